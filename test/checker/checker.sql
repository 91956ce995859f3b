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
-- A semaphore's permits (redlock_acquire_permit) are proved by counting instead: see
-- checker_permit_attempt.  A set of two resources (redlock_acquire(text[])) claims the
-- guard of each: see checker_set_attempt.  A shared lock (redlock_acquire_shared) counts
-- itself in the guard's readers, and an exclusive holder of the same resources finds none
-- there: see checker_shared_attempt at the end.
-- Every violation is a row in checker_violations (time, resource, who, what, and the other
-- holder's pid, claim time and validity).  Every attempt is a row in checker_attempts
-- (times, outcome acquired/busy/error, SQLSTATE), from which the figures are computed.
-- With p_fence ('fenced' or 'unfenced'), a holder also takes its fencing token right after
-- acquiring and, at the end of its work, writes it to checker_fence: 'fenced' with the
-- guarded write of README's "Fencing tokens" (UPDATE ... WHERE token <= ours), 'unfenced'
-- without the condition (a negative control).  The token, when it was taken, the value the
-- write found and whether it landed go into the attempt's row.
-- A procedure, not a function: a function runs in one transaction, so its claim would
-- only become visible when it returned.

DROP PROCEDURE IF EXISTS checker_attempt(text, integer, integer, integer);
DROP PROCEDURE IF EXISTS checker_attempt(text, integer, integer, integer, text);
DROP PROCEDURE IF EXISTS checker_take(text, integer, integer);
DROP PROCEDURE IF EXISTS checker_step(text, integer, integer, boolean, integer);
DROP PROCEDURE IF EXISTS checker_done(text);
DROP PROCEDURE IF EXISTS checker_done(text, boolean);
DROP PROCEDURE IF EXISTS checker_unclaim(text, checker_holds);
DROP PROCEDURE IF EXISTS checker_job(text, integer, integer, integer, integer, integer, boolean);
DROP PROCEDURE IF EXISTS checker_job_end(text, text);
DROP PROCEDURE IF EXISTS checker_permit_attempt(text, integer, integer, integer, integer);
DROP PROCEDURE IF EXISTS checker_permit_claim(text, integer, integer, timestamptz, integer,
	integer, timestamptz);
DROP PROCEDURE IF EXISTS checker_permit_unclaim(text, timestamptz, integer, integer);
DROP PROCEDURE IF EXISTS checker_permit_job(text, integer, integer, integer, integer, integer,
	integer);
DROP PROCEDURE IF EXISTS checker_permit_job_end(text, text);
DROP PROCEDURE IF EXISTS checker_shared_attempt(text, boolean, integer, integer, integer,
	integer);
DROP PROCEDURE IF EXISTS checker_work(text[], integer, integer, boolean, text);
DROP PROCEDURE IF EXISTS checker_set_attempt(text, integer, integer, integer, integer, integer);
DROP PROCEDURE IF EXISTS checker_set_attempt(text, integer, integer, integer, integer, integer,
	integer);
DROP PROCEDURE IF EXISTS checker_pair_attempt(text, integer, integer, integer, integer, integer,
	boolean);
DROP PROCEDURE IF EXISTS checker_pair_claim(text, timestamptz, integer, integer, timestamptz);
DROP TABLE IF EXISTS checker_guard, checker_attempts, checker_violations, checker_holds,
	checker_jobs, checker_writes, checker_losses, checker_fence, checker_permit_claims,
	checker_watch_events;

CREATE UNLOGGED TABLE checker_guard (
	resource text PRIMARY KEY,
	holder integer,				-- backend pid inside the critical section, or NULL
	since timestamptz,			-- when it claimed the guard
	valid_until timestamptz,	-- its lock's validity end (redlock_locks().valid_until)
	acquired_at timestamptz,	-- long jobs: when its redlock_acquire returned (names its hold)
	readers integer NOT NULL DEFAULT 0	-- shared holders inside (checker_shared_attempt)
);

CREATE UNLOGGED TABLE checker_attempts (
	pid integer NOT NULL,
	resource text NOT NULL,
	t0 timestamptz NOT NULL,		-- before redlock_acquire
	t1 timestamptz NOT NULL,		-- after it returned (or raised)
	outcome text NOT NULL,			-- acquired | busy | error (pairs: also deadlock)
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
	gave_up_why text,				-- 'extend false', or 'validity N ms' [' after extend SQLSTATE']
	-- long jobs (checker_job / checker_job_end) only:
	lost boolean,					-- redlock_locks().lost when the job ended
	renewals bigint,				-- redlock_locks().renewals when the job ended
	last_renewal timestamptz,		-- redlock_locks().last_renewal when the job ended
	end_sqlstate text,				-- how the job's CALL ended: 00000, 57014, 55P03, ...
	end_message text,
	taken_over boolean,				-- its guard had been taken over when it gave it back
	-- fenced attempts (checker_attempt with p_fence) only:
	valid_until timestamptz,		-- its validity end right after acquiring
	token bigint,					-- redlock_fencing_token's result (NULL: it raised)
	token_t0 timestamptz,			-- before redlock_fencing_token
	token_t1 timestamptz,			-- after it returned (or raised)
	token_sqlstate text,			-- what it raised
	write_at timestamptz,			-- when the write to checker_fence committed
	write_prev bigint,				-- the token checker_fence held when we wrote
	write_applied boolean,			-- the write changed the row
	-- permits of a semaphore (checker_permit_attempt, checker_permit_job) only:
	permits integer,				-- the semaphore's permits (k)
	slot integer,					-- the slot held: redlock_locks().key ends in '#<slot>'
	inside integer,					-- holders inside at our claim, ourselves included
	-- shared locks (checker_shared_attempt) only:
	mode text						-- shared | exclusive
);

-- The guarded resource of the fenced attempts: the token of the last write that landed.
CREATE UNLOGGED TABLE checker_fence (
	resource text PRIMARY KEY,
	token bigint NOT NULL DEFAULT 0
);

CREATE UNLOGGED TABLE checker_violations (
	at timestamptz NOT NULL,
	resource text NOT NULL,
	pid integer NOT NULL,
	what text NOT NULL,				-- claim | unclaim (permits: also slot)
	other_pid integer,				-- the holder found in the guard
	other_since timestamptz,
	other_valid_until timestamptz,
	acquired_at timestamptz,		-- when this session's redlock_acquire returned true
	nodes integer,
	validity_ms integer,
	other_acquired_at timestamptz,	-- long jobs: names the other holder's hold
	slot integer,					-- permits: the slot we hold
	others text						-- permits: every claim found inside (pid, slot, for how long)
);

CREATE PROCEDURE checker_attempt(p_resource text, p_ttl_ms integer, p_wait_ms integer,
								 p_work_ms integer, p_fence text DEFAULT NULL)
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
	tok bigint;
	tok_t0 timestamptz;
	tok_t1 timestamptz;
	tok_st text;
	w_at timestamptz;
	w_prev bigint;
	w_applied boolean;
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

	IF p_fence IS NOT NULL THEN
		tok_t0 := clock_timestamp();
		BEGIN
			tok := redlock_fencing_token(p_resource);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS tok_st = RETURNED_SQLSTATE;
		END;
		tok_t1 := clock_timestamp();
		COMMIT;
	END IF;

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

	-- The work's result, written with the token (a holder paused past its validity writes
	-- here when it runs again).  FOR UPDATE: the value our UPDATE saw.
	IF tok IS NOT NULL THEN
		SELECT f.token INTO w_prev FROM checker_fence f WHERE f.resource = p_resource FOR UPDATE;
		IF p_fence = 'fenced' THEN
			UPDATE checker_fence SET token = tok WHERE resource = p_resource AND token <= tok;
		ELSE
			UPDATE checker_fence SET token = tok WHERE resource = p_resource;
		END IF;
		GET DIAGNOSTICS n = ROW_COUNT;
		w_applied := n = 1;
		w_at := clock_timestamp();
		COMMIT;
	END IF;

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
								  released, valid_until, token, token_t0, token_t1,
								  token_sqlstate, write_at, write_prev, write_applied)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'acquired', v_nodes, v_validity,
			v_overran, rel, v_until, tok, tok_t0, tok_t1, tok_st, w_at, w_prev, w_applied);
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

