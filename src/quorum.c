/*-------------------------------------------------------------------------
 *
 * quorum.c
 *	  The Redlock protocol over the masters (spec §2-§6): one acquire attempt, the
 *	  retry loop, release, extend, and the validity time with clock drift.
 *
 * No SQL and no transactions here: callers get a RedlockResult and decide.  Every
 * time is read from the monotonic clock, so wall-clock jumps change nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/pg_prng.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "redlock.h"

/* Spec §2: delete the key only while it still holds our token. */
static RedlockScript release_script = {
	.body = "if redis.call(\"get\", KEYS[1]) == ARGV[1] then "
	"return redis.call(\"del\", KEYS[1]) else return 0 end"
};

/* Spec §6: set a new TTL only while the key still holds our token. */
static RedlockScript extend_script = {
	.body = "if redis.call(\"get\", KEYS[1]) == ARGV[1] then "
	"return redis.call(\"pexpire\", KEYS[1], ARGV[2]) else return 0 end"
};


/*
 * redlock_clock_ms
 *		Returns the monotonic clock in milliseconds (arbitrary origin).
 */
double
redlock_clock_ms(void)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	return INSTR_TIME_GET_MILLISEC(now);
}

/*
 * redlock_new_token
 *		Writes a fresh token into token (REDLOCK_TOKEN_LEN + 1 bytes): 20 bytes from
 *		pg_strong_random, hex-encoded (spec §2).  Raises ERROR (XX000) if the strong
 *		random source fails.
 */
void
redlock_new_token(char *token)
{
	uint8		bytes[REDLOCK_TOKEN_BYTES];

	if (!pg_strong_random(bytes, sizeof(bytes)))
		elog(ERROR, "could not generate a random lock token");
	for (int i = 0; i < REDLOCK_TOKEN_BYTES; i++)
		snprintf(token + i * 2, 3, "%02x", bytes[i]);
}

/* Drift allowance for ttl_ms (spec §3 step 4): TTL * factor + 2 ms. */
static double
clock_drift_ms(int ttl_ms)
{
	return ttl_ms * redlock_clock_drift_factor + 2.0;
}

/*
 * Starts result for an operation over the current node set.  The scripts are made
 * known first, so that every new connection loads them in its handshake.
 */
static void
result_init(RedlockResult *result)
{
	redlock_script_register(&release_script);
	redlock_script_register(&extend_script);
	memset(result, 0, sizeof(*result));
	result->node_count = redlock_node_count();
	result->quorum = result->node_count / 2 + 1;
}

/* A SET NX reply that granted the lock. */
static bool
accept_ok(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_OK;
}

/* A release or extend script reply that acted on our key. */
static bool
accept_one(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer == 1;
}

/* Logs each node's outcome of one request at DEBUG1. */
static void
debug_outcomes(const char *what, const char *key, const RedlockNodeOutcome *outcomes, int n,
			   double elapsed_ms)
{
	StringInfoData buf;

	if (!message_level_is_interesting(DEBUG1))
		return;
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		const RedlockNodeOutcome *o = &outcomes[i];

		appendStringInfo(&buf, "%s%s ", i > 0 ? ", " : "", redlock_node_name(i));
		switch (o->kind)
		{
			case REDLOCK_REPLY_OK:
				appendStringInfoString(&buf, "OK");
				break;
			case REDLOCK_REPLY_NIL:
				appendStringInfoString(&buf, "nil");
				break;
			case REDLOCK_REPLY_INTEGER:
				appendStringInfo(&buf, "%lld", o->integer);
				break;
			case REDLOCK_REPLY_PENDING:
				appendStringInfoString(&buf, "not awaited");
				continue;
			case REDLOCK_REPLY_OTHER:
				appendStringInfoString(&buf, "unexpected reply");
				break;
			default:
				appendStringInfo(&buf, "failed (%s)", o->error);
				break;
		}
		appendStringInfo(&buf, " in %.3f ms", o->elapsed_ms);
	}
	elog(DEBUG1, "redlock: %s \"%s\" decided in %.3f ms: %s", what, key, elapsed_ms, buf.data);
	pfree(buf.data);
}

/* "node: error" lines for the nodes that did not answer, or NULL when all did. */
static char *
collect_node_errors(const RedlockNodeOutcome *outcomes, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		if (!redlock_outcome_failed(&outcomes[i]))
			continue;
		appendStringInfo(&buf, "%s%s: %s", buf.len > 0 ? "\n" : "",
						 redlock_node_name(i), outcomes[i].error);
	}
	if (buf.len == 0)
	{
		pfree(buf.data);
		return NULL;
	}
	return buf.data;
}

/*
 * Runs script with key, token and an optional extra argument on every node, waiting
 * for need nodes to return 1 (see RedlockCommand).
 */
