/*-------------------------------------------------------------------------
 *
 * leasewatch.c
 *	  The owner's side of an auto-extended lock's lease (shared/lease.c): the
 *	  watchdog that cancels a statement before the validity runs out, the commit
 *	  check, and telling the owner of a loss.
 *
 * THE INVARIANT is shared/lease.c's (README, "Auto-extended locks"); this file keeps
 * the owner's half of it.
 *
 * The owner's side needs no word from the worker, which may be the one stalled:
 *	- the watchdog, a timer in the owner every WATCHDOG_MS, cancels the running
 *	  statement (SIGINT to itself, as statement_timeout does) once the validity is
 *	  within min(2 ticks, TTL/6), but at least a tick, of running out: once per
 *	  run-out and top-level statement (a cancel dropped is sent again to the next
 *	  statement).  It waits while the owner is idle (a cancel would be dropped there)
 *	  and checks at once when a statement starts, so the owner's next statement is the
 *	  one cancelled.  It is armed while the owner watches a lease and re-armed at every
 *	  statement start and abort, since PostgreSQL's error recovery disables every
 *	  timeout.  A statement begun less than a tick before a run-out whose parse and
 *	  plan outlast it is cancelled up to a tick late (no hook runs before parse);
 *	- the commit check (redlock_lease_commit_refusal) refuses a commit when a gap
 *	  ended after the transaction began (its start taken on the monotonic clock even
 *	  across wall-clock steps: lease_xact_start_ms), or the validity has run out (or has less
 *	  than redlock.commit_margin left) and that run-out was not told to the owner in
 *	  an earlier transaction.  A configuration change (redlock.servers, key_prefix)
 *	  counts as a run-out;
 *	- telling: the cancel's error (worded by the error-report hook), the commit's
 *	  refusal, and a false from redlock_extend().  The transaction in which the owner
 *	  is told cannot commit; later ones may, since the job knows.
 *
  * The worker only writes the lease; it never signals the owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <signal.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "guc.h"
#include "lock/leasewatch.h"
#include "redlock.h"
#include "shared/lease.h"
#include "shared/registry.h"
#include "shared/stats.h"
#include "validity.h"

#define WATCHDOG_MS 50

/*---- the owner's side: watchdog, commit check, telling ----*/

/*
 * One lease this backend watches.  The watchdog's timer handler reads the array of
 * them; it is changed only outside the handler, entries before the count.
 */
struct RedlockLeaseWatch
{
	RedlockRegistryHandle handle;
	double		told_run_out_ms;	/* the run-out the owner was told of; NaN: none */
	uint32		told_lxid;		/* in which transaction */
	volatile double fired_run_out_ms;	/* the run-out the watchdog cancelled for */
	volatile TimestampTz fired_statement;	/* in the top-level statement begun then */
	char		resource[REDLOCK_MAX_RESOURCE_LEN + 1];
};

/*
 * A refusal found when a watch was dropped (the lock released or let go of in the
 * transaction it was lost in): that transaction still must not commit.
 */
static uint32 carried_lxid = 0;
static char carried_resource[REDLOCK_MAX_RESOURCE_LEN + 1];
static char carried_reason[REDLOCK_NODE_ERROR_LEN + 128];

/*
 * The commit check asks whether a gap ended after the transaction began, on
 * redlock_clock_ms(); PostgreSQL keeps the transaction's start on the wall clock only.
 * The wall clock's reading taken back from now gives it, unless the wall clock was
 * stepped meanwhile (a step back would move the start past a gap, and let a refused
 * commit through).  So each transaction end this backend sees while it watches a lease
 * records both clocks: a step since then shows as a change of their offset, and that
 * end, which came before this transaction began, stands in for the start.
 */
#define CLOCK_STEP_TOLERANCE_MS 1.0
static bool boundary_known = false;
static double boundary_ms;		/* redlock_clock_ms() at the last transaction end seen */
static double boundary_offset_ms;	/* the wall clock's ms minus it, then */

static RedlockLeaseWatch **watched = NULL;
static volatile int nwatched = 0;
static int	maxwatched = 0;
static TimeoutId watchdog_id = MAX_TIMEOUTS;
static RedlockLeaseWatch *volatile watchdog_fired = NULL;	/* not yet explained */

/*
 * While set (DISCARD ALL), the watchdog sends no cancel and a watch that ends carries
 * no refusal: DISCARD ALL runs alone in its transaction, which holds no guarded work.
 */
static volatile bool watchdog_hushed = false;

