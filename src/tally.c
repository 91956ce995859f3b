/*-------------------------------------------------------------------------
 *
 * tally.c
 *	  One round's replies counted, written once for the acquire, release and extend
 *	  rounds (quorum.c) and the fencing rounds (fence.c), with the reply tests every
 *	  round shares (an integer, a string, 0, 1).
 *
 * Invariant: a lock is lost for certain only when more masters than a quorum can spare
 * (node_count - quorum) answered that our key is not there.  Fewer such answers, with
 * the rest silent, say nothing: the silent masters may still hold our token, so the
 * lock is then unknown (REDLOCK_UNAVAILABLE), never lost, and its keys are left to
 * their TTL.  Also the quorum itself: its size (redlock_quorum_for, the formula
 * beside the comparison) and the one comparison every round decides by
 * (redlock_quorum_reached).  A leaf: it calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redlock.h"
#include "tally.h"

/*
 * redlock_tally_integer
 *		A RedlockOutcomeTest: an integer reply (the lock scripts reply one, and PTTL).
 *		Raises nothing.  Not a distlock section: a reply's shape.
 */
bool
redlock_tally_integer(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER;
}

/*
 * redlock_tally_string
 *		A RedlockOutcomeTest: a string reply (the inspection and deadlock read scripts
 *		reply one).  Raises nothing.  Not a distlock section: a reply's shape.
 */
bool
redlock_tally_string(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_STRING;
}

/*
 * redlock_tally_zero
 *		A RedlockOutcomeTest: the integer 0, which the release, extend and fencing write
 *		scripts reply where our key is not.  Raises nothing.
 */
bool
redlock_tally_zero(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer == 0;
}

/*
 * redlock_tally_one
 *		A RedlockOutcomeTest: the integer 1, which the release, extend and fencing write
 *		scripts reply where they acted on our key.  Raises nothing.
 */
bool
redlock_tally_one(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_INTEGER && outcome->integer == 1;
}

/*
 * redlock_tally_round
 *		Counts one round's outcomes (result->node_count of them) into result:
 *		accepted (outcomes the test accepted approves), answered (outcomes answer
 *		approves: a reply that says something about the key), failed (no reply, or an
 *		error reply: redlock_outcome_failed), and of the failed, left_out (answers that
 *		count toward no quorum: wire/masterinfo.c) and out_of_memory (Redis' OOM error:
 *		the master reached maxmemory with noeviction) and timed_out (no reply in time
 *		on a connection still open: a master that may be slow rather than gone).
 *
 * gone: approves an answer that says our key is not there; NULL when the round cannot
 *		tell (then 0 is returned).
 *
 * Returns how many outcomes gone approved, for redlock_tally_lost.  Raises nothing.
 */
int
redlock_tally_round(const RedlockNodeOutcome *outcomes, RedlockOutcomeTest accepted,
					RedlockOutcomeTest answer, RedlockOutcomeTest gone, RedlockResult *result)
{
	int			gone_count = 0;

	result->accepted = result->answered = result->failed = 0;
	result->left_out = result->out_of_memory = result->timed_out = 0;
	for (int i = 0; i < result->node_count; i++)
	{
		if (redlock_outcome_failed(&outcomes[i]))
		{
			result->failed++;
			if (outcomes[i].left_out)
				result->left_out++;
			else if (outcomes[i].timed_out)
				result->timed_out++;
			else if (outcomes[i].kind == REDLOCK_REPLY_ERROR &&
					 strncmp(outcomes[i].error, "OOM ", 4) == 0)
				result->out_of_memory++;
		}
		if (!answer(&outcomes[i]))
			continue;
		result->answered++;
		if (accepted(&outcomes[i]))
			result->accepted++;
		else if (gone && gone(&outcomes[i]))
			gone_count++;
	}
	return gone_count;
}

/*
 * redlock_tally_lost
 *		True when the lock is lost for certain (the invariant above): the masters that
 *		did not say our key is gone (result->node_count less gone, the count
 *		redlock_tally_round returned) can no longer reach result->quorum.  Raises
 *		nothing.
 */
bool
redlock_tally_lost(const RedlockResult *result, int gone)
{
	return !redlock_quorum_reached(result->node_count - gone, result->quorum);
}

/*---- the quorum: its size, and the one comparison every round decides by ----*/

/*
 * redlock_quorum_reached
 *		Returns true when count masters (that accepted, answered, hold a key, confirmed
 *		a subscription...) reach quorum, the number redlock_quorum_for gave: the one
 *		comparison of every quorum decision (spec §3 step 3, and every round after it).
 *		Raises nothing.
 */
bool
redlock_quorum_reached(int count, int quorum)
{
	return count >= quorum;
}

/*
 * redlock_quorum_for
 *		Returns how many of count masters must accept for a lock to be held under the
 *		quorum setting setting (redlock.quorum: 0 for a majority, count / 2 + 1).
 *		Raises nothing.
 */
int
redlock_quorum_for(int setting, int count)
{
	return setting == 0 ? count / 2 + 1 : setting;
}

/*
 * redlock_quorum_problem
 *		Returns why a quorum setting (redlock.quorum) cannot serve count masters, as an
 *		errdetail sentence, or NULL when it can: 0, or more than half and at most all of
 *		them.  Raises nothing (the text is static, or palloc'd).
 */
const char *
redlock_quorum_problem(int setting, int count)
{
	if (setting == 0)
		return NULL;
	if (setting > count)
		return psprintf("redlock.quorum is %d, but redlock.servers lists %d masters.",
						setting, count);
	if (setting <= count / 2)
		return psprintf("redlock.quorum is %d of %d masters, not a majority: two clients could each hold the lock.",
						setting, count);
	return NULL;
}
