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

/*
 * One acquire's attempts and the waits between them (retry.c): every acquire loop
 * (quorum.c, quorumset.c) runs redlock_retry_begin, then per attempt
 * redlock_retry_attempt and redlock_retry_timeout_ms before it goes out,
 * redlock_retry_outcome once its outcome is counted, and redlock_retry_next after a
 * refusal.
 */
typedef struct RedlockRetry
{
	RedlockWaiter *waiter;		/* our slot on the waiter board, or NULL */
	double		deadline_ms;	/* redlock_clock_ms() time; < 0: none */
	double		reach_deadline_ms;	/* until when a slow attempt (retry.c) is
									 * retried, whatever deadline_ms */
	int			learned;		/* the cluster's patience level, read before each
								 * attempt that follows none or a busy one
								 * (shared/patience.c) */
	int			slow_attempts;	/* slow attempts in a row, up to the latest */
	int			attempt_reached;	/* the level the latest attempt's capped
									 * patience reached */
	double		attempt_patience_ms;	/* and its patience, capped */
	RedlockWakeCount seen;		/* the waiter's wake-ups before the latest attempt */
	bool		waits;			/* wait_ms is not 0 */
	struct RedlockDeadlockWait *deadlock;	/* its deadlock checks, or NULL */
} RedlockRetry;

extern void redlock_retry_begin(RedlockRetry *retry, int wait_ms, RedlockWaiter *waiter,
								bool behind);
extern void redlock_retry_attempt(RedlockRetry *retry, RedlockResult *result);
extern int	redlock_retry_timeout_ms(RedlockRetry *retry, int ttl_ms);
extern void redlock_retry_outcome(RedlockRetry *retry, const RedlockResult *attempt);
extern void redlock_retry_watch(RedlockRetry *retry, RedlockNodeSet *set,
								const char *const *keys, int nkeys, char kind);
extern bool redlock_retry_next(RedlockRetry *retry, RedlockResult *attempt,
							   double free_in_ms);
extern void redlock_retry_intends(RedlockRetry *retry);
extern void redlock_retry_end(RedlockRetry *retry);
extern bool redlock_held_by_one_client(const RedlockNodeOutcome *set_outcomes,
									   const RedlockNodeOutcome *get_outcomes, int count,
									   int quorum);
extern double redlock_free_in_ms(const RedlockNodeOutcome *set_outcomes,
								 const RedlockNodeOutcome *pttl_outcomes, int count,
								 int quorum);

#endif							/* REDLOCK_RETRY_H */
