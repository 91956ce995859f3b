/*-------------------------------------------------------------------------
 *
 * sql.c
 *	  The SQL-callable functions: argument checks, then the lock table, then the
 *	  decision between a result, a WARNING and an ERROR.
 *
 * Functions are not STRICT: a NULL resource or TTL is an ERROR (22004) rather than a
 * silent NULL, and a NULL wait_ms means "wait without limit".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid_d.h"
#include "catalog/pg_type_d.h"
#include "common/string.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "guc.h"
#include "lock/lockops.h"
#include "lock/locktable.h"
#include "redlock.h"
#include "shared/registry.h"
#include "shared/stats.h"
#include "shared/waiters.h"
#include "sql/messages.h"
#include "sql/sqlarg.h"
#include "sql/xact.h"
#include "validity.h"
#include "wire/nodeset.h"

/*---- argument checks ----*/

/* The ttl_ms argument: 1..REDLOCK_MAX_TTL_MS; NULL gives null_ttl when allowed. */
static int
sql_arg_ttl(FunctionCallInfo fcinfo, int argno, bool null_allowed, int null_ttl)
{
	int			ttl_ms;

	if (PG_ARGISNULL(argno))
	{
		if (null_allowed)
			return null_ttl;
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ttl_ms must not be null")));
	}
	ttl_ms = PG_GETARG_INT32(argno);
	if (ttl_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms must be greater than zero"),
				 errdetail("The TTL given was %d ms.", ttl_ms)));
	if (ttl_ms > REDLOCK_MAX_TTL_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms must be at most %d (one day)", REDLOCK_MAX_TTL_MS),
				 errdetail("The TTL given was %d ms.", ttl_ms),
				 errhint("Take a shorter TTL and extend the lock with redlock_extend() while the work runs.")));
	/* Spec §3 step 4: a TTL that the drift allowance eats whole can never be valid. */
	if (!redlock_ttl_leaves_validity(ttl_ms))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms is too short to leave any validity time"),
				 errdetail("A TTL of %d ms leaves nothing after the clock drift allowance (TTL * redlock.clock_drift_factor + 2 ms).",
						   ttl_ms)));
	return ttl_ms;
}

/* The wait_ms argument: >= 0, or NULL for no limit (returned as -1). */
static int
sql_arg_wait(FunctionCallInfo fcinfo, int argno)
{
	int			wait_ms;

	if (PG_ARGISNULL(argno))
		return -1;
	wait_ms = PG_GETARG_INT32(argno);
	if (wait_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait_ms must not be negative"),
				 errdetail("The wait given was %d ms.", wait_ms),
				 errhint("Pass 0 for a single attempt, or NULL to wait without limit.")));
	return wait_ms;
}

static void
sql_warn_not_held(const char *resource)
{
	RedlockLockInfo *locks;
	int			n = redlock_lock_list(&locks);

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
	ereport(WARNING,
			(errmsg("lock on resource \"%s\" is not held by this session", resource)));
}

/*
 * An extension of an auto-extended lock (redlock_extend, a re-acquire) is sent by the
 * background worker: when it did not answer, say so (08006) rather than count masters.
 */
static void
sql_report_worker_silent(const char *resource, const RedlockResult *result)
{
	if (result->worker_silent)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not extend lock on resource \"%s\": the redlock background worker did not answer",
						resource),
				 errdetail("Extensions of auto-extended locks are sent by the worker; the lock is kept with the validity it had."),
				 errhint("Check that the worker runs: pg_stat_activity shows it with backend_type \"redlock auto-extend\".")));
}

/* Raises 08006 for an extension of resource that fewer than a quorum answered. */
static void
sql_report_extend_failed(const char *resource, const RedlockResult *result)
{
	sql_report_worker_silent(resource, result);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not extend lock on resource \"%s\": %d of %d Redis masters extended it and %d did not answer, %d needed",
					resource, result->accepted, result->node_count, result->failed,
					result->quorum),
			 redlock_errdetail_nodes(result),
			 errhint("The lock is kept with the validity the new TTL allows; its keys expire with their TTL.")));
}

/* The permits argument: 1..REDLOCK_MAX_PERMITS. */
static int
sql_arg_permits(FunctionCallInfo fcinfo, int argno)
{
	int			permits;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("permits must not be null")));
	permits = PG_GETARG_INT32(argno);
	if (permits < 1 || permits > REDLOCK_MAX_PERMITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be between 1 and %d", REDLOCK_MAX_PERMITS),
				 errdetail("The number of permits given was %d.", permits),
				 errhint("Each permit is a lock of its own on the masters, all tried in one round trip.")));
	return permits;
}

/* The words for what this backend holds of a resource (redlock_locktable_kind). */
static char *
sql_kind_words(int kind)
{
	if (kind == REDLOCK_KIND_LOCK)
		return pstrdup("an exclusive lock");
	if (kind == REDLOCK_KIND_SHARED)
		return pstrdup("a shared lock");
	return psprintf("a permit of a %d-permit semaphore", kind);
}

