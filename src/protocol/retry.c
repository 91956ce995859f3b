/*-------------------------------------------------------------------------
 *
 * retry.c
 *	  The wait policy between acquire attempts (spec §4): a random retry delay, and what
 *	  ends it early (the keys that refused us expiring, a release announced to this
 *	  waiter), and whether a refused lock is held by one other client.  One attempt of
 *	  the protocol is quorum.c's (or quorumset.c's); the loop around the attempts, its
 *	  deadline, the waiter it reads and how long it waits before the next attempt,
 *	  are written once, here.
 *
 * Invariant: an acquire ends at its wait (wait_ms), except that a slow attempt is
 * retried until redlock.quorum_timeout after the acquire began, whatever the wait.  An
 * attempt is slow when fewer than a quorum of masters answered it, but the masters
 * that did not answer in time on open connections would have made one: masters that
 * are slow, not gone (refused connections, errors, a minority alive: raised at once).
 * So a try-lock rides out a blip (a burst of new sessions on an oversubscribed
 * machine, a master paused) rather than raise 08006 at the first timeout.  Each slow
 * attempt in a row doubles the next one's patience (how long a master may take to
 * answer: redlock.timeout, then twice, four times ..., as TCP backs off its
 * retransmission timeout), up to a tenth of the TTL and what is left of
 * redlock.quorum_timeout: a master that answers late but answers is then counted,
 * rather than asked again.  An acquire's attempts after a busy one or none start at
 * the patience the cluster learned from its attempts (shared/patience.c: raised by
 * slow attempts, lowered by quick ones), under the same caps: so even a try-lock's
 * one attempt may wait for its masters longer than redlock.timeout, but never past
 * redlock.quorum_timeout after the acquire began nor a tenth of the TTL.  Every
 * attempt is undone before the next (spec §3 step 5), and its validity counts the
 * time it took (§3 step 4), so retrying costs the masters one more round, never
 * safety.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/pg_prng.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "clock.h"
#include "compat.h"
#include "guc.h"
#include "protocol/deadlock.h"
#include "protocol/retry.h"
#include "redlock.h"
#include "shared/patience.h"
#include "shared/stats.h"
#include "tally.h"

/*
 * redlock_held_by_one_client
 *		True when one value (another client's token) is on a quorum of the masters
 *		that refused our SET, read by the GET that followed it: that client holds the
 *		lock.  set_outcomes, get_outcomes: one attempt's SET and GET outcomes, count
 *		masters each; quorum: how many must accept.  Raises nothing.
 */
bool
redlock_held_by_one_client(const RedlockNodeOutcome *set_outcomes,
						   const RedlockNodeOutcome *get_outcomes, int count, int quorum)
{
	for (int i = 0; i < count; i++)
	{
		int			same = 0;

		if (set_outcomes[i].kind != REDLOCK_REPLY_NIL ||
			get_outcomes[i].kind != REDLOCK_REPLY_STRING)
			continue;
		for (int j = 0; j < count; j++)
			if (set_outcomes[j].kind == REDLOCK_REPLY_NIL &&
				get_outcomes[j].kind == REDLOCK_REPLY_STRING &&
				get_outcomes[j].integer == get_outcomes[i].integer)
				same++;
		if (redlock_quorum_reached(same, quorum))
			return true;
	}
	return false;
}

/*
 * Sleeps a random retry delay (spec §4): after a busy attempt, redlock.retry_delay plus
 *		up to redlock.retry_jitter ms; after a slow one, a random part of the attempt's
 *		own time (it already waited its patience, and the next one waits twice as
 *		long: that is its backoff; the random part spreads the clients that timed out
 *		together).  After a busy one at least as long as the attempt took
 *		(attempt_ms); always at least 1 ms, so that a delay of 0 cannot turn into a hot
 *		loop against the masters; and not past deadline_ms (a redlock_clock_ms() time;
 *		< 0 for none).
 *
 * Two things end it early.  free_in_ms >= 0: the keys that refused us expire on a
 * quorum of masters that many ms from now (their PTTLs), so waking then is enough.
 * waiter (may be NULL): our slot on the waiter board, whose wake-ups another process
 * counts, setting our latch, when the lock is released; once they differ from seen
 * (read before the attempt went out), the sleep ends after a random time up to the
 * attempt's own (attempt_ms, at least 100 us, at most retry_jitter ms): the waiters that releases wake in several clusters then
 * reach the masters one round trip apart at most, rather than in the same instant,
 * while a handoff costs half a round trip on average.  A waiter woken directly by a
 * release in its own cluster (a direct wake-up) retries at once: it is the one
 * waiter of its cluster that release wakes, and the other clusters' waiters hear of
 * the release later, through their subscriptions.  deadlock (may be NULL): the wait's
 * deadlock checks, run when one falls due during the sleep (deadlock.c), without an
 * attempt; returns the DETAIL of a deadlock one found (the sleep ends then), else NULL.
 * Interruptible (that short jitter aside): raises 57014 on query cancel or
 * statement_timeout.
 */
