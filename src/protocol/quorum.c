/*-------------------------------------------------------------------------
 *
 * quorum.c
 *	  The Redlock protocol over the masters (spec §2-§6): one acquire attempt and the
 *	  retry loop around it (its waits are retry.c's), release and extend.
 *
 * No SQL and no transactions here: callers get a RedlockResult and decide.  Every
 * time is read from redlock_clock_ms(), so wall-clock jumps change nothing.
 *
 * Every acquire attempt uses a fresh token (written into the caller's buffer before
 * the attempt's SET goes out).  A failed attempt's undo is sent without waiting for
 * it; with one token per attempt, that undo, however late it runs (a NOSCRIPT re-sent
 * with EVAL behind the next attempt's SET), can only ever delete its own attempt's key.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/atomics.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"

#include "clock.h"
#include "compat.h"
#include "protocol/holder.h"
#include "protocol/quorum.h"
#include "protocol/quorumshared.h"
#include "protocol/retry.h"
#include "protocol/waitgraph.h"
#include "protocol/round.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "shared/stats.h"
#include "tally.h"
#include "validity.h"
#include "wire/call.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/* A SET NX reply that granted the lock. */
static bool
quorum_accept_ok(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_OK;
}

/* A permits_beyond.lua reply naming a slot past the permits. */
static bool
quorum_accept_positive(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer > 0;
}

/* A SET NX reply at all: granted, or refused because the key is there. */
static bool
quorum_answered_set(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_OK || outcome->kind == REDLOCK_REPLY_NIL;
}

/* True when some master of count accepted the holder record's SET NX. */
static bool
quorum_record_written(const RedlockNodeOutcome *outcomes, int count)
{
	for (int i = 0; i < count; i++)
		if (outcomes[i].kind == REDLOCK_REPLY_OK)
			return true;
	return false;
}

