/* redlock--1.4--1.5.sql: semaphores across clusters (redlock_acquire_permit): at most
   "permits" holders at once, each holding one of the semaphore's slots, an exclusive
   lock of its own (doc/semaphores.md). */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.5'" to load this file. \quit

CREATE FUNCTION redlock_acquire_permit(resource text, permits integer,
                                       ttl_ms integer DEFAULT 30000,
                                       wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_acquire_permit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_xact_acquire_permit(resource text, permits integer,
                                            ttl_ms integer DEFAULT 30000,
                                            wait_ms integer DEFAULT 0)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_xact_acquire_permit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_acquire_permit(text, integer, integer, integer),
                       redlock_xact_acquire_permit(text, integer, integer, integer)
   FROM PUBLIC;
COMMENT ON FUNCTION redlock_acquire_permit(text, integer, integer, integer) IS
'Take one of a semaphore''s permits, session-scoped: at most "permits" holders at once across every cluster using these masters (every caller gives the same permits). Each permit is a Redlock lock on one of the slots resource#1..resource#permits, all tried in one round trip; wait up to wait_ms ms (NULL: without limit). True when taken. Release it with redlock_release(resource).';
COMMENT ON FUNCTION redlock_xact_acquire_permit(text, integer, integer, integer) IS
'As redlock_acquire_permit, but released when the transaction ends; the commit fails if the permit was lost or its validity ran out.';