static char *
retry_sleep(double attempt_ms, bool slow, double deadline_ms, double free_in_ms,
			RedlockWaiter *waiter, const RedlockWakeCount *seen,
			RedlockDeadlockWait *deadlock)
{
	double		now = redlock_clock_ms();
	double		delay = redlock_retry_delay_ms;
	double		end;

	if (slow)
		delay = (double) pg_prng_uint64_range(&pg_global_prng_state, 1,
											  (uint64) Max(attempt_ms, 1.0));
	else
	{
		if (redlock_retry_jitter_ms > 0)
			delay += (double) pg_prng_uint64_range(&pg_global_prng_state, 0,
												   redlock_retry_jitter_ms);
		delay = Max(delay, Max(attempt_ms, 1.0));
	}
	if (free_in_ms >= 0)
		delay = Min(delay, Max(free_in_ms + 1.0, 1.0));
	end = now + delay;
	if (deadline_ms >= 0 && end > deadline_ms)
		end = deadline_ms;

	while (now < end)
	{
		int			rc;
		double		wake = end;
		double		check_ms = redlock_deadlock_next_check_ms(deadlock);

		RedlockWakeCount count = *seen;

		/* A deadlock check falls due within the sleep: it runs, no attempt with it. */
		if (check_ms >= 0 && now >= check_ms)
		{
			char	   *detail = redlock_deadlock_check(deadlock);

			if (detail)
				return detail;
			now = redlock_clock_ms();
			continue;
		}
		if (check_ms >= 0 && check_ms < wake)
			wake = check_ms;

		if (waiter)
			redlock_waiters_read(waiter, &count);
		if (count.announced != seen->announced || count.direct != seen->direct)
		{
			/* Woken: a random part of one attempt's time (in us), then retry. */
			uint64		max_us = (uint64) Min(redlock_retry_jitter_ms * 1000.0,
											  Max(attempt_ms * 1000.0, 100.0));

			/* Woken by a release in this cluster: nobody else was woken with us. */
			if (count.direct != seen->direct)
				max_us = 0;
			if (max_us > 0)
				pg_usleep((long) pg_prng_uint64_range(&pg_global_prng_state, 0, max_us));
			CHECK_FOR_INTERRUPTS();
			return NULL;
		}
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   (long) ceil(wake - now), redlock_wait_event(REDLOCK_WAIT_RETRY));
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		now = redlock_clock_ms();
	}
	return NULL;
}

/*
 * redlock_retry_begin
 *		Starts an acquire's attempts: wait_ms is how long it may wait (0: one attempt,
 *		unless it is slow: the invariant above; < 0: no limit),
 *		waiter its slot on the waiter board (may be NULL).  behind:
 *		other sessions of this cluster were waiting already, so this one first waits
 *		for a wake-up (or a retry delay), queued behind them (waiters.c).  Raises 57014
 *		on query cancel or statement_timeout.
 */
void
redlock_retry_begin(RedlockRetry *retry, int wait_ms, RedlockWaiter *waiter, bool behind)
{
	retry->waiter = waiter;
	retry->deadline_ms = wait_ms < 0 ? -1 : redlock_clock_ms() + wait_ms;
	retry->reach_deadline_ms = redlock_clock_ms() + redlock_quorum_timeout_ms;
	retry->learned = 0;			/* read before each first attempt */
	retry->slow_attempts = 0;
	retry->attempt_reached = 0;
	retry->attempt_patience_ms = redlock_timeout_ms;
	retry->seen.announced = retry->seen.direct = 0;
	retry->waits = wait_ms != 0;
	retry->deadlock = NULL;
	if (waiter && behind && wait_ms != 0)
	{
		redlock_waiters_read(waiter, &retry->seen);
		(void) retry_sleep(0, false, retry->deadline_ms, -1, waiter, &retry->seen, NULL);
	}
}

