/*-------------------------------------------------------------------------
 *
 * quorumset.c
 *	  The Redlock protocol for a set of resources held all or nothing (doc/sets.md):
 *	  one acquire attempt sets every key of the set, or none, on each master, with one
 *	  script; the set is held when a quorum of masters set all of them (spec §3), and
 *	  the retry loop around it (spec §4).
 *
 * Invariant: on each master the script answers 1 only when it set all the set's keys,
 * 0 when it set none of them, and a set is held only when a quorum of masters answered
 * 1.  (A script that fails part way, a master's ACL refusing one key, sets some and
 * answers an error: that is no answer, so the attempt undoes it there as it does for a
 * master that did not answer.)  Every key of a held set
 * is then an ordinary Redlock key held on a quorum, so a set excludes every other set
 * or lock sharing a resource with it (two quorums meet), and holding part of a set is
 * never the outcome of an attempt: the masters counted have all of its keys.
 * Release, extension and fencing act on each key as on a lock (quorum.c, fence.c).
 *
 * One room with quorum.c (doc/internals.md): the token, the holder record's value, the
 * undo scripts and the retry policy are the lock's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "clock.h"
#include "protocol/quorum.h"
#include "protocol/retry.h"
#include "protocol/waitgraph.h"
#include "protocol/round.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "tally.h"
#include "validity.h"
#include "wire/call.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/* A set release reply that deleted every key. */
static bool
quorumset_accept_all_deleted(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer == 0;
}

/*
 * redlock_quorumset_release_command
 *		Fills command with the release of n locks that share token (a set's, spec §5):
 *		one script per master for all of them, decided once need masters deleted every
 *		key (-1: nobody waits; 0: every master).  keys: n keys, 2..REDLOCK_RELEASE_GROUP;
 *		joined: an empty buffer, which keeps the keys' argument (free it after the
 *		call).  Read each lock's outcome with redlock_quorumset_release_outcome.  Raises
 *		only out-of-memory errors.
 */
void
redlock_quorumset_release_command(RedlockCommand *command, const char *const *keys, int n,
								  const char *token, StringInfo joined, int need)
{
	Assert(n >= 1 && n <= REDLOCK_RELEASE_GROUP);
	for (int k = 0; k < n; k++)
	{
		appendStringInfoString(joined, keys[k]);
		appendStringInfoChar(joined, '\0');
	}
	redlock_round_script_command(command, &redlock_script_set_release, keys[0], token, NULL, need);
	command->accept = quorumset_accept_all_deleted;
	command->argv[command->argc] = joined->data;
	command->argvlen[command->argc++] = joined->len;
}

/*
 * redlock_quorumset_release_outcome
 *		The outcome, on one master, of the k-th lock of a set release's command (its
 *		reply there, reply): the integer 1 where the key was deleted, 0 where not, as
 *		the lock's release script answers; a failure as it is.  Raises nothing.
 */
void
redlock_quorumset_release_outcome(const RedlockNodeOutcome *reply, int k,
								  RedlockNodeOutcome *outcome)
{
	*outcome = *reply;
	if (reply->kind == REDLOCK_REPLY_INTEGER)
		outcome->integer = ((reply->integer >> k) & 1) ? 0 : 1;
}

/*
 * The masters' answers about one key of the set, as a lone SET NX of it would have
 * given them (for retry.c's rules): OK where the key is free or ours, nil where another
 * client holds it (its GET has a value and the script refused), failed where the
 * master did not answer.  gets: count GET outcomes of the key.
 */
static void
quorumset_key_view(const RedlockNodeOutcome *script, const RedlockNodeOutcome *gets,
				   int count, RedlockNodeOutcome *view)
{
	for (int i = 0; i < count; i++)
	{
		view[i] = script[i];
		if (script[i].kind != REDLOCK_REPLY_INTEGER)
			continue;
		view[i].kind = (script[i].integer == 0 && gets[i].kind == REDLOCK_REPLY_STRING)
			? REDLOCK_REPLY_NIL : REDLOCK_REPLY_OK;
	}
}