/* This backend's local transaction number, which names the current transaction. */
static uint32
lease_current_lxid(void)
{
	return (uint32) redlock_my_lxid();
}

/* The run-out a lease stands for: the configuration change, or its validity's end. */
static double
lease_run_out_of(const RedlockLease *lease, bool reconfigured)
{
	return reconfigured ? -1.0 : lease->valid_until_ms;
}

/*
 * True while this backend waits for its client's next command: a cancel sent then is
 * dropped.  With track_activities off the state is unknown, and taken as running.
 */
static bool
lease_owner_idle(void)
{
	return MyBEEntry != NULL &&
		(MyBEEntry->st_state == STATE_IDLE ||
		 MyBEEntry->st_state == STATE_IDLEINTRANSACTION ||
		 MyBEEntry->st_state == STATE_IDLEINTRANSACTION_ABORTED);
}

/*
 * How close to its run-out a lease's validity must be for the watchdog to cancel: two
 * ticks, or TTL/6 for short TTLs, but at least one tick, so that no run-out falls
 * between two ticks (TTLs under 300 ms).
 */
static double
lease_watchdog_margin_ms(int ttl_ms)
{
	return Max((double) WATCHDOG_MS, Min((double) WATCHDOG_MS * 2, ttl_ms / 6.0));
}

/* The watchdog's check: a timer handler, and also called at statement start. */
/*
 * When the running top-level statement began (pg_stat_activity's query_start): a cancel
 * is sent once per run-out and top-level statement, so that one dropped (the statement
 * ended first, or another error came first) is sent again to the next statement, while
 * one caught inside a function is not repeated at each of its statements.  0 with
 * track_activities off: once per run-out.
 */
static TimestampTz
lease_current_statement(void)
{
	return MyBEEntry != NULL ? MyBEEntry->st_activity_start_timestamp : 0;
}

static void
lease_watchdog_tick(void)
{
	double		now = redlock_clock_ms();

	if (lease_owner_idle())
	{
		watchdog_fired = NULL;	/* any cancel it sent was dropped */
		return;
	}
	if (watchdog_hushed)
		return;
	for (int i = 0; i < nwatched; i++)
	{
		RedlockLeaseWatch *w = watched[i];
		RedlockLease peek;

		if (!redlock_registry_peek(&w->handle, &peek) || peek.state == LEASE_PENDING ||
			!peek.cancel_on_loss ||
			peek.valid_until_ms - now > lease_watchdog_margin_ms(peek.ttl_ms) ||
			(w->fired_run_out_ms == peek.valid_until_ms &&
			 w->fired_statement == lease_current_statement()) ||
			w->told_run_out_ms == peek.valid_until_ms)
			continue;
		w->fired_run_out_ms = peek.valid_until_ms;
		w->fired_statement = lease_current_statement();
		watchdog_fired = w;
		kill(MyProcPid, SIGINT);
		return;
	}
}

/* Arms the watchdog unless it runs (error recovery disables every timeout). */
static void
lease_watchdog_arm(void)
{
	if (watchdog_id == MAX_TIMEOUTS)
		watchdog_id = RegisterTimeout(USER_TIMEOUT, lease_watchdog_tick);
	if (!get_timeout_active(watchdog_id))
		enable_timeout_every(watchdog_id,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(), WATCHDOG_MS),
							 WATCHDOG_MS);
}

/*
 * redlock_lease_watch
 *		This backend owns the lease of handle's entry, for resource: watch it (the
 *		watchdog, the commit check).  Returns the watch, for the other owner-side
 *		calls.  Raises only out-of-memory errors.
 */
RedlockLeaseWatch *
redlock_lease_watch(const RedlockRegistryHandle *handle, const char *resource)
{
	RedlockLeaseWatch *w = MemoryContextAllocZero(TopMemoryContext, sizeof(RedlockLeaseWatch));

	w->handle = *handle;
	w->told_run_out_ms = NAN;
	w->fired_run_out_ms = NAN;
	strlcpy(w->resource, resource, sizeof(w->resource));
	if (nwatched == maxwatched)
	{
		int			newmax = Max(8, maxwatched * 2);
		RedlockLeaseWatch **bigger = MemoryContextAlloc(TopMemoryContext,
														newmax * sizeof(RedlockLeaseWatch *));

		RedlockLeaseWatch **old = watched;

		/* The handler may read the old array meanwhile: swap in a full copy. */
		if (nwatched > 0)
			memcpy(bigger, old, nwatched * sizeof(RedlockLeaseWatch *));
		pg_compiler_barrier();
		watched = bigger;
		pg_compiler_barrier();
		if (old)
			pfree(old);
		maxwatched = newmax;
	}
	watched[nwatched] = w;
	pg_compiler_barrier();
	nwatched = nwatched + 1;
	lease_watchdog_arm();
	return w;
}

