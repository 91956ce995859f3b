-- Shared locks (redlock_acquire_shared, doc/shared.md): any number of shared holders at
-- once, none beside an exclusive holder; a waiting exclusive acquire keeps new shared
-- holders out.  Two more sessions, reached through dblink, play the other clients.
SET client_min_messages = warning;
ALTER EXTENSION redlock UPDATE;
RESET client_min_messages;
\i test/sql/second_session.psql
SELECT dblink_connect('third',
       format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1))) AS third;
CREATE OR REPLACE FUNCTION third(sql text) RETURNS boolean LANGUAGE sql
AS $$ SELECT r FROM dblink('third', sql) AS t(r boolean) $$;
SET redlock.key_prefix = 'regress-shared:';
SELECT dblink_exec('other', 'SET redlock.key_prefix = ''regress-shared:''') AS other_prefix;
SELECT dblink_exec('third', 'SET redlock.key_prefix = ''regress-shared:''') AS third_prefix;

-- Two sessions hold it shared at once; the masters show one lock (the shared marker),
-- whose TTL is the latest hold's.
SELECT redlock_acquire_shared('sh-a', 30000) AS mine;
SELECT other($$SELECT redlock_acquire_shared('sh-a', 30000)$$) AS other_shared_too;
SELECT resource, key, scope, session_holds, permits, set_id, mode FROM redlock_locks();
SELECT held, masters, ttl_ms > 29000 AS ttl_of_the_latest FROM redlock_lock_info('sh-a');

-- No exclusive holder beside them: refused at once, and after a wait that runs out.
SELECT third($$SELECT redlock_acquire('sh-a', 30000)$$) AS third_exclusive;
SELECT third($$SELECT redlock_acquire('sh-a', 30000, 300)$$) AS third_exclusive_waited;
SELECT other($$SELECT redlock_release('sh-a')$$) AS other_released;
-- Still held: the other's release ended its own hold only.
SELECT third($$SELECT redlock_acquire('sh-a', 30000)$$) AS third_exclusive_again;
SELECT held, masters FROM redlock_lock_info('sh-a');

-- Holds stack; the last release frees the resource, and an exclusive holder gets it;
-- shared holders are then refused.
SELECT redlock_acquire_shared('sh-a', 30000) AS stacked;
SELECT session_holds FROM redlock_locks();
SELECT redlock_release('sh-a') AS one_hold_dropped;
SELECT held FROM redlock_lock_info('sh-a');
SELECT redlock_release('sh-a') AS released;
SELECT held FROM redlock_lock_info('sh-a');
SELECT third($$SELECT redlock_acquire('sh-a', 30000)$$) AS third_exclusive_now;
SELECT redlock_acquire_shared('sh-a', 30000) AS shared_refused;
SELECT redlock_acquire_shared('sh-a', 30000, 300) AS shared_waited;
SELECT count(*) AS held_here FROM redlock_locks();
SELECT third($$SELECT redlock_release('sh-a')$$) AS third_released;

-- Extension sets a new TTL on a shared hold.
SELECT redlock_acquire_shared('sh-b', 10000) AS mine;
SELECT redlock_extend('sh-b', 45000) AS extended;
SELECT ttl_ms FROM redlock_locks();
SELECT redlock_extend('sh-b') AS extended_again;

-- A shared hold's validity counts the clock drift allowance as a single lock's does:
-- with a factor of 0.5, a 10 s TTL leaves at most 4998 ms.
SET redlock.clock_drift_factor = 0.5;
SELECT redlock_acquire_shared('sh-drift', 10000) AS mine;
SELECT validity_ms BETWEEN 1 AND 4998 AS drift_taken_off FROM redlock_locks()
 WHERE resource = 'sh-drift';
SELECT redlock_release('sh-drift') AS released;
RESET redlock.clock_drift_factor;

-- When the latest hold is released, the key lives on as long as the longest of the
-- holds left (40 s), not the shortest (20 s): else it could expire under a holder.
SELECT redlock_acquire_shared('sh-l', 20000) AS mine_20s;
SELECT other($$SELECT redlock_acquire_shared('sh-l', 40000)$$) AS other_40s;
SELECT third($$SELECT redlock_acquire_shared('sh-l', 60000)$$) AS third_60s;
SELECT third($$SELECT redlock_release('sh-l')$$) AS latest_released;
SELECT held, masters, ttl_ms > 30000 AS ttl_of_the_longest_left FROM redlock_lock_info('sh-l');
SELECT other($$SELECT redlock_release('sh-l')$$) AS other_released;
SELECT held, masters, ttl_ms <= 20000 AS ttl_of_the_one_left FROM redlock_lock_info('sh-l');
SELECT redlock_release('sh-l') AS released;
SELECT held FROM redlock_lock_info('sh-l');

-- One mode at a time in a session (55000), and no fencing token for a shared hold
-- (0A000).
SELECT redlock_acquire('sh-b', 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_fencing_token('sh-b');
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit('sh-b', 3, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire(ARRAY['sh-b', 'sh-c'], 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire('sh-c', 30000) AS exclusive_c;
SELECT redlock_acquire_shared('sh-c', 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_release('sh-c') AS released_c;

-- A waiting exclusive acquire posts its intent: a third session's shared acquire is
-- refused while it waits, although only a shared holder holds the resource; the writer
-- gets it when that holder leaves, and the third session gets it after the writer.
SELECT dblink_send_query('other', $$SELECT redlock_acquire('sh-b', 30000, 20000)$$) AS writer_sent;
SELECT pg_sleep(1.5);
SELECT third($$SELECT redlock_acquire_shared('sh-b', 30000)$$) AS third_shared_refused;
SELECT redlock_release('sh-b') AS released;
SELECT r AS writer_got_it FROM dblink_get_result('other') AS x(r boolean);
SELECT count(*) AS no_more_results FROM dblink_get_result('other') AS x(r boolean);
SELECT third($$SELECT redlock_acquire_shared('sh-b', 30000, 300)$$) AS third_waits_for_writer;
SELECT other($$SELECT redlock_release('sh-b')$$) AS writer_released;
SELECT third($$SELECT redlock_acquire_shared('sh-b', 30000)$$) AS third_shared_now;
SELECT third($$SELECT redlock_release('sh-b')$$) AS third_released;

-- Transaction scope: released at commit; a session hold taken in a transaction that
-- rolls back is released by the rollback.
BEGIN;
SELECT redlock_xact_acquire_shared('sh-x', 30000) AS in_xact;
SELECT scope, xact_holds, mode FROM redlock_locks();
SELECT other($$SELECT redlock_acquire_shared('sh-x', 30000)$$) AS other_shares_it;
COMMIT;
SELECT count(*) AS held_after_commit FROM redlock_locks();
SELECT held FROM redlock_lock_info('sh-x');
SELECT other($$SELECT redlock_release('sh-x')$$) AS other_released;
SELECT held FROM redlock_lock_info('sh-x');
BEGIN;
SELECT redlock_acquire_shared('sh-x', 30000) AS session_hold;
ROLLBACK;
SELECT count(*) AS held_after_rollback FROM redlock_locks();
SELECT held FROM redlock_lock_info('sh-x');

-- Bad input, as redlock_acquire's.
SELECT redlock_acquire_shared(NULL, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_shared('', 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_shared('sh-e', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_shared('sh-e', 30000, -2);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_xact_acquire_shared('sh-e', NULL);
\echo :LAST_ERROR_SQLSTATE

SELECT dblink_disconnect('third');
SELECT dblink_disconnect('other');
