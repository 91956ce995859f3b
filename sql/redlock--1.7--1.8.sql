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

/* Watches (issue 43): a change of a watched lock, by any cluster, sent as NOTIFY
   "redlock" by the database's notifier (a background worker). */

CREATE FUNCTION redlock_watch(resource text)
RETURNS void
AS 'MODULE_PATHNAME', 'redlock_watch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION redlock_watch(text) IS
'From commit on, sends every change of the lock on resource that a quorum of masters shows (acquired, released, expired, forced; by any cluster) as NOTIFY "redlock" with a JSON payload, and LISTENs on "redlock". Needs shared_preload_libraries.';

CREATE FUNCTION redlock_unwatch(resource text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_unwatch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION redlock_unwatch(text) IS
'Stops watching resource at once: true when this session watched it. The last watch gone, UNLISTENs "redlock".';

CREATE FUNCTION redlock_unwatch_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'redlock_unwatch_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION redlock_watch(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'redlock_watch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION redlock_watch(bigint) IS
'redlock_watch(resource) for the resource named by the key''s decimal text (42 is ''42'').';

CREATE FUNCTION redlock_unwatch(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'redlock_unwatch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION redlock_unwatch(bigint) IS
'redlock_unwatch(resource) for the resource named by the key''s decimal text (42 is ''42'').';

REVOKE ALL ON FUNCTION redlock_watch(text), redlock_unwatch(text), redlock_unwatch_all(),
                       redlock_watch(bigint), redlock_unwatch(bigint)
  FROM PUBLIC;
COMMENT ON FUNCTION redlock_unwatch_all() IS
'Stops every watch of this session at once and UNLISTENs "redlock"; returns how many resources were watched.';
