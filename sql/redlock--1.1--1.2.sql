/* redlock--1.1--1.2.sql: a short user-facing description on every function (\df+). */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.2'" to load this file. \quit

COMMENT ON FUNCTION redlock_acquire(text, integer, integer) IS
'Take a session-scoped Redlock lock on a quorum of the Redis masters for ttl_ms milliseconds; wait up to wait_ms ms (NULL: without limit). True when acquired.';
COMMENT ON FUNCTION redlock_xact_acquire(text, integer, integer) IS
'As redlock_acquire, but released when the transaction ends; the commit fails if the lock was lost or its validity ran out.';
COMMENT ON FUNCTION redlock_release(text) IS
'Drop one session hold on a lock; the last one deletes its keys where they still hold our token. False with a warning when not held.';
COMMENT ON FUNCTION redlock_extend(text, integer) IS
'Set a new TTL (ms; NULL: the TTL last set) on a held lock where its keys still hold our token. False when the lock was lost.';
COMMENT ON FUNCTION redlock_release_all() IS
'Drop every session hold of this session and release the locks left with none. Returns how many were released.';
COMMENT ON FUNCTION redlock_locks() IS
'The locks this session holds, with their holds, TTL and remaining validity time.';
COMMENT ON FUNCTION redlock_nodes() IS
'The configured Redis masters as this backend sees them: connection, last error, round trip and request counts.';
COMMENT ON FUNCTION redlock_stats() IS
'Acquire, release and extend counters since start or reset: cluster-wide when redlock is preloaded, else this backend''s.';
COMMENT ON FUNCTION redlock_stats_reset() IS
'Set the counters of redlock_stats() back to zero.';
