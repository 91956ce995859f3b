-- test/checker/checker.sql: what the mutual-exclusion checker's pgbench clients run.
--
-- Each pgbench transaction is one CALL checker_attempt(resource, ttl_ms, wait_ms, work_ms):
--   1. redlock_acquire(resource, ttl_ms, wait_ms), errors caught and counted by SQLSTATE;
--   2. on success, claim the guard row with
--        UPDATE checker_guard SET holder = pg_backend_pid() ... WHERE holder IS NULL
--      in its own committed transaction (so every other session sees it at once) and
--      check that exactly one row changed: zero means another session is inside its
--      critical section for the same resource right now, i.e. two holders (a violation);
--   3. the "work": pg_sleep(work_ms);
--   4. give the guard back (WHERE holder = pg_backend_pid(), again exactly one row), then
--      redlock_release.
-- Every violation is a row in checker_violations (time, resource, who, what, and the other
-- holder's pid, claim time and validity).  Every attempt is a row in checker_attempts
-- (times, outcome acquired/busy/error, SQLSTATE), from which the figures are computed.
-- A procedure, not a function: a function runs in one transaction, so its claim would
-- only become visible when it returned.

DROP PROCEDURE IF EXISTS checker_attempt(text, integer, integer, integer);
DROP TABLE IF EXISTS checker_guard, checker_attempts, checker_violations;

CREATE UNLOGGED TABLE checker_guard (
	resource text PRIMARY KEY,
	holder integer,				-- backend pid inside the critical section, or NULL
	since timestamptz,			-- when it claimed the guard
	valid_until timestamptz		-- its lock's validity end (redlock_locks().valid_until)
);

CREATE UNLOGGED TABLE checker_attempts (
	pid integer NOT NULL,
	resource text NOT NULL,
	t0 timestamptz NOT NULL,		-- before redlock_acquire
	t1 timestamptz NOT NULL,		-- after it returned (or raised)
	outcome text NOT NULL,			-- acquired | busy | error
	sqlstate text,					-- for errors
	message text,					-- for errors
	nodes integer,					-- masters that accepted, for acquisitions
	validity_ms integer,			-- validity left right after acquiring
	overran boolean,				-- the validity had run out when the work was done
	released boolean				-- redlock_release's result (NULL: it raised)
);

CREATE UNLOGGED TABLE checker_violations (
	at timestamptz NOT NULL,
	resource text NOT NULL,
	pid integer NOT NULL,
	what text NOT NULL,				-- claim | unclaim
	other_pid integer,				-- the holder found in the guard
	other_since timestamptz,
	other_valid_until timestamptz,
	acquired_at timestamptz,		-- when this session's redlock_acquire returned true
	nodes integer,
	validity_ms integer
);

CREATE PROCEDURE checker_attempt(p_resource text, p_ttl_ms integer, p_wait_ms integer,
								 p_work_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	got boolean;
	st text;
	msg text;
	n integer;
	claimed boolean;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	v_overran boolean;
	rel boolean;
	g checker_guard;
BEGIN
	BEGIN
		got := redlock_acquire(p_resource, p_ttl_ms, p_wait_ms);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message)
		VALUES (pg_backend_pid(), p_resource, t_start, clock_timestamp(), 'error', st, msg);
		COMMIT;
		RETURN;
	END;
	t_acq := clock_timestamp();
	IF NOT got THEN
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome)
		VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'busy');
		COMMIT;
		RETURN;
	END IF;
	SELECT l.nodes, l.validity_ms, l.valid_until INTO v_nodes, v_validity, v_until
	FROM redlock_locks() l WHERE l.resource = p_resource;
	-- The session-scoped lock survives this commit.
	COMMIT;

	-- Claim the guard, committed at once.
	UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
		valid_until = v_until
	WHERE resource = p_resource AND holder IS NULL;
	GET DIAGNOSTICS n = ROW_COUNT;
	COMMIT;
	claimed := n = 1;
	IF NOT claimed THEN
		SELECT * INTO g FROM checker_guard WHERE resource = p_resource;
		INSERT INTO checker_violations
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'claim', g.holder, g.since,
				g.valid_until, t_acq, v_nodes, v_validity);
		COMMIT;
	END IF;

	PERFORM pg_sleep(p_work_ms / 1000.0);

	v_overran := clock_timestamp() > v_until;
	IF claimed THEN
		UPDATE checker_guard SET holder = NULL, since = NULL, valid_until = NULL
		WHERE resource = p_resource AND holder = pg_backend_pid();
		GET DIAGNOSTICS n = ROW_COUNT;
		IF n <> 1 THEN
			SELECT * INTO g FROM checker_guard WHERE resource = p_resource;
			INSERT INTO checker_violations
			VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'unclaim', g.holder,
					g.since, g.valid_until, t_acq, v_nodes, v_validity);
		END IF;
		COMMIT;
	END IF;

	BEGIN
		rel := redlock_release(p_resource);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms, overran,
								  released)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'acquired', v_nodes, v_validity,
			v_overran, rel);
	COMMIT;
END
$$;