-- p_release false: give the guard back only; the driver's next command (DISCARD ALL)
-- releases the lock, and released stays NULL.
CREATE PROCEDURE checker_done(p_resource text, p_release boolean DEFAULT true)
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
		IF p_release THEN
			rel := redlock_release(p_resource);
		END IF;
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

-- ---- long jobs: auto-extended locks (redlock.auto_extend, library preloaded) ----
--
-- One hold is one CALL checker_job(resource, ttl_ms, wait_ms, xacts, steps, step_ms,
-- swallow), followed (by the driver, a psql script, whatever the CALL raised) by
-- CALL checker_job_end(:'SQLSTATE', :'LAST_ERROR_MESSAGE').  The job acquires with the
-- session's redlock.auto_extend on and a TTL shorter than its work, claims the guard,
-- and works in xacts transactions of steps steps: each step inserts one row into
-- checker_writes (the job's output) and sleeps step_ms; each transaction commits.  The
-- lock lives only as long as the background worker renews it.
--
-- When the worker gives up on the lock (redlock.cancel_on_loss on), the job's statement
-- is cancelled (57014) and the transaction running at the loss must not commit.  A job
-- with swallow = false lets the cancel end the CALL.  One with swallow = true catches
-- it, logs a WARNING, and works on: it writes the rest of its steps in that same
-- transaction and tries to commit them at the end, which the extension must refuse
-- (55P03).  Meanwhile another session may take the lock (it has run out on the masters)
-- and claim the guard, finding it still held: see checker_job's claim and
-- Checker/Report.pm's reading of checker_violations for when that is excused.  A job is
-- one statement from acquire to its last commit, so a loss always finds a statement to
-- cancel (an idle session is not interrupted).
--
-- checker_job_end gives the guard back (in its own committed transaction), releases the
-- lock and records the attempt with how the CALL ended; the hold's state between the two
-- CALLs is this backend's row of checker_jobs.  The worker's LOG lines of losses are read
-- into checker_losses by Checker/Report.pm after the run.  The node has
-- track_commit_timestamp on, so pg_xact_commit_timestamp(xmin) of a checker_writes row
-- says when it committed.

CREATE UNLOGGED TABLE checker_jobs (
	pid integer PRIMARY KEY,
	resource text NOT NULL,
	t0 timestamptz NOT NULL,
	t1 timestamptz NOT NULL,		-- acquired (names the hold in checker_writes)
	nodes integer,
	validity_ms integer,
	in_guard boolean NOT NULL,		-- we claimed the guard and have not given it back yet
	slot integer					-- permit jobs (checker_permit_job): the slot held
);

CREATE UNLOGGED TABLE checker_writes (
	resource text NOT NULL,
	pid integer NOT NULL,
	t1 timestamptz NOT NULL,		-- the hold (checker_attempts.t1)
	xact integer NOT NULL,			-- which of the job's transactions
	step integer NOT NULL,
	at timestamptz NOT NULL,		-- when written (the commit is pg_xact_commit_timestamp(xmin))
	swallowed boolean NOT NULL		-- written after the job swallowed a cancel
);

CREATE UNLOGGED TABLE checker_losses (
	at timestamptz NOT NULL,		-- the worker's LOG line (millisecond resolution)
	resource text NOT NULL,
	owner_pid integer NOT NULL,
	reason text,
	detail text
);

CREATE PROCEDURE checker_job(p_resource text, p_ttl_ms integer, p_wait_ms integer,
							 p_xacts integer, p_steps integer, p_step_ms integer,
							 p_swallow boolean)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	got boolean;
	st text;
	msg text;
	det text;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	g checker_guard;
	swallowed boolean := false;
BEGIN
	DELETE FROM checker_jobs WHERE pid = pg_backend_pid();
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
	INSERT INTO checker_jobs (pid, resource, t0, t1, nodes, validity_ms, in_guard)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, v_nodes, v_validity, false);
	COMMIT;

	-- Claim the guard, committed at once.  As in checker_attempt, a guard found held is
	-- a conflict; here we take the guard over (under the row lock, after recording the
	-- conflict), so that a third session entering while we are inside is seen too.
	SELECT * INTO g FROM checker_guard WHERE resource = p_resource FOR UPDATE;
	IF g.holder IS NOT NULL THEN
		INSERT INTO checker_violations
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'claim', g.holder, g.since,
				g.valid_until, t_acq, v_nodes, v_validity, g.acquired_at);
	END IF;
	UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
		valid_until = v_until, acquired_at = t_acq
	WHERE resource = p_resource;
	UPDATE checker_jobs SET in_guard = true WHERE pid = pg_backend_pid();
	COMMIT;

	-- The work.  A swallowed cancel (p_swallow) keeps the job writing in the transaction
	-- that was running at the loss, to the end of its work, and then tries to commit it.
	FOR x IN 1 .. p_xacts LOOP
		FOR s IN 1 .. p_steps LOOP
			BEGIN
				INSERT INTO checker_writes (resource, pid, t1, xact, step, at, swallowed)
				VALUES (p_resource, pg_backend_pid(), t_acq, x, s, clock_timestamp(), swallowed);
				PERFORM pg_sleep(p_step_ms / 1000.0);
			EXCEPTION WHEN query_canceled THEN
				IF NOT p_swallow THEN
					RAISE;
				END IF;
				GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
				RAISE WARNING 'checker: a job swallowed a cancel and works on: %', msg;
				swallowed := true;
			END;
		END LOOP;
		IF NOT swallowed OR x = p_xacts THEN
			COMMIT;
		END IF;
	END LOOP;