/*
 * redlock_quorum_acquire_all
 *		Acquires every key of a set on a quorum of set's masters, all or nothing (spec
 *		§3 for the set; doc/sets.md), retrying while one is busy (spec §4).  Each
 *		attempt is one script per master, in one round trip whatever nkeys is.
 *
 * set: the masters.  keys, nkeys: the set's Redis keys, 1..REDLOCK_MAX_SET, distinct.
 * tokens: nkeys buffers of REDLOCK_TOKEN_LEN + 1 bytes (one per lock of the set); each
 *		attempt's fresh token is written into every one before its script goes out, so
 *		that each holds the token to undo if the caller is interrupted.
 * ttl_ms, wait_ms, holder, waiter, behind: as for redlock_quorum_acquire_one_of; a
 *		waiter waits on keys[0]'s release (the caller registered it).  When waiting,
 *		each attempt also asks for each key's value and PTTL: the retry delay ends
 *		when every key will have expired on a quorum of the masters that hold it.
 * result: REDLOCK_OK with valid_until_ms (from the start of the attempt that won) and
 *		the count of masters that set the whole set; REDLOCK_BUSY when the last attempt
 *		found a key held elsewhere (or won too late to leave validity);
 *		REDLOCK_UNAVAILABLE when fewer than a quorum answered it, with node_errors.
 *
 * A failed attempt is undone on every master at once, key by key (spec §3 step 5):
 * a key held by one other client on a quorum quietly, others with an announcement.
 * Raises what an interrupted wait raises (57014), and XX000 if the strong random
 * source fails.
 */
void
redlock_quorum_acquire_all(RedlockNodeSet *set, const char *const *keys, int nkeys,
						   char *const *tokens, int ttl_ms, int wait_ms, const char *holder,
						   RedlockWaiter *waiter, bool behind, RedlockResult *result)
{
	redlock_quorumset_acquire_with(&redlock_script_set_acquire, set, keys, nkeys, tokens, ttl_ms,
								   wait_ms, holder, waiter, behind, result);
}

/*
 * redlock_quorumset_acquire_with
 *		redlock_quorum_acquire_all with another acquire script, called as the set's is
 *		(KEYS[1] the first key; ARGV: token, TTL in ms, the keys NUL-joined, the holder
 *		record or "") and answering as it does: 1 when it took every key, 0 when it
 *		took none.  For quorumshared.c, this module's room: a shared hold is acquired
 *		as a set of one key with the shared script.  Arguments, result and errors as
 *		for redlock_quorum_acquire_all.
 */