static void
run_script(RedlockScript *script, const char *key, const char *token, const char *arg,
		   int need, bool cleanup, RedlockNodeOutcome *outcomes)
{
	RedlockCommand command = {0};

	command.need = need;
	command.accept = accept_one;
	command.script = script;
	command.argv[0] = key;
	command.argv[1] = token;
	command.argc = 2;
	if (arg)
		command.argv[command.argc++] = arg;
	for (int i = 0; i < command.argc; i++)
		command.argvlen[i] = strlen(command.argv[i]);
	redlock_nodes_run(&command, cleanup, outcomes);
}

/*
 * Counts replies that are the integer 1 (accepted), integer replies (answered), and
 * failures.
 */
static void
count_integer_replies(const RedlockNodeOutcome *outcomes, RedlockResult *result)
{
	result->accepted = 0;
	result->answered = 0;
	result->failed = 0;
	for (int i = 0; i < result->node_count; i++)
	{
		if (redlock_outcome_failed(&outcomes[i]))
			result->failed++;
		if (outcomes[i].kind != REDLOCK_REPLY_INTEGER)
			continue;
		result->answered++;
		if (outcomes[i].integer == 1)
			result->accepted++;
	}
}

/*
 * Sleeps a random retry delay (spec §4): retry_delay plus up to retry_jitter ms, but
 * not past deadline_ms (a monotonic time; < 0 for none).  Interruptible.
 */
static void
retry_sleep(double deadline_ms)
{
	double		now = redlock_clock_ms();
	double		delay = redlock_retry_delay_ms;
	double		end;

	if (redlock_retry_jitter_ms > 0)
		delay += (double) pg_prng_uint64_range(&pg_global_prng_state, 0,
											   redlock_retry_jitter_ms);
	end = now + delay;
	if (deadline_ms >= 0 && end > deadline_ms)
		end = deadline_ms;

	while (now < end)
	{
		int			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								   (long) ceil(end - now), PG_WAIT_EXTENSION);

		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		now = redlock_clock_ms();
	}
}

/*
 * redlock_quorum_acquire
 *		Acquires key on a quorum of masters (spec §3), retrying a busy lock (spec §4).
 *
 * key: the Redis key; token: this acquisition's token (redlock_new_token).
 * ttl_ms: the TTL, 1..REDLOCK_MAX_TTL_MS milliseconds.
 * wait_ms: how long to keep retrying a busy lock, in milliseconds; 0 makes one
 *		attempt, < 0 retries without limit (until interrupted).
 * result: REDLOCK_OK with valid_until_ms set, measured from the start of the attempt
 *		that won; REDLOCK_BUSY when the last attempt found the lock held elsewhere (or
 *		won too late to leave any validity); REDLOCK_UNAVAILABLE, at once and without
 *		retrying, when fewer than a quorum of masters answered, with node_errors.
 *
 * A failed attempt is undone on every master at once (spec §3 step 5).  Raises what
 * an interrupted wait raises (57014 on cancel or statement_timeout).
 */
void
redlock_quorum_acquire(const char *key, const char *token, int ttl_ms, int wait_ms,
					   RedlockResult *result)
{
	RedlockNodeOutcome *outcomes;
	RedlockCommand command = {0};
	char		ttl_text[16];
	double		deadline_ms;
	double		drift_ms = clock_drift_ms(ttl_ms);

	result_init(result);
	deadline_ms = wait_ms < 0 ? -1 : redlock_clock_ms() + wait_ms;
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(result->node_count, 1));

	/* Spec §2: SET key token NX PX ttl; decided once a quorum granted it, or cannot. */
	snprintf(ttl_text, sizeof(ttl_text), "%d", ttl_ms);
	command.need = result->quorum;
	command.accept = accept_ok;
	command.argc = 6;
	command.argv[0] = "SET";
	command.argv[1] = key;
	command.argv[2] = token;
	command.argv[3] = "NX";
	command.argv[4] = "PX";
	command.argv[5] = ttl_text;
	for (int i = 0; i < command.argc; i++)
		command.argvlen[i] = strlen(command.argv[i]);

	for (;;)
	{
		double		start_ms = redlock_clock_ms();
		double		now;
		int			accepted = 0;
		int			answered = 0;

		result->attempts++;
		redlock_stats_count(REDLOCK_STAT_ATTEMPTS);
		redlock_nodes_run(&command, false, outcomes);
		now = redlock_clock_ms();
		debug_outcomes("acquire", key, outcomes, result->node_count, now - start_ms);

		result->failed = 0;
		for (int i = 0; i < result->node_count; i++)
		{
			if (outcomes[i].kind == REDLOCK_REPLY_OK)
				accepted++;
			if (outcomes[i].kind == REDLOCK_REPLY_OK || outcomes[i].kind == REDLOCK_REPLY_NIL)
				answered++;
			if (redlock_outcome_failed(&outcomes[i]))
				result->failed++;
		}
		result->accepted = accepted;
		result->answered = answered;
		result->elapsed_ms = now - start_ms;

		/* Spec §3 steps 3 and 4: a quorum, and validity left after elapsed and drift. */
		if (accepted >= result->quorum && ttl_ms - result->elapsed_ms - drift_ms > 0)
		{
			result->status = REDLOCK_OK;
			result->valid_until_ms = start_ms + ttl_ms - drift_ms;
			redlock_stats_count(REDLOCK_STAT_ACQUIRED);
			redlock_stats_acquire_latency(result->elapsed_ms);
			break;
		}

		result->status = answered < result->quorum ? REDLOCK_UNAVAILABLE : REDLOCK_BUSY;
		if (result->status == REDLOCK_UNAVAILABLE)
			result->node_errors = collect_node_errors(outcomes, result->node_count);

		/*
		 * Spec §3 step 5: undo on every master at once, including those that did not
		 * answer, since a request that timed out may still have set the key.  Nobody
		 * waits for the replies (each connection reads them before its next use), so
		 * the outcomes, read above, can be written over.
		 */
		if (accepted > 0 || answered < result->node_count)
			run_script(&release_script, key, token, NULL, -1, false, outcomes);

		if (result->status == REDLOCK_UNAVAILABLE)
		{
			redlock_stats_count(REDLOCK_STAT_UNAVAILABLE);
			break;
		}
		redlock_stats_count(REDLOCK_STAT_BUSY);
		if (deadline_ms >= 0 && redlock_clock_ms() >= deadline_ms)
			break;
		retry_sleep(deadline_ms);
	}
	pfree(outcomes);
}

