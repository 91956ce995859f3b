-- Semaphores (redlock_acquire_permit): at most "permits" holders at once, each on one of
-- the slots resource#1..resource#permits, an ordinary lock each.  A second and a third
-- session, reached through dblink, play the other holders.
SET client_min_messages = warning;
ALTER EXTENSION redlock UPDATE;
RESET client_min_messages;
\i test/sql/second_session.psql
SELECT dblink_connect('third',
       format('dbname=%s port=%s host=%s', current_database(), current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1)));
CREATE OR REPLACE FUNCTION third(sql text) RETURNS boolean LANGUAGE sql
AS $$ SELECT r FROM dblink('third', sql) AS t(r boolean) $$;
SET redlock.key_prefix = 'regress-pm:';
SELECT dblink_exec('other', 'SET redlock.key_prefix = ''regress-pm:''') AS other_prefix;
SELECT dblink_exec('third', 'SET redlock.key_prefix = ''regress-pm:''') AS third_prefix;

-- Two permits: this session and the other one get one each, on different slots; the
-- third is refused while both are held, and gets the slot the other gives back.
SELECT redlock_acquire_permit('regress-pm-a', 2, 30000) AS mine;
SELECT resource, key, session_holds, xact_holds, nodes >= 3 AS quorum, permits, set_id FROM redlock_locks();
SELECT other($$SELECT redlock_acquire_permit('regress-pm-a', 2, 30000)$$) AS others;
SELECT other($$SELECT key = 'regress-pm:regress-pm-a#2' FROM redlock_locks()$$) AS others_slot_2;
SELECT third($$SELECT redlock_acquire_permit('regress-pm-a', 2, 30000)$$) AS third_refused;
SELECT held, masters FROM redlock_lock_info('regress-pm-a#1');
SELECT held, masters FROM redlock_lock_info('regress-pm-a#2');
SELECT other($$SELECT redlock_release('regress-pm-a')$$) AS other_released;
SELECT third($$SELECT redlock_acquire_permit('regress-pm-a', 2, 30000, 5000)$$) AS third_gets_it;
SELECT third($$SELECT key = 'regress-pm:regress-pm-a#2' FROM redlock_locks()$$) AS third_slot_2;

-- Again in this session: another hold on the same slot, the TTL raised to the larger.
SELECT redlock_acquire_permit('regress-pm-a', 2, 40000) AS again;
SELECT key, session_holds, ttl_ms FROM redlock_locks();
-- Extend and fencing tokens work on the slot held; the token is the same for the hold.
SELECT redlock_extend('regress-pm-a', 50000) AS extended, (SELECT ttl_ms FROM redlock_locks());
SELECT redlock_fencing_token('regress-pm-a') = redlock_fencing_token('regress-pm-a') AS same_token;
SELECT redlock_release('regress-pm-a') AS first_hold, redlock_release('regress-pm-a') AS last_hold;
SELECT count(*) AS held_now FROM redlock_locks();
SELECT held FROM redlock_lock_info('regress-pm-a#1');
SELECT third($$SELECT redlock_release('regress-pm-a')$$) AS third_released;

-- A slot is a lock of its own: an exclusive lock on 'regress-pm-b#1' takes the one
-- permit of 'regress-pm-b'.
SELECT other($$SELECT redlock_acquire('regress-pm-b#1', 30000)$$) AS slot_taken_as_lock;
SELECT redlock_acquire_permit('regress-pm-b', 1, 30000) AS one_permit_refused;
SELECT redlock_acquire_permit('regress-pm-b', 2, 30000) AS second_slot_free;
SELECT key FROM redlock_locks();
SELECT redlock_release('regress-pm-b');
SELECT other($$SELECT redlock_release('regress-pm-b#1')$$) AS other_released;

-- A slot past the permits held on a quorum breaks the bound of those who give fewer
-- (another caller gives more, or holds a lock of that name): refused with 55000,
-- nothing taken; with enough permits it is one of them.
SELECT other($$SELECT redlock_acquire('regress-pm-f#3', 30000)$$) AS slot_3_taken;
SELECT redlock_acquire_permit('regress-pm-f', 2, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS nothing_taken FROM redlock_locks();
SELECT held FROM redlock_lock_info('regress-pm-f#1');
SELECT redlock_acquire_permit('regress-pm-f', 3, 30000) AS three_permits;
SELECT key FROM redlock_locks();
SELECT redlock_release('regress-pm-f');
SELECT other($$SELECT redlock_release('regress-pm-f#3')$$) AS other_released;

-- ... but a slot past the permits held on a minority (one master) is a stray, not a
-- holder: the permits are given.
SELECT current_setting('redlock.servers') AS all_servers \gset
SELECT dblink_exec('other', format('SET redlock.servers = %L', split_part(:'all_servers', ',', 1))) AS other_on_one_master;
SELECT other($$SELECT redlock_acquire('regress-pm-g#3', 30000)$$) AS slot_3_on_one_master;
SELECT redlock_acquire_permit('regress-pm-g', 2, 30000) AS given;
SELECT redlock_release('regress-pm-g');
SELECT other($$SELECT redlock_release('regress-pm-g#3')$$) AS other_released;
SELECT dblink_exec('other', 'RESET redlock.servers') AS other_on_every_master;

-- Transaction scope: released at commit, and by a rollback.
BEGIN;
SELECT redlock_xact_acquire_permit('regress-pm-c', 3, 30000) AS in_xact;
SELECT key, session_holds, xact_holds FROM redlock_locks();
COMMIT;
SELECT count(*) AS after_commit FROM redlock_locks();
SELECT held FROM redlock_lock_info('regress-pm-c#1');
BEGIN;
SELECT redlock_acquire_permit('regress-pm-c', 3, 30000) AS session_in_aborted_xact;
ROLLBACK;
SELECT count(*) AS after_rollback FROM redlock_locks();
SELECT held FROM redlock_lock_info('regress-pm-c#1');

-- One name, one kind: a resource held as a permit is not also a lock, nor a permit of
-- another semaphore size (55000); bad permits (22023, 22004).
SELECT redlock_acquire_permit('regress-pm-d', 3, 30000);
SELECT redlock_acquire('regress-pm-d', 30000);
SELECT redlock_xact_acquire_permit('regress-pm-d', 4, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_release('regress-pm-d');
SELECT redlock_acquire('regress-pm-d', 30000);
SELECT redlock_acquire_permit('regress-pm-d', 3, 30000);
SELECT redlock_release('regress-pm-d');
SELECT redlock_acquire_permit('regress-pm-e', 0, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit('regress-pm-e', 65, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit('regress-pm-e', -1, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit('regress-pm-e', NULL, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit('regress-pm-e', 3, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit(NULL, 3, 30000);
\echo :LAST_ERROR_SQLSTATE
SELECT redlock_acquire_permit('regress-pm-e', 64, 30000, 0) AS sixty_four_slots;
SELECT key FROM redlock_locks();
SELECT redlock_release('regress-pm-e');

SELECT dblink_disconnect('third');
SELECT dblink_disconnect('other');
