-- Version 1.3: the upgrade from 1.2 recreates redlock_locks() and redlock_stats() with
-- more columns and must carry over the EXECUTE grants a DBA gave on them; 1.0 updates
-- straight to 1.3; redlock_claim() is revoked from PUBLIC and claims once.

DROP EXTENSION redlock;
CREATE EXTENSION redlock VERSION '1.2';
CREATE ROLE regress_redlock_monitor;
GRANT EXECUTE ON FUNCTION redlock_locks(), redlock_stats() TO regress_redlock_monitor;
ALTER EXTENSION redlock UPDATE TO '1.3';
SELECT extversion FROM pg_extension WHERE extname = 'redlock';
SELECT has_function_privilege('regress_redlock_monitor', 'redlock_locks()', 'execute') AS locks_granted,
       has_function_privilege('regress_redlock_monitor', 'redlock_stats()', 'execute') AS stats_granted,
       has_function_privilege('public', 'redlock_locks()', 'execute') AS locks_public,
       has_function_privilege('public', 'redlock_claim(text, integer)', 'execute') AS claim_public;
SELECT proname, array_length(proargnames, 1) AS columns
  FROM pg_proc WHERE proname IN ('redlock_locks', 'redlock_stats') ORDER BY 1;
SELECT count(*) AS temp_tables_left FROM pg_class WHERE relname = 'redlock_saved_grants';
SELECT obj_description('redlock_claim(text, integer)'::regprocedure, 'pg_proc') IS NOT NULL AS claim_commented;
DROP OWNED BY regress_redlock_monitor;
DROP ROLE regress_redlock_monitor;

-- 1.0 updates straight to the default version.
DROP EXTENSION redlock;
CREATE EXTENSION redlock VERSION '1.0';
ALTER EXTENSION redlock UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'redlock';
-- 1.4: redlock_fencing_token, revoked from PUBLIC and commented like the others.
SELECT has_function_privilege('public', 'redlock_fencing_token(text)', 'execute') AS fencing_public,
       obj_description('redlock_fencing_token(text)'::regprocedure, 'pg_proc') IS NOT NULL AS fencing_commented;
-- 1.4: redlock_waiters, likewise; nobody waits here, so no rows (preloaded or not).
SELECT has_function_privilege('public', 'redlock_waiters()', 'execute') AS waiters_public,
       obj_description('redlock_waiters()'::regprocedure, 'pg_proc') IS NOT NULL AS waiters_commented,
       (SELECT count(*) FROM redlock_waiters()) AS waiting;
-- Every function of 1.8 (redlock_check and the watches too), the bigint, set and shared forms too: not PUBLIC's, and
-- commented.
SELECT count(*) AS functions,
       count(*) FILTER (WHERE has_function_privilege('public', p.oid, 'execute')) AS public,
       count(*) FILTER (WHERE obj_description(p.oid, 'pg_proc') IS NULL) AS uncommented,
       count(*) FILTER (WHERE pg_get_function_identity_arguments(p.oid) LIKE 'key bigint%') AS keyed
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'redlock' AND d.deptype = 'e';

-- 1.7: the upgrade from 1.6 recreates redlock_locks() with mode and carries its grants.
DROP EXTENSION redlock;
CREATE EXTENSION redlock VERSION '1.6';
CREATE ROLE regress_redlock_monitor;
GRANT EXECUTE ON FUNCTION redlock_locks() TO regress_redlock_monitor;
ALTER EXTENSION redlock UPDATE TO '1.7';
SELECT has_function_privilege('regress_redlock_monitor', 'redlock_locks()', 'execute') AS locks_granted,
       has_function_privilege('public', 'redlock_locks()', 'execute') AS locks_public,
       has_function_privilege('public', 'redlock_acquire_shared(text, integer, integer)', 'execute') AS shared_public;
SELECT array_length(proargnames, 1) AS columns, proargnames[17] AS last
  FROM pg_proc WHERE proname = 'redlock_locks';
SELECT count(*) AS temp_tables_left FROM pg_class WHERE relname = 'redlock_saved_grants';
DROP OWNED BY regress_redlock_monitor;
DROP ROLE regress_redlock_monitor;

-- redlock_claim: the first caller wins; a claim is not a held lock.
SELECT redlock_claim('regress-claim', 1000) AS first, redlock_claim('regress-claim', 1000) AS second;
SELECT redlock_acquire('regress-claim') AS acquire_while_claimed;
SELECT count(*) AS held FROM redlock_locks();
\set VERBOSITY terse
SELECT redlock_claim(NULL, 1000);
SELECT redlock_claim('regress-claim-2', NULL);
SELECT redlock_claim('', 1000);
SELECT redlock_claim('regress-claim-2', 0);
-- Fewer than a quorum answering is an error (08006), not a claim lost to another caller.
SET redlock.servers = '127.0.0.1:1,127.0.0.1:2,127.0.0.1:3';
SELECT redlock_claim('regress-claim-3', 1000);
RESET redlock.servers;
\set VERBOSITY default

-- Back to the default version, so that the files after this one find what they expect
-- (the files pass in any order).
SET client_min_messages = warning;
ALTER EXTENSION redlock UPDATE;
RESET client_min_messages;