/*
 * redlock_lease_unwatch
 *		The owner lets go of watch's lease (release, let-go, abort, exit); reconfigured
 *		as for redlock_lease_commit_refusal.  A lease that the running transaction may
 *		not commit over keeps refusing it after this (redlock_lease_carried_refusal).
 *		The watchdog stops when nothing is left to watch.  Raises only out-of-memory
 *		errors, and not at exit or outside a transaction.
 */
void
redlock_lease_unwatch(RedlockLeaseWatch *watch, bool reconfigured)
{
	if (IsTransactionState() && !watchdog_hushed)
	{
		const char *why = redlock_lease_commit_refusal(watch, reconfigured);

		if (why && carried_lxid != lease_current_lxid())
		{
			carried_lxid = lease_current_lxid();
			strlcpy(carried_resource, watch->resource, sizeof(carried_resource));
			strlcpy(carried_reason, why, sizeof(carried_reason));
		}
	}
	for (int i = 0; i < nwatched; i++)
	{
		if (watched[i] != watch)
			continue;
		/* Hide the last one's slot before it moves down. */
		watched[i] = watched[nwatched - 1];
		pg_compiler_barrier();
		nwatched = nwatched - 1;
		break;
	}
	if (watchdog_fired == watch)
		watchdog_fired = NULL;
	pg_compiler_barrier();
	pfree(watch);
	if (nwatched == 0 && watchdog_id != MAX_TIMEOUTS)
		disable_timeout(watchdog_id, false);
}

/*
 * redlock_lease_rearm
 *		Re-arms the watchdog, which error recovery may have switched off: at every
 *		statement start (check: true), where it also checks at once, so that a
 *		statement begun less than a tick before a run-out is cancelled before it; and
 *		at abort (check: false: a cancel sent there would be dropped, yet count as
 *		sent).  Raises nothing; a cancel it sends is raised at the statement's next
 *		interrupt check.
 */
void
redlock_lease_rearm(bool check)
{
	if (nwatched == 0)
		return;
	lease_watchdog_arm();
	if (check)
		lease_watchdog_tick();
}

/*
 * redlock_lease_told
 *		The owner was just told that watch's lease is lost (redlock_extend returned
 *		false): the transaction that is running cannot commit, later ones may.
 *		Raises nothing.
 */
void
redlock_lease_told(RedlockLeaseWatch *watch)
{
	RedlockLease lease;

	if (!redlock_registry_view(&watch->handle, &lease) ||
		watch->told_run_out_ms == lease.valid_until_ms)
		return;					/* told already, maybe in an earlier transaction */
	watch->told_run_out_ms = lease.valid_until_ms;
	watch->told_lxid = lease_current_lxid();
}

/* The wall clock's reading (a TimestampTz) less redlock_clock_ms()'s, in ms. */
static double
lease_clock_offset_ms(TimestampTz wall, double clock_ms)
{
	return wall / 1000.0 - clock_ms;
}

/*
 * redlock_lease_xact_ended
 *		A transaction of this backend ended (committed, aborted or prepared) while it
 *		watched a lease: the next one begins after now.  Raises nothing.
 */
void
redlock_lease_xact_ended(void)
{
	boundary_ms = redlock_clock_ms();
	boundary_offset_ms = lease_clock_offset_ms(GetCurrentTimestamp(), boundary_ms);
	boundary_known = true;
}

/*
 * When the running transaction began, on redlock_clock_ms() (now_ms, read with the
 * wall clock's now): never later than it did.  Before any transaction end was seen,
 * every watched lease was taken in this transaction, so 0 (boot) is as good.
 */
static double
lease_xact_start_ms(double now_ms, TimestampTz now)
{
	if (!boundary_known)
		return 0.0;
	if (fabs(lease_clock_offset_ms(now, now_ms) - boundary_offset_ms) > CLOCK_STEP_TOLERANCE_MS)
		return boundary_ms;		/* the wall clock was stepped */
	return now_ms - (now - GetCurrentTransactionStartTimestamp()) / 1000.0 -
		CLOCK_STEP_TOLERANCE_MS;
}