/*
 * Refuses to take resource as another kind than this backend holds it (55000): a lock
 * and a permit, permits of semaphores of different sizes, or an exclusive lock and a
 * shared one (no upgrade or downgrade in place: doc/shared.md §4).
 */
static void
sql_refuse_other_kind(const char *resource, int kind)
{
	int			held = redlock_locktable_kind(resource);

	if (held == REDLOCK_KIND_NONE || held == kind)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("resource \"%s\" is held by this session as %s, not as %s",
					resource, sql_kind_words(held), sql_kind_words(kind)),
			 (held > 0 || kind > 0)
			 ? errdetail("A resource name is either a lock or a semaphore, whose callers all give the same number of permits.")
			 : errdetail("A session holds a resource in one mode at a time: a lock is not upgraded or downgraded in place."),
			 errhint("Release it first, or use another resource name.")));
}

/*
 * An unlimited wait (*wait_ms < 0) still honours lock_timeout, as PostgreSQL's lock
 * waits do: sets *wait_ms to it and returns true when it bounds the wait.
 */
static bool
sql_bound_by_lock_timeout(int *wait_ms)
{
	if (*wait_ms >= 0 || LockTimeout <= 0)
		return false;
	*wait_ms = LockTimeout;
	return true;
}

/*
 * Raises what an acquire that failed means, or returns for a plain false: 55000 a
 * semaphore's holder beyond its permits; 08006 fewer than a quorum answered; 55P03
 * an unlimited wait that lock_timeout bounded ran out.  resource: the resource (a
 * set's first); what: the words for it, 'resource "name"' or a set's.
 */
static void
sql_report_not_acquired(const char *resource, const char *what, int permits,
						const RedlockResult *result, bool bounded_by_lock_timeout, int wait_ms)
{
	if (result->beyond_slot > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("semaphore \"%s\" has a holder beyond its %d permits", resource, permits),
				 errdetail("A quorum of the masters hold a slot past them, the lowest \"%s" REDLOCK_PERMIT_SLOT_SEPARATOR "%d\": another caller gives more permits for this resource, or holds a lock of that name.",
						   resource, result->beyond_slot),
				 errhint("Give every caller of a semaphore the same number of permits.")));
	if (result->status == REDLOCK_UNAVAILABLE)
	{
		sql_report_worker_silent(resource, result);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not acquire lock on %s: %d of %d Redis masters answered, %d needed",
						what, result->answered, result->node_count, result->quorum),
				 redlock_errdetail_nodes(result)));
	}
	if (bounded_by_lock_timeout)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("canceling statement due to lock timeout"),
				 errdetail("The lock on %s was still held elsewhere after %d ms.",
						   what, wait_ms)));
}

/*
 * Shared by redlock_acquire, redlock_xact_acquire and their _permit and _shared forms:
 * the arguments from argument first on are ttl_ms and wait_ms; kind as for
 * redlock_lock_acquire.
 */
static bool
sql_acquire(FunctionCallInfo fcinfo, RedlockScope scope, int kind, int first)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	int			ttl_ms = sql_arg_ttl(fcinfo, first, false, 0);
	int			wait_ms = sql_arg_wait(fcinfo, first + 1);
	bool		bounded_by_lock_timeout;
	bool		was_lost;
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	sql_refuse_other_kind(resource, kind);
	redlock_hooks_register();

	bounded_by_lock_timeout = sql_bound_by_lock_timeout(&wait_ms);

	if (redlock_lock_acquire(resource, kind, scope, ttl_ms, wait_ms, &was_lost,
							 &result) == REDLOCK_HELD)
	{
		if (was_lost)
			ereport(WARNING,
					(errmsg("lock on resource \"%s\" had been lost before it was acquired again",
							resource),
					 errdetail("Work done under the earlier hold may have overlapped another client's.")));
		return true;
	}

	sql_report_not_acquired(resource, psprintf("resource \"%s\"", resource), Max(kind, 0),
							&result, bounded_by_lock_timeout, wait_ms);
	return false;
}

/* The words for a set of resources in messages: 'resources "a", "b"'. */
static char *
sql_set_words(char **resources, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "resources ");
	for (int k = 0; k < n; k++)
		appendStringInfo(&buf, "%s\"%s\"", k > 0 ? ", " : "", resources[k]);
	return buf.data;
}

/*
 * Shared by the set forms of redlock_acquire and redlock_xact_acquire (1.6):
 * resources text[], ttl_ms, wait_ms.
 */