END
$$;

-- Ends the hold checker_job left (if any): gives the guard back, releases the lock and
-- records the attempt with how the job's CALL ended (p_sqlstate, p_message: psql's
-- SQLSTATE and LAST_ERROR_MESSAGE after it).
CREATE PROCEDURE checker_job_end(p_sqlstate text, p_message text)
LANGUAGE plpgsql
AS $$
DECLARE
	h checker_jobs;
	n integer := 1;
	rel boolean;
	v_lost boolean;
	v_renewals bigint;
	v_last timestamptz;
BEGIN
	SELECT * INTO h FROM checker_jobs WHERE pid = pg_backend_pid();
	IF NOT FOUND THEN
		-- No hold: the CALL recorded its busy or failed attempt itself.  Anything it
		-- left behind all the same is let go of.
		PERFORM redlock_release_all();
		COMMIT;
		RETURN;
	END IF;
	SELECT l.lost, l.renewals, l.last_renewal INTO v_lost, v_renewals, v_last
	FROM redlock_locks() l WHERE l.resource = h.resource;
	IF h.in_guard THEN
		UPDATE checker_guard SET holder = NULL, since = NULL, valid_until = NULL,
			acquired_at = NULL
		WHERE resource = h.resource AND holder = pg_backend_pid();
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	COMMIT;
	BEGIN
		rel := redlock_release(h.resource);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	PERFORM redlock_release_all();
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms,
								  released, lost, renewals, last_renewal, end_sqlstate,
								  end_message, taken_over)
	VALUES (pg_backend_pid(), h.resource, h.t0, h.t1, 'acquired', h.nodes, h.validity_ms,
			rel, v_lost, v_renewals, v_last, p_sqlstate,
			CASE WHEN p_sqlstate <> '00000' THEN p_message END, n = 0);
	DELETE FROM checker_jobs WHERE pid = pg_backend_pid();
	COMMIT;
END
$$;

-- ---- jobs across commands: the loss protocol of issue 21 ----
--
-- A job that the loss protocol of auto-extended locks must stop whatever its session is
-- doing: idle, idle in a transaction (its client gone quiet between two statements), or
-- running a statement.  Such a job is not one CALL (an idle session needs commands
-- from the client): Checker.pm writes it as a psql script of commands, one hold a block:
--   CALL checker_lease_take(resource, ttl_ms, wait_ms);
--   BEGIN; SELECT checker_lease_write(1, 1); <idle or running> ...; COMMIT;   -- xacts times
--   CALL checker_job_end(<the job's first error's SQLSTATE>, <its message>);
-- and stops writing at its first error (a cancel, a refused commit), as a job that is
-- told of the loss does.  checker_lease_take acquires (session scope, with the session's
-- redlock.auto_extend), records the hold in checker_jobs and claims the guard, taking it
-- over when it is found held without recording a conflict: a job idle in its transaction
-- when its lock runs out cannot be stopped before its next command, only refused its
-- commit, so a second holder inside is expected and what counts is whether the first
-- one's work committed after the second acquired (Checker/Report.pm's long-job judge).
-- A guard taken over shows at checker_job_end (taken_over): the loss path was exercised.

DROP PROCEDURE IF EXISTS checker_lease_take(text, integer, integer);
DROP FUNCTION IF EXISTS checker_lease_write(integer, integer);

CREATE PROCEDURE checker_lease_take(p_resource text, p_ttl_ms integer, p_wait_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	got boolean;
	st text;
	msg text;
	det text;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
BEGIN
	DELETE FROM checker_jobs WHERE pid = pg_backend_pid();
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
	INSERT INTO checker_jobs (pid, resource, t0, t1, nodes, validity_ms, in_guard)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, v_nodes, v_validity, false);
	COMMIT;
	UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
		valid_until = v_until, acquired_at = t_acq
	WHERE resource = p_resource;
	UPDATE checker_jobs SET in_guard = true WHERE pid = pg_backend_pid();
	COMMIT;
END
$$;