/* Logs each node's outcome of one request at DEBUG1. */
static void
quorum_debug_outcomes(RedlockNodeSet *set, const char *what, const char *key,
			   const RedlockNodeOutcome *outcomes, int n, double elapsed_ms)
{
	StringInfoData buf;

	if (!message_level_is_interesting(DEBUG1))
		return;
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		const RedlockNodeOutcome *o = &outcomes[i];

		appendStringInfo(&buf, "%s%s ", i > 0 ? ", " : "", redlock_node_name(set, i));
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
			case REDLOCK_REPLY_STRING:
				appendStringInfoString(&buf, "a value");
				break;
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

/*
 * One slot's commands in an acquire round, in this order: its SET NX, a waiter's GET
 * and PTTL, the holder record's SET NX.
 */
typedef struct QuorumSlotCommands
{
	int			per_slot;		/* commands per slot */
	int			look;			/* 3 when GET and PTTL follow the SET, else 1 */
	bool		record;			/* the record's SET is last */
} QuorumSlotCommands;

/* Fills a slot's commands (layout above) at commands for key; the token comes later. */
static void
quorum_slot_fill(RedlockCommand *commands, const QuorumSlotCommands *layout,
				 const char *key, const char *record_key, const char *ttl_text, int quorum)
{
	RedlockCommand *command = &commands[0];

	/* Spec §2: SET key token NX PX ttl; decided once a quorum granted it, or cannot. */
	command->need = quorum;
	command->accept = quorum_accept_ok;
	command->argc = 6;
	command->argv[0] = "SET";
	command->argv[1] = key;
	command->argv[3] = "NX";
	command->argv[4] = "PX";
	command->argv[5] = ttl_text;
	for (int i = 0; i < command->argc; i++)
		command->argvlen[i] = command->argv[i] ? strlen(command->argv[i]) : 0;

	/* A waiter also asks whose the key is and how long it has left, in the same trip. */
	if (layout->look == 3)
		redlock_round_look_commands(&commands[1], key, quorum);

	/*
	 * The holder record, right behind in the same round trip: SET NX too, so that an
	 * attempt refused because the lock is held leaves the holder's record alone (the
	 * record names its token, and is read only beside it: holder.c).
	 */
	if (layout->record)
	{
		RedlockCommand *record = &commands[layout->look];

		memcpy(record, command, sizeof(*record));
		record->accept = quorum_answered_set;
		record->argv[1] = record_key;
		record->argvlen[1] = strlen(record_key);
	}
}

/*
 * The lowest slot past a semaphore's permits that at least quorum masters report
 * held (permits_beyond.lua's replies), or 0.
 */
static int
quorum_beyond_slot(const RedlockNodeOutcome *outcomes, int count, int quorum)
{
	int			seen = 0;
	int			lowest = 0;

	for (int i = 0; i < count; i++)
		if (outcomes[i].kind == REDLOCK_REPLY_INTEGER && outcomes[i].integer > 0)
		{
			seen++;
			if (lowest == 0 || outcomes[i].integer < lowest)
				lowest = (int) outcomes[i].integer;
		}
	return redlock_quorum_reached(seen, quorum) ? lowest : 0;
}

/*
 * redlock_quorum_acquire
 *		redlock_quorum_acquire_one_of for one key: acquires key on a quorum of set's
 *		masters (spec §3), retrying a busy lock (spec §4); arguments and result as
 *		described there.  Raises what that raises.
 */
void
redlock_quorum_acquire(RedlockNodeSet *set, const char *key, char *token, int ttl_ms,
					   int wait_ms, const char *holder, RedlockWaiter *waiter, bool behind,
					   RedlockResult *result)
{
	int			slot;

	redlock_quorum_acquire_one_of(set, &key, 1, NULL, token, ttl_ms, wait_ms, holder,
								  waiter, behind, result, &slot);
}

/*
 * redlock_quorum_acquire_one_of
 *		Acquires one of nkeys keys on a quorum of set's masters (spec §3), retrying
 *		while all are busy (spec §4): a lock (nkeys 1) or a semaphore's permit (its
 *		slots, doc/semaphores.md).  Every attempt sends SET NX for every key to every
 *		master in one round trip; the first key that a quorum granted is kept, and
 *		every other key granted anywhere is undone at once.
 *
 * Invariant: each key is an ordinary Redlock key, held by at most one client (two
 * quorums meet), and an attempt keeps at most one of them; so at most nkeys clients
 * hold one, whatever the masters' replies and their order.  The quorum is counted per
 * key, never across keys.
 *
 * set: the masters.  keys, nkeys: the Redis keys, 1..REDLOCK_MAX_PERMITS.
 * announce: NULL, or the key on whose release channel an undo of a key announces it
 *		(a semaphore's waiters wait on its resource's key); NULL announces the key.
 * token: a buffer of REDLOCK_TOKEN_LEN + 1 bytes; a fresh token (redlock_new_token) is
 *		written into it before each attempt's SET goes out, so that it always holds the
 *		token of the latest attempt (the one to undo, on every key, if the caller is
 *		interrupted).
 * ttl_ms: the TTL, 1..REDLOCK_MAX_TTL_MS milliseconds.
 * holder: NULL, or the holder record (holder.c) to write beside each key, with SET NX
 *		and the key's TTL, right behind each attempt's SET in the same round trip.
 * wait_ms: how long to keep retrying, in milliseconds, while every key is busy or
 *		fewer than a quorum answered (a master's blip); 0 makes one attempt, < 0
 *		retries without limit (until interrupted).  When it is not 0, each attempt
 *		also asks every master for each key's value and PTTL: the retry delay ends when
 *		a quorum of some key's masters that refused us will have expired it, and a
 *		failed attempt's undo announces a key's release only when no single other
 *		client holds that key on a quorum (a single attempt's undo announces only a
 *		key a quorum granted it, too late or beside the key kept).
 * waiter: NULL, or this backend's slot on the waiter board, woken when a release of
 *		the awaited key is announced (see redlock_retry_sleep): the retry delay then
 *		ends early.
 * behind: other backends of this cluster already wait for it (with waiter only): the
 *		first attempt waits for a wake-up too, or one retry delay, rather than race the
 *		waiter a release has just woken; a third contender in a round can split the
 *		masters' votes so that nobody wins.
 * result: REDLOCK_OK with valid_until_ms set, measured from the start of the attempt
 *		that won, and the counts of the key kept; REDLOCK_BUSY when the last attempt
 *		found every key held elsewhere (or won too late to leave any validity);
 *		REDLOCK_UNAVAILABLE when fewer than a quorum of masters answered the last
 *		attempt, with its node_errors.  Both are retried while the wait lasts: with
 *		wait_ms 0, the one attempt's outcome.
 * slot: set to the index of the key held (REDLOCK_OK), else -1.
 *
 * A semaphore's attempt (announce set, fewer than REDLOCK_MAX_PERMITS keys) also asks
 * each master for a held slot past nkeys, in the same round trip: when a quorum reports
 * one, another caller gives more permits and the bound is broken; the attempt is
 * undone whatever it won, not retried, and result->beyond_slot (1-based) names it,
 * with REDLOCK_BUSY.
 *
 * A failed attempt is undone on every master at once (spec §3 step 5).  Raises what
 * an interrupted wait raises (57014 on cancel or statement_timeout), and XX000 if the
 * strong random source fails.
 */
void
redlock_quorum_acquire_one_of(RedlockNodeSet *set, const char *const *keys, int nkeys,
							  const char *announce, char *token, int ttl_ms, int wait_ms,
							  const char *holder, RedlockWaiter *waiter, bool behind,
							  RedlockResult *result, int *slot)
{
	QuorumSlotCommands layout;
	RedlockCommand *commands;
	RedlockCommand *undo;
	RedlockResult *tallies = palloc(sizeof(RedlockResult) * nkeys);
	RedlockNodeOutcome *outcomes;
	char	  **record_keys = NULL;
	StringInfoData record_value;
	char		ttl_text[16];
	RedlockRetry retry;
	double		drift_ms = redlock_clock_drift_ms(ttl_ms);
	int			count;
	int			nsent;
	char		permits_text[16];
	char		max_text[16];
	bool		check_beyond = announce != NULL && nkeys < REDLOCK_MAX_PERMITS;
	/* A lock waiting for shared holders posts its intent (doc/shared.md §3). */
	bool		may_intend = nkeys == 1 && announce == NULL && wait_ms != 0;
	char	   *intent_key = NULL;
	char		intent_ttl_text[16];
	int			nrun;

	Assert(nkeys >= 1 && nkeys <= REDLOCK_MAX_PERMITS);
	redlock_round_result_init(set, result);
	count = result->node_count;
	layout.look = (wait_ms != 0) ? 3 : 1;
	layout.record = holder != NULL;
	layout.per_slot = layout.look + (holder ? 1 : 0);
	nsent = layout.per_slot * nkeys + (check_beyond ? 1 : 0);
	nrun = nsent;
	commands = palloc0(sizeof(RedlockCommand) * (nsent + 1));
	undo = palloc0(sizeof(RedlockCommand) * (nkeys + 1));
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(count, 1) * (nsent + 1));

	snprintf(ttl_text, sizeof(ttl_text), "%d", ttl_ms);
	if (holder)
	{
		record_keys = palloc(sizeof(char *) * nkeys);
		initStringInfo(&record_value);
	}
	for (int s = 0; s < nkeys; s++)
	{
		if (holder)
			record_keys[s] = psprintf("%s%s", keys[s], REDLOCK_HOLDER_KEY_SUFFIX);
		quorum_slot_fill(&commands[s * layout.per_slot], &layout, keys[s],
						 holder ? record_keys[s] : NULL, ttl_text, result->quorum);
	}
	if (check_beyond)
	{
		RedlockCommand *beyond = &commands[nsent - 1];

		snprintf(permits_text, sizeof(permits_text), "%d", nkeys);
		snprintf(max_text, sizeof(max_text), "%d", REDLOCK_MAX_PERMITS);
		redlock_round_script_command(beyond, &redlock_script_permits_beyond, announce, permits_text, max_text,
							  result->quorum);
		/* Wait until a quorum names a slot, or enough say none that it cannot. */
		beyond->accept = quorum_accept_positive;
	}

	/* Queued behind this cluster's waiters: the oldest is woken first (waiters.c). */
	redlock_retry_begin(&retry, wait_ms, waiter, behind);
	redlock_retry_watch(&retry, set, keys, nkeys,
						announce ? REDLOCK_WAIT_PERMIT : REDLOCK_WAIT_EXCLUSIVE);

	for (;;)
	{
		double		start_ms;
		double		now;
		double		free_in = -1;
		int			kept = -1;
		int			nundo = 0;
		int			patience_ms;
		bool		shared_seen;

		redlock_new_token(token);
		if (holder)
		{
			resetStringInfo(&record_value);
			redlock_round_record_value(&record_value, token, holder);
		}
		for (int s = 0; s < nkeys; s++)
		{
			RedlockCommand *command = &commands[s * layout.per_slot];

			command->argv[2] = token;
			command->argvlen[2] = strlen(token);
			if (holder)
			{
				command[layout.look].argv[2] = record_value.data;
				command[layout.look].argvlen[2] = record_value.len;
			}
		}
		redlock_retry_attempt(&retry, result);
		patience_ms = redlock_retry_timeout_ms(&retry, ttl_ms);
		if (intent_key)
			redlock_quorumshared_intent_attempt(&commands[nsent], token, ttl_ms, patience_ms);
		start_ms = redlock_clock_ms();
		redlock_nodes_run_within(set, commands, nrun, patience_ms, outcomes);
		now = redlock_clock_ms();
		result->elapsed_ms = now - start_ms;

		/* Each key's quorum on its own (the invariant above); keep the first granted. */
		for (int s = 0; s < nkeys; s++)
		{
			RedlockNodeOutcome *mine = outcomes + s * layout.per_slot * count;

			quorum_debug_outcomes(set, "acquire", keys[s], mine, count, result->elapsed_ms);
			tallies[s] = *result;
			redlock_tally_round(mine, quorum_accept_ok, quorum_answered_set, NULL, &tallies[s]);
			/* Spec §3 steps 3 and 4: a quorum, and validity left after elapsed and drift. */
			if (kept < 0 && redlock_round_won(result, tallies[s].accepted, ttl_ms, drift_ms))
				kept = s;
			if (layout.look == 3)
			{
				double		free_s = redlock_free_in_ms(mine, mine + 2 * count, count,
														result->quorum);

				if (free_s >= 0 && (free_in < 0 || free_s < free_in))
					free_in = free_s;
			}
		}
		result->beyond_slot = check_beyond
			? quorum_beyond_slot(outcomes + (nsent - 1) * count, count, result->quorum) : 0;
		/* Read before the undo below writes over the outcomes. */
		shared_seen = may_intend && intent_key == NULL &&
			redlock_quorumshared_seen(outcomes + count, count);
		if (result->beyond_slot > 0)
			kept = -1;			/* refused: undone below with the others */
		*slot = kept;
		result->accepted = tallies[Max(kept, 0)].accepted;
		result->answered = tallies[Max(kept, 0)].answered;
		result->failed = tallies[Max(kept, 0)].failed;
		result->left_out = tallies[Max(kept, 0)].left_out;
		result->out_of_memory = tallies[Max(kept, 0)].out_of_memory;
		result->timed_out = tallies[Max(kept, 0)].timed_out;
		if (result->node_errors)	/* an earlier attempt's */
			pfree(result->node_errors);
		result->node_errors = NULL;
		if (kept < 0)
		{
			result->status = !redlock_quorum_reached(result->answered, result->quorum) && result->beyond_slot == 0
				? REDLOCK_UNAVAILABLE : REDLOCK_BUSY;
			if (result->status == REDLOCK_UNAVAILABLE)
				result->node_errors = redlock_node_errors(set, outcomes, count);
		}

		/*
		 * Spec §3 step 5: undo every key not kept on every master at once, including
		 * those that did not answer, since a request that timed out may still have set
		 * the key; also when only a holder record of ours was set (the scripts delete
		 * it there).  A key granted by a quorum but not kept is free for others: its
		 * undo announces it.  Nobody waits for the replies (each connection reads them
		 * before its next use), so the outcomes, read above, can be written over.
		 */
		for (int s = 0; s < nkeys; s++)
		{
			RedlockNodeOutcome *mine = outcomes + s * layout.per_slot * count;
			bool		held_elsewhere;

			if (s == kept ||
				!(tallies[s].accepted > 0 || tallies[s].answered < count ||
				  (holder && quorum_record_written(mine + layout.look * count, count))))
				continue;
			held_elsewhere = !redlock_quorum_reached(tallies[s].accepted, result->quorum) &&
				(layout.look == 1 ||
				 redlock_held_by_one_client(mine, mine + count, count, result->quorum));
			redlock_round_release_command(&undo[nundo++], held_elsewhere, keys[s], token,
										  announce, -1);
		}
		if (nundo > 0)
			redlock_nodes_run(set, undo, nundo, false, outcomes);

		redlock_round_count_attempt(result, kept >= 0, start_ms, ttl_ms, drift_ms);
		redlock_retry_outcome(&retry, result);
		if (kept >= 0)
			break;

		/*
		 * Shared holders hold it on some master: from the next attempt on, each one
		 * also posts this acquire's intent, so that no new shared holder joins them
		 * while it waits (doc/shared.md §3).
		 */
		if (shared_seen)
		{
			intent_key = psprintf("%s" REDLOCK_INTENT_KEY_SUFFIX, keys[0]);
			redlock_quorumshared_intent_command(&commands[nsent], intent_key,
												intent_ttl_text);
			nrun = nsent + 1;
			redlock_retry_intends(&retry);
		}

		/*
		 * A caller willing to wait rides out a blip: an attempt that fewer than a
		 * quorum answered is retried like a busy one (the undo above went out), and
		 * the last attempt's outcome is the answer when the wait runs out.
		 */
		if (result->beyond_slot > 0 || !redlock_retry_next(&retry, result, free_in))
			break;
	}

	redlock_retry_end(&retry);

	/* The intent goes with the wait, held or not: it names the last attempt's token. */
	if (intent_key)
	{
		redlock_round_release_command(&undo[0], true, intent_key, token, NULL, -1);
		redlock_nodes_run(set, undo, 1, false, outcomes);
		pfree(intent_key);
	}
	pfree(outcomes);
	pfree(undo);
	pfree(commands);
	pfree(tallies);
	if (holder)
	{
		for (int s = 0; s < nkeys; s++)
			pfree(record_keys[s]);
		pfree(record_keys);
		pfree(record_value.data);
	}
}

