/*-------------------------------------------------------------------------
 *
 * retry.h
 *	  The wait policy between acquire attempts (retry.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_RETRY_H
#define REDLOCK_RETRY_H

#include "redlock.h"
#include "shared/waiters.h"

extern void redlock_retry_sleep(double attempt_ms, double deadline_ms, double free_in_ms,
								RedlockWaiter *waiter, const RedlockWakeCount *seen);
extern bool redlock_held_by_one_client(const RedlockNodeOutcome *set_outcomes,
									   const RedlockNodeOutcome *get_outcomes, int count,
									   int quorum);
extern double redlock_free_in_ms(const RedlockNodeOutcome *set_outcomes,
								 const RedlockNodeOutcome *pttl_outcomes, int count,
								 int quorum);

#endif							/* REDLOCK_RETRY_H */
