/* redlock--1.3--1.4.sql: fencing tokens taken through the lock (redlock_fencing_token). */

\echo Use "ALTER EXTENSION redlock UPDATE TO '1.4'" to load this file. \quit

CREATE FUNCTION redlock_fencing_token(resource text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'redlock_fencing_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION redlock_fencing_token(text) FROM PUBLIC;
COMMENT ON FUNCTION redlock_fencing_token(text) IS
'The fencing token of a lock this session holds: larger than every earlier holder''s, the same for the whole hold. Write it with the guarded data and refuse writes that carry a smaller one.';
