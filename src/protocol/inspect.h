/*-------------------------------------------------------------------------
 *
 * inspect.h
 *	  Looking at locks on the masters, whoever holds them (inspect.c): one lock's
 *	  state, every lock under a prefix, and the operator's forced release.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_INSPECT_H
#define REDLOCK_INSPECT_H

#include "protocol/holder.h"
#include "redlock.h"

/* One lock as the masters show it. */
typedef struct RedlockLockState
{
	int			masters;		/* masters holding the most common token (0: none) */
	bool		held;			/* masters >= quorum */
	int64		ttl_ms;			/* when held: the quorum-th largest PTTL (-1: none set) */
	bool		has_holder;		/* a holder record of that token was found */
	RedlockHolder holder;
	uint64		token_hash;		/* a hash of that token (0: no token) */
	uint64		forced_hash;	/* redlock_inspect_watch: a hash of the token a forced
								 * release deleted lately on some master (0: none) */
	bool		certain;		/* redlock_inspect_watch: the masters heard from settle
								 * held or not, whatever the others hold */
} RedlockLockState;

extern void redlock_inspect_locks(RedlockNodeSet *set, const char *const *keys, int n,
								  RedlockLockState *states, RedlockResult *result);
extern int	redlock_inspect_scan(RedlockNodeSet *set, const char *prefix, int limit,
								 char ***keys, bool *more, RedlockResult *result);
extern void redlock_inspect_watch(RedlockNodeSet *set, const char *const *keys, int n,
								  RedlockLockState *states, RedlockResult *result);
extern void redlock_inspect_force_release(RedlockNodeSet *set, const char *key,
										  RedlockLockState *before, RedlockResult *result);

#endif							/* REDLOCK_INSPECT_H */
