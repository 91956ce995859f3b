/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  Fencing tokens taken through the lock itself (doc/redlock.md §9): a number per
 *	  hold, larger than the token of every earlier holder of the resource.
 *
 * Each master keeps a counter per resource under its own key (the counter key: the
 * byte 0xFF, "fence:", then the lock's key; no UTF-8 text contains 0xFF, so no lock
 * key of ours or of another client that names its locks in text can equal it).  A
 * token is taken in two rounds, each on a quorum of the masters, and each only where
 * the lock's key still holds our token:
 *
 *	1. read: every master where our key is replies the larger of its counter and its
 *	   floor - 1, its floor being its own wall clock (TIME) in whole seconds times
 *	   10^6; else -1.  Once a quorum replied, T = their largest + 1.  The caller's
 *	   clock plays no part: the PostgreSQL servers taking tokens may disagree on the
 *	   time by any amount.
 *	2. write: every master where our key is still there sets its counter to T if the
 *	   counter is smaller (and replies 1), or replies minus the counter when it is
 *	   not (a conflict: see below).  T is ours once a quorum set it within the
 *	   lock's validity.
 *
 * Why a later token is larger.  Say hold A got T_A, its write round ending at t, and
 * hold B's read round starts after t.  A's write quorum and B's read quorum share a
 * master m (two quorums of N share 2q - N >= 1).  At m, A's write came before t and
 * B's read after it; counters only grow while the master keeps its data, so B read at
 * least T_A there, and T_B >= T_A + 1.  No two rounds ever hand out the same T: two
 * write quorums share a master, and there the second write finds the counter at T
 * already and is refused.  Tokens are fixed per hold and taken while it is held, so
 * for holds that do not overlap (the lock's promise, §3) the token order is the hold
 * order.  Holds that do overlap (a master whose clock ran fast dropped a key early,
 * §8) still get distinct tokens ordered by when each was taken, which is what a
 * guarded write needs: the one that writes with a smaller token than the last write's
 * is refused.
 *
 * Why the key check in both rounds.  A holder that pauses between its rounds (a GC,
 * a SIGSTOP) past its validity must not complete with a stale T: a later holder may
 * have read the same counters and written T itself.  The write round runs only where
 * our key still is, and a later holder's SET NX at a master succeeds only after our
 * key left it, so at every master of the later holder's quorum our late write finds
 * the key gone: it cannot reach a quorum.  A one-round scheme (reading the counters
 * with the acquire's SET NX, or reading without writing back) has no such guard, and
 * counters on different masters drift apart: test/model checks both.
 *
 * Preconditions, as for the lock itself (§8), and exactly what test/model checks: a
 * master keeps its counters across a restart (appendfsync always), or stays down
 * longer than the longest TTL and longer than one second plus S, where S bounds how far
 * one master's wall clock may be behind another's (a clock stepped back across the
 * restart counts its step).  A master restarted empty lowers nothing on the others, but
 * even one such master can be the one that the last write quorum and the next read
 * quorum share (test/model finds it): without a floor the next token could repeat or
 * fall below one already given.  The floor keeps it above: every token is below the
 * second after the largest master clock that had a part in it (fewer than 10^6 tokens
 * a second), and the restarted master, in the next read quorum, reads its own clock,
 * later by more than that second.  Callers' clocks are no part of it (1.4 took the floor
 * from the caller's clock: a PostgreSQL server whose clock was behind another's by more
 * than the restart delay less a second could get a smaller token; issue 21).
 *
 * Lifetime.  A counter lives REDLOCK_FENCE_COUNTER_TTL_MS (30 days) after the last
 * token taken from it, so that resources named once (a job id) do not leave keys
 * behind for ever.  A counter that expired restarts from the floor: a master's wall
 * clock in seconds times 10^6 exceeds every token taken more than 30 days earlier
 * unless the masters' clocks differ by more than that, since a counter cannot outrun
 * the floor by more than the tokens taken within one second (each costs two round
 * trips: far fewer than 10^6).  Tokens stay below 2^53 (Lua numbers are doubles)
 * until the year 2255.
 *
 * A conflict in the write round means a master already holds T or more: a token
 * taken by a write round that failed elsewhere, or by an overlapping holder.  The
 * write is retried with T above the highest counter reported, at most
 * FENCE_WRITE_ROUNDS times, within the validity.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "clock.h"
#include "protocol/fence.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "tally.h"
#include "wire/call.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/* Write rounds one token may take (conflicts resolved by writing a larger T). */
#define FENCE_WRITE_ROUNDS 3

/* A read reply from a master where our key is: a counter. */
static bool
fence_accept_counter(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer >= 0;
}

/* Fills command with a call of script on key and counter_key with up to two args. */
static void
fence_command(RedlockCommand *command, RedlockScript *script,
			  bool (*accept) (const RedlockNodeOutcome *outcome), int need,
			  const char *key, const char *counter_key, const char *token,
			  const char *arg1, const char *arg2)
{
	memset(command, 0, sizeof(*command));
	command->need = need;
	command->accept = accept;
	command->script = script;
	command->argv[command->argc++] = key;
	command->argv[command->argc++] = counter_key;
	command->argv[command->argc++] = token;
	if (arg1)
		command->argv[command->argc++] = arg1;
	if (arg2)
		command->argv[command->argc++] = arg2;
	for (int i = 0; i < command->argc; i++)
		command->argvlen[i] = strlen(command->argv[i]);
}

/* A read reply from a master where our key is not. */
static bool
fence_read_gone(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer == -1;
}

/*
 * Ends a round that did not reach a quorum: REDLOCK_BUSY when the lock is lost for
 * certain (redlock_tally_lost), else REDLOCK_UNAVAILABLE with the masters' errors.
 */
static void
fence_round_failed(RedlockNodeSet *set, const RedlockNodeOutcome *outcomes, int gone,
			 RedlockResult *result)
{
	if (redlock_tally_lost(result, gone))
		result->status = REDLOCK_BUSY;
	else
	{
		result->status = REDLOCK_UNAVAILABLE;
		result->node_errors = redlock_node_errors(set, outcomes, result->node_count);
	}
}

/*
 * redlock_quorum_fence
 *		Takes a fencing token for a held lock: the two rounds above (§9).
 *
 * set: the masters the lock was taken on.  key, token: the lock's key and token.
 * valid_until_ms: the lock's validity end (a redlock_clock_ms() time): the write
 *		round must be decided before it.
 * fence: set to the token when the result is REDLOCK_OK.
 * result: REDLOCK_OK; REDLOCK_BUSY when the lock is no longer ours (more than
 *		node_count - quorum masters no longer hold our token), when its validity ran
 *		out before the token was written, or when conflicts went on for
 *		FENCE_WRITE_ROUNDS rounds; REDLOCK_UNAVAILABLE when fewer than a quorum
 *		answered (with node_errors).
 *
 * Raises what an interrupted network wait raises (57014 on cancel or
 * statement_timeout); a token left half-written then only raises some counters.
 */
void
redlock_quorum_fence(RedlockNodeSet *set, const char *key, const char *token,
					 double valid_until_ms, int64 *fence, RedlockResult *result)
{
	RedlockNodeOutcome *outcomes;
	RedlockCommand command;
	char	   *counter_key = psprintf(REDLOCK_FENCE_KEY_PREFIX "%s", key);
	char		fence_text[24];
	char		ttl_text[24];
	int64		next = 0;
	double		start_ms = redlock_clock_ms();
	int			gone;

	memset(result, 0, sizeof(*result));
	result->node_count = redlock_nodeset_size(set);
	result->quorum = redlock_nodeset_quorum(set);
	result->status = REDLOCK_BUSY;
	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(result->node_count, 1));
	snprintf(ttl_text, sizeof(ttl_text), INT64_FORMAT, REDLOCK_FENCE_COUNTER_TTL_MS);

	/* Round 1: the counters of a quorum of the masters where our key is. */
	fence_command(&command, &redlock_script_fence_read, fence_accept_counter, result->quorum,
				  key, counter_key, token, NULL, NULL);
	redlock_nodes_run(set, &command, 1, false, outcomes);
	gone = redlock_tally_round(outcomes, fence_accept_counter, redlock_tally_integer,
							   fence_read_gone, result);
	if (!redlock_quorum_reached(result->accepted, result->quorum))
	{
		fence_round_failed(set, outcomes, gone, result);
		goto done;
	}
	for (int i = 0; i < result->node_count; i++)
		if (fence_accept_counter(&outcomes[i]))
			next = Max(next, outcomes[i].integer + 1);

	/* Round 2: write it back where our key still is; a conflict raises it. */
	for (int round = 0; round < FENCE_WRITE_ROUNDS; round++)
	{
		int64		highest = 0;

		snprintf(fence_text, sizeof(fence_text), INT64_FORMAT, next);
		fence_command(&command, &redlock_script_fence_write, redlock_tally_one, result->quorum,
					  key, counter_key, token, fence_text, ttl_text);
		redlock_nodes_run(set, &command, 1, false, outcomes);
		gone = redlock_tally_round(outcomes, redlock_tally_one, redlock_tally_integer,
								   redlock_tally_zero, result);
		result->attempts = round + 1;
		if (redlock_quorum_reached(result->accepted, result->quorum))
		{
			/* §3 step 4: taken within the validity, or not at all. */
			if (redlock_clock_ms() < valid_until_ms)
			{
				result->status = REDLOCK_OK;
				*fence = next;
			}
			goto done;
		}
		for (int i = 0; i < result->node_count; i++)
			if (outcomes[i].kind == REDLOCK_REPLY_INTEGER && outcomes[i].integer < 0)
				highest = Max(highest, -outcomes[i].integer);
		if (highest == 0 || redlock_clock_ms() >= valid_until_ms)
		{
			fence_round_failed(set, outcomes, gone, result);
			goto done;
		}
		next = highest + 1;
	}

done:
	result->elapsed_ms = redlock_clock_ms() - start_ms;
	pfree(outcomes);
	pfree(counter_key);
}
