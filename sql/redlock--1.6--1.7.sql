/* redlock--1.6--1.7.sql: shared locks (doc/shared.md): redlock_acquire_shared and
   redlock_xact_acquire_shared, released and extended as locks are; redlock_locks()
   shows each lock's mode. */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.7'" to load this file. \quit

CREATE FUNCTION redlock_acquire_shared(resource text, ttl_ms integer DEFAULT 30000,
                                       wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_acquire_shared'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_xact_acquire_shared(resource text, ttl_ms integer DEFAULT 30000,
                                            wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_xact_acquire_shared'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_acquire_shared(text, integer, integer),
                       redlock_xact_acquire_shared(text, integer, integer)
   FROM PUBLIC;
COMMENT ON FUNCTION redlock_acquire_shared(text, integer, integer) IS
'Take a session-scoped shared lock: any number of shared holders at once across every cluster, none beside an exclusive holder; an exclusive acquire waits until they are gone, and while it waits new shared holders wait behind it. Held when a quorum of masters added it within the TTL (ms). Wait up to wait_ms ms (NULL: without limit). True when held.';
COMMENT ON FUNCTION redlock_xact_acquire_shared(text, integer, integer) IS
'As redlock_acquire_shared, but released when the transaction ends; the commit fails if it was lost or its validity ran out.';

-- redlock_locks() gains mode.  Its result columns cannot change in place, so it is
-- dropped and created again; the EXECUTE grants a DBA gave on it are carried over (as
-- in the upgrades to 1.3 and 1.6).
CREATE TEMPORARY TABLE redlock_saved_grants AS
SELECT a.grantee
  FROM pg_proc p, aclexplode(p.proacl) a
 WHERE p.oid = 'redlock_locks()'::regprocedure
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
    OUT renewals bigint,
    OUT permits integer,
    OUT set_id bigint,
    OUT mode text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_locks'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_locks() FROM PUBLIC;
COMMENT ON FUNCTION redlock_locks() IS
'The locks this session holds, with their holds, TTL, remaining validity time, whether the background worker renews them (and gave up on them), a permit''s permits, the set each was acquired in (set_id, shared by a set''s locks), and its mode (exclusive or shared).';

DO $$
DECLARE
  g record;
BEGIN
  FOR g IN SELECT * FROM redlock_saved_grants LOOP
    IF g.grantee = 0 THEN
      EXECUTE 'GRANT EXECUTE ON FUNCTION redlock_locks() TO PUBLIC';
    ELSE
      EXECUTE format('GRANT EXECUTE ON FUNCTION redlock_locks() TO %I',
                     (SELECT rolname FROM pg_roles WHERE oid = g.grantee));
    END IF;
  END LOOP;
END
$$;
DROP TABLE redlock_saved_grants;
