-- Sets of resources (redlock_acquire(text[])): one script per master sets every key of
-- the set or none, and the set is held when a quorum of masters set all of them.  A
-- second session, reached through dblink, plays the other client.
-- (run alone, the extension is at 1.7 after the update.)
SET client_min_messages = warning;
ALTER EXTENSION redlock UPDATE;
RESET client_min_messages;
\i test/sql/second_session.psql
SET redlock.key_prefix = 'regress-set:';
SELECT dblink_exec('other', 'SET redlock.key_prefix = ''regress-set:''') AS other_prefix;

-- A set of three: all held, each a lock of its own sharing the set's number.
SELECT redlock_acquire(ARRAY['s-a', 's-b', 's-c'], 30000) AS mine;
SELECT resource, key, session_holds, nodes >= 3 AS quorum, permits, set_id IS NOT NULL AS in_set
  FROM redlock_locks() ORDER BY resource;
SELECT count(DISTINCT set_id) AS sets FROM redlock_locks();
SELECT held, masters FROM redlock_lock_info('s-b');

-- Sets that share a resource exclude each other; nothing of a refused set is left
-- on the masters ('s-d' stays free); a set without a shared resource proceeds.
SELECT other($$SELECT redlock_acquire(ARRAY['s-d', 's-c'], 30000)$$) AS shares_s_c;
SELECT held FROM redlock_lock_info('s-d');
SELECT other($$SELECT redlock_acquire('s-b', 30000)$$) AS lock_on_s_b;
SELECT other($$SELECT redlock_acquire(ARRAY['s-d', 's-e'], 30000)$$) AS disjoint_set;
SELECT other($$SELECT redlock_release(ARRAY['s-d', 's-e'])$$) AS other_released;

-- Release of one resource of a set leaves the others held; the set's release takes
-- them in one round, and the other session then gets a set that shares them.
SELECT redlock_release('s-a') AS one_released;
SELECT resource FROM redlock_locks() ORDER BY resource;
SELECT other($$SELECT redlock_acquire(ARRAY['s-a', 's-d'], 30000)$$) AS gets_s_a;
SELECT redlock_release(ARRAY['s-b', 's-c']) AS set_released;
SELECT count(*) AS held_now FROM redlock_locks();
SELECT other($$SELECT redlock_acquire(ARRAY['s-b', 's-c'], 30000, 5000)$$) AS other_gets_b_c;
SELECT other($$SELECT redlock_release(ARRAY['s-a', 's-b', 's-c', 's-d'])$$) AS other_released;

-- Waiting: a set waits for the one resource held elsewhere, and gets it on release.
SELECT other($$SELECT redlock_acquire('s-w2', 30000)$$) AS other_holds_w2;
SELECT redlock_acquire(ARRAY['s-w1', 's-w2'], 30000, 300) AS times_out;
SELECT held FROM redlock_lock_info('s-w1');
SELECT other($$SELECT redlock_release('s-w2')$$) AS other_released;
SELECT redlock_acquire(ARRAY['s-w1', 's-w2'], 30000, 5000) AS after_release;

-- Extend per set, and fencing tokens per resource of it.
SELECT redlock_extend(ARRAY['s-w1', 's-w2'], 45000) AS extended;
SELECT resource, ttl_ms FROM redlock_locks() ORDER BY resource;
SELECT redlock_fencing_token('s-w1') > 0 AND redlock_fencing_token('s-w2') > 0 AS fenced;
SELECT redlock_extend(ARRAY['s-w1', 's-nope'], 45000) AS not_all_held;
SELECT redlock_release(ARRAY['s-w1', 's-w2', 's-nope']) AS not_all_held;
SELECT count(*) AS held_now FROM redlock_locks();

-- A set's validity counts the clock drift allowance as a single lock's does: with a
-- factor of 0.5, a 10 s TTL leaves at most 4998 ms on each lock of the set.
SET redlock.clock_drift_factor = 0.5;
SELECT redlock_acquire(ARRAY['s-drift-1', 's-drift-2'], 10000) AS set_held;
SELECT resource, validity_ms BETWEEN 1 AND 4998 AS drift_taken_off FROM redlock_locks()
 WHERE resource LIKE 's-drift-%'
 ORDER BY resource;
SELECT redlock_release(ARRAY['s-drift-1', 's-drift-2']) AS released;
RESET redlock.clock_drift_factor;

-- A set is acquired whole: a resource held already cannot join one (55000).
SELECT redlock_acquire('s-h', 30000);
SELECT redlock_acquire(ARRAY['s-g', 's-h'], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT held FROM redlock_lock_info('s-g');
SELECT redlock_release('s-h');

-- Transaction scope: released at commit; a session set taken in a transaction that
-- rolls back is released by the rollback.
BEGIN;
SELECT redlock_xact_acquire(ARRAY['s-x1', 's-x2'], 30000) AS in_xact;
SELECT resource, scope FROM redlock_locks() ORDER BY resource;
COMMIT;
SELECT count(*) AS after_commit FROM redlock_locks();
SELECT held FROM redlock_lock_info('s-x2');
BEGIN;
SELECT redlock_acquire(ARRAY['s-x1', 's-x2'], 30000) AS session_in_aborted_xact;
ROLLBACK;
SELECT count(*) AS after_rollback FROM redlock_locks();
SELECT held FROM redlock_lock_info('s-x1');

-- A set's release deletes only the keys that still hold its token: once the set has
-- expired and the other session has taken one of its resources, this session's release
-- of the set leaves that key alone (the set's release script, spec §2 for each key).
SELECT redlock_acquire(ARRAY['s-r1', 's-r2'], 500) AS short_set;
SELECT pg_sleep(0.7);
SELECT other($$SELECT redlock_acquire('s-r2', 30000)$$) AS other_takes_s_r2;
SELECT redlock_release(ARRAY['s-r1', 's-r2']) AS expired_set_released;
SELECT held FROM redlock_lock_info('s-r2');
SELECT redlock_acquire('s-r2', 30000, 0) AS still_the_others;
SELECT other($$SELECT redlock_release('s-r2')$$) AS other_released;

-- Bad input.
SELECT redlock_acquire(NULL::text[], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY[]::text[], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a', NULL], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a', ''], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a', 's-b', 's-a'], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a', 's-a'], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a', 's-b', 's-b', 's-c'], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY[['s-a', 's-b'], ['s-c', 's-d']], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY(SELECT 's-' || g FROM generate_series(1, 65) g), 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a'], 0);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['s-a'], 30000, -1);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_extend(ARRAY['s-a'], -5);
\echo :LAST_ERROR_SQLSTATE
-- The largest set: 64 resources in one attempt.
SELECT redlock_acquire(ARRAY(SELECT 's-' || g FROM generate_series(1, 64) g), 30000)
       AS sixty_four;
SELECT count(*), count(DISTINCT set_id) FROM redlock_locks();
SELECT redlock_release(ARRAY(SELECT 's-' || g FROM generate_series(1, 64) g)) AS released;

SELECT dblink_disconnect('other');