-- One write of the job this backend holds (none when it holds none): a row of
-- checker_writes in the caller's transaction, and a LOG line (which no rollback takes
-- back) saying when the job wrote, committed or not.
CREATE FUNCTION checker_lease_write(p_xact integer, p_step integer) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	h checker_jobs;
BEGIN
	SELECT * INTO h FROM checker_jobs WHERE pid = pg_backend_pid();
	IF NOT FOUND THEN
		RETURN;
	END IF;
	INSERT INTO checker_writes (resource, pid, t1, xact, step, at, swallowed)
	VALUES (h.resource, h.pid, h.t1, p_xact, p_step, clock_timestamp(), false);
	RAISE LOG 'checker-write: % % % %', h.pid, extract(epoch FROM h.t1),
		extract(epoch FROM clock_timestamp()), h.resource;
END
$$;

-- ---- a guarded row in a third cluster, through postgres_fdw (issue 38, item 5) ----
--
-- The fdw scenarios (Checker/Fdw.pm) run the jobs across commands above on two clusters
-- that share the masters, and each job writes its guarded rows into a table of a third
-- cluster through postgres_fdw: the foreign tables checker_fdw_holds and checker_fdw_rows,
-- made by Checker::Fdw::setup on the job clusters only (a PL/pgSQL body names its tables
-- only when it runs).  The remote tables add what the judge orders by, all from the third
-- cluster's clock: the time a row was inserted (a DEFAULT there, since postgres_fdw sends
-- only the foreign table's columns) and, with track_commit_timestamp, when it committed.
-- A hold is named by its cluster (the setting checker.cluster), backend and acquire time.

DROP FUNCTION IF EXISTS checker_fdw_acquired();
DROP FUNCTION IF EXISTS checker_fdw_write(integer, integer);
DROP FUNCTION IF EXISTS checker_fdw_hold();

-- The name of the hold this backend has (NULL when none) in the third cluster:
-- cluster:pid:acquire time (epoch).
CREATE FUNCTION checker_fdw_hold() RETURNS text
LANGUAGE sql STABLE
AS $$
SELECT current_setting('checker.cluster') || ':' || pid || ':' || extract(epoch FROM t1)
FROM checker_jobs WHERE pid = pg_backend_pid()
$$;

-- The hold this backend has just acquired, recorded in the third cluster in a transaction
-- of its own (the session's first use of postgres_fdw comes after its first lock call,
-- the order in which the guard used to be passed).  The next holder's acquisition, in
-- the judge's words: this row is inserted after redlock_acquire returned true.
-- (PL/pgSQL, as checker_fdw_write: the body of an SQL function is checked against the
-- tables when it is created, and only the job clusters have the foreign tables.)
CREATE FUNCTION checker_fdw_acquired() RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	INSERT INTO checker_fdw_holds (hold, resource)
	SELECT checker_fdw_hold(), resource FROM checker_jobs WHERE pid = pg_backend_pid();
END
$$;

-- One write of the job this backend holds (none when it holds none):
-- checker_lease_write's local row and LOG line, and the guarded row in the third
-- cluster, in the caller's transaction.
CREATE FUNCTION checker_fdw_write(p_xact integer, p_step integer) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM checker_lease_write(p_xact, p_step);
	INSERT INTO checker_fdw_rows (hold, resource, xact, step)
	SELECT checker_fdw_hold(), resource, p_xact, p_step
	FROM checker_jobs WHERE pid = pg_backend_pid();
END
$$;