/* qsort comparator: indexes into quorum_sort_locks by token, then by index. */
static const RedlockKeyToken *quorum_sort_locks;

static int
quorum_compare_by_token(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;
	int			c = strcmp(quorum_sort_locks[x].token, quorum_sort_locks[y].token);

	return c != 0 ? c : (x > y) - (x < y);
}

/*
 * redlock_quorum_release_many
 *		Runs the release script for n locks on every master of set, all in one round
 *		with one deadline per master (spec §5).  Locks that share a token (a set's,
 *		quorumset.c) go in one script per master, up to REDLOCK_RELEASE_GROUP of them.
 *
 * set: the masters the locks were taken on.  locks, n: their keys and tokens (n >= 1).
 * wait_all: wait for every master (within its deadline) rather than only until each
 *		release is decided: for backend exit, where no later call reads late replies.
 * cleanup: true on commit, abort and exit paths (see redlock_nodes_run).
 * results: n entries; accepted = masters that deleted the key; REDLOCK_OK when a
 *		quorum answered, REDLOCK_UNAVAILABLE otherwise, with node_errors (the keys then
 *		live until their TTL runs out).
 *
 * Outside cleanup, raises what an interrupted wait raises.
 */
void
redlock_quorum_release_many(RedlockNodeSet *set, const RedlockKeyToken *locks, int n,
							bool wait_all, bool cleanup, RedlockResult *results)
{
	RedlockCommand *commands = palloc(sizeof(RedlockCommand) * n);
	int		   *order = palloc(sizeof(int) * n);
	int		   *command_of = palloc(sizeof(int) * n);	/* per lock */
	int		   *place = palloc(sizeof(int) * n);	/* its place in its command */
	const char **group_keys = palloc(sizeof(char *) * n);
	StringInfoData *joined = palloc(sizeof(StringInfoData) * n);
	RedlockNodeOutcome *outcomes;
	int			count = redlock_nodeset_size(set);
	int			ncommands = 0;
	double		start_ms = redlock_clock_ms();
	double		elapsed_ms;

	for (int k = 0; k < n; k++)
	{
		redlock_round_result_init(set, &results[k]);
		order[k] = k;
	}
	quorum_sort_locks = locks;
	qsort(order, n, sizeof(int), quorum_compare_by_token);

	/* Runs of one token with no announcement go together; the others alone. */
	for (int i = 0; i < n;)
	{
		const RedlockKeyToken *first = &locks[order[i]];
		int			run = 1;
		int			need = wait_all ? 0 : results[order[i]].quorum;

		while (i + run < n && run < REDLOCK_RELEASE_GROUP && first->announce == NULL &&
			   locks[order[i + run]].announce == NULL &&
			   strcmp(locks[order[i + run]].token, first->token) == 0)
			run++;
		for (int j = 0; j < run; j++)
		{
			command_of[order[i + j]] = ncommands;
			place[order[i + j]] = j;
			group_keys[j] = locks[order[i + j]].key;
		}
		joined[ncommands].data = NULL;
		if (run == 1)
			redlock_round_release_command(&commands[ncommands], false, first->key,
										  first->token, first->announce, need);
		else
		{
			initStringInfo(&joined[ncommands]);
			redlock_quorumset_release_command(&commands[ncommands], group_keys, run,
											  first->token, &joined[ncommands], need);
		}
		ncommands++;
		i += run;
	}
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(ncommands * count, 1));
	redlock_nodes_run(set, commands, ncommands, cleanup, outcomes);
	elapsed_ms = redlock_clock_ms() - start_ms;

	for (int k = 0; k < n; k++)
	{
		RedlockResult *result = &results[k];
		RedlockNodeOutcome *theirs = &outcomes[command_of[k] * count];
		RedlockNodeOutcome mine[REDLOCK_MAX_NODES];

		for (int i = 0; i < count; i++)
		{
			if (joined[command_of[k]].data)
				redlock_quorumset_release_outcome(&theirs[i], place[k], &mine[i]);
			else
				mine[i] = theirs[i];
		}
		result->elapsed_ms = elapsed_ms;
		quorum_debug_outcomes(set, "release", locks[k].key, mine, count, elapsed_ms);
		redlock_stats_count(REDLOCK_STAT_RELEASED);
		redlock_tally_round(mine, redlock_tally_one, redlock_tally_integer, NULL, result);
		result->status = redlock_quorum_reached(result->answered, result->quorum) ? REDLOCK_OK : REDLOCK_UNAVAILABLE;
		result->node_errors = redlock_node_errors(set, mine, count);
	}
	for (int c = 0; c < ncommands; c++)
		if (joined[c].data)
			pfree(joined[c].data);
	pfree(outcomes);
	pfree(joined);
	pfree(group_keys);
	pfree(place);
	pfree(command_of);
	pfree(order);
	pfree(commands);
}

