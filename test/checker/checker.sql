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
DROP PROCEDURE IF EXISTS checker_take(text, integer, integer);
DROP PROCEDURE IF EXISTS checker_step(text, integer, integer, boolean, integer);
DROP PROCEDURE IF EXISTS checker_done(text);
DROP PROCEDURE IF EXISTS checker_unclaim(text, checker_holds);
DROP TABLE IF EXISTS checker_guard, checker_attempts, checker_violations, checker_holds;

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
	released boolean,				-- redlock_release's result (NULL: it raised)
	-- held across commands (checker_take / checker_step / checker_done) only:
	steps integer,					-- work steps done
	extends integer,				-- redlock_extend calls
	extend_false integer,			-- ... that returned false
	extend_errors integer,			-- ... that raised 08006
	extend_other_errors integer,	-- ... that raised anything else
	gave_up boolean,				-- stopped working early: validity too short or lost
	gave_up_at timestamptz,
	gave_up_why text				-- 'extend false', or 'validity N ms' [' after extend SQLSTATE']
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
	det text;
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
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message)
		VALUES (pg_backend_pid(), p_resource, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''));
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

-- ---- a lock held across several commands ----
--
-- For the scenarios where a holder must live through a configuration change or extend its
-- lock while it works, one pgbench transaction is a script of several commands:
--   CALL checker_take(resource, ttl_ms, wait_ms);        acquire and claim the guard
--   CALL checker_step(resource, step_ms, ext_ttl_ms, honest, margin_ms);   N times
--   CALL checker_done(resource);                         give the guard back, release
-- Between two commands the backend is idle and takes in a pg_reload_conf() (a backend
-- reloads its configuration only between commands, never inside a CALL), so a lock spans
-- reloads.  checker_step first extends the lock to ext_ttl_ms (unless NULL), then, for an
-- honest holder, works (pg_sleep(step_ms)) only if redlock_extend did not return false and
-- redlock_locks() reports at least step_ms + margin_ms of validity; otherwise it gives the
-- guard back at once and does nothing more until checker_done (gave_up).  A dishonest
-- holder (honest = false, the negative controls) ignores both and works on.
-- The state between commands is this backend's row of checker_holds.

CREATE UNLOGGED TABLE checker_holds (
	pid integer PRIMARY KEY,
	resource text NOT NULL,
	t0 timestamptz NOT NULL,
	t1 timestamptz NOT NULL,
	nodes integer,
	validity_ms integer,
	valid_until timestamptz,		-- the last validity end redlock_locks() reported
	in_guard boolean NOT NULL,		-- we claimed the guard and have not given it back yet
	steps integer NOT NULL DEFAULT 0,
	extends integer NOT NULL DEFAULT 0,
	extend_false integer NOT NULL DEFAULT 0,
	extend_errors integer NOT NULL DEFAULT 0,
	extend_other_errors integer NOT NULL DEFAULT 0,
	gave_up boolean NOT NULL DEFAULT false,
	gave_up_at timestamptz,
	gave_up_why text
);

-- Gives the guard of P_RESOURCE back (exactly one row, else an 'unclaim' violation).
CREATE PROCEDURE checker_unclaim(p_resource text, h checker_holds)
LANGUAGE plpgsql
AS $$
DECLARE
	n integer;
	g checker_guard;
BEGIN
	UPDATE checker_guard SET holder = NULL, since = NULL, valid_until = NULL
	WHERE resource = p_resource AND holder = pg_backend_pid();
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n <> 1 THEN
		SELECT * INTO g FROM checker_guard WHERE resource = p_resource;
		INSERT INTO checker_violations
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'unclaim', g.holder,
				g.since, g.valid_until, h.t1, h.nodes, h.validity_ms);
	END IF;
	UPDATE checker_holds SET in_guard = false WHERE pid = pg_backend_pid();
	COMMIT;
END
$$;

