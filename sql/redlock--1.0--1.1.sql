/* redlock--1.0--1.1.sql: what operators see (per-node figures and counters). */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.1'" to load this file. \quit

-- Each configured master as this backend sees it.
CREATE FUNCTION redlock_nodes(
    OUT node text,
    OUT connected boolean,
    OUT last_error text,
    OUT last_error_at timestamptz,
    OUT last_rtt_ms double precision,
    OUT requests bigint,
    OUT replies bigint,
    OUT late_replies bigint,
    OUT errors bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'redlock_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Counters since start or reset: cluster-wide when preloaded, else this backend's.
CREATE FUNCTION redlock_stats(
    OUT scope text,
    OUT attempts bigint,
    OUT acquired bigint,
    OUT busy bigint,
    OUT unavailable bigint,
    OUT released bigint,
    OUT released_after_expiry bigint,
    OUT extended bigint,
    OUT extend_lost bigint,
    OUT acquire_latency_mean_ms double precision,
    OUT acquire_latency_max_ms double precision,
    OUT reset_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'redlock_stats'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION redlock_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'redlock_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION redlock_nodes() FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION redlock_stats_reset() FROM PUBLIC;
