/* redlock--1.3--1.4.sql: fencing tokens taken through the lock (redlock_fencing_token);
   the backends waiting for a lock (redlock_waiters). */

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
