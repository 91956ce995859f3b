/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  The loss protocol of an auto-extended lock: its life after acquire, written once.
 *
 * THE INVARIANT (README, "Auto-extended locks"): for a lock taken with
 * redlock.cancel_on_loss on, no transaction of its owner commits (or prepares) if the
 * lock's validity ran out at any point after the transaction began, unless the owner
 * was told of that loss by an error or a false from redlock_extend() in an earlier
 * transaction; and a running statement is cancelled before the validity runs out
 * whenever the owner can be reached.  Whatever the worker does (renews, stalls, is
 * terminated and restarted), whatever the owner's state (running, idle, idle in a
 * transaction, after an error) and whatever the order of events.
 *
 * A lease (RedlockLease, in the lock's registry entry) goes
 *		PENDING --acquired--> HELD --renewal refused, or validity ran out--> LOST
 * and HELD renews itself (spec §6, applied to a lock nobody extends by hand):
 *	- a renewal is due once only two thirds of the TTL are left of the validity, i.e.
 *	  every TTL/3; locks due within a tenth of their TTL (at most 200 ms) come along;
 *	- before a request goes out, the validity is cut to what its TTL allows from now
 *	  (redlock_validity_bound_ms): any master may apply it, whatever we learn;
 *	- a quorum that refused (our token is gone from more masters than a quorum can
 *	  spare) loses the lock at once;
 *	- fewer than a quorum answering is retried every min(redlock.retry_delay, TTL/10)
 *	  until less than TTL/3 of validity is left, and the lock is then lost, so that
 *	  its owner is stopped with a third of the TTL to spare;
 *	- a lease whose validity ran out before the worker could renew it (the worker was
 *	  stopped, starved or restarting) is lost;
 *	- a renewal whose success arrives after the validity had run out (a worker that
 *	  stalled mid-round) holds the lease again, but the gap is remembered (gap_end_ms).
 * A LOST lease's validity is the time of the loss: from then on it reads as run out.
 *
 * The owner's side (lock/leasewatch.c: the watchdog and the commit check) reads the
 * lease back from the registry and needs no word from the worker.
 * The worker only writes the lease; it never signals the owner.
 *
*-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "utils/timestamp.h"

#include "clock.h"
#include "guc.h"
#include "redlock.h"
#include "shared/lease.h"
#include "shared/stats.h"
#include "tally.h"
#include "validity.h"

/*---- the lease, under the registry's lock ----*/

/*
 * redlock_lease_init
 *		Starts lease for an acquire under way (PENDING); cancel_on_loss: the owner asked
 *		to be stopped if the lock is lost.  Raises nothing.
 */
void
redlock_lease_init(RedlockLease *lease, bool cancel_on_loss)
{
	memset(lease, 0, sizeof(*lease));
	lease->state = LEASE_PENDING;
	lease->cancel_on_loss = cancel_on_loss;
}

/* The renewal time of a lease valid until valid_until_ms with a TTL of ttl_ms: TTL/3 in. */
static double
lease_renewal_due_ms(int ttl_ms, double valid_until_ms)
{
	return valid_until_ms - ttl_ms * 2.0 / 3.0;
}

/*
 * redlock_lease_hold
 *		The acquire succeeded: lease is HELD with a TTL of ttl_ms milliseconds, valid
 *		until valid_until_ms (a redlock_clock_ms() time).  Raises nothing.
 */
void
redlock_lease_hold(RedlockLease *lease, int ttl_ms, double valid_until_ms)
{
	if (lease->state != LEASE_PENDING)
		return;
	lease->state = LEASE_HELD;
	lease->ttl_ms = ttl_ms;
	lease->valid_until_ms = valid_until_ms;
	lease->next_renewal_ms = lease_renewal_due_ms(ttl_ms, valid_until_ms);
}

/*
 * redlock_lease_due
 *		Whether the worker renews lease in its round at now_ms: NOT_DUE, DUE (its
 *		renewal time came, within the batching window, or requested: its owner asked
 *		for a new TTL), or RAN_OUT (the caller loses it).  Raises nothing.
 */
RedlockLeaseDue
redlock_lease_due(const RedlockLease *lease, double now_ms, bool requested)
{
	if (lease->state != LEASE_HELD)
		return LEASE_NOT_DUE;
	if (lease->valid_until_ms <= now_ms)
		return LEASE_RAN_OUT;
	/* Nearly due ones join this round (fewer rounds); retries keep their spacing. */
	if (requested ||
		lease->next_renewal_ms <= now_ms +
		(lease->retrying ? 0 : Min(lease->ttl_ms / 10.0, 200.0)))
		return LEASE_DUE;
	return LEASE_NOT_DUE;
}

/*
 * redlock_lease_cut
 *		A request setting a TTL of ttl_ms milliseconds is about to go out: the lease's
 *		validity is cut to what that TTL allows from now (spec §3 step 4), since any
 *		master may apply it.  Raises nothing.
 */
void
redlock_lease_cut(RedlockLease *lease, int ttl_ms)
{
	lease->ttl_ms = ttl_ms;
	lease->valid_until_ms = Min(lease->valid_until_ms, redlock_validity_bound_ms(ttl_ms));
}

/*
 * The masters that did not answer a renewal, by name, from result's "name: error"
 * lines: "; no answer from 10.0.0.1:6379, 10.0.0.2:6379" (palloc'd), or "" when it
 * names none.  Raises only out-of-memory errors.
 */
static char *
lease_silent_masters(const RedlockResult *result)
{
	StringInfoData buf;
	const char *line = result->node_errors;

	if (line == NULL || *line == '\0')
		return "";
	initStringInfo(&buf);
	appendStringInfoString(&buf, "; no answer from ");
	while (line && *line)
	{
		const char *colon = strstr(line, ": ");
		const char *end = strchr(line, '\n');

		if (colon == NULL || (end && colon > end))
			colon = end ? end : line + strlen(line);
		appendBinaryStringInfo(&buf, line, (int) (colon - line));
		line = end ? end + 1 : NULL;
		if (line && *line)
			appendStringInfoString(&buf, ", ");
	}
	return buf.data;
}

/*
 * redlock_lease_decide
 *		What the worker's renewal of a lease with a TTL of ttl_ms, valid until
 *		valid_until_ms when it went out, means given result at now_ms (ms): renewed (a
 *		new validity and renewal time), retry (a renewal time), or lost (a reason).
 *		Fills *outcome; raises nothing.
 */
void
redlock_lease_decide(int ttl_ms, double valid_until_ms, const RedlockResult *result,
					 double now_ms, RedlockRenewalOutcome *outcome)
{
	outcome->answer.status = result->status;
	outcome->answer.node_count = result->node_count;
	outcome->answer.quorum = result->quorum;
	outcome->answer.accepted = result->accepted;
	outcome->answer.answered = result->answered;
	outcome->answer.failed = result->failed;

	switch (result->status)
	{
		case REDLOCK_OK:
			redlock_stats_count(REDLOCK_STAT_RENEWED);
			outcome->valid_until_ms = result->valid_until_ms;
			outcome->next_renewal_ms = lease_renewal_due_ms(ttl_ms, result->valid_until_ms);
			break;
		case REDLOCK_BUSY:
			if (redlock_quorum_reached(result->accepted, result->quorum))
				snprintf(outcome->lost_reason, sizeof(outcome->lost_reason),
						 "a quorum renewed it too late to leave any validity time");
			else
				snprintf(outcome->lost_reason, sizeof(outcome->lost_reason),
						 "%d of %d Redis masters no longer hold its token",
						 result->answered - result->accepted, result->node_count);
			break;
		case REDLOCK_UNAVAILABLE:
			redlock_stats_count(REDLOCK_STAT_RENEW_FAILED);
			if (valid_until_ms - now_ms < ttl_ms / 3.0)
				snprintf(outcome->lost_reason, sizeof(outcome->lost_reason),
						 "fewer than a quorum of Redis masters renewed it "
						 "(%d of %d answered, %d renewed, %d needed) and less than a third "
						 "of its TTL of validity was left%s",
						 result->answered, result->node_count, result->accepted,
						 result->quorum, lease_silent_masters(result));
			else
				outcome->next_renewal_ms = now_ms +
					Max(1.0, Min((double) redlock_retry_delay_ms, ttl_ms / 10.0));
			break;
	}
}

/*
 * redlock_lease_lose
 *		lease is LOST for reason at now_ms: its validity ends now (or when it ran out,
 *		if earlier), for good.  Raises nothing.
 */
void
redlock_lease_lose(RedlockLease *lease, const char *reason, double now_ms)
{
	/* The reason before the state: the owner's hook reads them without the lock. */
	strlcpy(lease->lost_reason, reason, sizeof(lease->lost_reason));
	lease->valid_until_ms = Min(lease->valid_until_ms, now_ms);
	lease->lost_at = GetCurrentTimestamp();
	pg_write_barrier();
	lease->state = LEASE_LOST;
	redlock_stats_count(REDLOCK_STAT_LOCKS_LOST);
}

/*
 * redlock_lease_apply
 *		Applies the worker's decision (outcome, from redlock_lease_decide) to a HELD
 *		lease at now_ms.  A success that comes after the validity had run out records
 *		the gap.  The caller checks lease->state for a loss.  Raises nothing.
 */
void
redlock_lease_apply(RedlockLease *lease, const RedlockRenewalOutcome *outcome, double now_ms)
{
	if (lease->state != LEASE_HELD)
		return;
	if (outcome->lost_reason[0] != '\0')
	{
		redlock_lease_lose(lease, outcome->lost_reason, now_ms);
		return;
	}
	lease->next_renewal_ms = outcome->next_renewal_ms;
	lease->retrying = (outcome->answer.status != REDLOCK_OK);
	if (outcome->answer.status != REDLOCK_OK)
		return;
	if (lease->valid_until_ms <= now_ms)
		lease->gap_end_ms = now_ms;
	lease->valid_until_ms = outcome->valid_until_ms;
	lease->last_renewal = GetCurrentTimestamp();
	lease->renewals++;
}
