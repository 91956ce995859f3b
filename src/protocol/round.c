/*-------------------------------------------------------------------------
 *
 * round.c
 *	  What every quorum round shares, whatever the kind of lock (quorum.c, quorumset.c,
 *	  quorumshared.c): a fresh token, a result started, a script's command, a waiter's
 *	  look, the holder record's value, the release (and an attempt's undo, spec §3
 *	  step 5) with its scripts, an attempt counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "protocol/holder.h"
#include "protocol/quorumshared.h"
#include "protocol/round.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "shared/stats.h"
#include "tally.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/*
 * Where the key is not ours, a holder record of our token may still be there: the
 * record's SET NX succeeded on a master where the lock's did not (the key was held by
 * a client that writes no record, or by shared holders, who write none).  Both release
 * scripts delete it, so that a refused attempt's undo, or the release of a lock held on
 * the other masters, leaves nothing.
 */
/*
 * Strong random bytes drawn ahead, for tokens: one pg_strong_random call serves
 * ROUND_TOKENS_AHEAD tokens (its per-call cost was a few percent of an acquire and
 * release pair).  Each byte is used once; a process forked after drawing (a backend
 * of a postmaster that drew none: the postmaster takes no lock) draws its own.
 */
#define ROUND_TOKENS_AHEAD 64
static uint8 round_random[REDLOCK_TOKEN_BYTES * ROUND_TOKENS_AHEAD];
static int	round_random_used = sizeof(round_random);
static int	round_random_pid = 0;	/* MyProcPid when drawn */

/*
 * redlock_new_token
 *		Writes a fresh token into token (REDLOCK_TOKEN_LEN + 1 bytes): 20 bytes from
 *		pg_strong_random (drawn ahead, never reused), hex-encoded (spec §2).  Raises
 *		ERROR (XX000) if the strong random source fails.
 */
void
redlock_new_token(char *token)
{
	const uint8 *bytes;

	if (round_random_used + REDLOCK_TOKEN_BYTES > (int) sizeof(round_random) ||
		round_random_pid != MyProcPid)
	{
		if (!pg_strong_random(round_random, sizeof(round_random)))
			elog(ERROR, "could not generate a random lock token");
		round_random_used = 0;
		round_random_pid = MyProcPid;
	}
	bytes = round_random + round_random_used;
	round_random_used += REDLOCK_TOKEN_BYTES;
	hex_encode((const char *) bytes, REDLOCK_TOKEN_BYTES, token);
	token[REDLOCK_TOKEN_LEN] = '\0';
}

/*
 * redlock_round_result_init
 *		Starts result for an operation over set: zeroed, with its node count and
 *		quorum.  Raises nothing.
 */
void
redlock_round_result_init(RedlockNodeSet *set, RedlockResult *result)
{
	memset(result, 0, sizeof(*result));
	result->node_count = redlock_nodeset_size(set);
	result->quorum = redlock_nodeset_quorum(set);
}

/* A GET reply: the key's value, or none. */
static bool
round_accept_value(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_STRING || outcome->kind == REDLOCK_REPLY_NIL;
}

/*
 * redlock_round_script_command
 *		Fills command with a call of script on key with token and an optional extra
 *		argument (NULL: none), decided once need nodes returned 1 (see RedlockCommand;
 *		-1: nobody waits for it).  Raises nothing.
 */
void
redlock_round_script_command(RedlockCommand *command, RedlockScript *script, const char *key,
			   const char *token, const char *arg, int need)
{
	memset(command, 0, sizeof(*command));
	command->need = need;
	command->accept = redlock_tally_one;
	command->script = script;
	command->argv[0] = key;
	command->argv[1] = token;
	command->argc = 2;
	if (arg)
		command->argv[command->argc++] = arg;
	for (int i = 0; i < command->argc; i++)
		command->argvlen[i] = strlen(command->argv[i]);
}

/* Fills command with "NAME key", decided once need nodes gave a reply accept approves. */
static void
round_key_command(RedlockCommand *command, const char *name, const char *key,
			bool (*accept) (const RedlockNodeOutcome *outcome), int need)
{
	memset(command, 0, sizeof(*command));
	command->need = need;
	command->accept = accept;
	command->argc = 2;
	command->argv[0] = name;
	command->argv[1] = key;
	command->argvlen[0] = strlen(name);
	command->argvlen[1] = strlen(key);
}

/*
 * redlock_round_look_commands
 *		Fills two commands for a waiter's look at key, sent behind its acquire in the
 *		same round trip: GET (whose token it holds) and PTTL (how long it has left),
 *		each decided at quorum answers.  Raises nothing.
 */
void
redlock_round_look_commands(RedlockCommand *two, const char *key, int quorum)
{
	round_key_command(&two[0], "GET", key, round_accept_value, quorum);
	round_key_command(&two[1], "PTTL", key, redlock_tally_integer, quorum);
}

/*
 * redlock_round_record_value
 *		Writes into buf the holder record's value for an attempt of token: the token, a
 *		tab, holder (holder.c), a tab and the time now in microseconds.  Raises only
 *		out-of-memory errors.
 */
void
redlock_round_record_value(StringInfo buf, const char *token, const char *holder)
{
	appendStringInfo(buf, "%s\t%s\t" INT64_FORMAT, token, holder, redlock_holder_now_us());
}

/*
 * redlock_round_release_command
 *		Fills command with a release of key with token (spec §2; an attempt's undo,
 *		spec §3 step 5, is one too): quiet when another client holds key on a quorum
 *		(waking its waiters would only have them refused again), else announcing the
 *		release on announce's channel (NULL: the key's own).  Decided once need nodes
 *		returned 1 (-1: nobody waits for it).  Raises nothing.
 */
void
redlock_round_release_command(RedlockCommand *command, bool quiet, const char *key,
							  const char *token, const char *announce, int need)
{
	redlock_round_script_command(command, quiet ? &redlock_script_quiet_release : &redlock_script_release,
								 key, token, announce, need);
}

/*
 * redlock_round_won
 *		Returns true when an acquire attempt that took result->elapsed_ms won: accepted
 *		masters (of the attempt's key, or of every key of a set) reach result->quorum
 *		(spec §3 step 3) and the TTL (ttl_ms) less the time it took and the drift
 *		allowance (drift_ms) leaves some validity (spec §3 step 4).  Raises nothing.
 */
bool
redlock_round_won(const RedlockResult *result, int accepted, int ttl_ms, double drift_ms)
{
	return redlock_quorum_reached(accepted, result->quorum) && ttl_ms - result->elapsed_ms - drift_ms > 0;
}

/*
 * redlock_round_count_attempt
 *		Ends an acquire attempt's outcome in result: when won, REDLOCK_OK with its
 *		validity (spec §3 step 4: from start_ms, the TTL less the drift allowance
 *		drift_ms) and the acquire counted; else the busy or unavailable attempt counted
 *		(result->status says which).  Raises nothing.
 */
void
redlock_round_count_attempt(RedlockResult *result, bool won, double start_ms, int ttl_ms,
							 double drift_ms)
{
	if (won)
	{
		result->status = REDLOCK_OK;
		result->valid_until_ms = start_ms + ttl_ms - drift_ms;
		redlock_stats_count(REDLOCK_STAT_ACQUIRED);
		redlock_stats_acquire_latency(result->elapsed_ms);
	}
	else
		redlock_stats_count(result->status == REDLOCK_UNAVAILABLE
							? REDLOCK_STAT_UNAVAILABLE : REDLOCK_STAT_BUSY);
}
