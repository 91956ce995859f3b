-- Acquire, stack, extend and release on the five masters of the test harness.
-- A second session, reached through dblink, plays the other client.
-- (Each file creates what it uses, so that the files do not depend on their order.)
\i test/sql/second_session.psql

-- One attempt, default TTL: every master accepted.
SELECT redlock_acquire('regress-a');
SELECT resource, key, scope, session_holds, xact_holds, ttl_ms, nodes >= 3 AS quorum,
       validity_ms BETWEEN 1 AND 30000 AS valid,
       valid_until > acquired_at AS valid_until_after_acquired_at
  FROM redlock_locks();

-- The other client cannot take it, nor release it.
SELECT other($$SELECT redlock_acquire('regress-a')$$);
SELECT other($$SELECT redlock_release('regress-a')$$);

-- Re-acquiring stacks a hold and sets the new TTL (a longer one: a re-acquire that asks
-- for less than the TTL still held may leave the longer one in place).
SELECT redlock_acquire('regress-a', 40000);
SELECT session_holds, ttl_ms, validity_ms > 30000 AS refreshed FROM redlock_locks();

-- Extend with a TTL, then with NULL: the TTL last set on the masters (by the acquire, a
-- re-acquire or an extend), here the extend's 50000.
SELECT redlock_extend('regress-a', 50000);
SELECT ttl_ms, validity_ms > 40000 AS extended FROM redlock_locks();
SELECT redlock_extend('regress-a');
SELECT ttl_ms FROM redlock_locks();

-- The first release drops a hold; the second deletes the keys.
SELECT redlock_release('regress-a');
SELECT session_holds FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-a')$$);
SELECT redlock_release('regress-a');
SELECT count(*) FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-a')$$);
SELECT other($$SELECT redlock_release('regress-a')$$);

-- Not held: false with a warning.
SELECT redlock_release('regress-a');
SELECT redlock_extend('regress-a');

-- A waiting acquire gives up after wait_ms when the holder keeps the lock.
SELECT other($$SELECT redlock_acquire('regress-wait', 30000)$$);
SET redlock.retry_delay = 20;
SET redlock.retry_jitter = 10;
SELECT redlock_acquire('regress-wait', 30000, 100);
SELECT other($$SELECT redlock_release('regress-wait')$$);
SELECT redlock_acquire('regress-wait', 30000, 100);
SELECT redlock_release('regress-wait');
RESET redlock.retry_delay;
RESET redlock.retry_jitter;

-- wait_ms bounds the wait also when redlock.retry_delay is longer: a 200 ms wait with a
-- 20 s retry delay gives up after about 200 ms, not after the delay.
SELECT other($$SELECT redlock_acquire('regress-wait', 30000)$$);
SET redlock.retry_delay = 20000;
SELECT clock_timestamp() AS wait_began \gset
SELECT redlock_acquire('regress-wait', 30000, 200) AS waited;
SELECT clock_timestamp() - :'wait_began'::timestamptz < interval '10 s' AS bounded_by_wait_ms;
SELECT other($$SELECT redlock_release('regress-wait')$$);
RESET redlock.retry_delay;

-- Key prefix: the key changes, so the unprefixed name is a different lock.
SET redlock.key_prefix = 'app:';
SELECT redlock_acquire('regress-p');
SELECT resource, key FROM redlock_locks();
SELECT other($$SELECT redlock_acquire('regress-p')$$);
SELECT other($$SELECT redlock_release('regress-p')$$);
SELECT other($$SET redlock.key_prefix = 'app:'; SELECT redlock_acquire('regress-p')$$);
SELECT other($$RESET redlock.key_prefix; SELECT true$$);
RESET redlock.key_prefix;
-- The lock keeps the key it was acquired under; under another prefix it is lost
-- (other sessions look for it under the new one), so releasing it warns.
SELECT key FROM redlock_locks();
-- Acquiring it again takes it afresh under the prefix in force, with a WARNING, rather
-- than refreshing the key no one looks for: another session then finds it held.
SELECT redlock_acquire('regress-p') AS reacquired;
SELECT key, session_holds FROM redlock_locks() WHERE resource = 'regress-p';
SELECT other($$SELECT redlock_acquire('regress-p', 30000, 0)$$) AS other_gets_it;