/*
 * redlock_lease_guards_commits
 *		True when the loss of watch's lease must stop its owner's work (it was taken
 *		with redlock.cancel_on_loss on), so that a transaction whose commit the lease
 *		cannot check, a prepared one, must not be prepared under it.  Raises nothing.
 */
bool
redlock_lease_guards_commits(const RedlockLeaseWatch *watch)
{
	RedlockLease lease;

	return redlock_registry_view(&watch->handle, &lease) && lease.cancel_on_loss;
}

/*
 * redlock_lease_commit_refusal
 *		The commit check of watch's lease (see the invariant above); reconfigured: the
 *		configuration in force is not the one the lock was taken under.  Returns why the
 *		current transaction must not commit (palloc'd), or NULL.  A refusal tells the
 *		owner.  Raises only out-of-memory errors.
 */
const char *
redlock_lease_commit_refusal(RedlockLeaseWatch *watch, bool reconfigured)
{
	RedlockLease lease;
	double		now_ms = redlock_clock_ms();
	TimestampTz now = GetCurrentTimestamp();
	double		xact_start_ms;
	const char *why;

	if (!redlock_registry_view(&watch->handle, &lease) || lease.state == LEASE_PENDING ||
		!lease.cancel_on_loss)
		return NULL;
	xact_start_ms = lease_xact_start_ms(now_ms, now);

	/* A gap is over: refused, but not told, or the renewed validity's end would be. */
	if (lease.gap_end_ms > xact_start_ms)
		return "its validity time ran out during this transaction before the worker renewed it";
	if (!reconfigured && lease.valid_until_ms - now_ms > redlock_commit_margin_ms)
		return NULL;
	if (watch->told_run_out_ms == lease_run_out_of(&lease, reconfigured) &&
		watch->told_lxid != lease_current_lxid())
		return NULL;			/* told in an earlier transaction */
	if (reconfigured)
		why = "redlock.servers, its credentials or redlock.key_prefix changed, so other sessions look for it elsewhere";
	else if (lease.state == LEASE_LOST)
		why = pstrdup(lease.lost_reason);
	else
		why = "its validity time ran out (or had less than redlock.commit_margin left) before the worker renewed it";
	watch->told_run_out_ms = lease_run_out_of(&lease, reconfigured);
	watch->told_lxid = lease_current_lxid();
	return why;
}

/*
 * redlock_lease_cancel_explanation
 *		For the error-report hook, on a query cancel: when the watchdog sent it and it
 *		was not explained yet, returns the lease's resource and sets *reason, and the
 *		owner counts as told; NULL otherwise.  Takes no lock (the hook must not) and
 *		raises only out-of-memory errors.
 */
const char *
redlock_lease_cancel_explanation(const char **reason)
{
	RedlockLeaseWatch *w = watchdog_fired;
	RedlockLease peek;

	if (w == NULL)
		return NULL;
	watchdog_fired = NULL;
	w->told_run_out_ms = w->fired_run_out_ms;
	w->told_lxid = lease_current_lxid();
	if (redlock_registry_peek(&w->handle, &peek) && peek.state == LEASE_LOST)
		*reason = pstrdup(peek.lost_reason);
	else
		*reason = "its validity time was running out without a renewal (the worker did not renew it in time)";
	return w->resource;
}

/*
 * redlock_lease_hush
 *		on: until called again with off, the watchdog sends no cancel and a watch that
 *		ends refuses no commit.  For DISCARD ALL, which runs alone in its transaction,
 *		does no work a lock guards and ends every watch (the release's WARNING tells of
 *		a loss), so that a pooler's reset query does not fail.  Raises nothing.
 */
void
redlock_lease_hush(bool on)
{
	watchdog_hushed = on;
}

/*
 * redlock_lease_carried_refusal
 *		When a lease let go of in the running transaction refused its commit: returns
 *		its resource and sets *reason; NULL otherwise.  Raises nothing.
 */
const char *
redlock_lease_carried_refusal(const char **reason)
{
	if (carried_lxid == 0 || carried_lxid != lease_current_lxid())
		return NULL;
	*reason = carried_reason;
	return carried_resource;
}

/*
 * redlock_lease_was_told
 *		True when the owner was told of a loss of watch's lease (an error or a false
 *		from redlock_extend), so that a release need not warn of it again.  Raises
 *		nothing.
 */
bool
redlock_lease_was_told(const RedlockLeaseWatch *watch)
{
	return !isnan(watch->told_run_out_ms);
}
