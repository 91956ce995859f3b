-- Who may take locks and change where they live.  The library must be loaded for its
-- settings to be guarded: until then they are placeholders that anyone may set and
-- show, which is why README asks for shared_preload_libraries.
LOAD 'redlock';
CREATE ROLE regress_redlock_user;
SET ROLE regress_redlock_user;

-- Execute is revoked from PUBLIC.
\set VERBOSITY terse
SELECT redlock_acquire('regress-priv');
SELECT redlock_release('regress-priv');
SELECT * FROM redlock_locks();

-- Where backends connect, with which credentials and keys: superusers only.
SET redlock.servers = '127.0.0.1:1';
SET redlock.key_prefix = 'stolen:';
SET redlock.username = 'someone';
SET redlock.password = 'secret';
SET redlock.database = 1;
SET redlock.clock_drift_factor = 0;
-- The password is hidden from non-superusers.
SHOW redlock.password;
SELECT count(*) FROM pg_settings WHERE name = 'redlock.password';
SELECT current_setting('redlock.password');
-- Timeouts and retry pacing are the caller's own business.
SET redlock.timeout = 100;
SET redlock.retry_delay = 50;
RESET redlock.timeout;
RESET redlock.retry_delay;
\set VERBOSITY default

RESET ROLE;
GRANT EXECUTE ON FUNCTION redlock_acquire(text, integer, integer), redlock_release(text)
  TO regress_redlock_user;
SET ROLE regress_redlock_user;
SELECT redlock_acquire('regress-priv');
SELECT redlock_release('regress-priv');
RESET ROLE;

DROP OWNED BY regress_redlock_user;
DROP ROLE regress_redlock_user;
