/* redlock--1.2--1.3.sql: long jobs (auto-extended locks, shown in redlock_locks() and
   counted in redlock_stats()), redlock_claim() for work run once per scheduled fire, and
   the figures of waiting (wakeups, waiting_backends). */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.3'" to load this file. \quit

CREATE FUNCTION redlock_claim(resource text, ttl_ms integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_claim(text, integer) FROM PUBLIC;
COMMENT ON FUNCTION redlock_claim(text, integer) IS
'Claim a resource on a quorum of the Redis masters for ttl_ms milliseconds, never released: it ends with its TTL, so one caller per resource wins. True when claimed.';

-- redlock_locks() and redlock_stats() gain columns.  A function's result columns cannot
-- change in place, so they are dropped and created again; the EXECUTE grants a DBA gave
-- on them are carried over.
CREATE TEMPORARY TABLE redlock_saved_grants AS
SELECT p.proname::text AS proname, a.grantee
  FROM pg_proc p, aclexplode(p.proacl) a
 WHERE p.oid IN ('redlock_locks()'::regprocedure, 'redlock_stats()'::regprocedure)
   AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner;

DROP FUNCTION redlock_locks();
CREATE FUNCTION redlock_locks(
    OUT resource text,
    OUT key text,
    OUT scope text,
    OUT session_holds integer,
    OUT xact_holds integer,
    OUT ttl_ms integer,
    OUT acquired_at timestamptz,
    OUT valid_until timestamptz,
    OUT validity_ms integer,
    OUT nodes integer,
    OUT auto_extended boolean,
    OUT lost boolean,
    OUT last_renewal timestamptz,
    OUT renewals bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_locks'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_locks() FROM PUBLIC;
COMMENT ON FUNCTION redlock_locks() IS
'The locks this session holds, with their holds, TTL, remaining validity time, and whether the background worker renews them (and gave up on them).';

DROP FUNCTION redlock_stats();
CREATE FUNCTION redlock_stats(
    OUT scope text,
    OUT attempts bigint,
    OUT acquired bigint,
    OUT busy bigint,
    OUT unavailable bigint,
    OUT released bigint,
    OUT released_after_expiry bigint,
    OUT extended bigint,
    OUT extend_lost bigint,
    OUT acquire_latency_mean_ms double precision,
    OUT acquire_latency_max_ms double precision,
    OUT reset_at timestamptz,
    OUT renewals bigint,
    OUT renewals_failed bigint,
    OUT locks_lost bigint,
    OUT auto_extended_locks integer,
    OUT renewal_round_ms double precision,
    OUT renewal_round_locks integer,
    OUT wakeups bigint,
    OUT waiting_backends integer)
RETURNS record
AS 'MODULE_PATHNAME', 'redlock_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_stats() FROM PUBLIC;
COMMENT ON FUNCTION redlock_stats() IS
'Acquire, release, extend and renewal counters since start or reset, and the auto-extend worker''s last round: cluster-wide when redlock is preloaded, else this backend''s.';

DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT * FROM redlock_saved_grants LOOP
    IF g.grantee = 0 THEN
      EXECUTE format('GRANT EXECUTE ON FUNCTION %I() TO PUBLIC', g.proname);
    ELSE
      EXECUTE format('GRANT EXECUTE ON FUNCTION %I() TO %I', g.proname,
                     (SELECT rolname FROM pg_roles WHERE oid = g.grantee));
    END IF;
  END LOOP;
END
$$;
DROP TABLE redlock_saved_grants;
