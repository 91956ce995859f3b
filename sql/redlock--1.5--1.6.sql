/* redlock--1.5--1.6.sql: sets of resources acquired all or nothing (doc/sets.md):
   redlock_acquire(text[]) and redlock_xact_acquire(text[]), released and extended per
   set with redlock_release(text[]) and redlock_extend(text[]); redlock_locks() shows
   each lock's set and a permit's permits. */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.6'" to load this file. \quit

CREATE FUNCTION redlock_acquire(resources text[], ttl_ms integer DEFAULT 30000,
                                wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_acquire_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_xact_acquire(resources text[], ttl_ms integer DEFAULT 30000,
                                     wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_xact_acquire_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_release(resources text[])
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_release_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_extend(resources text[], ttl_ms integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_extend_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_acquire(text[], integer, integer),
                       redlock_xact_acquire(text[], integer, integer),
                       redlock_release(text[]),
                       redlock_extend(text[], integer)
   FROM PUBLIC;
COMMENT ON FUNCTION redlock_acquire(text[], integer, integer) IS
'Take session-scoped locks on every resource of the set, all or none: one script per master sets all the keys or none, and the set is held when a quorum of masters set all of them within the TTL. At most 64 resources. Wait up to wait_ms ms (NULL: without limit). True when all are held.';
COMMENT ON FUNCTION redlock_xact_acquire(text[], integer, integer) IS
'As redlock_acquire(text[]), but every lock of the set is released when the transaction ends; the commit fails if one was lost or its validity ran out.';
COMMENT ON FUNCTION redlock_release(text[]) IS
'Drop one session hold on each resource and release, in one round, those left without a hold. True when this session held every one.';
COMMENT ON FUNCTION redlock_extend(text[], integer) IS
'Set a new TTL (ms; NULL: each lock''s last TTL) on every resource of the set. True when all were extended; false when one was lost.';

-- redlock_locks() gains permits and set_id.  Its result columns cannot change in place,
-- so it is dropped and created again; the EXECUTE grants a DBA gave on it are carried
-- over (as in the upgrade to 1.3).
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
    OUT set_id bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_locks'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_locks() FROM PUBLIC;
COMMENT ON FUNCTION redlock_locks() IS
'The locks this session holds, with their holds, TTL, remaining validity time, whether the background worker renews them (and gave up on them), a permit''s permits, and the set each was acquired in (set_id, shared by a set''s locks).';

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