/*
 * redlock_quorum_let_go
 *		Sends the release of lock, found lost or run out, to every master of set
 *		without waiting for a reply, as an attempt's undo (spec §3 step 5): whatever
 *		the masters answer, the lock is no longer this backend's, and a master that is
 *		frozen or slow must not hold the caller (the key then lives until its TTL runs
 *		out).  Each connection reads the reply before its next use.  Raises what an
 *		interrupted network wait raises.
 */
void
redlock_quorum_let_go(RedlockNodeSet *set, const RedlockKeyToken *lock)
{
	RedlockCommand command;
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * redlock_nodeset_size(set));

	redlock_round_release_command(&command, false, lock->key, lock->token, lock->announce, -1);
	redlock_nodes_run(set, &command, 1, false, outcomes);
	redlock_stats_count(REDLOCK_STAT_RELEASED);
	pfree(outcomes);
}

/*
 * redlock_quorum_extend_many
 *		Sets a new TTL on n locks, on every master of set that still holds the lock's
 *		token (spec §6), all in one round (the background worker renews many locks at
 *		once).
 *
 * set: the masters the locks were taken on.  locks, n: their keys and tokens (n >= 1).
 * ttls_ms: each lock's new TTL, 1..REDLOCK_MAX_TTL_MS milliseconds.
 * renewal: true for the background worker's renewals, which it counts itself (renewed,
 *		failed, lost) rather than as extensions.
 * answer_by_ms: 0, or the end of the validity the locks still have (a redlock_clock_ms()
 *		time, the earliest of theirs): the round waits no longer, and a lock that a
 *		quorum has not extended by then has run out (doc/redlock.md §6: an extension
 *		answered after the validity it extends leaves its holder working unprotected
 *		meanwhile, so its holder must hear by then).
 * results: n entries; REDLOCK_OK with a new valid_until_ms when a quorum extended the
 *		lock within its new validity time; REDLOCK_BUSY when it is no longer ours for
 *		certain (more than node_count - quorum masters answered that our key is gone),
 *		or ran out (ran_out: answer_by_ms came first); REDLOCK_UNAVAILABLE when the
 *		answers cannot tell (with node_errors).
 *		Whatever the outcome, any master may have applied the new TTL: see
 *		redlock_validity_bound_ms().
 *
 * Outside cleanup, raises what an interrupted wait raises.
 */
