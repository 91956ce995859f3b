-- Every bad argument and setting, with its SQLSTATE, message and detail.
CREATE FUNCTION try(command text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  state text;
  message text;
  detail text;
BEGIN
  EXECUTE command;
  RETURN 'ok';
EXCEPTION WHEN others THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                          detail = PG_EXCEPTION_DETAIL;
  RETURN state || ': ' || message || coalesce(' (' || nullif(detail, '') || ')', '');
END
$$;

-- Arguments: NULL (22004); empty or too long resource, TTL <= 0 or over one day, and
-- negative wait (22023).
SELECT command, try(command) AS outcome
  FROM (VALUES
    ($$SELECT redlock_acquire(NULL)$$),
    ($$SELECT redlock_acquire('')$$),
    ($$SELECT redlock_acquire(repeat('x', 1025))$$),
    ($$SELECT redlock_acquire(repeat('é', 513))$$),
    ($$SELECT redlock_acquire('r', NULL)$$),
    ($$SELECT redlock_acquire('r', 0)$$),
    ($$SELECT redlock_acquire('r', -5)$$),
    ($$SELECT redlock_acquire('r', 86400001)$$),
    ($$SELECT redlock_acquire('r', 1000, -1)$$),
    ($$SELECT redlock_xact_acquire(NULL)$$),
    ($$SELECT redlock_xact_acquire('')$$),
    ($$SELECT redlock_xact_acquire('r', 0)$$),
    ($$SELECT redlock_xact_acquire('r', 1000, -1)$$),
    ($$SELECT redlock_release(NULL)$$),
    ($$SELECT redlock_release('')$$),
    ($$SELECT redlock_release(repeat('x', 1025))$$),
    ($$SELECT redlock_extend(NULL)$$),
    ($$SELECT redlock_extend('')$$),
    ($$SELECT redlock_extend('r', 0)$$),
    ($$SELECT redlock_extend('r', 86400001)$$)
  ) AS t(command);

-- A TTL of exactly one day (the limit, redlock.max_ttl's default) is allowed.
SELECT redlock_acquire('r', 86400000) AS one_day, redlock_release('r') AS released;

-- A resource of exactly 1024 bytes is allowed: acquired and released.
SELECT redlock_acquire(repeat('x', 1024), 1000) AS acquired,
       redlock_release(repeat('x', 1024)) AS released;
SELECT redlock_acquire(repeat('é', 512), 1000) AS acquired,
       redlock_release(repeat('é', 512)) AS released;

-- redlock.servers: the bad item is named (22023).  Good lists are accepted.
SELECT command, try(command) AS outcome
  FROM (VALUES
    ($$SET redlock.servers = 'localhost:notaport'$$),
    ($$SET redlock.servers = 'a:1,,b:2'$$),
    ($$SET redlock.servers = 'a:1,'$$),
    ($$SET redlock.servers = ','$$),
    ($$SET redlock.servers = 'a:0'$$),
    ($$SET redlock.servers = 'a:65536'$$),
    ($$SET redlock.servers = 'a:99999999999999999999'$$),
    ($$SET redlock.servers = 'a:'$$),
    ($$SET redlock.servers = ':1'$$),
    ($$SET redlock.servers = '[::1'$$),
    ($$SET redlock.servers = '[::1]x'$$),
    ($$SET redlock.servers = '[]:1'$$),
    ($$SET redlock.servers = '[zz]:1'$$),
    ($$SET redlock.servers = 'a:1, a:1'$$),
    ($$SET redlock.servers = 'a, a:6379'$$),
    ($$SET redlock.servers = 'a:6379, b:6379'$$),
    ($$SET redlock.servers = 'bad host:1'$$),
    ($$SET redlock.servers = 'a:1:2'$$),
    ($$SET redlock.servers = 'a;b'$$),
    ($$SET redlock.servers = 'a:1;b:2'$$),
    ($$SET redlock.servers = 'redis://a:1'$$),
    ($$SET redlock.servers = 'a:1,rediss://b:6380'$$),
    (format('SET redlock.servers = %L', '/' || repeat('s', 300))),
    (format('SET redlock.servers = %L', repeat('h,', 64) || 'h')),
    ($$SET redlock.servers = ' a:1 , [::1]:2 , /tmp/redis.sock , b '$$),
    ($$SET redlock.servers = ''$$),
    ($$RESET redlock.servers$$)
  ) AS t(command);

-- A bad list: the detail says what is wrong, the hint shows the format.
SET redlock.servers = 'redis://a:1';

-- No servers configured: taking a lock fails (22023) with a hint.
SET redlock.servers = '';
SELECT redlock_acquire('r');
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_xact_acquire('r');
\echo :LAST_ERROR_SQLSTATE
RESET redlock.servers;

-- Other settings out of range (22023), and unknown names under the prefix (42602).
SELECT command, try(command) AS outcome
  FROM (VALUES
    ($$SET redlock.timeout = 0$$),
    ($$SET redlock.timeout = 60001$$),
    ($$SET redlock.connect_timeout = 0$$),
    ($$SET redlock.retry_delay = -1$$),
    ($$SET redlock.retry_jitter = -1$$),
    ($$SET redlock.clock_drift_factor = 0.9$$),
    ($$SET redlock.clock_drift_factor = -0.1$$),
    ($$SET redlock.database = -1$$),
    ($$SET redlock.nonexistent = 1$$),
    ($$SET redlock.timeout = '2s'$$),
    ($$RESET redlock.timeout$$)
  ) AS t(command);

-- The other settings' bounds (22023), and the edges that are allowed.
SELECT command, try(command) AS outcome
  FROM (VALUES
    ($$SET redlock.connect_timeout = 60001$$),
    ($$SET redlock.quorum_timeout = -1$$),
    ($$SET redlock.deadlock_timeout = -1$$),
    ($$SET redlock.commit_margin = -1$$),
    ($$SET redlock.max_ttl = 0$$),
    ($$SET redlock.max_ttl = 86400001$$),
    ($$SET redlock.max_locks_per_role = 0$$),
    ($$SET redlock.max_auto_extended_locks_per_role = -1$$),
    ($$SET redlock.quorum_timeout = 0$$),
    ($$SET redlock.deadlock_timeout = 0$$),
    ($$SET redlock.commit_margin = 0$$),
    ($$RESET redlock.quorum_timeout$$),
    ($$RESET redlock.deadlock_timeout$$),
    ($$RESET redlock.commit_margin$$)
  ) AS t(command);
-- Settings for the whole cluster: ALTER SYSTEM checks their bounds too.
ALTER SYSTEM SET redlock.watch_interval = 4;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET redlock.restart_quarantine = -1;
\echo :LAST_ERROR_SQLSTATE

DROP FUNCTION try(text);
