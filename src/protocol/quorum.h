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
extern void redlock_quorum_let_go(RedlockNodeSet *set, const RedlockKeyToken *lock);
extern void redlock_quorum_extend(RedlockNodeSet *set, const char *key, const char *token,
								  int ttl_ms, double answer_by_ms, RedlockResult *result);
extern void redlock_quorum_extend_many(RedlockNodeSet *set, const RedlockKeyToken *locks,
									   const int *ttls_ms, int n, bool renewal,
									   double answer_by_ms, RedlockResult *results);

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
#endif							/* REDLOCK_QUORUM_H */
