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

-- Who holds a lock, whoever took it: read from the masters in one round trip per master.
CREATE FUNCTION redlock_lock_info(resource text,
    OUT held boolean, OUT masters integer, OUT ttl_ms bigint,
    OUT cluster text, OUT pid integer, OUT application_name text, OUT database text,
    OUT role text, OUT acquired_at timestamptz, OUT scope text, OUT waiters integer)
RETURNS record
AS 'MODULE_PATHNAME', 'redlock_lock_info'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_lock_info(key bigint,
    OUT held boolean, OUT masters integer, OUT ttl_ms bigint,
    OUT cluster text, OUT pid integer, OUT application_name text, OUT database text,
    OUT role text, OUT acquired_at timestamptz, OUT scope text, OUT waiters integer)
RETURNS record
AS 'MODULE_PATHNAME', 'redlock_lock_info'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Every lock under redlock.key_prefix on the masters (SCAN in batches, never KEYS).
CREATE FUNCTION redlock_cluster_locks(max_locks integer DEFAULT 1000,
    OUT resource text,
    OUT held boolean, OUT masters integer, OUT ttl_ms bigint,
    OUT cluster text, OUT pid integer, OUT application_name text, OUT database text,
    OUT role text, OUT acquired_at timestamptz, OUT scope text, OUT waiters integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_cluster_locks'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- For operators: delete a lock whatever its token, and raise its fencing counter.
CREATE FUNCTION redlock_force_release(resource text)
RETURNS integer
AS 'MODULE_PATHNAME', 'redlock_force_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_force_release(key bigint)
RETURNS integer
AS 'MODULE_PATHNAME', 'redlock_force_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION redlock_lock_info(text), redlock_lock_info(bigint),
                       redlock_cluster_locks(integer),
                       redlock_force_release(text), redlock_force_release(bigint)
   FROM PUBLIC;
COMMENT ON FUNCTION redlock_lock_info(text) IS
'The lock on a resource as the masters show it, whoever holds it: held (by a quorum), masters, ttl_ms, the holder recorded at acquire (cluster, pid, application_name, database, role, acquired_at, scope; scope ''unknown'' for keys of other clients), and this cluster''s waiters.';
COMMENT ON FUNCTION redlock_lock_info(bigint) IS
'redlock_lock_info(resource) for the resource named by the key''s decimal text.';
COMMENT ON FUNCTION redlock_cluster_locks(integer) IS
'Every lock under redlock.key_prefix on the masters, from every cluster and client, with redlock_lock_info''s columns; at most max_locks rows. Reveals resource names: grant it only to those who may see them.';
COMMENT ON FUNCTION redlock_force_release(text) IS
'For operators: deletes the lock on every master whatever its token, raises its fencing counter, logs who did it; returns the masters where a key was deleted. The evicted holder sees the lock lost at its next extension or renewal.';
COMMENT ON FUNCTION redlock_force_release(bigint) IS
'redlock_force_release(resource) for the resource named by the key''s decimal text.';
