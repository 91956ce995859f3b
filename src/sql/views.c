/*-------------------------------------------------------------------------
 *
 * views.c
 *	  The SQL functions that show this backend's and the cluster's state: its locks,
 *	  the masters, the waiters, the counters.
 *
 * Functions are not STRICT: a NULL resource or TTL is an ERROR (22004) rather than a
 * silent NULL, and a NULL wait_ms means "wait without limit".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid_d.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "clock.h"
#include "lock/lockends.h"
#include "lock/locktable.h"
#include "redlock.h"
#include "shared/stats.h"
#include "shared/waiters.h"
#include "sql/sqlarg.h"

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
