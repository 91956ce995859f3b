-- Deadlock detection (doc/deadlock.md): two sessions (this one and 'other', through
-- dblink), and a third for the cycles of three, each holding one lock and waiting for
-- another's.  The session of a cycle that began waiting last gets 40P01 with a DETAIL
-- naming each member; the others go on; a wait with no cycle never does.
\i test/sql/second_session.psql
SELECT dblink_connect('third',
       format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));
SET redlock.key_prefix = 'regress-dl:';
SET redlock.deadlock_timeout = 300;
SELECT dblink_exec('other', 'SET redlock.key_prefix = ''regress-dl:''; SET redlock.deadlock_timeout = 300') AS other_set;
SELECT dblink_exec('third', 'SET redlock.key_prefix = ''regress-dl:''; SET redlock.deadlock_timeout = 300') AS third_set;

-- Runs sql here; returns its boolean, or the deadlock: SQLSTATE and DETAIL with pids and
-- cluster names masked (they change from run to run).
CREATE FUNCTION try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  r boolean;
  detail text;
BEGIN
  EXECUTE sql INTO r;
  RETURN r::text;
EXCEPTION WHEN deadlock_detected THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ' ' || SQLERRM || E'\n' ||
         regexp_replace(regexp_replace(detail, '[Pp]rocess \d+', 'process P', 'g'),
                        'cluster "[^"]*"', 'cluster C', 'g');
END $$;
-- The other session's answer to a query sent with dblink_send_query.
CREATE FUNCTION other_result() RETURNS text LANGUAGE sql
AS $$ SELECT coalesce((SELECT r::text FROM dblink_get_result('other', false) AS t(r boolean)),
                      dblink_error_message('other')) $$;

-- Two locks taken in opposite orders: the other session waits first, this one last,
-- so this one is the victim; once it lets go, the other gets its lock.
SELECT redlock_acquire('x-a', 30000) AS this_holds_a;
SELECT other($$SELECT redlock_acquire('x-b', 30000)$$) AS other_holds_b;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('x-a', 30000, 20000)$$) AS other_waits_for_a;
SELECT pg_sleep(0.2);
SELECT try($$SELECT redlock_acquire('x-b', 30000, 20000)$$) AS this_waits_for_b;
SELECT redlock_release('x-a') AS this_lets_go;
SELECT other_result() AS other_got_a;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT other($$SELECT redlock_release('x-a') AND redlock_release('x-b')$$) AS other_released;

-- A wait with no cycle: the holder waits for nothing.  This session holds a lock of its
-- own, so it checks (every 300 ms: a waiter that holds nothing is on no cycle and
-- reads nothing); no error.
SELECT other($$SELECT redlock_acquire('n-a', 30000)$$) AS other_holds;
SELECT redlock_acquire('n-own', 30000) AS this_holds_own;
SELECT try($$SELECT redlock_acquire('n-a', 30000, 1000)$$) AS no_cycle_no_error;
SELECT redlock_release('n-own') AS this_released;
SELECT other($$SELECT redlock_release('n-a')$$) AS other_released;

-- With redlock.deadlock_timeout = 0 in both sessions nobody checks: both waits run out.
SET redlock.deadlock_timeout = 0;
SELECT dblink_exec('other', 'SET redlock.deadlock_timeout = 0') AS other_unchecked;
SELECT redlock_acquire('o-a', 30000) AS this_holds_a;
SELECT other($$SELECT redlock_acquire('o-b', 30000)$$) AS other_holds_b;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('o-a', 30000, 1500)$$) AS other_waits;
SELECT try($$SELECT redlock_acquire('o-b', 30000, 1000)$$) AS unchecked_runs_out;
SELECT other_result() AS other_ran_out;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SET redlock.deadlock_timeout = 300;
SELECT dblink_exec('other', 'SET redlock.deadlock_timeout = 300') AS other_checked;
SELECT redlock_release('o-a') AS this_released,
       other($$SELECT redlock_release('o-b')$$) AS other_released;