static bool
sql_acquire_set(FunctionCallInfo fcinfo, RedlockScope scope)
{
	int			n;
	char	  **resources = redlock_sqlarg_resources(fcinfo, 0, &n);
	int			ttl_ms = sql_arg_ttl(fcinfo, 1, false, 0);
	int			wait_ms = sql_arg_wait(fcinfo, 2);
	bool		bounded_by_lock_timeout;
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	for (int k = 0; k < n; k++)
		if (redlock_locktable_kind(resources[k]) != REDLOCK_KIND_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("resource \"%s\" is held by this session already", resources[k]),
					 errdetail("A set is acquired whole, by one attempt with one token; a resource held already cannot join it."),
					 errhint("Release it first, or acquire the set without it.")));
	redlock_hooks_register();
	bounded_by_lock_timeout = sql_bound_by_lock_timeout(&wait_ms);
	if (redlock_lockset_acquire((const char *const *) resources, n, scope, ttl_ms, wait_ms,
								&result) == REDLOCK_HELD)
		return true;
	sql_report_not_acquired(resources[0], sql_set_words(resources, n), 0, &result,
							bounded_by_lock_timeout, wait_ms);
	return false;
}

/*---- SQL-callable functions ----*/

/*
 * redlock_acquire(resource text, ttl_ms integer DEFAULT 30000, wait_ms integer
 *		DEFAULT 0) RETURNS boolean
 * redlock_acquire(key bigint, ...) (1.4): the same, resource being key's decimal text
 *
 * Takes a session-scoped lock on resource for ttl_ms milliseconds (spec §3).  With
 * wait_ms 0, one attempt; otherwise retries with redlock.retry_delay plus up to
 * redlock.retry_jitter ms between attempts (spec §4) until acquired or wait_ms ms
 * have passed; NULL waits until acquired, cancelled, statement_timeout or lock_timeout.
 * Re-acquiring a lock this session holds adds a hold and extends it (spec §6) to the
 * larger of ttl_ms and the TTL last set: a re-acquire never shortens a lock.  The Redis
 * key is redlock.key_prefix followed by the UTF-8 form of resource.
 *
 * Returns true when acquired, false when the lock is held elsewhere.  A session lock
 * acquired in a transaction that aborts is released by the abort.
 * Errors: 22004 NULL resource or TTL; 22023 empty or too long resource, TTL <= 0, over
 * one day or too short to leave validity after drift, negative wait, no servers
 * configured; 25000 in a parallel worker; 08006 fewer than a quorum of masters
 * answered (errdetail names each failure): at once with wait_ms 0, else when the wait
 * ran out with the last attempt unanswered; 55P03 lock_timeout ran out.
 */
PG_FUNCTION_INFO_V1(redlock_acquire);
Datum
redlock_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_SESSION, REDLOCK_KIND_LOCK, 1));
}

/*
 * redlock_xact_acquire(resource text, ttl_ms integer DEFAULT 30000, wait_ms integer
 *		DEFAULT 0) RETURNS boolean
 * redlock_xact_acquire(key bigint, ...) (1.4): resource being key's decimal text
 *
 * As redlock_acquire, but transaction-scoped: released right after the transaction
 * commits or aborts.  If its validity has run out (or an extension found it lost)
 * before commit, the commit fails with 55P03.  Same arguments, result and errors.
 */
PG_FUNCTION_INFO_V1(redlock_xact_acquire);
Datum
redlock_xact_acquire(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_XACT, REDLOCK_KIND_LOCK, 1));
}

/*
 * redlock_acquire_shared(resource text, ttl_ms integer DEFAULT 30000, wait_ms integer
 *		DEFAULT 0) RETURNS boolean (1.7)
 *
 * Takes a session-scoped shared lock on resource (doc/shared.md): any number of
 * sessions, in any cluster, hold it shared at once, and none while an exclusive lock
 * (redlock_acquire) holds it; an exclusive acquire waits until the shared holders are
 * gone.  Each attempt runs one script per master that adds this hold unless the key
 * holds an exclusive holder's token or a waiting exclusive acquire's intent (§3: new
 * shared holders queue behind a waiting writer); held when a quorum added it within
 * the TTL (spec §3), a failed attempt undone at once, retries as for redlock_acquire
 * (spec §4).  ttl_ms and wait_ms in ms, holds, re-acquire and the scope's end as for
 * redlock_acquire; released by redlock_release(resource); redlock_extend and
 * redlock.auto_extend work on it as on a lock.  No holder record is written and no
 * fencing token is issued.
 *
 * Returns true when held, false when an exclusive holder holds it (or a writer waits).
 * Errors: those of redlock_acquire; 55000 this session holds resource exclusively or
 * as a permit.
 */
PG_FUNCTION_INFO_V1(redlock_acquire_shared);
Datum
redlock_acquire_shared(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_SESSION, REDLOCK_KIND_SHARED, 1));
}

/*
 * redlock_xact_acquire_shared(resource text, ttl_ms integer DEFAULT 30000, wait_ms
 *		integer DEFAULT 0) RETURNS boolean (1.7)
 *
 * As redlock_acquire_shared, but transaction-scoped, as redlock_xact_acquire: released
 * right after the transaction ends, and a commit after its validity ran out fails with
 * 55P03.  Same arguments, result and errors.
 */
PG_FUNCTION_INFO_V1(redlock_xact_acquire_shared);
Datum
redlock_xact_acquire_shared(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_XACT, REDLOCK_KIND_SHARED, 1));
}

