/*-------------------------------------------------------------------------
 *
 * quorumshared.h
 *	  Shared holds (quorumshared.c): how one lives on a master (doc/shared.md), as the
 *	  scripts write it (src/scripts/: shared_acquire.lua and the _shared_ fragments),
 *	  and the module's functions.  The names and the marker are redlock.h's.
 *
 * Invariant, on each master: while any shared holder's hold is valid there, the
 * resource's own key exists and holds the marker, and expires no earlier than that
 * hold.  So the exclusive path (SET NX, the set script's EXISTS) needs no change to
 * refuse a resource held shared, and a shared acquire refuses a key that holds
 * anything but the marker (a token: an exclusive holder).  Each holder's expiry lives
 * in the readers hash beside the key, in the master's own clock (TIME), as the key's
 * expiry does; the key's expiry is set absolute (PEXPIREAT), to the latest of them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_QUORUMSHARED_H
#define REDLOCK_QUORUMSHARED_H

#include "redlock.h"

/*
 * Lua, where the key holds the marker: the hold of token ARGV[1] ends on this master
 * (spec §5 for a shared hold).  When no hold is left the key goes, and PUBLISH_LUA (a
 * statement, or nothing) announces that.  When this hold's expiry was the latest (the
 * key's), the key's expiry becomes the latest of those left, whose time has not run
 * out (the others go); else one of the others keeps the key's expiry (the key exists,
 * so that hold has not run out), and nothing more changes: a release costs a few calls
 * whatever the count of holders, but for the latest one.  Returns 1 when this hold was
 * there and still valid, else 0, as the exclusive release answers.
 */
/*
 * Lua, where the key holds the marker: the hold of token ARGV[1], while still valid
 * on this master, now lasts ARGV[2] ms (spec §6 for a shared hold); the key lasts at
 * least as long.  Returns 1 when extended, else 0.
 */
struct RedlockWaiter;			/* waiters.h */

extern void redlock_quorum_acquire_shared(RedlockNodeSet *set, const char *key,
										  char *token, int ttl_ms, int wait_ms,
										  struct RedlockWaiter *waiter, bool behind,
										  RedlockResult *result);
extern bool redlock_quorumshared_seen(const RedlockNodeOutcome *gets, int count);
extern void redlock_quorumshared_intent_command(RedlockCommand *command,
												const char *intent_key, char *ttl_text);
extern void redlock_quorumshared_intent_attempt(RedlockCommand *command, const char *token,
												int ttl_ms, int patience_ms);

#endif							/* REDLOCK_QUORUMSHARED_H */
