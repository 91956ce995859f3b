/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  Transaction, subtransaction and exit hooks.
 *
 * They enter at the lock table: a (sub)transaction that aborts takes back the holds
 * it added (so a lock taken for work that rolled back is released), transaction-scoped
 * locks end right after commit (never before, so the lock covers the commit), and a
 * backend that exits releases everything it holds.  Network trouble in these paths is
 * a WARNING, never an ERROR: the lock table releases all the locks in one round in
 * cleanup mode, bounded by one deadline per master and deaf to interrupts, and skips
 * the network when error recovery is itself in trouble.  After the commit point (and
 * at exit) nothing may raise, since an ERROR there becomes "cannot abort transaction
 * ..., it was already committed" (a PANIC): whatever is raised there anyway (out of
 * memory, a failing wait set) is caught and reported as a WARNING.
 *
 * DISCARD ALL releases the session's locks, as it releases advisory locks, so that a
 * pooler that resets a server connection with it (PgBouncer's server_reset_query)
 * hands the next client a backend that holds nothing.
 *
 * For auto-extended locks, the loss protocol (shared/lease.c, lock/leasewatch.c) acts
 * here: the commit check (at PRE_COMMIT and PRE_PREPARE), an error-report hook that
 * words the watchdog's cancel, and the watchdog re-armed at every statement start (the
 * executor and utility hooks) and abort, since PostgreSQL's error recovery disables
 * every timeout.
 *
 * The hooks are registered on first use rather than in _PG_init, so that a library
 * preloaded into the postmaster still registers them in each backend.
 *
 * THE GUARD GOES FIRST.  PostgreSQL calls transaction callbacks newest first, and an
 * extension may commit work elsewhere from its own PRE_COMMIT callback (postgres_fdw
 * sends the remote COMMIT there): behind such a callback, our commit check would
 * refuse after the remote work had committed.  So while this backend holds anything
 * the check guards (redlock_lock_xact_pending), our transaction callback is moved to
 * the front of PostgreSQL's list at the end of every statement (ExecutorEnd, and after
 * a utility statement).  A library loaded or first used during a statement registers
 * its callbacks then (postgres_fdw at its first connection, in the statement, trigger
 * or function that first touches a foreign table), so it is behind ours by the end of
 * that statement; one registered before ours is behind it anyway.  Every commit comes
 * after the end of its last statement (the deferred triggers and cursors that commit
 * runs end statements too): the check runs before any other extension's PRE_COMMIT
 * work, whatever the order in which the extensions were loaded or first used.  Not
 * covered: a callback registered by C code that no statement runs.  The move never
 * runs inside our own callback (PostgreSQL reads an item's next after calling it).
 * PREPARE TRANSACTION is refused while a lock whose loss must stop the work is held:
 * COMMIT PREPARED may come at any later time, from any backend, after the lock is gone,
 * and no check of ours runs there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/elog.h"

#include "guc.h"
#include "lock/leasewatch.h"
#include "lock/lockends.h"
#include "protocol/deadlock.h"
#include "redlock.h"
#include "sql/messages.h"
#include "sql/xact.h"

static bool hooks_registered = false;
static RedlockDiscardCallback discard_callback = NULL;
static bool xact_callback_running = false;	/* xact_guard_first must not move it */
static emit_log_hook_type prev_emit_log_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;
static ExecutorStart_hook_type prev_executor_start_hook = NULL;
static ExecutorEnd_hook_type prev_executor_end_hook = NULL;

static void xact_callback(XactEvent event, void *arg);

/*
 * Runs fn(arg) and turns any ERROR it raises into a WARNING saying when (what), for
 * paths that must not raise: after the commit point, and at exit.
 */
static void
xact_run_without_raising(void (*fn) (void *arg), void *arg, const char *what)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	uint32		crit_section = CritSectionCount;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* errfinish reset these for the handler it expected; put ours back. */
		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
		CritSectionCount = crit_section;
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("could not release redlock locks %s: %s", what, edata->message),
				 errhint("Their keys expire on the Redis masters when their TTL runs out.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

static void
xact_end_committed_xact(void *arg pg_attribute_unused())
{
	redlock_lock_xact_end(true, redlock_warn_release);
}

static void
xact_withdraw_at_exit(void *arg pg_attribute_unused())
{
	redlock_deadlock_withdraw_pending();
}

static void
xact_release_at_exit(void *arg pg_attribute_unused())
{
	redlock_lock_release_everything(redlock_warn_release);
}

/*
 * The loss protocol's commit check (lock/leasewatch.c): no work done while an
 * auto-extended lock taken with redlock.cancel_on_loss was lost or run out becomes
 * visible, at commit or at PREPARE TRANSACTION.
 */
/*
 * What to do once a loss stopped the work, true of either scope: the aborted
 * transaction already let go of what it acquired (a transaction-scoped lock, or a
 * session lock taken in it), so only a session hold from before it is left to release.
 */
#define REDLOCK_HINT_AFTER_LOSS \
	"Acquire the lock again before running the work again; a session-scoped hold taken before this transaction is still to be let go of with redlock_release() first."

static void
xact_refuse_lost_leases(void)
{
	const char *reason;
	const char *resource = redlock_lock_first_lost_in_xact(&reason);

	if (resource)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lock on resource \"%s\" was lost during this transaction", resource),
				 errdetail("The redlock background worker could not keep it alive: %s.", reason),
				 errhint("%s Or turn redlock.cancel_on_loss off before acquiring it to let such transactions commit.",
						 REDLOCK_HINT_AFTER_LOSS)));
}

