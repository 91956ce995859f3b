/*-------------------------------------------------------------------------
 *
 * messages.c
 *	  Messages shared by the SQL functions and the transaction hooks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "lock/lockends.h"
#include "lock/locktable.h"
#include "redlock.h"
#include "sql/messages.h"
#include "tally.h"

/*
 * redlock_errdetail_nodes
 *		errdetail for an ereport: the masters that did not answer, one per line, with
 *		what went wrong.  Returns 0, as errdetail does.
 */
int
redlock_errdetail_nodes(const RedlockResult *result)
{
	if (result->node_count == 0)
		return errdetail("No Redis master is configured in redlock.servers.");
	if (result->node_errors == NULL)
		return 0;
	return errdetail_internal("%s", result->node_errors);
}

/*
 * redlock_report_unanswered
 *		Raises the ERROR of a round that fewer than a quorum of masters answered (spec §3
 *		step 3): "could not <doing>: N of M Redis masters answered, Q needed", the
 *		masters that failed and why in the detail (redlock_errdetail_nodes).  SQLSTATE
 *		53200 when masters refused for lack of memory (Redis' OOM error: maxmemory
 *		reached with noeviction), which the message then counts; else 08006.  Masters
 *		left out (wire/masterinfo.c: restarted without their data, evicting) are
 *		counted in the message, and the hint points at redlock_check().  doing: the
 *		words for what failed ("acquire lock on resource \"x\"").  Does not return.
 */
void
redlock_report_unanswered(const char *doing, const RedlockResult *result)
{
	if (result->out_of_memory > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not %s: %d of %d Redis masters are out of memory, %d answered, %d needed",
						doing, result->out_of_memory, result->node_count, result->answered,
						result->quorum),
				 redlock_errdetail_nodes(result),
				 errhint("A master refuses writes once its memory reaches maxmemory: free memory there, "
						 "raise maxmemory, or lower what one role may hold (redlock.max_locks_per_role).")));
	if (result->left_out > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not %s: %d of %d Redis masters answered and %d more are left out of quorums, %d needed",
						doing, result->answered, result->node_count, result->left_out,
						result->quorum),
				 redlock_errdetail_nodes(result),
				 errhint("redlock_check() says what each master lacks: a master restarted without its "
						 "data counts again after redlock.restart_quarantine; one that may evict keys "
						 "needs maxmemory-policy noeviction.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not %s: %d of %d Redis masters answered, %d needed",
					doing, result->answered, result->node_count, result->quorum),
			 redlock_errdetail_nodes(result),
			 errhint("%s", REDLOCK_HINT_CHECK_MASTERS)));
}

/*
 * redlock_warn_release
 *		Raises a WARNING (01000) when a release found something wrong: the validity had
 *		run out before it (the lock may have protected nothing), a quorum could not be
 *		reached (the keys live until their TTL), or a majority no longer held the lock.
 *		Silent otherwise, and while error recovery is itself in trouble.
 */
/*
 * The resources whose acquire a rollback (of a transaction or a savepoint) undid, so
 * that "not held" can say so: where pg_advisory_lock's users, whose session locks
 * survive a rollback, are surprised.  A later release of the resource forgets it; at
 * most MESSAGES_UNDONE_MAX names are kept (the oldest go first), in TopMemoryContext.
 */
#define MESSAGES_UNDONE_MAX 16
static List *messages_undone = NIL;

static void
messages_forget_undone(const char *resource)
{
	ListCell   *cell;

	foreach(cell, messages_undone)
	{
		if (strcmp((char *) lfirst(cell), resource) == 0)
		{
			pfree(lfirst(cell));
			messages_undone = foreach_delete_current(messages_undone, cell);
		}
	}
}

/*
 * redlock_warn_release_at_abort
 *		redlock_warn_release for the releases a rollback makes, which also notes that
 *		the rollback undid the acquire of info->resource (redlock_warn_not_held says
 *		so).  Raises only out-of-memory errors besides the WARNINGs.
 */