void
redlock_quorum_extend_many(RedlockNodeSet *set, const RedlockKeyToken *locks,
						   const int *ttls_ms, int n, bool renewal, double answer_by_ms,
						   RedlockResult *results)
{
	RedlockCommand *commands = palloc(sizeof(RedlockCommand) * n);
	char	  (*ttl_texts)[16] = palloc(sizeof(*ttl_texts) * n);
	int			count = redlock_nodeset_size(set);
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(n * count, 1));
	double		start_ms;
	double		elapsed_ms;

	for (int k = 0; k < n; k++)
	{
		redlock_round_result_init(set, &results[k]);
		snprintf(ttl_texts[k], sizeof(ttl_texts[k]), "%d", ttls_ms[k]);
		redlock_round_script_command(&commands[k], &redlock_script_extend, locks[k].key, locks[k].token,
					   ttl_texts[k], results[k].quorum);
	}

	start_ms = redlock_clock_ms();
	if (answer_by_ms > start_ms)
		redlock_nodes_run_by(set, commands, n, answer_by_ms, "the lock's validity ran out",
							 outcomes);
	else
		redlock_nodes_run(set, commands, n, false, outcomes);
	elapsed_ms = redlock_clock_ms() - start_ms;

	for (int k = 0; k < n; k++)
	{
		RedlockResult *result = &results[k];
		RedlockNodeOutcome *mine = &outcomes[k * count];
		double		drift_ms = redlock_clock_drift_ms(ttls_ms[k]);
		int			gone;

		result->elapsed_ms = elapsed_ms;
		result->attempts = 1;
		quorum_debug_outcomes(set, "extend", locks[k].key, mine, count, elapsed_ms);
		gone = redlock_tally_round(mine, redlock_tally_one, redlock_tally_integer,
								   redlock_tally_zero, result);

		if (redlock_quorum_reached(result->accepted, result->quorum) && ttls_ms[k] - elapsed_ms - drift_ms > 0)
		{
			result->status = REDLOCK_OK;
			result->valid_until_ms = start_ms + ttls_ms[k] - drift_ms;
			if (!renewal)
				redlock_stats_count(REDLOCK_STAT_EXTENDED);
		}
		else if (redlock_quorum_reached(result->accepted, result->quorum) || redlock_tally_lost(result, gone) ||
				 (answer_by_ms > start_ms && redlock_clock_ms() >= answer_by_ms))
		{
			/*
			 * Lost for certain (tally.c), extended by a quorum too late to leave any
			 * validity, or not extended before the validity it had ran out.
			 */
			result->ran_out = !redlock_quorum_reached(result->accepted, result->quorum) &&
				!redlock_tally_lost(result, gone);
			if (result->ran_out)
				result->node_errors = redlock_node_errors(set, mine, count);
			result->status = REDLOCK_BUSY;
			if (!renewal)
				redlock_stats_count(REDLOCK_STAT_EXTEND_LOST);
		}
		else
		{
			/*
			 * Not enough answers to tell: the masters that did not answer may still
			 * hold it.  Unknown, not lost: the caller keeps the lock with capped
			 * validity and leaves its keys to their TTL, since deleting them could
			 * free a lock that a quorum still grants us.
			 */
			result->status = REDLOCK_UNAVAILABLE;
			result->node_errors = redlock_node_errors(set, mine, count);
		}
	}
	pfree(outcomes);
	pfree(ttl_texts);
	pfree(commands);
}

/*
 * redlock_quorum_extend
 *		redlock_quorum_extend_many for one lock: sets a TTL of ttl_ms milliseconds on
 *		key where it still holds token (spec §6), waiting no later than answer_by_ms
 *		(0: none); result as described there.  Raises what an interrupted wait raises.
 */
void
redlock_quorum_extend(RedlockNodeSet *set, const char *key, const char *token, int ttl_ms,
					  double answer_by_ms, RedlockResult *result)
{
	RedlockKeyToken kt = {key, token, NULL};

	redlock_quorum_extend_many(set, &kt, &ttl_ms, 1, false, answer_by_ms, result);
}