-- ---- semaphores: the permits of redlock_acquire_permit (1.5) ----
--
-- A semaphore admits at most k holders at once (k: its permits), each on one of its
-- slots, exclusive locks of their own (the keys resource#1..resource#k).  So instead of
-- a guard row that one holder at a time may claim, a holder proves that it is one of at
-- most k by counting: its claim, in one committed transaction under
-- pg_advisory_xact_lock(hashtext(resource)) (the claims of a semaphore are made one at a
-- time, so no two can count the same others and both go in), counts the claims of the
-- resource in checker_permit_claims.  k or more already inside is a violation (what
-- 'claim': we are holder k + 1 at least; others lists them), and so is a claim of the
-- slot we hold (what 'slot': two holders of one slot, each an exclusive lock); then our
-- claim goes in whatever was found, so that a further holder counts us too.  A holder
-- deletes its claim, committed, before it calls redlock_release, as a holder gives the
-- guard back: a claim found belongs to a session that still believes it holds a permit
-- (the counterpart of checker_guard's argument).  The number inside at each claim,
-- ourselves included, is kept (checker_permit_claims.inside, then checker_attempts):
-- its largest value is the most holders inside at once (the count only rises at a
-- claim), which must reach 2 (the semaphore did not behave as a lock) and stay <= k.
--
-- The slot held is read from redlock_locks().key (the slot's key ends in '#<slot>').
--
-- Two drivers: checker_permit_attempt (pgbench, one CALL a hold, as checker_attempt)
-- and checker_permit_job / checker_permit_job_end (psql, long jobs on auto-extended
-- permits, as checker_job / checker_job_end but without swallowed cancels: a job whose
-- permit the worker gave up is cancelled, and its claim deleted by checker_permit_job_end).

-- What a watcher heard (redlock_watch, issue 43), one row per event, filled by the
-- checker after the run from the watcher's notifications (Checker.pm, run).
CREATE UNLOGGED TABLE checker_watch_events (
	resource text NOT NULL,
	event text NOT NULL,			-- acquired | released | expired | forced
	pid integer,					-- the holder record's pid (NULL: none)
	at timestamptz NOT NULL			-- when the notifier's look that saw it began
);

CREATE UNLOGGED TABLE checker_permit_claims (
	resource text NOT NULL,			-- the semaphore (as given to redlock_acquire_permit)
	pid integer NOT NULL,
	slot integer,					-- the slot held (NULL: not read from redlock_locks().key)
	since timestamptz NOT NULL,		-- when the claim was made
	valid_until timestamptz,		-- the permit's validity end (redlock_locks().valid_until)
	acquired_at timestamptz,		-- when redlock_acquire_permit returned (names the hold)
	inside integer NOT NULL,		-- holders inside once the claim went in, ourselves included
	PRIMARY KEY (resource, pid)
);

-- The slot of the key of a permit (redlock_locks().key: '<prefix><resource>#<slot>').
CREATE OR REPLACE FUNCTION checker_permit_slot(p_key text) RETURNS integer
LANGUAGE sql IMMUTABLE
AS $$ SELECT substring(p_key FROM '#([0-9]+)$')::integer $$;

-- Claims one of P_PERMITS permits of P_RESOURCE, committed (see above).
CREATE PROCEDURE checker_permit_claim(p_resource text, p_permits integer, p_slot integer,
									  p_acquired_at timestamptz, p_nodes integer,
									  p_validity_ms integer, p_valid_until timestamptz)
LANGUAGE plpgsql
AS $$
DECLARE
	n integer;
	v_at timestamptz;
	v_others text;
	o checker_permit_claims;
BEGIN
	-- Held to our commit: the claims of this semaphore one at a time.  The count below
	-- is a statement of its own, with a snapshot taken once we hold the lock, so it sees
	-- every claim committed before (a claimant commits before it lets go of the lock).
	PERFORM pg_advisory_xact_lock(hashtext(p_resource));
	v_at := clock_timestamp();
	SELECT count(*),
		string_agg(format('pid %s slot %s inside %s ms', c.pid, coalesce(c.slot::text, '?'),
			round((extract(epoch FROM v_at - c.since) * 1000)::numeric, 1)), ', '
			ORDER BY c.since)
	INTO n, v_others
	FROM checker_permit_claims c WHERE c.resource = p_resource;
	IF n >= p_permits THEN
		SELECT * INTO o FROM checker_permit_claims c WHERE c.resource = p_resource
		ORDER BY c.since LIMIT 1;
		INSERT INTO checker_violations
		VALUES (v_at, p_resource, pg_backend_pid(), 'claim', o.pid, o.since, o.valid_until,
				p_acquired_at, p_nodes, p_validity_ms, o.acquired_at, p_slot, v_others);
	END IF;
	SELECT * INTO o FROM checker_permit_claims c WHERE c.resource = p_resource
		AND c.slot = p_slot ORDER BY c.since LIMIT 1;
	IF FOUND THEN
		INSERT INTO checker_violations
		VALUES (v_at, p_resource, pg_backend_pid(), 'slot', o.pid, o.since, o.valid_until,
				p_acquired_at, p_nodes, p_validity_ms, o.acquired_at, p_slot, v_others);
	END IF;
	INSERT INTO checker_permit_claims (resource, pid, slot, since, valid_until, acquired_at,
									   inside)
	VALUES (p_resource, pg_backend_pid(), p_slot, clock_timestamp(), p_valid_until,
			p_acquired_at, n + 1);
	COMMIT;
END
$$;

-- Deletes this backend's claim of P_RESOURCE, committed (exactly one row, else an
-- 'unclaim' violation).
CREATE PROCEDURE checker_permit_unclaim(p_resource text, p_acquired_at timestamptz,
										p_nodes integer, p_validity_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	n integer;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext(p_resource));
	DELETE FROM checker_permit_claims WHERE resource = p_resource AND pid = pg_backend_pid();
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n <> 1 THEN
		INSERT INTO checker_violations (at, resource, pid, what, acquired_at, nodes, validity_ms)
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'unclaim', p_acquired_at,
				p_nodes, p_validity_ms);
	END IF;
	COMMIT;
END
$$;

-- One hold of a permit, as checker_attempt holds a lock: acquire (errors caught and
-- recorded by SQLSTATE), claim, work P_WORK_MS, unclaim, release.
CREATE PROCEDURE checker_permit_attempt(p_resource text, p_permits integer, p_ttl_ms integer,
										p_wait_ms integer, p_work_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	got boolean;
	st text;
	msg text;
	det text;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	v_slot integer;
	v_inside integer;
	v_overran boolean;
	rel boolean;
BEGIN
	BEGIN
		got := redlock_acquire_permit(p_resource, p_permits, p_ttl_ms, p_wait_ms);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message, permits)
		VALUES (pg_backend_pid(), p_resource, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''), p_permits);
		COMMIT;
		RETURN;
	END;
	t_acq := clock_timestamp();
	IF NOT got THEN
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, permits)
		VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'busy', p_permits);
		COMMIT;
		RETURN;
	END IF;
	SELECT l.nodes, l.validity_ms, l.valid_until, checker_permit_slot(l.key)
	INTO v_nodes, v_validity, v_until, v_slot
	FROM redlock_locks() l WHERE l.resource = p_resource;
	-- The session-scoped permit survives this commit.
	COMMIT;

	CALL checker_permit_claim(p_resource, p_permits, v_slot, t_acq, v_nodes, v_validity,
							  v_until);

	PERFORM pg_sleep(p_work_ms / 1000.0);

	v_overran := clock_timestamp() > v_until;
	SELECT c.inside INTO v_inside FROM checker_permit_claims c
	WHERE c.resource = p_resource AND c.pid = pg_backend_pid();
	CALL checker_permit_unclaim(p_resource, t_acq, v_nodes, v_validity);

	BEGIN
		rel := redlock_release(p_resource);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms, overran,
								  released, valid_until, permits, slot, inside)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'acquired', v_nodes, v_validity,
			v_overran, rel, v_until, p_permits, v_slot, v_inside);
	COMMIT;
END
$$;

