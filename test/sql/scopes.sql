-- Transaction scope, and what commit, rollback and savepoints do to holds.  Locks meant
-- to run out get a 500 ms TTL and 0.7 s of sleep: room for a loaded machine to acquire
-- them first.  Errors are followed by their SQLSTATE (psql's LAST_ERROR_SQLSTATE).
\i test/sql/second_session.psql

-- A transaction-scoped lock covers the commit and ends right after it.
BEGIN;
SELECT redlock_xact_acquire('regress-x');
SELECT scope, session_holds, xact_holds FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-x')$$);
-- It cannot be released by redlock_release.
SELECT redlock_release('regress-x');
COMMIT;
SELECT count(*) FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-x')$$);
SELECT other($$SELECT redlock_release('regress-x')$$);

-- ... and after a rollback too.
BEGIN;
SELECT redlock_xact_acquire('regress-x');
ROLLBACK;
SELECT count(*) FROM redlock_locks();

-- A session lock taken in a transaction that aborts is released by the abort.
BEGIN;
SELECT redlock_acquire('regress-y');
ROLLBACK;
SELECT count(*) FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-y')$$);
SELECT other($$SELECT redlock_release('regress-y')$$);

-- ... and one taken in a committed transaction stays.
BEGIN;
SELECT redlock_acquire('regress-y');
COMMIT;
SELECT resource, session_holds FROM redlock_locks();
-- A later rollback takes back only its own holds.
BEGIN;
SELECT redlock_acquire('regress-y');
SELECT session_holds FROM redlock_locks();
ROLLBACK;
SELECT session_holds FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-y')$$);
SELECT redlock_release('regress-y');

-- Rolling back to a savepoint takes back the holds added after it.
BEGIN;
SELECT redlock_acquire('regress-z');
SAVEPOINT s1;
SELECT redlock_acquire('regress-z');
SELECT redlock_acquire('regress-w');
ROLLBACK TO SAVEPOINT s1;
SELECT resource, session_holds FROM redlock_locks() ORDER BY resource;
COMMIT;
SELECT other($$SELECT redlock_acquire('regress-w')$$);
SELECT other($$SELECT redlock_release('regress-w')$$);
SELECT redlock_release('regress-z');

-- A released savepoint hands its holds to the parent, which then aborts.
BEGIN;
SAVEPOINT s1;
SELECT redlock_acquire('regress-v');
RELEASE SAVEPOINT s1;
ROLLBACK;
SELECT count(*) FROM redlock_locks();

-- Two levels: a released inner savepoint hands its holds to the outer one, and rolling
-- back to the outer one takes them back; the commit then keeps nothing.
BEGIN;
SAVEPOINT a;
SAVEPOINT b;
SELECT redlock_acquire('regress-nest');
RELEASE SAVEPOINT b;
ROLLBACK TO SAVEPOINT a;
SELECT count(*) FROM redlock_locks();
COMMIT;
SELECT count(*) FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-nest')$$);
SELECT other($$SELECT redlock_release('regress-nest')$$);
-- The same for a transaction-scoped lock found lost in the inner savepoint: rolling
-- back to the outer one undoes the work done under it, so the commit succeeds.
BEGIN;
SAVEPOINT a;
SAVEPOINT b;
SELECT redlock_xact_acquire('regress-nest-lost', 500);
SELECT pg_sleep(0.7);
SELECT redlock_extend('regress-nest-lost') AS extended;
RELEASE SAVEPOINT b;
ROLLBACK TO SAVEPOINT a;
COMMIT;
\echo :ERROR
SELECT count(*) FROM redlock_locks();

-- An exception block is a subtransaction: the error takes the lock back.
DO $$
BEGIN
  PERFORM redlock_acquire('regress-e');
  RAISE EXCEPTION 'work failed';
EXCEPTION WHEN others THEN
  RAISE NOTICE 'caught: %', SQLERRM;
END
$$;
SELECT count(*) FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-e')$$);
SELECT other($$SELECT redlock_release('regress-e')$$);

-- A release inside a transaction is not undone by its rollback.
SELECT redlock_acquire('regress-u');
BEGIN;
SELECT redlock_release('regress-u');
ROLLBACK;
SELECT count(*) FROM redlock_locks();

-- Session and transaction holds on one resource.
BEGIN;
SELECT redlock_acquire('regress-t');
SELECT redlock_xact_acquire('regress-t');
SELECT scope, session_holds, xact_holds FROM redlock_locks();
COMMIT;
SELECT scope, session_holds, xact_holds FROM redlock_locks();
SELECT redlock_release('regress-t');

-- A transaction-scoped lock whose validity ran out makes the commit fail.  (Warnings off:
-- the abort's release warns too, and psql may print that WARNING before or after the
-- ERROR.)
SET client_min_messages = error;
BEGIN;
SELECT redlock_xact_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
COMMIT;
\echo :LAST_ERROR_SQLSTATE
RESET client_min_messages;
SELECT count(*) FROM redlock_locks();

-- A session lock whose validity ran out: release warns, extend says lost.
SELECT redlock_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
SELECT redlock_release('regress-short');
SELECT redlock_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
SELECT redlock_extend('regress-short');
SELECT count(*) FROM redlock_locks();
-- Re-acquiring one that was lost warns and takes it afresh, keeping its hold.
SELECT redlock_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
SELECT redlock_acquire('regress-short', 30000);
SELECT session_holds, ttl_ms FROM redlock_locks();
SELECT redlock_release('regress-short');
SELECT redlock_release('regress-short');

-- An extension that finds the lock lost makes the transaction's commit fail.
BEGIN;
SELECT redlock_xact_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
SELECT redlock_extend('regress-short', 30000);
COMMIT;
\echo :LAST_ERROR_SQLSTATE

-- Re-acquiring a lost lock at transaction scope takes it afresh, keeping the session
-- hold: the commit stands when no earlier transaction-scoped hold was lost ...
BEGIN;
SELECT redlock_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
SELECT redlock_xact_acquire('regress-short', 30000);
SELECT scope, session_holds, xact_holds FROM redlock_locks();
COMMIT;
SELECT scope, session_holds, xact_holds FROM redlock_locks();
SELECT redlock_release('regress-short');
SELECT count(*) FROM redlock_locks();
-- ... and fails when work already ran under a transaction-scoped hold that was lost.
BEGIN;
SELECT redlock_xact_acquire('regress-short', 500);
SELECT pg_sleep(0.7);
SELECT redlock_xact_acquire('regress-short', 30000);
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM redlock_locks();

-- Locks do not survive into a prepared transaction.
BEGIN;
SELECT redlock_acquire('regress-prep');
PREPARE TRANSACTION 'regress-prep';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM redlock_locks();

-- ... nor a transaction that found a transaction-scoped lock lost (its work ran
-- unprotected): refused the same way.
BEGIN;
SELECT redlock_xact_acquire('regress-prep-lost', 500);
SELECT pg_sleep(0.7);
SELECT redlock_extend('regress-prep-lost') AS extended;
PREPARE TRANSACTION 'regress-prep-lost';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM redlock_locks();

-- DISCARD ALL releases session locks, as it releases advisory locks (a pooler's
-- server_reset_query); another session can then take them at once.
SELECT redlock_acquire('regress-discard', 30000), redlock_acquire('regress-discard', 30000);
SELECT other('SELECT redlock_acquire(''regress-discard'', 30000)');
DISCARD ALL;
SELECT count(*) FROM redlock_locks();
SELECT other('SELECT redlock_acquire(''regress-discard'', 30000)');
SELECT other('SELECT redlock_release(''regress-discard'')');
-- Not inside a transaction block: refused by PostgreSQL, and the lock is kept.
SELECT redlock_acquire('regress-discard', 30000);
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT resource, session_holds FROM redlock_locks();
SELECT redlock_release('regress-discard');

SELECT dblink_disconnect('other');

-- Issue 40: the refused commit says which cause it was, with the TTL it was given in
-- milliseconds: here less than redlock.commit_margin was left.
SET redlock.commit_margin = 60000;
SET client_min_messages = error;
BEGIN;
SELECT redlock_xact_acquire('regress-margin', 30000);
COMMIT;
RESET client_min_messages;
RESET redlock.commit_margin;
