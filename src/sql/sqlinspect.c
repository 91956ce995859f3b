/*-------------------------------------------------------------------------
 *
 * sqlinspect.c
 *	  The SQL functions that look at locks on the masters whoever holds them
 *	  (redlock_lock_info, redlock_cluster_locks) and the operator's
 *	  redlock_force_release.  None of them changes what this backend holds.
 *
 * Their rows share one shape: held, masters, ttl_ms, then the holder as recorded at
 * acquire (cluster, pid, application_name, database, role, acquired_at, scope), then
 * waiters (this cluster's backends waiting for the lock).  A lock whose key has no
 * holder record of its token (taken by another client, or with redlock.record_holder
 * off) has the holder columns NULL and scope 'unknown'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "lock/locktable.h"
#include "protocol/inspect.h"
#include "redlock.h"
#include "shared/waiters.h"
#include "sql/messages.h"
#include "sql/sqlarg.h"
#include "wire/nodeset.h"

#define LOCK_INFO_COLS 11

/* This cluster's waiters, listed once per call. */
typedef struct WaiterList
{
	int			n;				/* -1: no waiter board (not preloaded) */
	RedlockWaiterRow *rows;
} WaiterList;

/* Fills the 11 columns of a lock's state (see the head of this file). */
static void
sqlinspect_fill(const RedlockLockState *state, const char *key, const WaiterList *waiters,
				Datum *values, bool *nulls)
{
	const RedlockHolder *h = &state->holder;
	int			waiting = 0;

	memset(nulls, 0, sizeof(bool) * LOCK_INFO_COLS);
	values[0] = BoolGetDatum(state->held);
	values[1] = Int32GetDatum(state->masters);
	values[2] = Int64GetDatum(state->ttl_ms);
	nulls[2] = !state->held;
	if (state->has_holder)
	{
		values[3] = CStringGetTextDatum(h->cluster);
		values[4] = Int32GetDatum(h->pid);
		values[5] = CStringGetTextDatum(h->application_name);
		values[6] = CStringGetTextDatum(h->database);
		values[7] = CStringGetTextDatum(h->role);
		values[8] = TimestampTzGetDatum(h->acquired_at);
		values[9] = CStringGetTextDatum(h->scope);
	}
	else
	{
		for (int c = 3; c <= 8; c++)
			nulls[c] = true;
		values[9] = CStringGetTextDatum("unknown");
		nulls[9] = state->masters == 0;
	}
	for (int i = 0; i < waiters->n; i++)
		if (waiters->rows[i].key && strcmp(waiters->rows[i].key, key) == 0)
			waiting++;
	values[10] = Int32GetDatum(waiting);
	nulls[10] = waiters->n < 0;
}

/* Raises 08006 (or 53200) for a look that fewer than a quorum of masters answered. */
static void
sqlinspect_require_quorum(const RedlockResult *result, const char *what)
{
	if (result->status == REDLOCK_UNAVAILABLE)
		redlock_report_unanswered(what, result);
}

/*
 * redlock_lock_info(resource text) RETURNS TABLE(held boolean, masters integer,
 *		ttl_ms bigint, cluster text, pid integer, application_name text, database text,
 *		role text, acquired_at timestamptz, scope text, waiters integer) (1.4)
 * redlock_lock_info(key bigint) (1.4): resource being key's decimal text
 *
 * One row: the lock on resource as the masters show it now, whoever holds it, read
 * in one round trip per master.  held: a quorum holds the same token; masters: how
 * many hold the most common token; ttl_ms: the quorum-th largest PTTL among them, in
 * milliseconds (NULL when not held; -1 when the key has no TTL); the holder columns
 * from the holder record written at acquire (cluster: its cluster_name, or the system
 * identifier when that is empty; acquired_at: when the winning attempt began,
 * on the acquiring server's clock;
 * scope 'session', 'transaction' or 'claim'; 'unknown' with the other holder
 * columns NULL for a key another client wrote); waiters: this cluster's backends
 * waiting for it (NULL without shared_preload_libraries).
 * Errors: 22004 NULL resource; 22023 empty or too long resource, no servers
 * configured; 08006 fewer than a quorum of masters answered (errdetail names each
 * failure).
 */
