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

#include "redlock.h"

extern void RedlockQuorumInit(void);
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

#endif							/* REDLOCK_QUORUM_H */
