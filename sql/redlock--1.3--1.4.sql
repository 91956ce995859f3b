/* redlock--1.3--1.4.sql: fencing tokens taken through the lock (redlock_fencing_token);
   the backends waiting for a lock (redlock_waiters); bigint keys, as pg_advisory_lock's. */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.4'" to load this file. \quit

CREATE FUNCTION redlock_fencing_token(resource text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'redlock_fencing_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_fencing_token(text) FROM PUBLIC;
COMMENT ON FUNCTION redlock_fencing_token(text) IS
'The fencing token of a lock this session holds: larger than every earlier holder''s, the same for the whole hold. Write it with the guarded data and refuse writes that carry a smaller one.';

-- The backends of this cluster waiting for a busy lock (the waiter board: preloaded only).
CREATE FUNCTION redlock_waiters(
    OUT pid integer,
    OUT resource text,
    OUT waiting_since timestamptz,
    OUT attempts bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_waiters'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_waiters() FROM PUBLIC;
COMMENT ON FUNCTION redlock_waiters() IS
'The backends of this cluster waiting for a busy lock now: pid, resource (shown as pg_stat_activity shows queries), when the wait began, attempts so far. Needs the library in shared_preload_libraries.';

-- Every function that takes a resource also takes a bigint key, as pg_advisory_lock(bigint)
-- does: the key names the resource of its decimal text (42 is '42').  No (int, int) form:
-- redlock_acquire(42, 60000) would pick it over (bigint, ttl_ms) and take another lock.
CREATE FUNCTION redlock_acquire(key bigint, ttl_ms integer DEFAULT 30000,
                                wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_xact_acquire(key bigint, ttl_ms integer DEFAULT 30000,
                                     wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_release(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_extend(key bigint, ttl_ms integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_extend'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_claim(key bigint, ttl_ms integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_claim'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_fencing_token(key bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'redlock_fencing_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_acquire(bigint, integer, integer),
                       redlock_xact_acquire(bigint, integer, integer),
                       redlock_release(bigint), redlock_extend(bigint, integer),
                       redlock_claim(bigint, integer), redlock_fencing_token(bigint)
   FROM PUBLIC;
COMMENT ON FUNCTION redlock_acquire(bigint, integer, integer) IS
'redlock_acquire(resource) for the resource named by the key''s decimal text (42 is ''42''), as pg_advisory_lock(bigint) keys locks.';
COMMENT ON FUNCTION redlock_xact_acquire(bigint, integer, integer) IS
'redlock_xact_acquire(resource) for the resource named by the key''s decimal text.';
COMMENT ON FUNCTION redlock_release(bigint) IS
'redlock_release(resource) for the resource named by the key''s decimal text.';
COMMENT ON FUNCTION redlock_extend(bigint, integer) IS
'redlock_extend(resource) for the resource named by the key''s decimal text.';
COMMENT ON FUNCTION redlock_claim(bigint, integer) IS
'redlock_claim(resource) for the resource named by the key''s decimal text.';
COMMENT ON FUNCTION redlock_fencing_token(bigint) IS
'redlock_fencing_token(resource) for the resource named by the key''s decimal text.';