void
redlock_warn_release_at_abort(const RedlockReleaseInfo *info)
{
	MemoryContext old;

	redlock_warn_release(info);
	if (!info->acquired)
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (list_length(messages_undone) >= MESSAGES_UNDONE_MAX)
	{
		pfree(linitial(messages_undone));
		messages_undone = list_delete_first(messages_undone);
	}
	messages_undone = lappend(messages_undone, pstrdup(info->resource));
	MemoryContextSwitchTo(old);
}

void
redlock_warn_release(const RedlockReleaseInfo *info)
{
	const RedlockResult *result = &info->result;

	messages_forget_undone(info->resource);

	/*
	 * An attempt cut short (query cancel) was only being undone, and a loss the
	 * cancel's error already named needs no second word (a job runner may take a
	 * WARNING after the error for the run's last word): nothing to say.
	 */
	if (!info->acquired || info->loss_reported || in_error_recursion_trouble())
		return;

	if (info->lost_reason)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" had been lost before it was released", info->resource),
				 errdetail("The redlock background worker could not keep it alive: %s.",
						   info->lost_reason)));
	else if (info->reconfigured)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" was lost when the Redis masters, credentials or key prefix changed",
						info->resource),
				 errdetail("It was taken under an earlier redlock.servers, redlock.database, credentials "
						   "or redlock.key_prefix, so clients of the new ones may have held it meanwhile; "
						   "its keys were released on the masters it was taken on.")));
	else if (info->expired)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" had expired before it was released",
						info->resource),
				 errdetail("Its validity time ran out, so another client may have held the lock meanwhile."),
				 errhint("Use a longer TTL, or extend the lock with redlock_extend() while the work runs.")));
	else if (result->status == REDLOCK_UNAVAILABLE)
		ereport(WARNING,
				(errmsg("could not release lock on resource \"%s\": %d of %d Redis masters answered",
						info->resource, result->answered, result->node_count),
				 redlock_errdetail_nodes(result),
				 errhint("The keys on the other masters expire when the TTL runs out.")));
	else if (!redlock_quorum_reached(result->accepted, result->quorum) && result->failed > 0)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" was no longer held by a majority of Redis masters when released",
						info->resource),
				 errdetail("%d of %d masters still held it; %d did not answer (any key there expires with its TTL):\n%s",
						   result->accepted, result->node_count, result->failed,
						   result->node_errors ? result->node_errors : "")));
	else if (!redlock_quorum_reached(result->accepted, result->quorum))
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" was no longer held by a majority of Redis masters when released",
						info->resource),
				 errdetail("%d of %d masters still held it.",
						   result->accepted, result->node_count)));
}

/*
 * redlock_warn_not_held
 *		Raises a WARNING that this session does not hold resource at session scope
 *		(spec §5: releasing a lock one does not hold is refused by the token check
 *		anyway): held only at transaction scope, or not at all.  Raises no ERROR.
 */
void
redlock_warn_not_held(const char *resource)
{
	RedlockLockInfo *locks;
	int			n = redlock_lock_list(&locks);
	ListCell   *cell;

	for (int i = 0; i < n; i++)
	{
		if (strcmp(locks[i].resource, resource) == 0 && locks[i].xact_holds > 0)
		{
			ereport(WARNING,
					(errmsg("lock on resource \"%s\" is held only at transaction scope", resource),
					 errdetail("Transaction-scoped locks are released when the transaction ends.")));
			return;
		}
	}
	foreach(cell, messages_undone)
	{
		if (strcmp((char *) lfirst(cell), resource) == 0)
		{
			ereport(WARNING,
					(errmsg("lock on resource \"%s\" is not held by this session", resource),
					 errdetail("The transaction (or savepoint) that acquired it rolled back, and the rollback undid the acquire."),
					 errhint("Unlike pg_advisory_lock, a redlock lock acquired in a transaction that aborts is released with it: acquire it again.")));
			return;
		}
	}
	ereport(WARNING,
			(errmsg("lock on resource \"%s\" is not held by this session", resource)));
}

