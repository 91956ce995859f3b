/* redlock--1.7--1.8.sql: redlock_check(), what each master does against what Redlock's
   safety assumes of it (restarts, eviction, memory, clocks). */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.8'" to load this file. \quit

CREATE FUNCTION redlock_check(
    OUT master text,
    OUT reachable boolean,
    OUT rtt_ms float8,
    OUT server text,
    OUT persistence text,
    OUT maxmemory bigint,
    OUT maxmemory_policy text,
    OUT uptime_ms bigint,
    OUT quarantine_left_ms bigint,
    OUT clock_offset_ms float8,
    OUT clients bigint,
    OUT verdict text,
    OUT hint text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_check'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_check() FROM PUBLIC;
COMMENT ON FUNCTION redlock_check() IS
'One row per Redis master: what Redlock''s safety assumes of it (its data kept across restarts or a quarantine, no eviction, a steady clock) against what it does, with a verdict (ok, warning, left out, unreachable) and a hint.';