/*
 * redlock_acquire_permit(resource text, permits integer, ttl_ms integer DEFAULT
 *		30000, wait_ms integer DEFAULT 0) RETURNS boolean (1.5)
 *
 * Takes a session-scoped permit of the semaphore resource, which admits at most
 * permits holders at once across every cluster that uses these masters
 * (doc/semaphores.md): one of its slots, the locks resource#1..resource#permits, all
 * tried in one round trip per attempt (spec §3 for each), the first that a quorum
 * granted kept and the others undone.  ttl_ms, wait_ms, retries, holds, re-acquire
 * and the scope's end as for redlock_acquire; released by redlock_release(resource);
 * redlock_extend, redlock_fencing_token (per slot) and redlock.auto_extend work on it
 * as on a lock.  Every caller of one semaphore must give the same permits.
 *
 * Returns true when a permit was taken, false when all permits are held elsewhere.
 * Errors: those of redlock_acquire; 22004 NULL permits; 22023 permits outside
 * 1..REDLOCK_MAX_PERMITS (64); 55000 this session holds resource as a lock, or as a
 * permit of another number of permits, or a slot past permits is held on a quorum
 * (another caller gives more permits: the bound is broken, nothing is taken).
 */
PG_FUNCTION_INFO_V1(redlock_acquire_permit);
Datum
redlock_acquire_permit(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_SESSION, sql_arg_permits(fcinfo, 1), 2));
}

/*
 * redlock_xact_acquire_permit(resource text, permits integer, ttl_ms integer DEFAULT
 *		30000, wait_ms integer DEFAULT 0) RETURNS boolean (1.5)
 *
 * As redlock_acquire_permit, but transaction-scoped, as redlock_xact_acquire: the
 * permit is released right after the transaction ends, and a commit after its
 * validity ran out fails with 55P03.  Same arguments, result and errors.
 */
PG_FUNCTION_INFO_V1(redlock_xact_acquire_permit);
Datum
redlock_xact_acquire_permit(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_XACT, sql_arg_permits(fcinfo, 1), 2));
}

/*
 * redlock_acquire(resources text[], ttl_ms integer DEFAULT 30000, wait_ms integer
 *		DEFAULT 0) RETURNS boolean (1.6)
 *
 * Takes session-scoped locks on every resource of a set, all or none (doc/sets.md):
 * each attempt runs one script per master that sets every key of the set or none,
 * and the set is held when a quorum of masters set all of them within the TTL (spec
 * §3 for the set); a failed attempt is undone at once; retries as for redlock_acquire
 * (spec §4).  Once held, each resource is a lock of its own: redlock_release and
 * redlock_extend take one resource or the set, and redlock_fencing_token,
 * redlock.auto_extend and the abort's release work on each as on any lock;
 * redlock_locks() shows the set's number in set_id.  Two sets that share a resource
 * exclude each other; sets that share none do not meet.
 *
 * Returns true when every resource was acquired, false when one is held elsewhere.
 * Errors: those of redlock_acquire; 22004 NULL array or element; 22023 empty array,
 * more than REDLOCK_MAX_SET (64) resources, a name empty, too long or given twice;
 * 2202E more than one dimension; 55000 this session holds one of them already.
 */
PG_FUNCTION_INFO_V1(redlock_acquire_set);
Datum
redlock_acquire_set(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire_set(fcinfo, REDLOCK_SCOPE_SESSION));
}

/*
 * redlock_xact_acquire(resources text[], ttl_ms integer DEFAULT 30000, wait_ms integer
 *		DEFAULT 0) RETURNS boolean (1.6)
 *
 * As redlock_acquire(text[]), but transaction-scoped, as redlock_xact_acquire: every
 * resource of the set is released right after the transaction ends, and a commit
 * after one's validity ran out fails with 55P03.  Same arguments, result and errors.
 */
PG_FUNCTION_INFO_V1(redlock_xact_acquire_set);
Datum
redlock_xact_acquire_set(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(sql_acquire_set(fcinfo, REDLOCK_SCOPE_XACT));
}

/*
 * redlock_release(resources text[]) RETURNS boolean (1.6)
 *
 * Drops one session-scoped hold on each resource; those left without a hold are
 * deleted on the masters, all in one round (spec §5).
 *
 * Returns true when this session held every one; false with a WARNING for each it
 * did not hold (the others are still released).  WARNINGs as redlock_release.
 * Errors: those of the resources argument, as for redlock_acquire(text[]).
 */
PG_FUNCTION_INFO_V1(redlock_release_set);
Datum
redlock_release_set(PG_FUNCTION_ARGS)
{
	int			n;
	char	  **resources = redlock_sqlarg_resources(fcinfo, 0, &n);
	bool	   *not_held = palloc(sizeof(bool) * n);
	bool		all_held = true;
	RedlockReleaseInfo *infos;
	int			released;

	redlock_sqlarg_refuse_parallel();
	released = redlock_lockset_release((const char *const *) resources, n, not_held, &infos);
	for (int k = 0; k < n; k++)
		if (not_held[k])
		{
			sql_warn_not_held(resources[k]);
			all_held = false;
		}
	for (int k = 0; k < released; k++)
		redlock_warn_release(&infos[k]);
	PG_RETURN_BOOL(all_held);
}