-- A long job on an auto-extended permit (the session's redlock.auto_extend on): as
-- checker_job, with the claim of checker_permit_claim, and no swallowed cancel (a job
-- whose permit the worker gave up ends with the cancel, 57014, and
-- checker_permit_job_end deletes its claim).  The writes go to checker_writes, the hold
-- to checker_jobs.
CREATE PROCEDURE checker_permit_job(p_resource text, p_permits integer, p_ttl_ms integer,
									p_wait_ms integer, p_xacts integer, p_steps integer,
									p_step_ms integer)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	got boolean;
	st text;
	msg text;
	det text;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	v_slot integer;
BEGIN
	-- A claim left by an end that did not complete (a loss cancelled it) belongs to a hold
	-- that is over: this backend is not inside while it starts another.
	DELETE FROM checker_jobs WHERE pid = pg_backend_pid();
	DELETE FROM checker_permit_claims WHERE pid = pg_backend_pid();
	COMMIT;
	BEGIN
		got := redlock_acquire_permit(p_resource, p_permits, p_ttl_ms, p_wait_ms);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message, permits)
		VALUES (pg_backend_pid(), p_resource, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''), p_permits);
		COMMIT;
		RETURN;
	END;
	t_acq := clock_timestamp();
	IF NOT got THEN
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, permits)
		VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'busy', p_permits);
		COMMIT;
		RETURN;
	END IF;
	SELECT l.nodes, l.validity_ms, l.valid_until, checker_permit_slot(l.key)
	INTO v_nodes, v_validity, v_until, v_slot
	FROM redlock_locks() l WHERE l.resource = p_resource;
	INSERT INTO checker_jobs (pid, resource, t0, t1, nodes, validity_ms, in_guard, slot)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, v_nodes, v_validity, false, v_slot);
	COMMIT;

	CALL checker_permit_claim(p_resource, p_permits, v_slot, t_acq, v_nodes, v_validity,
							  v_until);
	UPDATE checker_jobs SET in_guard = true WHERE pid = pg_backend_pid();
	COMMIT;

	FOR x IN 1 .. p_xacts LOOP
		FOR s IN 1 .. p_steps LOOP
			INSERT INTO checker_writes (resource, pid, t1, xact, step, at, swallowed)
			VALUES (p_resource, pg_backend_pid(), t_acq, x, s, clock_timestamp(), false);
			PERFORM pg_sleep(p_step_ms / 1000.0);
		END LOOP;
		COMMIT;
	END LOOP;
END
$$;

-- Ends the hold checker_permit_job left (if any), as checker_job_end: deletes its claim
-- (committed), releases the permit and records the attempt with how the job's CALL ended.
CREATE PROCEDURE checker_permit_job_end(p_sqlstate text, p_message text)
LANGUAGE plpgsql
AS $$
DECLARE
	h checker_jobs;
	rel boolean;
	v_lost boolean;
	v_renewals bigint;
	v_last timestamptz;
	v_inside integer;
BEGIN
	SELECT * INTO h FROM checker_jobs WHERE pid = pg_backend_pid();
	IF NOT FOUND THEN
		PERFORM redlock_release_all();
		COMMIT;
		RETURN;
	END IF;
	SELECT l.lost, l.renewals, l.last_renewal INTO v_lost, v_renewals, v_last
	FROM redlock_locks() l WHERE l.resource = h.resource;
	SELECT c.inside INTO v_inside FROM checker_permit_claims c
	WHERE c.resource = h.resource AND c.pid = pg_backend_pid();
	IF FOUND THEN
		CALL checker_permit_unclaim(h.resource, h.t1, h.nodes, h.validity_ms);
	END IF;
	BEGIN
		rel := redlock_release(h.resource);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	PERFORM redlock_release_all();
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms,
								  released, lost, renewals, last_renewal, end_sqlstate,
								  end_message, taken_over, slot, inside)
	VALUES (pg_backend_pid(), h.resource, h.t0, h.t1, 'acquired', h.nodes, h.validity_ms,
			rel, v_lost, v_renewals, v_last, p_sqlstate,
			CASE WHEN p_sqlstate <> '00000' THEN p_message END, false, h.slot, v_inside);
	DELETE FROM checker_jobs WHERE pid = pg_backend_pid();
	COMMIT;
END
$$;

-- A set of two resources, all or nothing (redlock_acquire(text[]), 1.6): one pgbench
-- transaction is CALL checker_set_attempt(prefix, a, b, ttl_ms, wait_ms, work_ms), the
-- resources prefix || a and prefix || b (a <> b).  The holder of the set claims the guard
-- of each in one committed transaction; a guard already held (by a set or lock sharing
-- that resource) is a violation, one row per guard.  Sets that share no resource claim
-- different guards and may be inside at once.  The attempt's row names both resources.
-- With p_extend_ttl_ms, the holder works half of p_work_ms, extends the set
-- (redlock_extend(text[]), one round) to that TTL, and works the other half only when
-- the extension returned true; otherwise it gives up at once (gave_up in its row).
-- The work of a set or shared holder: p_work_ms of sleep; with p_extend_ttl_ms,
-- redlock_extend of the resources to that TTL halfway (one resource: the text form), and
-- the rest of the work only when it returned true.  ext: its result (false also when it
-- raised), ext_st: the SQLSTATE it raised, or NULL.
CREATE PROCEDURE checker_work(p_resources text[], p_work_ms integer, p_extend_ttl_ms integer,
							  INOUT ext boolean, INOUT ext_st text)
LANGUAGE plpgsql
AS $$
BEGIN
	IF p_extend_ttl_ms IS NULL THEN
		PERFORM pg_sleep(p_work_ms / 1000.0);
		RETURN;
	END IF;
	PERFORM pg_sleep(p_work_ms / 2000.0);
	BEGIN
		IF cardinality(p_resources) = 1 THEN
			ext := redlock_extend(p_resources[1], p_extend_ttl_ms);
		ELSE
			ext := redlock_extend(p_resources, p_extend_ttl_ms);
		END IF;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS ext_st = RETURNED_SQLSTATE;
		ext := false;
	END;
	COMMIT;
	IF ext THEN
		PERFORM pg_sleep(p_work_ms / 2000.0);
	END IF;
END;
$$;

