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

extern void redlock_quorum_fence(RedlockNodeSet *set, const char *key, const char *token,
								 double valid_until_ms, int64 *fence, RedlockResult *result);

#endif							/* REDLOCK_FENCE_H */