/*
 * redlock_extend(resources text[], ttl_ms integer DEFAULT NULL) RETURNS boolean (1.6)
 *
 * Sets a new TTL of ttl_ms milliseconds (NULL: each lock's TTL last set) on every
 * resource, on the masters that still hold our token (spec §6): in one round, but
 * for auto-extended locks, which the background worker extends one by one.
 *
 * Returns true when every lock was extended; false when one or more were lost (those
 * are forgotten and let go of, the others kept), or with a WARNING for each resource
 * this session does not hold (then nothing is extended).
 * Errors: those of the resources argument; 22023 bad TTL; 25000 in a parallel worker;
 * 08006 the answers cannot tell for one lock (kept, its validity cut), whatever became
 * of the others (those found lost are forgotten).
 */
PG_FUNCTION_INFO_V1(redlock_extend_set);
Datum
redlock_extend_set(PG_FUNCTION_ARGS)
{
	int			n;
	char	  **resources = redlock_sqlarg_resources(fcinfo, 0, &n);
	int			ttl_ms = sql_arg_ttl(fcinfo, 1, true, 0);
	bool	   *not_held = palloc(sizeof(bool) * n);
	const char *resource;
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	switch (redlock_lockset_extend((const char *const *) resources, n, ttl_ms, not_held,
								   &resource, &result))
	{
		case REDLOCK_NOT_HELD:
			for (int k = 0; k < n; k++)
				if (not_held[k])
					sql_warn_not_held(resources[k]);
			PG_RETURN_BOOL(false);
		case REDLOCK_HELD:
			PG_RETURN_BOOL(true);
		case REDLOCK_FAILED:
			sql_report_extend_failed(resource, &result);
			break;
		default:
			break;
	}
	PG_RETURN_BOOL(false);
}

/*
 * redlock_claim(resource text, ttl_ms integer) RETURNS boolean
 * redlock_claim(key bigint, ttl_ms integer) (1.4): resource being key's decimal text
 *
 * Claims resource for ttl_ms milliseconds with one quorum acquire (spec §3) that
 * nothing releases: not redlock_release, commit, abort or exit.  The claim ends when
 * its TTL runs out, so exactly one caller per resource wins within the TTL: for work
 * that must run at most once per scheduled fire, with a resource that names the fire
 * (e.g. 'billing:' and the fire's minute written in UTC).  One attempt, no retry.
 *
 * Returns true when claimed, false when claimed elsewhere.
 * Errors: 22004 NULL resource or TTL; 22023 empty or too long resource, bad TTL, no
 * servers configured; 25000 in a parallel worker; 08006 fewer than a quorum of
 * masters answered.
 */
PG_FUNCTION_INFO_V1(redlock_claim);
Datum
redlock_claim(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	int			ttl_ms = sql_arg_ttl(fcinfo, 1, false, 0);
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	if (redlock_lock_claim(resource, ttl_ms, &result))
		PG_RETURN_BOOL(true);
	if (result.status == REDLOCK_UNAVAILABLE)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not claim resource \"%s\": %d of %d Redis masters answered, %d needed",
						resource, result.answered, result.node_count, result.quorum),
				 redlock_errdetail_nodes(&result)));
	PG_RETURN_BOOL(false);
}

/*
 * redlock_release(resource text) RETURNS boolean
 * redlock_release(key bigint) (1.4): resource being key's decimal text
 *
 * Drops one session-scoped hold on resource; when none is left, deletes the key on
 * every master that still holds our token (spec §5).
 *
 * Returns true when this session held it; false with a WARNING when it did not.
 * WARNINGs (01000) when the validity had already run out, when a majority no longer
 * held the lock, or when fewer than a quorum of masters answered.
 * Errors: 22004 NULL resource; 22023 empty or too long resource.
 */
PG_FUNCTION_INFO_V1(redlock_release);
Datum
redlock_release(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	RedlockReleaseInfo info;

	redlock_sqlarg_refuse_parallel();
	switch (redlock_lock_release(resource, &info))
	{
		case REDLOCK_NOT_HELD:
			sql_warn_not_held(resource);
			PG_RETURN_BOOL(false);
		case REDLOCK_RELEASED:
			redlock_warn_release(&info);
			break;
		default:
			break;
	}
	PG_RETURN_BOOL(true);
}