/*
 * redlock_report_worker_silent
 *		An extension of an auto-extended lock (redlock_extend, a re-acquire) is sent by
 *		the background worker (spec §6 for a lock nobody extends by hand): when it did
 *		not answer (result->worker_silent), raises 08006 saying so rather than count
 *		masters; else returns.
 */
void
redlock_report_worker_silent(const char *resource, const RedlockResult *result)
{
	if (result->worker_silent)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not extend lock on resource \"%s\": the redlock background worker did not answer",
						resource),
				 errdetail("Extensions of auto-extended locks are sent by the worker; the lock is kept with the validity it had."),
				 errhint("Check that the worker runs: pg_stat_activity shows it with backend_type \"redlock auto-extend\".")));
}

/*
 * redlock_report_extend_failed
 *		Raises 08006 for an extension of resource that fewer than a quorum answered
 *		(spec §6), naming each master's failure from result; the worker's silence
 *		first (redlock_report_worker_silent).  Does not return.
 */
void
redlock_report_extend_failed(const char *resource, const RedlockResult *result)
{
	redlock_report_worker_silent(resource, result);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not extend lock on resource \"%s\": %d of %d Redis masters extended it and %d did not answer, %d needed",
					resource, result->accepted, result->node_count, result->failed,
					result->quorum),
			 redlock_errdetail_nodes(result),
			 errhint("The lock is kept with the validity the new TTL allows; its keys expire with their TTL.")));
}

/*
 * redlock_warn_ran_out
 *		Raises a WARNING (01000) when an extension of resource found the lock lost
 *		because its validity ran out before a quorum extended it (result->ran_out,
 *		doc/redlock.md §6); silent for other losses, which the false return says.
 */
void
redlock_warn_ran_out(const char *resource, const RedlockResult *result)
{
	if (!result->ran_out)
		return;
	ereport(WARNING,
			(errmsg("lock on resource \"%s\" ran out while it was being extended", resource),
			 errdetail("%d of %d Redis masters extended it before its validity time ended, %d needed; it is let go of.%s%s",
					   result->accepted, result->node_count, result->quorum,
					   result->node_errors ? "\n" : "",
					   result->node_errors ? result->node_errors : ""),
			 errhint("Extend it earlier in its validity time, or use redlock.auto_extend.")));
}

/* The words for what this backend holds of a resource (redlock_locktable_kind). */
static char *
messages_kind_words(int kind)
{
	if (kind == REDLOCK_KIND_LOCK)
		return pstrdup("an exclusive lock");
	if (kind == REDLOCK_KIND_SHARED)
		return pstrdup("a shared lock");
	return psprintf("a permit of a %d-permit semaphore", kind);
}

/*
 * redlock_refuse_other_kind
 *		Refuses to take resource as kind (REDLOCK_KIND_*, or a semaphore's permits)
 *		when this backend holds it as another (55000): a lock and a permit, permits of
 *		semaphores of different sizes, or an exclusive lock and a shared one (no
 *		upgrade or downgrade in place: doc/shared.md §4).  Returns when it may.
 */
void
redlock_refuse_other_kind(const char *resource, int kind)
{
	int			held = redlock_locktable_kind(resource);

	if (held == REDLOCK_KIND_NONE || held == kind)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("resource \"%s\" is held by this session as %s, not as %s",
					resource, messages_kind_words(held), messages_kind_words(kind)),
			 (held > 0 || kind > 0)
			 ? errdetail("A resource name is either a lock or a semaphore, whose callers all give the same number of permits.")
			 : errdetail("A session holds a resource in one mode at a time: a lock is not upgraded or downgraded in place."),
			 errhint("Release it first, or use another resource name.")));
}

