/*-------------------------------------------------------------------------
 *
 * fence.h
 *	  Fencing tokens (fence.c): two quorum rounds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_FENCE_H
#define REDLOCK_FENCE_H

#include "redlock.h"

/* How long a fencing counter lives after the last token taken from it: 30 days. */
#define REDLOCK_FENCE_COUNTER_TTL_MS	INT64CONST(2592000000)

extern void RedlockFenceInit(void);
extern void redlock_quorum_fence(RedlockNodeSet *set, const char *key, const char *token,
								 double valid_until_ms, int64 *fence, RedlockResult *result);

#endif							/* REDLOCK_FENCE_H */
