/*-------------------------------------------------------------------------
 *
 * lockops.h
 *	  What one call does to one lock of this backend (lockops.c): acquire, claim,
 *	  release, extend, fencing token.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LOCKOPS_H
#define REDLOCK_LOCKOPS_H

#include "lock/locktable.h"
#include "redlock.h"

extern RedlockHoldStatus redlock_lock_acquire(const char *resource, int kind,
											  RedlockScope scope, int ttl_ms, int wait_ms,
											  bool *was_lost, RedlockResult *result);
extern RedlockHoldStatus redlock_lock_release(const char *resource,
											  RedlockReleaseInfo *info);
extern RedlockHoldStatus redlock_lock_extend(const char *resource, int ttl_ms,
											 RedlockResult *result);
extern RedlockHoldStatus redlock_lock_fencing_token(const char *resource, int64 *fence,
													RedlockLossCause *cause,
													RedlockResult *result);
extern bool redlock_lock_claim(const char *resource, int ttl_ms, RedlockResult *result);

/* Sets of resources, all or nothing (lockset.c, in this module's room). */
extern RedlockHoldStatus redlock_lockset_acquire(const char *const *resources, int n,
												 RedlockScope scope, int ttl_ms,
												 int wait_ms, RedlockResult *result);
extern int	redlock_lockset_release(const char *const *resources, int n, bool *not_held,
									RedlockReleaseInfo **infos);
extern RedlockHoldStatus redlock_lockset_extend(const char *const *resources, int n,
												int ttl_ms, bool *not_held,
												const char **decided_by,
												RedlockResult *result);

/* For lockset.c. */
extern bool redlock_lock_refresh_begin(RedlockHeldLock *lock, int ttl_ms);
extern double redlock_lock_answer_by_ms(const RedlockHeldLock *lock);
extern RedlockHoldStatus redlock_lock_refreshed(RedlockHeldLock *lock, int ttl_ms,
												bool expired, RedlockResult *result);

#endif							/* REDLOCK_LOCKOPS_H */
