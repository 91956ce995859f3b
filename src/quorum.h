/*-------------------------------------------------------------------------
 *
 * quorum.h
 *	  The Redlock protocol (quorum.c): acquire attempts and their loop, release,
 *	  extend.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_QUORUM_H
#define REDLOCK_QUORUM_H

#include "lib/stringinfo.h"

#include "redlock.h"

extern void RedlockQuorumInit(void);
extern void RedlockQuorumSetInit(void);
extern void redlock_new_token(char *token);
struct RedlockWaiter;			/* waiters.h */

extern void redlock_quorum_acquire(RedlockNodeSet *set, const char *key, char *token,
								   int ttl_ms, int wait_ms, const char *holder,
								   struct RedlockWaiter *waiter,
								   bool behind, RedlockResult *result);
extern void redlock_quorum_acquire_one_of(RedlockNodeSet *set, const char *const *keys,
										  int nkeys, const char *announce, char *token,
										  int ttl_ms, int wait_ms, const char *holder,
										  struct RedlockWaiter *waiter, bool behind,
										  RedlockResult *result, int *slot);
extern void redlock_quorum_release_many(RedlockNodeSet *set, const RedlockKeyToken *locks,
										int n, bool wait_all, bool cleanup,
										RedlockResult *results);
extern void redlock_quorum_extend(RedlockNodeSet *set, const char *key, const char *token,
								  int ttl_ms, RedlockResult *result);
extern void redlock_quorum_extend_many(RedlockNodeSet *set, const RedlockKeyToken *locks,
									   const int *ttls_ms, int n, bool renewal,
									   RedlockResult *results);

extern void redlock_quorum_acquire_all(RedlockNodeSet *set, const char *const *keys,
									   int nkeys, char *const *tokens, int ttl_ms,
									   int wait_ms, const char *holder,
									   struct RedlockWaiter *waiter, bool behind,
									   RedlockResult *result);

extern void redlock_quorumset_acquire_with(RedlockScript *script, RedlockNodeSet *set,
										   const char *const *keys, int nkeys,
										   char *const *tokens, int ttl_ms, int wait_ms,
										   const char *holder,
										   struct RedlockWaiter *waiter, bool behind,
										   RedlockResult *result);
extern void redlock_quorumset_release_command(RedlockCommand *command,
											  const char *const *keys, int n,
											  const char *token, StringInfo joined,
											  int need);
extern void redlock_quorumset_release_outcome(const RedlockNodeOutcome *reply, int k,
											  RedlockNodeOutcome *outcome);

/* For quorumset.c, in this module's room. */
extern void redlock_quorum_result_init(RedlockNodeSet *set, RedlockResult *result);
extern void redlock_quorum_script_command(RedlockCommand *command, RedlockScript *script,
										  const char *key, const char *token,
										  const char *arg, int need);
extern void redlock_quorum_look_commands(RedlockCommand *two, const char *key, int quorum);
extern void redlock_quorum_record_value(StringInfo buf, const char *token,
										const char *holder);
extern void redlock_quorum_count_attempt(RedlockResult *result, bool won, double start_ms,
										 int ttl_ms, double drift_ms);
extern void redlock_quorum_undo_command(RedlockCommand *command, bool quiet,
										const char *key, const char *token);

#endif							/* REDLOCK_QUORUM_H */