CREATE PROCEDURE checker_set_attempt(p_prefix text, p_a integer, p_b integer,
									 p_ttl_ms integer, p_wait_ms integer, p_work_ms integer,
									 p_extend_ttl_ms integer DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	set_of text[] := ARRAY[p_prefix || p_a, p_prefix || p_b];
	name text := p_prefix || p_a || '+' || p_b;
	got boolean;
	st text;
	msg text;
	det text;
	n integer;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	rel boolean;
	g checker_guard;
	ext boolean;
	ext_st text;
BEGIN
	BEGIN
		got := redlock_acquire(set_of, p_ttl_ms, p_wait_ms);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message)
		VALUES (pg_backend_pid(), name, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''));
		COMMIT;
		RETURN;
	END;
	t_acq := clock_timestamp();
	IF NOT got THEN
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome)
		VALUES (pg_backend_pid(), name, t_start, t_acq, 'busy');
		COMMIT;
		RETURN;
	END IF;
	-- The set's validity: its shortest lock's.
	SELECT min(l.nodes), min(l.validity_ms), min(l.valid_until) INTO v_nodes, v_validity, v_until
	FROM redlock_locks() l WHERE l.resource = ANY (set_of);
	COMMIT;

	-- Claim both guards, committed at once: each must have been free.
	FOR g IN SELECT * FROM checker_guard WHERE resource = ANY (set_of) ORDER BY resource
		FOR UPDATE
	LOOP
		IF g.holder IS NOT NULL THEN
			INSERT INTO checker_violations
			VALUES (clock_timestamp(), g.resource, pg_backend_pid(), 'claim', g.holder, g.since,
					g.valid_until, t_acq, v_nodes, v_validity);
		END IF;
	END LOOP;
	UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
		valid_until = v_until
	WHERE resource = ANY (set_of) AND holder IS NULL;
	COMMIT;

	CALL checker_work(set_of, p_work_ms, p_extend_ttl_ms, ext, ext_st);

	-- Give back the guards still ours; one taken over meanwhile is a violation too.
	UPDATE checker_guard SET holder = NULL, since = NULL, valid_until = NULL
	WHERE resource = ANY (set_of) AND holder = pg_backend_pid();
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n <> 2 THEN
		INSERT INTO checker_violations (at, resource, pid, what, acquired_at, nodes, validity_ms)
		VALUES (clock_timestamp(), name, pg_backend_pid(), 'unclaim', t_acq, v_nodes, v_validity);
	END IF;
	COMMIT;
	BEGIN
		rel := redlock_release(set_of);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms, overran,
								  released, extends, extend_false, extend_errors, gave_up,
								  gave_up_why)
	VALUES (pg_backend_pid(), name, t_start, t_acq, 'acquired', v_nodes, v_validity,
			clock_timestamp() > v_until, rel,
			CASE WHEN p_extend_ttl_ms IS NULL THEN 0 ELSE 1 END,
			CASE WHEN ext_st IS NULL AND ext IS FALSE THEN 1 ELSE 0 END,
			CASE WHEN ext_st IS NOT NULL THEN 1 ELSE 0 END,
			ext IS FALSE, CASE WHEN ext IS FALSE THEN 'extend ' || coalesce(ext_st, 'false') END);
	COMMIT;
END;
$$;

-- A shared or an exclusive hold of one resource (redlock_acquire_shared or
-- redlock_acquire), proved on the guard row: a shared holder counts itself in readers and
-- must find no exclusive holder there; an exclusive holder must find neither a holder nor
-- readers.  Each claim is committed at once, and given back (committed) before the
-- release, as checker_attempt does.  p_extend_ttl_ms: extend halfway through the work to
-- that TTL, and stop working if that fails.
CREATE PROCEDURE checker_shared_attempt(p_resource text, p_shared boolean, p_ttl_ms integer,
										p_wait_ms integer, p_work_ms integer,
										p_extend_ttl_ms integer DEFAULT NULL)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	v_mode text := CASE WHEN p_shared THEN 'shared' ELSE 'exclusive' END;
	got boolean;
	st text;
	msg text;
	det text;
	n integer;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	v_inside integer;
	rel boolean;
	g checker_guard;
	ext boolean;
	ext_st text;
BEGIN
	BEGIN
		IF p_shared THEN
			got := redlock_acquire_shared(p_resource, p_ttl_ms, p_wait_ms);
		ELSE
			got := redlock_acquire(p_resource, p_ttl_ms, p_wait_ms);
		END IF;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message, mode)
		VALUES (pg_backend_pid(), p_resource, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''), v_mode);
		COMMIT;
		RETURN;
	END;
	t_acq := clock_timestamp();
	IF NOT got THEN
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, mode)
		VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'busy', v_mode);
		COMMIT;
		RETURN;
	END IF;
	SELECT l.nodes, l.validity_ms, l.valid_until INTO v_nodes, v_validity, v_until
	FROM redlock_locks() l WHERE l.resource = p_resource;
	COMMIT;

	-- The claim: nobody exclusive inside; for an exclusive holder, no reader either.
	SELECT * INTO g FROM checker_guard WHERE resource = p_resource FOR UPDATE;
	IF g.holder IS NOT NULL OR (NOT p_shared AND g.readers > 0) THEN
		INSERT INTO checker_violations
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'claim', g.holder, g.since,
				g.valid_until, t_acq, v_nodes, v_validity);
	END IF;
	IF p_shared THEN
		UPDATE checker_guard SET readers = readers + 1 WHERE resource = p_resource
		RETURNING readers INTO v_inside;
	ELSE
		UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
			valid_until = v_until
		WHERE resource = p_resource AND holder IS NULL;
		v_inside := 1;
	END IF;
	COMMIT;

	CALL checker_work(ARRAY[p_resource], p_work_ms, p_extend_ttl_ms, ext, ext_st);

	-- Give the claim back; a reader count or a guard gone meanwhile is a violation too.
	IF p_shared THEN
		UPDATE checker_guard SET readers = readers - 1
		WHERE resource = p_resource AND readers > 0;
	ELSE
		UPDATE checker_guard SET holder = NULL, since = NULL, valid_until = NULL
		WHERE resource = p_resource AND holder = pg_backend_pid();
	END IF;
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n <> 1 THEN
		INSERT INTO checker_violations (at, resource, pid, what, acquired_at, nodes, validity_ms)
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'unclaim', t_acq, v_nodes,
				v_validity);
	END IF;
	COMMIT;
	BEGIN
		rel := redlock_release(p_resource);
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, nodes, validity_ms, overran,
								  released, extends, extend_false, extend_errors, gave_up,
								  gave_up_why, inside, mode)
	VALUES (pg_backend_pid(), p_resource, t_start, t_acq, 'acquired', v_nodes, v_validity,
			clock_timestamp() > v_until, rel,
			CASE WHEN p_extend_ttl_ms IS NULL THEN 0 ELSE 1 END,
			CASE WHEN ext_st IS NULL AND ext IS FALSE THEN 1 ELSE 0 END,
			CASE WHEN ext_st IS NOT NULL THEN 1 ELSE 0 END,
			ext IS FALSE, CASE WHEN ext IS FALSE THEN 'extend ' || coalesce(ext_st, 'false') END,
			v_inside, v_mode);
	COMMIT;