/*
 * redlock_extend(resource text, ttl_ms integer DEFAULT NULL) RETURNS boolean
 * redlock_extend(key bigint, ttl_ms integer DEFAULT NULL) (1.4): likewise
 *
 * Sets a new TTL of ttl_ms milliseconds (NULL: the TTL the lock was acquired with) on
 * every master that still holds our token (spec §6).
 *
 * Returns true when a quorum extended it within the new validity time; false when the
 * lock was lost for certain (more masters than a quorum can spare no longer hold our
 * token, or redlock.servers changed: it is then forgotten and let go of), or with a
 * WARNING when this session does not hold it.
 * Errors: 22004 NULL resource; 22023 bad resource or TTL (too short to leave any
 * validity); 25000 in a parallel worker; 08006 the answers cannot tell (masters did
 * not answer): the lock is kept, its validity cut to what the new TTL allows from the
 * start of the request.
 */
PG_FUNCTION_INFO_V1(redlock_extend);
Datum
redlock_extend(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	int			ttl_ms = sql_arg_ttl(fcinfo, 1, true, 0);
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	switch (redlock_lock_extend(resource, ttl_ms, &result))
	{
		case REDLOCK_NOT_HELD:
			sql_warn_not_held(resource);
			PG_RETURN_BOOL(false);
		case REDLOCK_HELD:
			PG_RETURN_BOOL(true);
		case REDLOCK_FAILED:
			sql_report_extend_failed(resource, &result);
			break;
		default:
			break;
	}
	PG_RETURN_BOOL(false);
}

/*
 * redlock_fencing_token(resource text) RETURNS bigint
 * redlock_fencing_token(key bigint) (1.4): resource being key's decimal text
 *
 * The fencing token of a lock this session holds, at either scope (doc/redlock.md §9):
 * a number larger than the token of every earlier holder of resource, so that a
 * guarded write can refuse one that comes from an older hold (README, "Fencing
 * tokens").  The first call of a hold takes it from a quorum of the masters (two
 * round trips); later calls return the same number while the lock is valid.
 * Errors: 22004 NULL resource; 22023 bad resource; 25000 in a parallel worker; 55000
 * not held by this session; 0A000 held shared (doc/shared.md §4); 55P03 lost (validity ran out, the masters no longer hold
 * its token, or the configuration changed; in the last two cases it is forgotten);
 * 08006 fewer than a quorum of masters answered (the lock is kept).
 */
PG_FUNCTION_INFO_V1(redlock_fencing_token);
Datum
redlock_fencing_token(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	int64		fence = 0;
	RedlockLossCause cause;
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	if (redlock_locktable_kind(resource) == REDLOCK_KIND_SHARED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing tokens are not issued for shared locks"),
				 errdetail("Resource \"%s\" is held shared by this session; shared holders do not exclude one another, so a token could not order their writes.",
						   resource),
				 errhint("Take the lock exclusively with redlock_acquire() to fence writes.")));
	switch (redlock_lock_fencing_token(resource, &fence, &cause, &result))
	{
		case REDLOCK_HELD:
			PG_RETURN_INT64(fence);
		case REDLOCK_NOT_HELD:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lock on resource \"%s\" is not held by this session", resource),
					 errhint("Take it with redlock_acquire() or redlock_xact_acquire() first.")));
			break;
		case REDLOCK_LOST:
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("lock on resource \"%s\" was lost", resource),
					 cause == REDLOCK_LOSS_EXPIRED
					 ? errdetail("Its validity time ran out, so another client may hold it.")
					 : cause == REDLOCK_LOSS_RECONFIGURED
					 ? errdetail("The redlock configuration changed since it was acquired.")
					 : errdetail("%d of %d Redis masters no longer hold this session's token.",
								 result.answered - result.accepted, result.node_count),
					 errhint("Stop the work it guards; acquire it again for a new token.")));
			break;
		case REDLOCK_FAILED:
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not take a fencing token for resource \"%s\": %d of %d Redis masters answered with the lock's token, %d needed",
							resource, result.accepted, result.node_count, result.quorum),
					 redlock_errdetail_nodes(&result),
					 errhint("The lock is kept; the call may be repeated.")));
			break;
		default:
			break;
	}
	PG_RETURN_NULL();
}

/*
 * redlock_release_all() RETURNS integer
 *
 * Drops every session-scoped hold of this session (transaction-scoped holds stay) and
 * releases the locks left with no hold (spec §5).  Returns how many were released.
 * WARNINGs as for redlock_release.
 */
PG_FUNCTION_INFO_V1(redlock_release_all);
Datum
redlock_release_all(PG_FUNCTION_ARGS)
{
	redlock_sqlarg_refuse_parallel();
	PG_RETURN_INT32(redlock_lock_release_session(redlock_warn_release));
}

/*
 * redlock_locks() RETURNS SETOF record
 *
 * One row per lock this session holds: resource, key (the Redis key), scope
 * ('session' when any session hold exists, else 'transaction'), session_holds,
 * xact_holds, ttl_ms (of the last acquire or extend), acquired_at, valid_until,
 * validity_ms (remaining validity time, 0 once run out), nodes (masters that accepted
 * the last acquire or extend); from 1.3 also auto_extended (renewed by the background
 * worker), lost (the worker gave up on it), last_renewal (NULL before the first) and
 * renewals; from 1.6 permits (a semaphore's permit: its permits; NULL for a lock) and
 * set_id (locks acquired together by redlock_acquire(text[]) share it; NULL for a lock
 * acquired alone); from 1.7 mode ('exclusive' or 'shared').  Fills as many columns as
 * the installed SQL definition has (10, 14, 16 or 17).
 * Raises nothing of its own.
 */