/*
 * redlock_quorum_release
 *		Runs the release script on every master (spec §5).
 *
 * key, token: as acquired.  cleanup: true on abort and exit paths (see
 * redlock_nodes_run).
 * result: accepted = masters that deleted the key; REDLOCK_OK when a quorum answered,
 *		REDLOCK_UNAVAILABLE otherwise, with node_errors (the keys then live until their
 *		TTL runs out).
 *
 * Outside cleanup, raises what an interrupted wait raises.
 */
void
redlock_quorum_release(const char *key, const char *token, bool cleanup,
					   RedlockResult *result)
{
	RedlockNodeOutcome *outcomes;
	double		start_ms = redlock_clock_ms();

	result_init(result);
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(result->node_count, 1));
	/* Cleanup waits for every node: there may be no later call to read the replies. */
	run_script(&release_script, key, token, NULL, cleanup ? 0 : result->quorum, cleanup,
			   outcomes);
	result->elapsed_ms = redlock_clock_ms() - start_ms;
	debug_outcomes("release", key, outcomes, result->node_count, result->elapsed_ms);
	redlock_stats_count(REDLOCK_STAT_RELEASED);
	count_integer_replies(outcomes, result);
	result->status = result->answered >= result->quorum ? REDLOCK_OK : REDLOCK_UNAVAILABLE;
	result->node_errors = collect_node_errors(outcomes, result->node_count);
	pfree(outcomes);
}

/*
 * redlock_quorum_extend
 *		Sets a new TTL on every master that still holds our token (spec §6).
 *
 * key, token: as acquired.  ttl_ms: the new TTL, 1..REDLOCK_MAX_TTL_MS milliseconds.
 * result: REDLOCK_OK with a new valid_until_ms when a quorum extended it within the
 *		new validity time; REDLOCK_UNAVAILABLE when fewer than a quorum answered (with
 *		node_errors); REDLOCK_BUSY when they answered but the lock is no longer ours.
 *
 * Raises what an interrupted wait raises.
 */
void
redlock_quorum_extend(const char *key, const char *token, int ttl_ms, RedlockResult *result)
{
	RedlockNodeOutcome *outcomes;
	char		ttl_text[16];
	double		start_ms;

	result_init(result);
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(result->node_count, 1));
	snprintf(ttl_text, sizeof(ttl_text), "%d", ttl_ms);

	start_ms = redlock_clock_ms();
	run_script(&extend_script, key, token, ttl_text, result->quorum, false, outcomes);
	result->elapsed_ms = redlock_clock_ms() - start_ms;
	result->attempts = 1;
	debug_outcomes("extend", key, outcomes, result->node_count, result->elapsed_ms);
	count_integer_replies(outcomes, result);

	if (result->accepted >= result->quorum &&
		ttl_ms - result->elapsed_ms - clock_drift_ms(ttl_ms) > 0)
	{
		result->status = REDLOCK_OK;
		result->valid_until_ms = start_ms + ttl_ms - clock_drift_ms(ttl_ms);
		redlock_stats_count(REDLOCK_STAT_EXTENDED);
	}
	else if (result->answered < result->quorum)
	{
		result->status = REDLOCK_UNAVAILABLE;
		result->node_errors = collect_node_errors(outcomes, result->node_count);
	}
	else
	{
		result->status = REDLOCK_BUSY;
		redlock_stats_count(REDLOCK_STAT_EXTEND_LOST);
	}
	pfree(outcomes);
}
