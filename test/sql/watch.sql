-- Watches (redlock_watch, 1.8): the arguments, the session's list, and a watch made in a
-- transaction or savepoint that rolls back dropped with it, as LISTEN is.  The events
-- themselves come from the database's notifier, timed: TAP 080.  Without the library
-- in shared_preload_libraries every watch is refused with 55000 (watch_1.out).
\set VERBOSITY terse
SELECT redlock_watch(NULL::text);
SELECT redlock_watch('');
SELECT redlock_unwatch(NULL::text);
SELECT redlock_unwatch('regress-watch-never') AS unwatched_never_watched;
SELECT redlock_unwatch_all() AS none_to_unwatch;
SET redlock.servers = '';
SELECT redlock_watch('regress-watch');
RESET redlock.servers;

SELECT redlock_watch('regress-watch');
SELECT redlock_watch('regress-watch') AS watched_twice;
SELECT redlock_unwatch('regress-watch') AS unwatched;
SELECT redlock_unwatch('regress-watch') AS unwatched_again;
SELECT redlock_watch(42::bigint);

-- A rolled-back transaction drops its watch; a rolled-back savepoint drops its own.
BEGIN;
SELECT redlock_watch('regress-watch-rolled-back');
ROLLBACK;
SELECT redlock_unwatch('regress-watch-rolled-back') AS unwatched_rolled_back;
BEGIN;
SAVEPOINT s;
SELECT redlock_watch('regress-watch-savepoint');
ROLLBACK TO SAVEPOINT s;
SELECT redlock_watch('regress-watch-kept');
SAVEPOINT t;
SELECT redlock_watch('regress-watch-released-savepoint');
RELEASE SAVEPOINT t;
COMMIT;
SELECT redlock_unwatch('regress-watch-savepoint') AS unwatched_savepoint;
-- 42, regress-watch-kept and regress-watch-released-savepoint.
SELECT redlock_unwatch_all() AS unwatched_all;
SELECT redlock_unwatch_all() AS unwatched_all_again;
-- DISCARD ALL (a pooler's reset) drops the watches, as its UNLISTEN * their notifications.
SELECT redlock_watch('regress-watch-discarded');
DISCARD ALL;
SELECT redlock_unwatch('regress-watch-discarded') AS unwatched_after_discard;
\set VERBOSITY default
