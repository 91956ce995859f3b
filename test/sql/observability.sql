-- Version 1.1: the upgrade path, per-node figures and counters.  Locks meant to run out
-- get a 500 ms TTL and 0.7 s of sleep: room for a loaded machine to acquire them first.

-- 1.0 installs and updates to 1.1.
DROP EXTENSION redlock;
CREATE EXTENSION redlock VERSION '1.0';
SELECT count(*) FROM pg_proc WHERE proname IN ('redlock_nodes', 'redlock_stats');
ALTER EXTENSION redlock UPDATE TO '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'redlock';
SELECT p.proname, has_function_privilege('public', p.oid, 'execute') AS public_may_execute
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
  JOIN pg_extension e ON d.refobjid = e.oid AND e.extname = 'redlock'
 ORDER BY 1;

-- The backends of earlier files (which may release locks as they exit, counted in the
-- cluster's counters) are gone before the counters below are reset.
DO $$
BEGIN
  FOR i IN 1 .. 200 LOOP
    EXIT WHEN NOT EXISTS (SELECT FROM pg_stat_activity
                           WHERE backend_type = 'client backend' AND pid <> pg_backend_pid());
    PERFORM pg_sleep(0.05);
  END LOOP;
END
$$;
\i test/sql/second_session.psql

-- Counters: this backend's, or the cluster's when the library is preloaded.  Only this
-- backend takes locks between the reset and the last look, so the figures are the same
-- either way: the other session takes its lock before and lets go after, and the
-- backends of earlier files were waited for above.  test/run runs the suites both ways.
SELECT other($$SELECT redlock_acquire('regress-s-busy')$$);
SELECT redlock_stats_reset();
SELECT scope = CASE WHEN current_setting('shared_preload_libraries') ~ 'redlock'
                    THEN 'cluster' ELSE 'backend' END AS scope_as_configured,
       attempts, acquired, busy, unavailable, released, released_after_expiry,
       extended, extend_lost, acquire_latency_mean_ms, acquire_latency_max_ms
  FROM redlock_stats();

SELECT redlock_acquire('regress-s');             -- attempt, acquired
SELECT redlock_acquire('regress-s');             -- extended (stacked)
SELECT redlock_extend('regress-s', 20000);       -- extended
SELECT redlock_release('regress-s');
SELECT redlock_release('regress-s');             -- released
SELECT redlock_acquire('regress-s-busy');        -- attempt, busy
SELECT redlock_acquire('regress-s', 500);         -- attempt, acquired
SELECT pg_sleep(0.7);
SELECT redlock_release('regress-s');             -- released, after expiry
SELECT redlock_acquire('regress-s', 500);         -- attempt, acquired
SELECT pg_sleep(0.7);
SELECT redlock_extend('regress-s');              -- extend lost, released after expiry
SELECT attempts, acquired, busy, unavailable, released, released_after_expiry,
       extended, extend_lost,
       acquire_latency_mean_ms > 0 AND acquire_latency_mean_ms <= acquire_latency_max_ms
         AS latency_sane,
       reset_at <= now() AS reset_in_past
  FROM redlock_stats();

SELECT other($$SELECT redlock_release('regress-s-busy')$$);

-- Per-node figures: every master connected, answering, error-free.
SELECT count(*) AS nodes, bool_and(connected) AS connected, bool_and(last_error IS NULL) AS no_error,
       bool_and(requests > 0 AND replies <= requests AND late_replies <= replies) AS counted,
       bool_and(last_rtt_ms >= 0) AS timed, sum(errors) AS errors
  FROM redlock_nodes();

-- A sixth master that refuses connections: five of six still make a quorum (4), and
-- the sixth shows what went wrong.
SELECT set_config('redlock.servers', current_setting('redlock.servers') || ',127.0.0.1:1',
                  false) IS NOT NULL AS configured;
SELECT count(*) AS nodes, sum(requests) AS requests FROM redlock_nodes();
SELECT redlock_acquire('regress-s');
SELECT nodes BETWEEN 4 AND 5 AS quorum FROM redlock_locks();
SELECT redlock_release('regress-s');
SELECT node LIKE '%:1' AS dead_node, connected, last_error, last_error_at IS NOT NULL AS when_known,
       errors
  FROM redlock_nodes() WHERE NOT connected;
RESET redlock.servers;

SELECT dblink_disconnect('other');

-- Back to the default version, so that the files after this one find what they expect
-- (the files pass in any order).
SET client_min_messages = warning;
ALTER EXTENSION redlock UPDATE;
RESET client_min_messages;
