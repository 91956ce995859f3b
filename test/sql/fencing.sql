-- Fencing tokens (redlock_fencing_token) and a quorum larger than a majority
-- (redlock.quorum), on the five masters of the test harness.  A second session,
-- reached through dblink, plays the other client.
\i test/sql/second_session.psql
CREATE FUNCTION fence_try(command text) RETURNS text LANGUAGE plpgsql AS $$
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
CREATE TEMP TABLE tokens (n serial, token bigint);

-- Not held: 55000; NULL: 22004; empty: 22023.
SELECT fence_try($$SELECT redlock_fencing_token('regress-fence')$$) AS not_held;
SELECT fence_try($$SELECT redlock_fencing_token(NULL)$$) AS null_resource;
SELECT fence_try($$SELECT redlock_fencing_token('')$$) AS empty_resource;

-- One token per hold: stacking and extending keep it.  It is at least the masters'
-- wall clock (here the same host's) in whole seconds times 10^6 (the floor for a
-- counter that expired).
SELECT redlock_acquire('regress-fence', 5000);
INSERT INTO tokens (token) SELECT redlock_fencing_token('regress-fence');
SELECT token >= floor(extract(epoch FROM clock_timestamp()) - 60)::bigint * 1000000 AS above_floor
  FROM tokens;
SELECT redlock_acquire('regress-fence', 5000) AS stacked,
       redlock_extend('regress-fence', 8000) AS extended;
SELECT redlock_fencing_token('regress-fence') = (SELECT token FROM tokens WHERE n = 1) AS same_token;
SELECT redlock_release('regress-fence'), redlock_release('regress-fence');

-- The next holder, another session, gets a larger token; then this one again.
SELECT other_bigint($$SELECT redlock_acquire('regress-fence', 5000)::int::bigint$$) AS other_acquired;
INSERT INTO tokens (token) SELECT other_bigint($$SELECT redlock_fencing_token('regress-fence')$$);
SELECT other_bigint($$SELECT redlock_release('regress-fence')::int::bigint$$) AS other_released;
BEGIN;
SELECT redlock_xact_acquire('regress-fence', 5000);
INSERT INTO tokens (token) SELECT redlock_fencing_token('regress-fence');
SELECT bool_and(token > prev) AS increasing, count(*) AS tokens
  FROM (SELECT token, lag(token) OVER (ORDER BY n) AS prev FROM tokens) t
 WHERE prev IS NOT NULL;

-- A guarded write: the fence column takes the token; a write with a smaller one is
-- refused (0 rows), one with the same or a larger one goes through.
CREATE TEMP TABLE guarded (id int PRIMARY KEY, fence bigint NOT NULL, note text);
INSERT INTO guarded VALUES (1, 0, 'initial');
UPDATE guarded SET fence = redlock_fencing_token('regress-fence'), note = 'newest holder'
 WHERE id = 1 AND fence <= redlock_fencing_token('regress-fence');
UPDATE guarded SET fence = (SELECT token FROM tokens WHERE n = 1), note = 'stale holder'
 WHERE id = 1 AND fence <= (SELECT token FROM tokens WHERE n = 1);
SELECT note, fence = (SELECT max(token) FROM tokens) AS newest_fence FROM guarded;
COMMIT;

-- The floor rises with the masters' clock even where a counter exists below it: a
-- second later, the next token is about a million above the last, not one.
SELECT redlock_acquire('regress-fence-floor', 5000) AS floor_held;
SELECT redlock_fencing_token('regress-fence-floor') AS f1 \gset
SELECT redlock_release('regress-fence-floor');
SELECT pg_sleep(1.1);
SELECT redlock_acquire('regress-fence-floor', 5000) AS floor_held_again;
SELECT redlock_fencing_token('regress-fence-floor') - :f1 > 100000 AS floor_rises;
SELECT redlock_release('regress-fence-floor');

-- A lock whose validity ran out: 55P03.
SELECT redlock_acquire('regress-fence-short', 100);
SELECT pg_sleep(0.2);
SELECT fence_try($$SELECT redlock_fencing_token('regress-fence-short')$$) AS expired;
SET client_min_messages = error;
SELECT redlock_release('regress-fence-short');
RESET client_min_messages;

-- A lock found lost and acquired again takes a new token, larger than the one of the
-- holder that came in between (the lost hold's token is not kept).
SELECT redlock_acquire('regress-fence-again', 500) AS short_hold;
SELECT redlock_fencing_token('regress-fence-again') AS t1 \gset
SELECT pg_sleep(0.7);
SELECT other_bigint($$SELECT redlock_acquire('regress-fence-again', 5000)::int::bigint$$) AS other_acquired;
SELECT other_bigint($$SELECT redlock_fencing_token('regress-fence-again')$$) AS t2 \gset
SELECT other_bigint($$SELECT redlock_release('regress-fence-again')::int::bigint$$) AS other_released;
SELECT redlock_acquire('regress-fence-again', 5000) AS again;
SELECT :t2 > :t1 AS between_above_first,
       redlock_fencing_token('regress-fence-again') > :t2 AS again_above_between;
SELECT redlock_release('regress-fence-again');

-- A lock taken under a configuration no longer in force: 55P03, and forgotten.
SELECT redlock_acquire('regress-fence-moved', 30000);
SET redlock.database = 1;
SELECT fence_try($$SELECT redlock_fencing_token('regress-fence-moved')$$) AS reconfigured;
SELECT count(*) AS held FROM redlock_locks() WHERE resource = 'regress-fence-moved';
RESET redlock.database;

-- redlock.quorum: 0 (a majority) or more than half of the masters, at most all.
SELECT current_setting('redlock.quorum') AS default_quorum;
SELECT fence_try($$SET redlock.quorum = 2$$) AS minority;
SELECT fence_try($$SET redlock.quorum = 6$$) AS more_than_servers;
SET redlock.quorum = 5;
SELECT redlock_acquire('regress-quorum', 5000) AS all_five;
SELECT nodes FROM redlock_locks() WHERE resource = 'regress-quorum';
SELECT redlock_fencing_token('regress-quorum') > 0 AS token_with_five;
SELECT redlock_release('regress-quorum');
-- A later change of redlock.servers that the quorum no longer fits is refused where
-- locks are taken.
SELECT current_setting('redlock.servers') AS all_servers \gset
SELECT set_config('redlock.servers', split_part(:'all_servers', ',', 1) || ',' ||
                  split_part(:'all_servers', ',', 2) || ',' ||
                  split_part(:'all_servers', ',', 3), false) IS NOT NULL AS three_servers;
SELECT fence_try($$SELECT redlock_acquire('regress-quorum', 5000)$$) AS quorum_too_large;
SELECT set_config('redlock.servers', :'all_servers', false) IS NOT NULL AS five_servers;
RESET redlock.quorum;

-- Only superusers set it.
CREATE ROLE regress_fence_user;
SET ROLE regress_fence_user;
SELECT fence_try($$SET redlock.quorum = 4$$) AS plain_user;
RESET ROLE;
DROP ROLE regress_fence_user;

SELECT redlock_release_all() >= 0 AS done;
SELECT dblink_disconnect('other');