/*
 * PREPARE TRANSACTION: what it cannot carry (holds it added would outlive the session
 * they belong to) and what it must not escape (a lock whose loss must stop the work;
 * see the file's header).
 */
static void
xact_refuse_prepare(void)
{
	const char *resource;

	if (redlock_lock_xact_acquired())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that has acquired redlock locks")));
	xact_refuse_lost_leases();
	resource = redlock_lock_first_guarding();
	if (resource)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction while this session holds the auto-extended lock on resource \"%s\"",
						resource),
				 errdetail("COMMIT PREPARED may come at any later time, from any session, after the lock is lost; nothing could stop it then."),
				 errhint("Release the lock before PREPARE TRANSACTION, or turn redlock.cancel_on_loss off before acquiring it if its loss need not stop the work.")));
}

/*
 * Refuses the commit (55P03) for the transaction-scoped lock on resource that
 * redlock_lock_first_expired_xact named, saying which cause it was
 * (redlock_lock_commit_loss): the configuration changed, an extension or re-acquire
 * found it lost, the worker gave up on it, or its validity ran out (or has less than
 * redlock.commit_margin left), with the TTL it was given, in milliseconds: a TTL of 30
 * meant as seconds leaves about 20 ms of validity.  Does not return.
 */
static void
xact_report_lost_before_commit(const char *resource)
{
	int			ttl_ms;
	const char *detail;
	const char *hint = "TTLs are in milliseconds: use a longer TTL, or extend the lock with redlock_extend() while the work runs.";

	switch (redlock_lock_commit_loss(resource, &ttl_ms))
	{
		case REDLOCK_LOSS_RECONFIGURED:
			detail = "redlock.servers, the credentials, redlock.database, redlock.key_prefix or redlock.quorum changed since it was acquired, so clients of the new configuration may hold it.";
			hint = "Change the masters only while no transaction holds a lock.";
			break;
		case REDLOCK_LOSS_TOKEN_GONE:
			detail = "An extension or a re-acquire in this transaction found it lost: more Redis masters than a quorum can spare no longer held its token, so another client may hold it.";
			hint = "Use a longer TTL, or extend the lock with redlock_extend() while the work runs.";
			break;
		case REDLOCK_LOSS_WORKER:
			detail = psprintf("It was acquired with a TTL of %d ms and auto-extended; the redlock background worker could not keep it alive, so another client may hold it.",
							  ttl_ms);
			hint = "Check the masters with redlock_nodes(); the worker's LOG lines say why.";
			break;
		case REDLOCK_LOSS_MARGIN:
			detail = psprintf("It was acquired with a TTL of %d ms; its validity time had less than redlock.commit_margin (%d ms) left, so it could run out before the commit is visible.",
							  ttl_ms, redlock_commit_margin_ms);
			break;
		default:
			detail = psprintf("It was acquired with a TTL of %d ms, and its validity time ran out before the commit, so another client may hold it.",
							  ttl_ms);
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("transaction-scoped lock on resource \"%s\" was lost before commit", resource),
			 errdetail("%s", detail),
			 errhint("%s", hint)));
}

static void
xact_callback_event(XactEvent event)
{
	const char *resource;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* The work a lost or expired lock guarded must not become visible. */
			xact_refuse_lost_leases();
			resource = redlock_lock_first_expired_xact();
			if (resource)
				xact_report_lost_before_commit(resource);
			break;
		case XACT_EVENT_PRE_PREPARE:
			xact_refuse_prepare();
			break;
		case XACT_EVENT_COMMIT:
			xact_run_without_raising(xact_end_committed_xact, NULL, "after commit");
			redlock_lease_xact_ended();
			break;
		case XACT_EVENT_PREPARE:
			redlock_lease_xact_ended();
			break;
		case XACT_EVENT_ABORT:
			redlock_lock_xact_end(false, redlock_warn_release_at_abort);
			redlock_lease_rearm(false);
			redlock_lease_xact_ended();
			break;
		default:
			break;
	}
}

static void
xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	xact_callback_running = true;	/* an ERROR leaves it set until the abort's call */
	if (event == XACT_EVENT_ABORT)
		redlock_deadlock_withdraw_pending();	/* a wait cut short: its record */
	if (redlock_lock_xact_pending())
		xact_callback_event(event);
	xact_callback_running = false;
}

/*
 * Moves the transaction callback to the front of PostgreSQL's list, where it runs
 * before every other (the file's header says why and when).
 */