-- Sets: each waits for a set one of whose keys the other holds.
SELECT redlock_acquire('s-1', 30000) AS this_holds_1;
SELECT other($$SELECT redlock_acquire('s-2', 30000)$$) AS other_holds_2;
SELECT dblink_send_query('other', $$SELECT redlock_acquire(ARRAY['s-1', 's-3'], 30000, 20000)$$) AS other_waits_for_set;
SELECT pg_sleep(0.2);
SELECT try($$SELECT redlock_acquire(ARRAY['s-4', 's-2'], 30000, 20000)$$) AS this_waits_for_set;
SELECT redlock_release('s-1') AS this_lets_go;
SELECT other_result() AS other_got_set;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT other($$SELECT redlock_release_all() >= 0$$) AS other_released;

-- Shared holds: this session holds r shared, the other w exclusive; the other waits for
-- r exclusively (blocked by the shared holder), this one for w shared.
SELECT redlock_acquire_shared('r', 30000) AS this_shares_r;
SELECT other($$SELECT redlock_acquire('w', 30000)$$) AS other_holds_w;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('r', 30000, 20000)$$) AS other_waits_for_r;
SELECT pg_sleep(0.2);
SELECT try($$SELECT redlock_acquire_shared('w', 30000, 20000)$$) AS this_waits_for_w;
SELECT redlock_release('r') AS this_lets_go;
SELECT other_result() AS other_got_r;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT other($$SELECT redlock_release_all() >= 0$$) AS other_released;

-- A writer's intent blocks shared acquires: the third session holds k shared and waits
-- for x, this session's; the other waits for k exclusively (posting its intent); this
-- one waits for k shared, behind the intent: a cycle of three, through the intent.
SELECT redlock_acquire('i-x', 30000) AS this_holds_x;
SELECT r AS third_shares_k FROM dblink('third', $$SELECT redlock_acquire_shared('i-k', 30000)$$) AS t(r boolean);
SELECT dblink_send_query('third', $$SELECT redlock_acquire('i-x', 30000, 20000)$$) AS third_waits_for_x;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('i-k', 30000, 20000)$$) AS other_waits_for_k;
SELECT pg_sleep(0.8);
SELECT try($$SELECT redlock_acquire_shared('i-k', 30000, 20000)$$) AS this_waits_behind_intent;
SELECT redlock_release('i-x') AS this_lets_go;
SELECT r AS third_got_x FROM dblink_get_result('third') AS t(r boolean);
SELECT count(*) AS third_done FROM dblink_get_result('third') AS t(r boolean);
SELECT r AS third_released FROM dblink('third', $$SELECT redlock_release_all() >= 0$$) AS t(r boolean);
SELECT other_result() AS other_got_k;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT other($$SELECT redlock_release_all() >= 0$$) AS other_released;

-- Semaphores: a waiter for a permit waits for any slot.  One permit, held by the
-- other session, which waits for this session's lock: a cycle.
SELECT other($$SELECT redlock_acquire_permit('p-sem', 1, 30000)$$) AS other_holds_permit;
SELECT redlock_acquire('p-a', 30000) AS this_holds_a;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('p-a', 30000, 20000)$$) AS other_waits_for_a;
SELECT pg_sleep(0.2);
SELECT try($$SELECT redlock_acquire_permit('p-sem', 1, 30000, 20000)$$) AS this_waits_for_permit;
SELECT redlock_release('p-a') AS this_lets_go;
SELECT other_result() AS other_got_a;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT other($$SELECT redlock_release_all() >= 0$$) AS other_released;

