-- redlock.max_locks_per_role (issue 41): the locks and claims one role's sessions have
-- on the masters from this cluster are bounded.  The same output preloaded (counted in
-- shared memory, for the whole cluster) or not (each backend counts its own): one
-- session of the role here.
SET client_min_messages = warning;
ALTER EXTENSION redlock UPDATE;
RESET client_min_messages;
LOAD 'redlock';
SET redlock.key_prefix = 'regress-rq:';
SELECT name, setting, unit, min_val, context FROM pg_settings
 WHERE name = 'redlock.max_locks_per_role';

CREATE ROLE regress_rq_user;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO regress_rq_user;

-- A superuser's setting (ALTER ROLE ... SET); at least 1.
\set VERBOSITY terse
SET ROLE regress_rq_user;
SET redlock.max_locks_per_role = 100000;
RESET ROLE;
SET redlock.max_locks_per_role = 0;

-- Three: a lock, a shared lock and a permit fill it; the 4th lock, a set, a claim and
-- a transaction-scoped lock are refused (53400), naming the role and its count.
SET redlock.max_locks_per_role = 3;
SET SESSION AUTHORIZATION regress_rq_user;
SELECT redlock_acquire('regress-rq-1'), redlock_acquire_shared('regress-rq-2'),
       redlock_acquire_permit('regress-rq-3', 2);
SELECT redlock_acquire('regress-rq-1') AS reacquire_takes_nothing_more,
       redlock_release('regress-rq-1') AS one_hold_of_two;
SELECT redlock_acquire('regress-rq-4');
SELECT redlock_acquire(ARRAY['regress-rq-5', 'regress-rq-6']);
SELECT redlock_claim('regress-rq-claim', 30000);
BEGIN;
SELECT redlock_xact_acquire('regress-rq-4');
ROLLBACK;
\set VERBOSITY default
SELECT redlock_acquire('regress-rq-4');
\set VERBOSITY terse
DO $$
BEGIN
  PERFORM redlock_acquire('regress-rq-4');
EXCEPTION WHEN configuration_limit_exceeded THEN
  RAISE NOTICE 'refused with SQLSTATE %', SQLSTATE;
END $$;
SELECT resource FROM redlock_locks() ORDER BY 1;
SELECT held AS lock_on_masters FROM redlock_lock_info('regress-rq-4');
SELECT held AS claim_on_masters FROM redlock_lock_info('regress-rq-claim');

-- A release gives its share back; a claim not taken (held elsewhere: here a shared
-- lock) gives it back at once, one taken keeps it until its TTL has run out.
SELECT redlock_release('regress-rq-1');
SELECT redlock_claim('regress-rq-2', 5000) AS busy, redlock_claim('regress-rq-2', 5000) AS busy;
SELECT redlock_claim('regress-rq-claim', 5000);
SELECT redlock_acquire('regress-rq-4');
DO $$
BEGIN
  FOR i IN 1 .. 600 LOOP
    BEGIN
      PERFORM redlock_acquire('regress-rq-4');
      RAISE NOTICE 'acquired once the claim ran out';
      RETURN;
    EXCEPTION WHEN configuration_limit_exceeded THEN
      PERFORM pg_sleep(0.05);
    END;
  END LOOP;
  RAISE EXCEPTION 'the claim was still counted after 30 s';
END $$;

-- A transaction that rolls back gives back what it acquired, refused part or not.
SELECT redlock_release_all();
BEGIN;
SELECT redlock_xact_acquire(ARRAY['regress-rq-5', 'regress-rq-6']);
SELECT redlock_acquire('regress-rq-7'), redlock_acquire('regress-rq-8');
ROLLBACK;
SELECT redlock_acquire(ARRAY['regress-rq-5', 'regress-rq-6', 'regress-rq-7']);
SELECT redlock_release_all();

-- A set refused part way leaves the count as it was.
SELECT redlock_acquire('regress-rq-1'), redlock_acquire('regress-rq-2');
\set VERBOSITY default
SELECT redlock_acquire(ARRAY['regress-rq-5', 'regress-rq-6']);
\set VERBOSITY terse
SELECT redlock_acquire('regress-rq-9');
SELECT redlock_release_all();

RESET SESSION AUTHORIZATION;
RESET redlock.max_locks_per_role;
RESET redlock.key_prefix;
\set VERBOSITY default
DROP OWNED BY regress_rq_user;
DROP ROLE regress_rq_user;