PG_FUNCTION_INFO_V1(redlock_lock_info);
Datum
redlock_lock_info(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	char	   *key;
	TupleDesc	tupdesc;
	RedlockLockState state;
	RedlockResult result;
	WaiterList	waiters;
	Datum		values[LOCK_INFO_COLS];
	bool		nulls[LOCK_INFO_COLS];
	const char *keys[1];

	redlock_sqlarg_require_servers();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	key = redlock_locktable_make_key(resource, NULL);
	keys[0] = key;
	redlock_inspect_locks(redlock_nodeset_current(), keys, 1, &state, &result);
	sqlinspect_require_quorum(&result, psprintf("read the lock on resource \"%s\"", resource));
	waiters.n = redlock_waiters_list(&waiters.rows);
	sqlinspect_fill(&state, key, &waiters, values, nulls);
	pfree(key);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/*
 * redlock_cluster_locks(max_locks integer DEFAULT 1000) RETURNS TABLE(resource text,
 *		held boolean, ... waiters integer) (1.4)
 *
 * One row per lock under redlock.key_prefix on the masters, whoever took it (any
 * cluster, any client), with redlock_lock_info's columns after the resource, ordered
 * by key.  Finds the keys with SCAN steps of about 1000 keys per master per round
 * trip (never KEYS), each master with its own cursor, until every master's scan ends
 * or max_locks locks were found (a NOTICE then says more may exist), then reads them
 * 100 keys per round trip.  A lock held on a quorum is listed as long as at most
 * node_count - quorum masters fail.  resource is NULL for a key that is not UTF-8 or
 * has characters this database's encoding lacks.
 * Errors: 22004 NULL max_locks; 22023 max_locks < 1, no servers configured; 08006
 * more than node_count - quorum masters failed.
 */
PG_FUNCTION_INFO_V1(redlock_cluster_locks);
Datum
redlock_cluster_locks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedlockNodeSet *set;
	int			limit;
	int			prefix_len;
	char	   *prefix;
	char	  **keys;
	int			n;
	bool		more;
	RedlockResult result;
	WaiterList	waiters;
	RedlockLockState *states;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("max_locks must not be null")));
	limit = PG_GETARG_INT32(0);
	if (limit < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_locks must be greater than zero"),
				 errdetail("The limit given was %d.", limit)));
	redlock_sqlarg_require_servers();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != LOCK_INFO_COLS + 1)
		elog(ERROR, "incorrect number of output arguments");

	set = redlock_nodeset_current();
	prefix = redlock_locktable_make_key("", &prefix_len);
	n = redlock_inspect_scan(set, prefix, limit, &keys, &more, &result);
	sqlinspect_require_quorum(&result, "list the locks");
	if (more)
		ereport(NOTICE,
				(errmsg("listed the first %d locks; more may exist", limit),
				 errhint("Pass a larger max_locks to see more.")));

	waiters.n = redlock_waiters_list(&waiters.rows);
	states = palloc(sizeof(RedlockLockState) * Max(n, 1));
	for (int start = 0; start < n; start += 100)
	{
		int			batch = Min(100, n - start);

		redlock_inspect_locks(set, (const char *const *) &keys[start], batch, &states[start],
							  &result);
		sqlinspect_require_quorum(&result, "read the locks");
	}
	for (int k = 0; k < n; k++)
	{
		Datum		values[LOCK_INFO_COLS + 1];
		bool		nulls[LOCK_INFO_COLS + 1];

		if (states[k].masters == 0)
			continue;			/* released since the scan saw it */
		sqlinspect_fill(&states[k], keys[k], &waiters, values + 1, nulls + 1);
		nulls[0] = !redlock_sqlarg_resource_from_utf8(keys[k] + prefix_len, &values[0]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(prefix);
	return (Datum) 0;
}

/* "cluster "c", pid n, application "a"" for the log, or what is known instead. */
static char *
sqlinspect_describe(const RedlockLockState *state)
{
	if (state->masters == 0)
		return pstrdup("no master held the key");
	if (!state->has_holder)
		return psprintf("%d masters held the key; no holder record", state->masters);
	return psprintf("%d masters held the key of cluster \"%s\", pid %d, application \"%s\", database \"%s\", role \"%s\"",
					state->masters, state->holder.cluster, state->holder.pid,
					state->holder.application_name, state->holder.database,
					state->holder.role);
}

/*
 * redlock_force_release(resource text) RETURNS integer (1.4)
 * redlock_force_release(key bigint) (1.4): resource being key's decimal text
 *
 * For operators (not granted to PUBLIC): deletes the lock on resource on every master
 * whatever its token, as Redisson's forceUnlock, with its holder record; announces the
 * release to waiters; raises the resource's fencing counter by one above what any
 * master had, so that the next holder's fencing token is above the evicted holder's.
 * Logs (LOG) who did it and whose lock it was.  The evicted holder's session sees the
 * lock lost at its next extension or renewal (with redlock.auto_extend: within one
 * renewal interval, TTL/3, and its statement is cancelled).
 *
 * Returns the number of masters where a key was deleted (0: nobody held it).
 * Errors: 22004 NULL resource; 22023 empty or too long resource, no servers
 * configured; 25000 in a parallel worker; 08006 fewer than a quorum of masters
 * answered (the others keep the key until its TTL runs out; errdetail names them).
 */
PG_FUNCTION_INFO_V1(redlock_force_release);
Datum
redlock_force_release(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	char	   *key;
	RedlockLockState before;
	RedlockResult result;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	key = redlock_locktable_make_key(resource, NULL);
	redlock_inspect_force_release(redlock_nodeset_current(), key, &before, &result);
	pfree(key);
	ereport(LOG,
			(errmsg("redlock: lock on resource \"%s\" force-released by role \"%s\" (pid %d) on %d of %d masters",
					resource, GetUserNameFromId(GetUserId(), false), MyProcPid,
					result.accepted, result.node_count),
			 errdetail("Before: %s.", sqlinspect_describe(&before))));
	if (result.status == REDLOCK_UNAVAILABLE)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not force-release resource \"%s\" on a quorum: %d of %d Redis masters answered, %d needed",
						resource, result.answered, result.node_count, result.quorum),
				 redlock_errdetail_nodes(&result),
				 errhint("The masters that did not answer keep the key until its TTL runs out; run it again when they are back.")));
	PG_RETURN_INT32(result.accepted);
}
