/*-------------------------------------------------------------------------
 *
 * acquire.c
 *	  The SQL functions that acquire: a lock, a shared lock, a permit, a set, at
 *	  session or transaction scope (spec §3-§4): argument checks, then the lock
 *	  table, then the decision between true, false and an ERROR.
 *
 * Functions are not STRICT: a NULL resource or TTL is an ERROR (22004) rather than a
 * silent NULL, and a NULL wait_ms means "wait without limit".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "lock/lockops.h"
#include "redlock.h"
#include "sql/messages.h"
#include "sql/sqlarg.h"
#include "sql/xact.h"

/*
 * Shared by redlock_acquire, redlock_xact_acquire and their _permit and _shared forms:
 * the arguments from argument first on are ttl_ms and wait_ms; kind as for
 * redlock_lock_acquire.
 */
static bool
sql_acquire(FunctionCallInfo fcinfo, RedlockScope scope, int kind, int first)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	int			ttl_ms = redlock_sqlarg_ttl(fcinfo, first, false, 0);
	int			wait_ms = redlock_sqlarg_wait(fcinfo, first + 1);
	bool		bounded_by_lock_timeout;
	bool		was_lost;
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	redlock_refuse_other_kind(resource, kind);
	redlock_hooks_register();

	bounded_by_lock_timeout = redlock_sqlarg_wait_bound(&wait_ms);

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

	redlock_report_over_quota(&result.quota);
	redlock_report_not_acquired(resource, psprintf("resource \"%s\"", resource), Max(kind, 0),
							&result, bounded_by_lock_timeout, wait_ms);
	return false;
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
	int			ttl_ms = redlock_sqlarg_ttl(fcinfo, 1, false, 0);
	int			wait_ms = redlock_sqlarg_wait(fcinfo, 2);
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
	bounded_by_lock_timeout = redlock_sqlarg_wait_bound(&wait_ms);
	if (redlock_lockset_acquire((const char *const *) resources, n, scope, ttl_ms, wait_ms,
								&result) == REDLOCK_HELD)
		return true;
	redlock_report_over_quota(&result.quota);
	redlock_report_not_acquired(resources[0], redlock_set_words(resources, n), 0, &result,
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
 * ran out with the last attempt unanswered; 55P03 lock_timeout ran out; 53400 a new
 * lock would take the session user past redlock.max_locks_per_role (nothing is sent).
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
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_SESSION, redlock_sqlarg_permits(fcinfo, 1), 2));
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
	PG_RETURN_BOOL(sql_acquire(fcinfo, REDLOCK_SCOPE_XACT, redlock_sqlarg_permits(fcinfo, 1), 2));
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