-- Two permits: one held by the other session (in the cycle), one by the third, which
-- waits for nothing and will let go: no deadlock, this wait just runs out.
SELECT other($$SELECT redlock_acquire_permit('q-sem', 2, 30000)$$) AS other_holds_permit;
SELECT r AS third_holds_permit FROM dblink('third', $$SELECT redlock_acquire_permit('q-sem', 2, 30000)$$) AS t(r boolean);
SELECT redlock_acquire('q-a', 30000) AS this_holds_a;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('q-a', 30000, 20000)$$) AS other_waits_for_a;
SELECT pg_sleep(0.2);
SELECT try($$SELECT redlock_acquire_permit('q-sem', 2, 30000, 1000)$$) AS one_slot_free_to_come;
SELECT redlock_release('q-a') AS this_lets_go;
SELECT other_result() AS other_got_a;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT other($$SELECT redlock_release_all() >= 0$$) AS other_released;
SELECT r AS third_released FROM dblink('third', $$SELECT redlock_release_all() >= 0$$) AS t(r boolean);

-- A wait that ran out takes its record back first: the other session waited 500 ms
-- for this one's lock (a check posted its record at 300 ms) and gave up; this session
-- then waits for the other's lock, and no cycle is left to find.
SELECT redlock_acquire('g-a', 30000) AS this_holds_a;
SELECT other($$SELECT redlock_acquire('g-b', 30000)$$) AS other_holds_b;
SELECT other($$SELECT redlock_acquire('g-a', 30000, 500)$$) AS other_gave_up;
SELECT try($$SELECT redlock_acquire('g-b', 30000, 1000)$$) AS nothing_to_find;
SELECT redlock_release('g-a') AS this_released,
       other($$SELECT redlock_release('g-b')$$) AS other_released;

-- A wait cut short (a cancel) takes its record back at the abort.
SELECT redlock_acquire('c-a', 30000) AS this_holds_a;
SELECT other($$SELECT redlock_acquire('c-b', 30000)$$) AS other_holds_b;
SELECT dblink_send_query('other', $$SELECT redlock_acquire('c-a', 30000, 20000)$$) AS other_waits_for_a;
SELECT pg_sleep(0.5);
SELECT dblink_cancel_query('other') AS other_cancelled;
SELECT other_result() LIKE '%canceling statement%' AS other_saw_cancel;
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(r boolean);
SELECT try($$SELECT redlock_acquire('c-b', 30000, 1000)$$) AS nothing_to_find;
SELECT redlock_release('c-a') AS this_released,
       other($$SELECT redlock_release('c-b')$$) AS other_released;

-- The same in a subtransaction that rolls back: a PL/pgSQL block catches the cancel.
-- Cancelled with pg_cancel_backend (one SIGINT): a client's cancel request
-- (dblink_cancel_query, PQcancel) is two, to the backend and to its process group, and
-- the second can land during the abort's round trip to the masters and cancel the
-- handler as well (doc/failures.md).
SELECT r AS other_pid FROM dblink('other', 'SELECT pg_backend_pid()') AS t(r int) \gset
SELECT redlock_acquire('t-a', 30000) AS this_holds_a;
SELECT other($$SELECT redlock_acquire('t-b', 30000)$$) AS other_holds_b;
SELECT dblink_send_query('other', $sql$DO $do$ BEGIN
  BEGIN PERFORM redlock_acquire('t-a', 30000, 20000);
  EXCEPTION WHEN query_canceled THEN NULL; END;
  PERFORM pg_sleep(1.5); END $do$ $sql$) AS other_waits_in_subxact;
SELECT pg_sleep(0.5);
SELECT pg_cancel_backend(:other_pid) AS other_cancelled;
SELECT try($$SELECT redlock_acquire('t-b', 30000, 1000)$$) AS nothing_to_find;
SELECT s AS other_finished FROM dblink_get_result('other') AS t(s text);
SELECT count(*) AS other_done FROM dblink_get_result('other') AS t(s text);
SELECT redlock_release('t-a') AS this_released,
       other($$SELECT redlock_release('t-b')$$) AS other_released;

SELECT dblink_disconnect('third');
SELECT dblink_disconnect('other');
DROP FUNCTION try(text);
DROP FUNCTION other_result();