CREATE PROCEDURE checker_take(p_resource text, p_ttl_ms integer, p_wait_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	got boolean;
	st text;
	msg text;
	det text;
	n integer;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	g checker_guard;
BEGIN
	DELETE FROM checker_holds WHERE pid = pg_backend_pid();
	COMMIT;
	BEGIN
		got := redlock_acquire(p_resource, p_ttl_ms, p_wait_ms);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message)
		VALUES (pg_backend_pid(), p_resource, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''));
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
	COMMIT;

	UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
		valid_until = v_until
	WHERE resource = p_resource AND holder IS NULL;
	GET DIAGNOSTICS n = ROW_COUNT;
	COMMIT;
	IF n <> 1 THEN
		SELECT * INTO g FROM checker_guard WHERE resource = p_resource;
		INSERT INTO checker_violations
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'claim', g.holder, g.since,
				g.valid_until, t_acq, v_nodes, v_validity);
	END IF;
	INSERT INTO checker_holds (pid, resource, t0, t1, nodes, validity_ms, valid_until, in_guard)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, v_nodes, v_validity, v_until, n = 1);
	COMMIT;
END
$$;

CREATE PROCEDURE checker_step(p_resource text, p_step_ms integer, p_ext_ttl_ms integer,
							  p_honest boolean, p_margin_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	h checker_holds;
	ext boolean;
	st text;
	v_validity integer;
	v_until timestamptz;
BEGIN
	SELECT * INTO h FROM checker_holds WHERE pid = pg_backend_pid() AND resource = p_resource;
	IF NOT FOUND OR h.gave_up THEN
		RETURN;
	END IF;
	IF p_ext_ttl_ms IS NOT NULL THEN
		BEGIN
			ext := redlock_extend(p_resource, p_ext_ttl_ms);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
			ext := NULL;
		END;
		h.extends := h.extends + 1;
		IF ext IS NULL AND st = '08006' THEN
			h.extend_errors := h.extend_errors + 1;
		ELSIF ext IS NULL THEN
			h.extend_other_errors := h.extend_other_errors + 1;
		ELSIF NOT ext THEN
			h.extend_false := h.extend_false + 1;
		END IF;
	END IF;
	SELECT l.validity_ms, l.valid_until INTO v_validity, v_until
	FROM redlock_locks() l WHERE l.resource = p_resource;
	IF FOUND THEN
		h.valid_until := v_until;
	END IF;
	UPDATE checker_holds SET extends = h.extends, extend_false = h.extend_false,
		extend_errors = h.extend_errors, extend_other_errors = h.extend_other_errors,
		valid_until = h.valid_until
	WHERE pid = pg_backend_pid();
	IF p_honest AND (ext IS NOT DISTINCT FROM false
					 OR coalesce(v_validity, 0) < p_step_ms + p_margin_ms) THEN
		UPDATE checker_holds SET gave_up = true, gave_up_at = clock_timestamp(),
			gave_up_why = CASE WHEN ext IS NOT DISTINCT FROM false THEN 'extend false'
							   ELSE 'validity ' || coalesce(v_validity::text, 'none') || ' ms'
								   || coalesce(' after extend ' || st, '') END
		WHERE pid = pg_backend_pid();
		COMMIT;
		IF h.in_guard THEN
			CALL checker_unclaim(p_resource, h);
		END IF;
		RETURN;
	END IF;
	IF h.in_guard THEN
		UPDATE checker_guard SET valid_until = h.valid_until
		WHERE resource = p_resource AND holder = pg_backend_pid();
	END IF;
	COMMIT;
	PERFORM pg_sleep(p_step_ms / 1000.0);
	UPDATE checker_holds SET steps = steps + 1 WHERE pid = pg_backend_pid();
	COMMIT;
END
$$;

CREATE PROCEDURE checker_done(p_resource text)
LANGUAGE plpgsql
AS $$
DECLARE
	h checker_holds;
	rel boolean;
	v_overran boolean;
BEGIN
	SELECT * INTO h FROM checker_holds WHERE pid = pg_backend_pid() AND resource = p_resource;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	-- Overran: worked on (still inside the guard) after the validity last reported.
	v_overran := h.in_guard AND clock_timestamp() > h.valid_until;
	IF h.in_guard THEN
		CALL checker_unclaim(p_resource, h);
	END IF;
	BEGIN
		rel := redlock_release(p_resource);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms, overran,
								  released, steps, extends, extend_false, extend_errors,
								  extend_other_errors, gave_up, gave_up_at, gave_up_why)
	VALUES (pg_backend_pid(), p_resource, h.t0, h.t1, 'acquired', h.nodes, h.validity_ms,
			v_overran, rel, h.steps, h.extends, h.extend_false, h.extend_errors,
			h.extend_other_errors, h.gave_up, h.gave_up_at, h.gave_up_why);
	DELETE FROM checker_holds WHERE pid = pg_backend_pid();
	COMMIT;
END
$$;