PG_FUNCTION_INFO_V1(redlock_locks);
Datum
redlock_locks(PG_FUNCTION_ARGS)
{
#define REDLOCK_LOCKS_COLS_1_0 10
#define REDLOCK_LOCKS_COLS_1_3 14
#define REDLOCK_LOCKS_COLS_1_6 16
#define REDLOCK_LOCKS_COLS 17
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedlockLockInfo *locks;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != REDLOCK_LOCKS_COLS &&
		rsinfo->setDesc->natts != REDLOCK_LOCKS_COLS_1_6 &&
		rsinfo->setDesc->natts != REDLOCK_LOCKS_COLS_1_3 &&
		rsinfo->setDesc->natts != REDLOCK_LOCKS_COLS_1_0)
		elog(ERROR, "incorrect number of output arguments");

	n = redlock_lock_list(&locks);
	for (int i = 0; i < n; i++)
	{
		Datum		values[REDLOCK_LOCKS_COLS];
		bool		nulls[REDLOCK_LOCKS_COLS] = {0};
		RedlockLockInfo *lock = &locks[i];

		values[0] = CStringGetTextDatum(lock->resource);
		values[1] = CStringGetTextDatum(lock->key);
		values[2] = CStringGetTextDatum(lock->session_holds > 0 ? "session" : "transaction");
		values[3] = Int32GetDatum(lock->session_holds);
		values[4] = Int32GetDatum(lock->xact_holds);
		values[5] = Int32GetDatum(lock->ttl_ms);
		values[6] = TimestampTzGetDatum(lock->acquired_at);
		values[7] = TimestampTzGetDatum(lock->valid_until);
		values[8] = Int32GetDatum(lock->validity_ms > 0 ? (int32) lock->validity_ms : 0);
		values[9] = Int32GetDatum(lock->nodes);
		values[10] = BoolGetDatum(lock->auto_extended);
		values[11] = BoolGetDatum(lock->lost);
		values[12] = TimestampTzGetDatum(lock->last_renewal);
		nulls[12] = (lock->last_renewal == 0);
		values[13] = Int64GetDatum(lock->renewals);
		values[14] = Int32GetDatum(lock->permits);
		nulls[14] = (lock->permits == 0);
		values[15] = Int64GetDatum(lock->set_id);
		nulls[15] = (lock->set_id == 0);
		values[16] = CStringGetTextDatum(lock->shared ? "shared" : "exclusive");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * redlock_nodes() RETURNS SETOF record
 *
 * One row per configured master, as this backend sees it: node ("host:port" or socket
 * path), connected, last_error and last_error_at (NULL when none), last_rtt_ms (round
 * trip of its last reply to a call that awaited it, in ms; NULL before one),
 * requests, replies, late_replies (read after the call had decided without them),
 * errors.  Raises nothing of its own.
 */
PG_FUNCTION_INFO_V1(redlock_nodes);
Datum
redlock_nodes(PG_FUNCTION_ARGS)
{
#define REDLOCK_NODES_COLS 9
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedlockNodeStats *stats;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != REDLOCK_NODES_COLS)
		elog(ERROR, "incorrect number of output arguments");

	n = redlock_nodes_stats(&stats);
	for (int i = 0; i < n; i++)
	{
		Datum		values[REDLOCK_NODES_COLS];
		bool		nulls[REDLOCK_NODES_COLS] = {0};
		RedlockNodeStats *f = &stats[i];

		values[0] = CStringGetTextDatum(f->name);
		values[1] = BoolGetDatum(f->connected);
		if (f->last_error[0] == '\0')
			nulls[2] = nulls[3] = true;
		else
		{
			values[2] = CStringGetTextDatum(f->last_error);
			values[3] = TimestampTzGetDatum(f->last_error_at);
		}
		if (f->last_rtt_ms < 0)
			nulls[4] = true;
		else
			values[4] = Float8GetDatum(f->last_rtt_ms);
		values[5] = Int64GetDatum(f->requests);
		values[6] = Int64GetDatum(f->replies);
		values[7] = Int64GetDatum(f->late_replies);
		values[8] = Int64GetDatum(f->errors);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * redlock_waiters() RETURNS SETOF record (1.4)
 *
 * One row per backend of this cluster waiting for a busy lock now (redlock_acquire or
 * redlock_xact_acquire with a wait): pid, resource (NULL unless the caller has the
 * privileges of the waiting backend's role or of pg_read_all_stats, as
 * pg_stat_activity.query; NULL also when the key was too long to keep on the board or
 * names characters this database's encoding lacks), waiting_since (when the wait
 * began), attempts (acquire attempts made in it so far).  The waiter board lives in
 * shared memory: without the library in shared_preload_libraries, no rows.  Raises
 * nothing of its own.
 */
PG_FUNCTION_INFO_V1(redlock_waiters);
Datum
redlock_waiters(PG_FUNCTION_ARGS)
{
#define REDLOCK_WAITERS_COLS 4
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedlockWaiterRow *rows;
	int			n;
	double		now_ms = redlock_clock_ms();
	TimestampTz now = GetCurrentTimestamp();
	bool		read_all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != REDLOCK_WAITERS_COLS)
		elog(ERROR, "incorrect number of output arguments");

	n = redlock_waiters_list(&rows);
	for (int i = 0; i < n; i++)
	{
		Datum		values[REDLOCK_WAITERS_COLS];
		bool		nulls[REDLOCK_WAITERS_COLS] = {0};
		PGPROC	   *proc = GetPGProcByNumber(rows[i].proc_number);
		int			pid = proc->pid;
		Oid			role = proc->roleId;

		if (pid == 0)
			continue;			/* gone meanwhile */
		values[0] = Int32GetDatum(pid);
		nulls[1] = rows[i].key == NULL || !(read_all || has_privs_of_role(GetUserId(), role)) ||
			!redlock_sqlarg_resource_from_utf8(rows[i].key + rows[i].prefix_len, &values[1]);
		values[2] = TimestampTzGetDatum(now - (TimestampTz) ((now_ms - rows[i].since_ms) * 1000.0));
		values[3] = Int64GetDatum((int64) rows[i].attempts);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * redlock_stats() RETURNS record
 *
 * Counters since the start or the last redlock_stats_reset(): scope ('cluster' when
 * the library is in shared_preload_libraries and they are shared, else 'backend'),
 * attempts, acquired, busy, unavailable (acquire attempts and how they ended),
 * released, released_after_expiry, extended, extend_lost, acquire_latency_mean_ms and
 * acquire_latency_max_ms (of the attempts that acquired, in ms), reset_at; from 1.3
 * also renewals, renewals_failed and locks_lost (the background worker's renewals of
 * auto-extended locks: succeeded, answered by fewer than a quorum, given up on),
 * auto_extended_locks (registered now), renewal_round_ms and renewal_round_locks (the
 * worker's last round: duration in ms, locks renewed), wakeups (waiters woken by an
 * announced release) and waiting_backends (waiting for a busy lock now).  Fills as many
 * columns as the installed SQL definition has (12 or 20).  Raises nothing of its own.
 */
PG_FUNCTION_INFO_V1(redlock_stats);
Datum
redlock_stats(PG_FUNCTION_ARGS)
{
#define REDLOCK_STATS_COLS_1_1 12
#define REDLOCK_STATS_COLS 20
	TupleDesc	tupdesc;
	Datum		values[REDLOCK_STATS_COLS];
	bool		nulls[REDLOCK_STATS_COLS] = {0};
	RedlockStatsSnapshot snapshot;
	int			registered;
	double		round_ms;
	int			round_locks;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts != REDLOCK_STATS_COLS && tupdesc->natts != REDLOCK_STATS_COLS_1_1)
		elog(ERROR, "incorrect number of output arguments");

	redlock_stats_snapshot(&snapshot);
	values[0] = CStringGetTextDatum(snapshot.cluster_wide ? "cluster" : "backend");
	for (int i = 0; i <= REDLOCK_STAT_EXTEND_LOST; i++)
		values[1 + i] = Int64GetDatum((int64) snapshot.counters[i]);
	values[9] = Float8GetDatum(snapshot.acquire_latency_mean_ms);
	values[10] = Float8GetDatum(snapshot.acquire_latency_max_ms);
	values[11] = TimestampTzGetDatum(snapshot.reset_at);
	values[12] = Int64GetDatum((int64) snapshot.counters[REDLOCK_STAT_RENEWED]);
	values[13] = Int64GetDatum((int64) snapshot.counters[REDLOCK_STAT_RENEW_FAILED]);
	values[14] = Int64GetDatum((int64) snapshot.counters[REDLOCK_STAT_LOCKS_LOST]);
	(void) redlock_registry_stats(&registered, &round_ms, &round_locks);
	values[15] = Int32GetDatum(registered);
	values[16] = Float8GetDatum(round_ms);
	values[17] = Int32GetDatum(round_locks);
	values[18] = Int64GetDatum((int64) snapshot.counters[REDLOCK_STAT_WAKEUPS]);
	values[19] = Int32GetDatum(redlock_waiters_count());
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * redlock_stats_reset() RETURNS void
 *
 * Sets the counters of redlock_stats() back to zero: cluster-wide when they are in
 * shared memory.  The per-node stats of redlock_nodes() are not touched.
 */
PG_FUNCTION_INFO_V1(redlock_stats_reset);
Datum
redlock_stats_reset(PG_FUNCTION_ARGS)
{
	redlock_stats_reset_counters();
	PG_RETURN_VOID();
}