static void
xact_guard_first(void)
{
	if (xact_callback_running || !redlock_test_commit_guard_first ||
		!redlock_lock_xact_pending())
		return;
	UnregisterXactCallback(xact_callback, NULL);
	RegisterXactCallback(xact_callback, NULL);
}

static void
xact_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		redlock_deadlock_withdraw_pending();	/* a wait the subtransaction cut short */
	if (!redlock_lock_xact_pending())
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		redlock_lock_subxact_end(true, mySubid, parentSubid, redlock_warn_release);
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		redlock_lock_subxact_end(false, mySubid, parentSubid, redlock_warn_release_at_abort);
}

/* Backend exit (pg_terminate_backend, client disconnect, FATAL): release everything. */
static void
xact_exit_callback(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	/* Apart: an error taking a wait record back must not keep the locks. */
	xact_run_without_raising(xact_withdraw_at_exit, NULL, "at exit");
	xact_run_without_raising(xact_release_at_exit, NULL, "at exit");
}

/*
 * When the background worker cancelled this backend's statement because an
 * auto-extended lock was lost, the cancel's error (57014, "canceling statement due to
 * user request") says so instead: the one place PostgreSQL lets an extension word an
 * interrupt's error.  The SQLSTATE stays, so that callers still see a cancel.
 */
static void
xact_explain_cancel(ErrorData *edata)
{
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
	if (edata->elevel == ERROR && edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
	{
		const char *reason;
		const char *resource = redlock_lease_cancel_explanation(&reason);

		if (resource)
		{
			edata->message = psprintf("canceling statement because lock on resource \"%s\" was lost",
									  resource);
			edata->detail = psprintf("The redlock background worker could not keep it alive: %s.",
									 reason);
			edata->hint = pstrdup(REDLOCK_HINT_AFTER_LOSS);
		}
	}
}

static void
xact_standard_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params,
								  queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * DISCARD ALL, once it has run (it cannot inside a transaction block): the session
 * locks, then what discard_callback drops (the session's watches, as DISCARD ALL's
 * UNLISTEN * stops their notifications).  The watchdog is hushed meanwhile: a reset query does no guarded work, and
 * a pooler (PgBouncer's server_reset_query) drops a server whose reset fails.
 */
static void
xact_discard_all(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				 ProcessUtilityContext context, ParamListInfo params,
				 QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	redlock_lease_hush(true);
	PG_TRY();
	{
		xact_standard_utility(pstmt, queryString, readOnlyTree, context, params,
							  queryEnv, dest, qc);
		(void) redlock_lock_release_session(redlock_warn_release);
		if (discard_callback)
			discard_callback();
	}
	PG_FINALLY();
	{
		redlock_lease_hush(false);
	}
	PG_END_TRY();
}

static void
xact_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		discard_all = IsA(stmt, DiscardStmt) &&
		((DiscardStmt *) stmt)->target == DISCARD_ALL;

	if (discard_all)
		xact_discard_all(pstmt, queryString, readOnlyTree, context, params, queryEnv,
						 dest, qc);
	else
	{
		redlock_lease_rearm(true);
		xact_standard_utility(pstmt, queryString, readOnlyTree, context, params,
							  queryEnv, dest, qc);
	}
	xact_guard_first();			/* COPY into a foreign table runs no plan */
}

/* Every statement that runs a plan: the lease watchdog is armed (an error disarms it). */
static void
xact_executor_start(QueryDesc *queryDesc, int eflags)
{
	redlock_lease_rearm(true);
	if (prev_executor_start_hook)
		prev_executor_start_hook(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Every statement that ran a plan: the guard moves to the front (the file's header). */
static void
xact_executor_end(QueryDesc *queryDesc)
{
	if (prev_executor_end_hook)
		prev_executor_end_hook(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	xact_guard_first();			/* nested plans too: a trigger's, a function's */
}

/*
 * redlock_hooks_on_discard_all
 *		Sets callback, run after DISCARD ALL has released the session's locks: watch.c's
 *		drop of the session's watches.  One callback; NULL for none.  Raises nothing.
 */
void
redlock_hooks_on_discard_all(RedlockDiscardCallback callback)
{
	discard_callback = callback;
}

/*
 * redlock_hooks_register
 *		Registers the transaction, subtransaction, exit, error-report, utility
 *		(DISCARD ALL) and executor start and end hooks, once per backend.  Called
 *		before the first lock operation.  Raises nothing.
 */
void
redlock_hooks_register(void)
{
	if (hooks_registered)
		return;
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(xact_subxact_callback, NULL);
	before_shmem_exit(xact_exit_callback, (Datum) 0);
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = xact_explain_cancel;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = xact_process_utility;
	prev_executor_start_hook = ExecutorStart_hook;
	ExecutorStart_hook = xact_executor_start;
	prev_executor_end_hook = ExecutorEnd_hook;
	ExecutorEnd_hook = xact_executor_end;
	hooks_registered = true;
}