/*
 * redlock_retry_attempt
 *		Counts an attempt about to go out (in result->attempts, the stats and the
 *		waiter's slot), and reads the waiter's wake-ups first, so that a release
 *		announced from now on ends the wait that may follow.  Raises nothing.
 */
void
redlock_retry_attempt(RedlockRetry *retry, RedlockResult *result)
{
	if (retry->waiter)
	{
		redlock_waiters_read(retry->waiter, &retry->seen);
		redlock_waiters_count_attempt(retry->waiter);
	}
	result->attempts++;
	redlock_stats_count(REDLOCK_STAT_ATTEMPTS);
}

/*
 * True when attempt, refused, was slow (the invariant above): fewer than a quorum
 * answered, and those that timed out would have made one.
 */
static bool
retry_slow(const RedlockResult *attempt)
{
	return attempt->status == REDLOCK_UNAVAILABLE &&
		redlock_quorum_reached(attempt->answered + attempt->timed_out, attempt->quorum);
}

/*
 * redlock_retry_watch
 *		Has the acquire's wait checked for deadlocks across clusters (deadlock.c): set,
 *		the masters; keys (nkeys), what each attempt waits for; kind, REDLOCK_WAIT_*
 *		(protocol/waitgraph.h).  Nothing when the acquire does not wait (wait_ms 0).
 *		The acquire calls redlock_retry_end once its loop is over.  Raises only
 *		out-of-memory errors (53200).  spec §4's wait, doc/deadlock.md §1.
 */
void
redlock_retry_watch(RedlockRetry *retry, RedlockNodeSet *set, const char *const *keys,
					int nkeys, char kind)
{
	if (retry->waits)
		retry->deadlock = redlock_deadlock_begin(set, keys, nkeys, kind);
}

/*
 * redlock_retry_intends
 *		retry's acquire saw shared holders and posts a writer's intent from its next
 *		attempt on (doc/shared.md §3): its deadlock checks count it
 *		(redlock_deadlock_intends); nothing when the wait has no checks (wait_ms 0,
 *		redlock.deadlock_timeout 0).  Raises nothing.  Not a distlock section:
 *		doc/deadlock.md §1.
 */
void
redlock_retry_intends(RedlockRetry *retry)
{
	redlock_deadlock_intends(retry->deadlock);
}

/*
 * redlock_retry_end
 *		Ends the acquire's deadlock checks: its wait record, if it posted one, is taken
 *		back before the acquire returns (deadlock.c's invariant).  Raises what an
 *		interrupted network wait raises (57014).  doc/deadlock.md §2.
 */
void
redlock_retry_end(RedlockRetry *retry)
{
	redlock_deadlock_end(retry->deadlock);
	retry->deadlock = NULL;
}

/*
 * redlock_retry_next
 *		After attempt (its status, counts and elapsed_ms), refused: false when the
 *		acquire's wait has run out (for a slow attempt, when redlock.quorum_timeout has
 *		too: the invariant above), its wait record taken back first; false too, with
 *		attempt->deadlock set, when a deadlock check (deadlock.c, every
 *		redlock.deadlock_timeout) found this wait the victim of a cycle; else sleeps
 *		the retry delay (spec §4, ended early as retry_sleep says; free_in_ms: when the
 *		keys that refused us expire on a quorum, < 0 unknown) and returns true.  Raises
 *		57014 on query cancel or statement_timeout.
 */
bool
redlock_retry_next(RedlockRetry *retry, RedlockResult *attempt, double free_in_ms)
{
	double		now = redlock_clock_ms();
	double		deadline_ms = retry->deadline_ms;
	bool		slow = retry->slow_attempts > 0;	/* the latest (redlock_retry_outcome) */

	if (slow && deadline_ms >= 0)
		deadline_ms = Max(deadline_ms, retry->reach_deadline_ms);
	if (deadline_ms >= 0 && now >= deadline_ms)
	{
		redlock_retry_end(retry);
		return false;
	}
	attempt->deadlock = retry_sleep(attempt->elapsed_ms, slow, deadline_ms, free_in_ms,
									retry->waiter, &retry->seen, retry->deadlock);
	return attempt->deadlock == NULL;
}