void
redlock_quorumset_acquire_with(RedlockScript *script, RedlockNodeSet *set,
							   const char *const *keys, int nkeys, char *const *tokens,
							   int ttl_ms, int wait_ms, const char *holder,
							   RedlockWaiter *waiter, bool behind, RedlockResult *result)
{
	bool		look = wait_ms != 0;
	int			ncommands = 1 + (look ? 2 * nkeys : 0);
	RedlockCommand *commands = palloc0(sizeof(RedlockCommand) * ncommands);
	RedlockCommand *undo = palloc0(sizeof(RedlockCommand) * nkeys);
	RedlockNodeOutcome *outcomes;
	RedlockNodeOutcome *view;
	StringInfoData joined;
	StringInfoData record;
	char		ttl_text[16];
	RedlockRetry retry;
	double		drift_ms = redlock_clock_drift_ms(ttl_ms);
	int			count;

	Assert(nkeys >= 1 && nkeys <= REDLOCK_MAX_SET);
	redlock_round_result_init(set, result);
	count = result->node_count;
	/* Room for an attempt's outcomes, and for its undo's (one command per key). */
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(count, 1) * Max(ncommands, nkeys));
	view = palloc(sizeof(RedlockNodeOutcome) * Max(count, 1));
	snprintf(ttl_text, sizeof(ttl_text), "%d", ttl_ms);
	initStringInfo(&joined);
	for (int k = 0; k < nkeys; k++)
	{
		appendStringInfoString(&joined, keys[k]);
		appendStringInfoChar(&joined, '\0');
	}
	initStringInfo(&record);

	/* The script: KEYS[1], then token, TTL, the keys and the record (filled below). */
	redlock_round_script_command(&commands[0], script, keys[0], "", ttl_text,
								  result->quorum);
	commands[0].argv[commands[0].argc] = joined.data;
	commands[0].argvlen[commands[0].argc++] = joined.len;
	commands[0].argc++;			/* the record, per attempt */
	for (int k = 0; look && k < nkeys; k++)
		redlock_round_look_commands(&commands[1 + 2 * k], keys[k], result->quorum);

	redlock_retry_begin(&retry, wait_ms, waiter, behind);
	redlock_retry_watch(&retry, set, keys, nkeys,
						script == &redlock_script_shared_acquire ?
						REDLOCK_WAIT_SHARED : REDLOCK_WAIT_SET);

	for (;;)
	{
		double		start_ms;
		double		free_in = 0;
		int			nundo = 0;
		bool		won;

		redlock_new_token(tokens[0]);
		for (int k = 1; k < nkeys; k++)
			memcpy(tokens[k], tokens[0], REDLOCK_TOKEN_LEN + 1);
		resetStringInfo(&record);
		if (holder)
			redlock_round_record_value(&record, tokens[0], holder);
		commands[0].argv[1] = tokens[0];
		commands[0].argvlen[1] = REDLOCK_TOKEN_LEN;
		commands[0].argv[4] = record.data;
		commands[0].argvlen[4] = record.len;

		redlock_retry_attempt(&retry, result);
		start_ms = redlock_clock_ms();
		redlock_nodes_run_within(set, commands, ncommands,
								 redlock_retry_timeout_ms(&retry, ttl_ms), outcomes);
		result->elapsed_ms = redlock_clock_ms() - start_ms;

		/* Spec §3 steps 3 and 4 for the set: a quorum set all, and validity is left. */
		redlock_tally_round(outcomes, redlock_tally_one, redlock_tally_integer, NULL, result);
		won = redlock_round_won(result, result->accepted, ttl_ms, drift_ms);
		if (result->node_errors)	/* an earlier attempt's */
			pfree(result->node_errors);
		result->node_errors = NULL;
		if (!won)
		{
			result->status = !redlock_quorum_reached(result->answered, result->quorum)
				? REDLOCK_UNAVAILABLE : REDLOCK_BUSY;
			if (result->status == REDLOCK_UNAVAILABLE)
				result->node_errors = redlock_node_errors(set, outcomes, count);
		}

		/*
		 * Spec §3 step 5: undo every key where the script may have set it (it did, or
		 * its master did not answer); a key another client holds on a quorum quietly,
		 * since waking its waiters would only have them refused again.  The wait ends
		 * when every key is free on a quorum (the slowest key's time), or is unknown.
		 */
		for (int k = 0; k < nkeys && !won; k++)
		{
			bool		held_elsewhere = !redlock_quorum_reached(result->accepted, result->quorum);

			if (look)
			{
				const RedlockNodeOutcome *gets = outcomes + (1 + 2 * k) * count;
				double		free_k;

				quorumset_key_view(outcomes, gets, count, view);
				held_elsewhere = held_elsewhere &&
					redlock_held_by_one_client(view, gets, count, result->quorum);
				free_k = redlock_free_in_ms(view, gets + count, count, result->quorum);
				free_in = (free_in < 0 || free_k < 0) ? -1 : Max(free_in, free_k);
			}
			if (result->accepted > 0 || result->answered < count)
				redlock_round_release_command(&undo[nundo++], held_elsewhere, keys[k],
											tokens[k], NULL, -1);
		}
		if (nundo > 0)
			redlock_nodes_run(set, undo, nundo, false, outcomes);

		redlock_round_count_attempt(result, won, start_ms, ttl_ms, drift_ms);
		redlock_retry_outcome(&retry, result);
		if (won)
			break;
		if (!redlock_retry_next(&retry, result, look ? free_in : -1))
			break;
	}
	redlock_retry_end(&retry);
	pfree(record.data);
	pfree(joined.data);
	pfree(view);
	pfree(outcomes);
	pfree(undo);
	pfree(commands);
}