END;
$$;

-- Claims the guard of p_resource for this backend, committed: a guard held already is a
-- violation (as checker_set_attempt claims).
CREATE PROCEDURE checker_pair_claim(p_resource text, p_acquired_at timestamptz, p_nodes integer,
									p_validity integer, p_until timestamptz)
LANGUAGE plpgsql
AS $$
DECLARE
	g checker_guard;
BEGIN
	SELECT * INTO g FROM checker_guard WHERE resource = p_resource FOR UPDATE;
	IF g.holder IS NOT NULL THEN
		INSERT INTO checker_violations
		VALUES (clock_timestamp(), p_resource, pg_backend_pid(), 'claim', g.holder, g.since,
				g.valid_until, p_acquired_at, p_nodes, p_validity);
	END IF;
	UPDATE checker_guard SET holder = pg_backend_pid(), since = clock_timestamp(),
		valid_until = p_until
	WHERE resource = p_resource AND holder IS NULL;
	COMMIT;
END;
$$;

-- Two locks, one after the other, in the order the client drew (doc/deadlock.md): the
-- first with redlock_acquire, claimed; half the work; then the second, waiting, which
-- the clients drawing the opposite order make a deadlock of.  The victim's 40P01 is its
-- outcome ('deadlock'); it keeps its first lock, claimed, through the rest of the work
-- (a victim's locks stay its own), then gives the claims back and releases.  p_unsafe
-- (a negative control): the victim lets go of its first lock at once but works on as if
-- it held it.
CREATE PROCEDURE checker_pair_attempt(p_prefix text, p_a integer, p_b integer,
									  p_ttl_ms integer, p_wait_ms integer, p_work_ms integer,
									  p_unsafe boolean DEFAULT false)
LANGUAGE plpgsql
AS $$
DECLARE
	t_start timestamptz := clock_timestamp();
	t_acq timestamptz;
	first_r text := p_prefix || p_a;
	second_r text := p_prefix || p_b;
	name text := p_prefix || p_a || '>' || p_b;
	got boolean;
	victim boolean := false;
	outcome text;
	st text;
	msg text;
	det text;
	n integer;
	v_nodes integer;
	v_validity integer;
	v_until timestamptz;
	rel boolean;
BEGIN
	BEGIN
		got := redlock_acquire(first_r, p_ttl_ms, p_wait_ms);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message)
		VALUES (pg_backend_pid(), name, t_start, clock_timestamp(), 'error', st,
				msg || coalesce(' DETAIL: ' || nullif(det, ''), ''));
		COMMIT;
		RETURN;
	END;
	t_acq := clock_timestamp();
	IF NOT got THEN
		INSERT INTO checker_attempts (pid, resource, t0, t1, outcome)
		VALUES (pg_backend_pid(), name, t_start, t_acq, 'busy');
		COMMIT;
		RETURN;
	END IF;
	SELECT l.nodes, l.validity_ms, l.valid_until INTO v_nodes, v_validity, v_until
	FROM redlock_locks() l WHERE l.resource = first_r;
	COMMIT;
	CALL checker_pair_claim(first_r, t_acq, v_nodes, v_validity, v_until);
	PERFORM pg_sleep(p_work_ms / 2000.0);

	BEGIN
		got := redlock_acquire(second_r, p_ttl_ms, p_wait_ms);
	EXCEPTION
		WHEN deadlock_detected THEN
			victim := true;
			got := false;
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
			got := false;
	END;
	IF got THEN
		SELECT min(l.nodes), min(l.validity_ms), min(l.valid_until) INTO v_nodes, v_validity, v_until
		FROM redlock_locks() l WHERE l.resource IN (first_r, second_r);
		COMMIT;
		CALL checker_pair_claim(second_r, clock_timestamp(), v_nodes, v_validity, v_until);
	ELSIF victim AND p_unsafe THEN
		PERFORM redlock_release(first_r);
	END IF;
	COMMIT;
	PERFORM pg_sleep(p_work_ms / 2000.0);

	-- Give back the guards still ours; one taken over meanwhile is a violation too.
	UPDATE checker_guard SET holder = NULL, since = NULL, valid_until = NULL
	WHERE resource IN (first_r, second_r) AND holder = pg_backend_pid();
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n <> (CASE WHEN got THEN 2 ELSE 1 END) THEN
		INSERT INTO checker_violations (at, resource, pid, what, acquired_at, nodes, validity_ms)
		VALUES (clock_timestamp(), name, pg_backend_pid(), 'unclaim', t_acq, v_nodes, v_validity);
	END IF;
	COMMIT;
	BEGIN
		rel := redlock_release(first_r);
		IF got THEN
			rel := redlock_release(second_r) AND rel;
		END IF;
	EXCEPTION WHEN OTHERS THEN
		rel := NULL;
	END;
	outcome := CASE WHEN victim THEN 'deadlock' WHEN got THEN 'acquired'
					WHEN st IS NOT NULL THEN 'error' ELSE 'busy' END;
	INSERT INTO checker_attempts (pid, resource, t0, t1, outcome, sqlstate, message, nodes,
								  validity_ms, overran, released)
	VALUES (pg_backend_pid(), name, t_start, t_acq, outcome,
			CASE WHEN victim THEN '40P01' ELSE st END,
			msg || coalesce(' DETAIL: ' || nullif(det, ''), ''),
			v_nodes, v_validity, clock_timestamp() > v_until, rel);
	COMMIT;
END;
$$;
