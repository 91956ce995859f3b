/* redlock--1.0.sql: the SQL surface of redlock 1.0.  README.md documents every function. */

\echo Use "CREATE EXTENSION redlock" to load this file. \quit

-- Session-scoped lock on resource for ttl_ms; waits up to wait_ms (NULL: until acquired,
-- cancelled, statement_timeout or lock_timeout) with retry delay and jitter.
CREATE FUNCTION redlock_acquire(resource text, ttl_ms integer DEFAULT 30000,
                                wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The same, transaction-scoped: released right after the transaction commits or aborts.
CREATE FUNCTION redlock_xact_acquire(resource text, ttl_ms integer DEFAULT 30000,
                                     wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_xact_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Drops one session-scoped hold; the keys are deleted when no hold remains.
CREATE FUNCTION redlock_release(resource text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Sets a new TTL (NULL: the TTL the lock was acquired with) while the lock is still ours.
CREATE FUNCTION redlock_extend(resource text, ttl_ms integer DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_extend'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Drops every session-scoped hold of this backend; returns the number of locks released.
CREATE FUNCTION redlock_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'redlock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The locks this backend holds.
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
    OUT nodes integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_locks'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Taking a distributed lock is a privilege: grant it to the roles that need it.
REVOKE ALL ON FUNCTION redlock_acquire(text, integer, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_xact_acquire(text, integer, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_release(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_extend(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_release_all() FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_locks() FROM PUBLIC;