/* The patience level of the attempt about to go out, or just counted. */
static int
retry_level(const RedlockRetry *retry)
{
	return Min(retry->learned + retry->slow_attempts, REDLOCK_PATIENCE_MAX_LEVEL);
}

/*
 * redlock_retry_timeout_ms
 *		How long (ms) each master may take to answer the next attempt of an acquire
 *		whose TTL is ttl_ms: redlock.timeout, doubled for each level the cluster
 *		learned (shared/patience.c) and each slow attempt in a row (the invariant
 *		above), but not past a tenth of the TTL nor what is left of
 *		redlock.quorum_timeout, and never below redlock.timeout (spec §3 step 2's
 *		timeout, backed off).  Keeps the level its capped patience reached, and the
 *		patience, in retry for redlock_retry_outcome.  Raises nothing.
 */
int
redlock_retry_timeout_ms(RedlockRetry *retry, int ttl_ms)
{
	int			level;
	int			reached = 0;
	double		patience = redlock_timeout_ms;

	/* Not after a slow attempt: what the cluster learned meanwhile (a long wait). */
	if (retry->slow_attempts == 0)
		retry->learned = redlock_patience_level();
	level = retry_level(retry);
	if (level > 0)
	{
		double		cap = Min(ttl_ms / 10.0, retry->reach_deadline_ms - redlock_clock_ms());

		for (; reached < level && patience < cap; reached++)
			patience *= 2;
		patience = Max(Min(patience, cap), redlock_timeout_ms);
	}
	retry->attempt_reached = reached;
	retry->attempt_patience_ms = patience;
	return (int) patience;
}

/*
 * redlock_retry_outcome
 *		After attempt (counted: its status, answered and timed-out masters, elapsed_ms):
 *		whether it was slow (the invariant above; the next attempt's patience
 *		doubles), and what the cluster learns from it (shared/patience.c's invariant:
 *		slow raises the level one above what the attempt's capped patience reached,
 *		a quorum's answer within half the patience lowers it from the attempt's level).
 *		Raises nothing.  spec §3 step 2's timeout.
 */
void
redlock_retry_outcome(RedlockRetry *retry, const RedlockResult *attempt)
{
	int			level = retry_level(retry);	/* before slow_attempts moves */

	if (retry_slow(attempt))
	{
		retry->slow_attempts++;
		redlock_patience_slow(retry->attempt_reached);
		return;
	}
	retry->slow_attempts = 0;
	if (redlock_quorum_reached(attempt->answered, attempt->quorum) &&
		attempt->elapsed_ms <= retry->attempt_patience_ms / 2)
		redlock_patience_quick(level);
}

/* qsort comparator for doubles, ascending. */
static int
retry_compare_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/*
 * redlock_free_in_ms
 *		From one attempt's SET and PTTL outcomes (count masters each): in how many ms
 *		the lock can be free on quorum masters (ours are undone; a refused master's key
 *		expires after its PTTL; a master without the key is free now), or -1 when that
 *		cannot be told.  Raises nothing.
 */
double
redlock_free_in_ms(const RedlockNodeOutcome *set_outcomes,
				   const RedlockNodeOutcome *pttl_outcomes, int count, int quorum)
{
	double		free_in[REDLOCK_MAX_NODES];

	for (int i = 0; i < count; i++)
	{
		free_in[i] = INFINITY;
		if (set_outcomes[i].kind == REDLOCK_REPLY_OK)
			free_in[i] = 0;
		else if (set_outcomes[i].kind == REDLOCK_REPLY_NIL &&
				 pttl_outcomes[i].kind == REDLOCK_REPLY_INTEGER)
		{
			if (pttl_outcomes[i].integer >= 0)
				free_in[i] = pttl_outcomes[i].integer;
			else if (pttl_outcomes[i].integer == -2)
				free_in[i] = 0; /* gone since the SET */
		}
	}
	qsort(free_in, count, sizeof(double), retry_compare_double);
	return (redlock_quorum_reached(count, quorum) && isfinite(free_in[quorum - 1])) ? free_in[quorum - 1] : -1;
}

