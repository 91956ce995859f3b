-- Who holds a lock, whoever took it (redlock_lock_info, redlock_cluster_locks), the
-- holder record behind it (redlock.record_holder) and the operator's
-- redlock_force_release.  A second session, reached through dblink, plays the other
-- holder; its pid is the pid the record must name.
\i test/sql/second_session.psql
SET redlock.key_prefix = 'regress-li:';
SELECT dblink_exec('other', 'SET redlock.key_prefix = ''regress-li:''') AS other_prefix;
CREATE TEMP TABLE other_pid AS SELECT other_bigint('SELECT pg_backend_pid()::bigint') AS pid;

-- Nobody holds it: not held, no masters, no TTL, no holder, no scope.
SELECT held, masters, ttl_ms, cluster, pid, application_name, database, role, acquired_at,
       scope, coalesce(waiters, 0) AS waiters
  FROM redlock_lock_info('regress-li-a');

-- This session's lock: held by all five masters, the TTL counting down from 30 s, and
-- the holder as this backend would describe itself.
SET application_name = 'regress-li';
SELECT redlock_acquire('regress-li-a', 30000);
SELECT held, masters, ttl_ms BETWEEN 25000 AND 30000 AS ttl_counting,
       cluster = coalesce(nullif(current_setting('cluster_name'), ''),
                          (SELECT system_identifier::text FROM pg_control_system())) AS cluster_is_ours,
       pid = pg_backend_pid() AS pid_is_ours, application_name, database = current_database() AS db,
       role = session_user AS role_is_ours,
       acquired_at BETWEEN now() - interval '1 minute' AND clock_timestamp() AS acquired_recently,
       scope, coalesce(waiters, 0) AS waiters
  FROM redlock_lock_info('regress-li-a');

-- The record keeps the application_name in force at the acquire: a change later in the
-- session shows in the next lock's record only.
SET application_name = 'regress-li-later';
SELECT redlock_acquire('regress-li-a2', 30000);
SELECT (SELECT application_name FROM redlock_lock_info('regress-li-a')) AS first_lock,
       (SELECT application_name FROM redlock_lock_info('regress-li-a2')) AS second_lock;
SELECT redlock_release('regress-li-a2');
SET application_name = 'regress-li';

-- The other session's locks: its pid, its scope; a claim is 'claim'.
SELECT other($$SELECT redlock_acquire('regress-li-b', 30000)$$) AS other_acquired;
SELECT held, masters, pid = (SELECT pid FROM other_pid) AS pid_is_others, scope
  FROM redlock_lock_info('regress-li-b');
SELECT other($$SELECT redlock_claim('regress-li-c', 20000)$$) AS other_claimed;
SELECT held, pid = (SELECT pid FROM other_pid) AS pid_is_others, scope
  FROM redlock_lock_info('regress-li-c');

-- A bigint key names the resource of its decimal text: the same lock either way.
SELECT redlock_acquire(4242::bigint, 30000);
SELECT (SELECT held FROM redlock_lock_info('4242')) AS text_form,
       (SELECT held FROM redlock_lock_info(4242::bigint)) AS bigint_form;

-- Without the holder record the lock is still held and seen; the holder is unknown.
SET redlock.record_holder = off;
SELECT redlock_acquire('regress-li-anon', 30000);
SELECT held, masters, cluster, pid, application_name, scope
  FROM redlock_lock_info('regress-li-anon');
RESET redlock.record_holder;

-- Every lock under the prefix, from both sessions, ordered by resource.
SELECT resource, held, masters, scope,
       pid = (SELECT pid FROM other_pid) AS others, pid = pg_backend_pid() AS ours
  FROM redlock_cluster_locks();
-- A limit: the first locks only, and a NOTICE that more may exist.
SELECT resource FROM redlock_cluster_locks(2);
SELECT redlock_cluster_locks(0);
SELECT redlock_cluster_locks(NULL);

-- A prefix with glob characters (*, ?, [ ]) is matched as it is written: only its own
-- locks are listed, whole.
SET redlock.key_prefix = 'regress-li[*?]:';
SELECT redlock_acquire('g', 30000) AS globbed;
SELECT resource FROM redlock_cluster_locks();
SELECT redlock_release('g');
SET redlock.key_prefix = 'regress-li:';

-- Force release: the other session's lock goes whatever its token; the counter rises,
-- so the next holder's fencing token is above the one the evicted holder had.
SELECT other_bigint($$SELECT redlock_fencing_token('regress-li-b')$$) AS evicted_token \gset
SELECT redlock_force_release('regress-li-b') AS masters_deleted;
SELECT held, masters FROM redlock_lock_info('regress-li-b');
SELECT redlock_acquire('regress-li-b', 30000) AS taken_after_force;
SELECT redlock_fencing_token('regress-li-b') > :evicted_token AS token_above_evicted;
SELECT redlock_force_release('regress-li-nobody') AS nothing_to_delete;
SELECT redlock_force_release(4242::bigint) AS bigint_form;

-- Names in the database's encoding: a LATIN1 database, reached through dblink (which
-- hands its text back in this database's encoding), shows the key of café, the UTF-8
-- name, as café, and NULL for a name that LATIN1 cannot show.
CREATE DATABASE regress_li_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'
  TEMPLATE template0;
SELECT dblink_connect('latin1',
       format('dbname=regress_li_latin1 port=%s host=%s', current_setting('port'),
              split_part(current_setting('unix_socket_directories'), ',', 1))) AS latin1;
SELECT dblink_exec('latin1', 'CREATE EXTENSION redlock') AS created;
SELECT dblink_exec('latin1', 'SET redlock.key_prefix = ''regress-li:''') AS latin1_prefix;
SELECT redlock_acquire('regress-li-café', 30000) AS cafe,
       redlock_acquire('regress-li-語', 30000) AS not_latin1;
SELECT resource, resource IS NULL AS not_shown FROM dblink('latin1',
       $$SELECT resource FROM redlock_cluster_locks() WHERE resource IS NULL OR resource LIKE 'regress-li-caf%' ORDER BY 1$$)
       AS t(resource text);
SELECT redlock_release('regress-li-café') AS cafe, redlock_release('regress-li-語') AS not_latin1;
SELECT dblink_disconnect('latin1');
DROP DATABASE regress_li_latin1 WITH (FORCE);

-- Bad input.
SELECT redlock_lock_info(NULL::text);
SELECT redlock_lock_info('');
SELECT redlock_force_release(NULL::text);

-- A claim is released by nothing but its TTL, or by force.
SELECT redlock_force_release('regress-li-c') AS claim_deleted;
SELECT redlock_release_all() >= 0 AS released;
SELECT count(*) AS left_held FROM redlock_cluster_locks();
SELECT dblink_disconnect('other');