-- release_all drops session holds and leaves transaction holds.
SELECT redlock_acquire('regress-q');
SELECT redlock_acquire('regress-q');
BEGIN;
SELECT redlock_xact_acquire('regress-r');
SELECT redlock_release_all();
SELECT resource, scope FROM redlock_locks();
COMMIT;
SELECT count(*) FROM redlock_locks();

-- Names are binary-safe arguments, not command text.
SELECT redlock_acquire(E'quote'' "dq" space\nnewline ünïcødé');
SELECT other(format('SELECT redlock_acquire(%L)', E'quote'' "dq" space\nnewline ünïcødé'));
SELECT redlock_release(E'quote'' "dq" space\nnewline ünïcødé');

-- 1.4: a bigint key, as pg_advisory_lock(bigint) takes one, names the resource of its
-- decimal text: the same lock either way, in this session and for the other one.
SELECT redlock_acquire(42, 30000) AS by_key, redlock_acquire('42', 30000) AS by_name;
SELECT resource, session_holds FROM redlock_locks() WHERE resource = '42';
SELECT other($$SELECT redlock_acquire('42')$$) AS other_by_name,
       other($$SELECT redlock_acquire(42)$$) AS other_by_key;
SELECT redlock_fencing_token(42) = redlock_fencing_token('42') AS same_token;
SELECT redlock_extend(42, 20000) AS extended, redlock_release(42) AS first,
       redlock_release('42') AS second;
SELECT other($$SELECT redlock_xact_acquire(-7)$$) AS other_xact_by_key;
SELECT other($$SELECT redlock_acquire(-7)$$) AS other_by_key,
       redlock_acquire('-7') AS by_name;
SELECT other($$SELECT redlock_release('-7')$$) AS other_released_by_name;
SELECT redlock_claim(43, 1000) AS claimed_by_key, redlock_claim('43', 1000) AS claimed_by_name;
SELECT redlock_acquire(NULL::bigint);

-- The other session's locks go when it disconnects.
SELECT other($$SELECT redlock_acquire('regress-exit')$$);
SELECT dblink_disconnect('other');
-- (The other backend exits asynchronously: wait for it, up to 5 s.)
SELECT redlock_acquire('regress-exit', 30000, 5000);
SELECT redlock_release('regress-exit');

-- A session whose only call was an acquire releases at exit too (its release script
-- was never hashed; exit has no resource owner to hash it with).
SELECT dblink_connect('fresh',
       format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));
SELECT r FROM dblink('fresh', $$SELECT redlock_acquire('regress-exit2')$$) AS t(r boolean);
SELECT dblink_disconnect('fresh');
SELECT redlock_acquire('regress-exit2', 30000, 5000);
SELECT redlock_release('regress-exit2');

-- The clock drift allowance, TTL * redlock.clock_drift_factor + 2 ms, comes off the
-- validity: with a factor of 0.5, a 10 s TTL leaves at most 4998 ms.
SET redlock.clock_drift_factor = 0.5;
SELECT redlock_acquire('regress-drift', 10000);
SELECT validity_ms BETWEEN 1 AND 4998 AS drift_taken_off FROM redlock_locks()
 WHERE resource = 'regress-drift';
-- ... and off an extension's validity too (distlock §6: extend is an acquire).
SELECT redlock_extend('regress-drift', 10000) AS extended;
SELECT validity_ms BETWEEN 1 AND 4998 AS extend_drift_taken_off FROM redlock_locks()
 WHERE resource = 'regress-drift';
SELECT redlock_release('regress-drift');
RESET redlock.clock_drift_factor;

-- Issue 40: "not held" after a rollback says that the rollback undid the acquire (where
-- pg_advisory_lock's session locks survive); after a later release, it no longer does.
BEGIN;
SELECT redlock_acquire('regress-rolled', 30000);
ROLLBACK;
SELECT redlock_release('regress-rolled');
BEGIN;
SELECT redlock_acquire('regress-rolled', 30000);
SAVEPOINT s;
SELECT redlock_acquire('regress-rolled-sp', 30000);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT redlock_release('regress-rolled-sp');
SELECT redlock_release('regress-rolled');
SELECT redlock_release('regress-rolled');

-- Issue 40: fewer than a quorum answering (08006) names each master and hints where to
-- look.
SET redlock.servers = '127.0.0.1:1,127.0.0.1:2,127.0.0.1:3';
SELECT redlock_acquire('regress-nomasters', 1000);
SELECT redlock_claim('regress-nomasters', 1000);
RESET redlock.servers;
