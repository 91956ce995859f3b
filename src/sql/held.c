/*-------------------------------------------------------------------------
 *
 * held.c
 *	  The SQL functions on locks this session holds: release, extend, claim, the
 *	  fencing token, release of all, and the set forms (spec §5, §6, §9).
 *
 * Functions are not STRICT: a NULL resource or TTL is an ERROR (22004) rather than a
 * silent NULL, and a NULL wait_ms means "wait without limit".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "lock/lockends.h"
#include "lock/lockops.h"
#include "redlock.h"
#include "sql/messages.h"
#include "sql/sqlarg.h"

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
			redlock_warn_not_held(resources[k]);
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
 * are forgotten and let go of, the others kept; the round is answered by the end of the
 * earliest validity among them, and one that ran out then is lost, with a WARNING), or
 * with a WARNING for each resource this session does not hold (then nothing is
 * extended).
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
	int			ttl_ms = redlock_sqlarg_ttl(fcinfo, 1, true, 0);
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
					redlock_warn_not_held(resources[k]);
			PG_RETURN_BOOL(false);
		case REDLOCK_HELD:
			PG_RETURN_BOOL(true);
		case REDLOCK_FAILED:
			redlock_report_extend_failed(resource, &result);
			break;
		default:
			redlock_warn_ran_out(resource, &result);
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
 * masters answered; 53400 the role (the session user) has redlock.max_locks_per_role
 * locks and claims on the masters from this cluster already (nothing is sent).  A
 * claim counts against that limit until its TTL runs out.
 */
PG_FUNCTION_INFO_V1(redlock_claim);
Datum
redlock_claim(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	int			ttl_ms = redlock_sqlarg_ttl(fcinfo, 1, false, 0);
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	if (redlock_lock_claim(resource, ttl_ms, &result))
		PG_RETURN_BOOL(true);
	redlock_report_over_quota(&result.quota);
	if (result.status == REDLOCK_UNAVAILABLE)
		redlock_report_unanswered(psprintf("claim resource \"%s\"", resource), &result);
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
			redlock_warn_not_held(resource);
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
 * token, or redlock.servers changed: it is then forgotten and let go of), or ran out
 * (a lock with validity left is answered by its end: no quorum extended it by then,
 * with a WARNING; it is forgotten and let go of likewise), or with a WARNING when
 * this session does not hold it.
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
	int			ttl_ms = redlock_sqlarg_ttl(fcinfo, 1, true, 0);
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	switch (redlock_lock_extend(resource, ttl_ms, &result))
	{
		case REDLOCK_NOT_HELD:
			redlock_warn_not_held(resource);
			PG_RETURN_BOOL(false);
		case REDLOCK_HELD:
			PG_RETURN_BOOL(true);
		case REDLOCK_FAILED:
			redlock_report_extend_failed(resource, &result);
			break;
		default:
			redlock_warn_ran_out(resource, &result);
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