/*
 * redlock_report_not_acquired
 *		Raises what an acquire that failed means, or returns for a plain false: 40P01
 *		its wait was the victim of a deadlock across clusters (doc/deadlock.md); 55000 a
 *		semaphore's holder beyond its permits; 08006 (53200: masters out of memory)
 *		fewer than a quorum answered (spec §3 step 3, redlock_report_unanswered); 55P03 an unlimited wait that lock_timeout bounded ran out after
 *		wait_ms milliseconds (spec §4).  resource: the resource (a set's first); what:
 *		the words for it, 'resource "name"' or a set's; permits: a semaphore's, else 0.
 */
void
redlock_report_not_acquired(const char *resource, const char *what, int permits,
						const RedlockResult *result, bool bounded_by_lock_timeout, int wait_ms)
{
	if (result->deadlock)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
				 errmsg("deadlock detected"),
				 errdetail_internal("%s", result->deadlock),
				 errhint("Sessions that take several locks should take them in the same order; "
						 "this session's wait for %s ended so that the others can go on.", what)));
	if (result->beyond_slot > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("semaphore \"%s\" has a holder beyond its %d permits", resource, permits),
				 errdetail("A quorum of the masters hold a slot past them, the lowest \"%s" REDLOCK_PERMIT_SLOT_SEPARATOR "%d\": another caller gives more permits for this resource, or holds a lock of that name.",
						   resource, result->beyond_slot),
				 errhint("Give every caller of a semaphore the same number of permits.")));
	if (result->status == REDLOCK_UNAVAILABLE)
	{
		redlock_report_worker_silent(resource, result);
		redlock_report_unanswered(psprintf("acquire lock on %s", what), result);
	}
	if (bounded_by_lock_timeout)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("canceling statement due to lock timeout"),
				 errdetail("The lock on %s was still held elsewhere after %d ms.",
						   what, wait_ms)));
}

/*
 * redlock_set_words
 *		Returns the words for a set of n resources in messages: 'resources "a", "b"'
 *		(palloc'd).  Raises only out-of-memory errors.  Not a distlock section (doc/sets.md).
 */
char *
redlock_set_words(char **resources, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "resources ");
	for (int k = 0; k < n; k++)
		appendStringInfo(&buf, "%s\"%s\"", k > 0 ? ", " : "", resources[k]);
	return buf.data;
}

/*
 * redlock_report_over_quota
 *		Raises 53400 when quota says an acquire or a claim was refused, before anything
 *		was sent, for what its role (the session user) has on the masters from this
 *		cluster (redlock.max_locks_per_role, shared/rolequota.c); returns otherwise.
 */
void
redlock_report_over_quota(const RedlockQuotaRefusal *quota)
{
	const char *role;

	if (!quota->refused)
		return;
	role = GetUserNameFromId(quota->role, true);
	if (role == NULL)
		role = psprintf("%u", quota->role);
	if (quota->roles_full)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many roles have locks on the Redis masters from this cluster"),
				 errdetail("Locks and claims are counted for at most %d roles at once, and role \"%s\" would be one more.",
						   quota->limit, role),
				 errhint("Wait for claims to expire, or release locks.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg_plural("role \"%s\" has %d lock on the Redis masters from this cluster",
						   "role \"%s\" has %d locks on the Redis masters from this cluster",
						   quota->live, role, quota->live),
			 quota->asked > 1 ?
			 errdetail("Each resource of the set is a lock: %d more. Every lock of the role's sessions here counts, of every kind, until it is released, and every claim until its TTL runs out; redlock.max_locks_per_role is %d for this role.",
					   quota->asked, quota->limit) :
			 errdetail("Every lock of the role's sessions here counts, of every kind (each resource of a set, each permit), until it is released, and every claim until its TTL runs out; redlock.max_locks_per_role is %d for this role.",
					   quota->limit),
			 errhint("Release some of its locks or wait for its claims to expire; a superuser can raise the limit for this role with ALTER ROLE ... SET redlock.max_locks_per_role.")));
}
