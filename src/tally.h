/*-------------------------------------------------------------------------
 *
 * tally.h
 *	  One round's replies counted (tally.c): accepted, answered, failed, the rule that
 *	  says a lock is lost for certain, and the reply tests the rounds share; the
 *	  quorum's size and the one comparison against it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_TALLY_H
#define REDLOCK_TALLY_H

#include "redlock.h"

/* Says whether one master's outcome is of a kind (accepted, an answer, "key gone"). */
typedef bool (*RedlockOutcomeTest) (const RedlockNodeOutcome *outcome);

extern bool redlock_tally_integer(const RedlockNodeOutcome *outcome);
extern bool redlock_tally_string(const RedlockNodeOutcome *outcome);
extern bool redlock_tally_zero(const RedlockNodeOutcome *outcome);
extern bool redlock_tally_one(const RedlockNodeOutcome *outcome);
extern int	redlock_tally_round(const RedlockNodeOutcome *outcomes, RedlockOutcomeTest accepted,
								RedlockOutcomeTest answer, RedlockOutcomeTest gone,
								RedlockResult *result);
extern bool redlock_tally_lost(const RedlockResult *result, int gone);

extern bool redlock_quorum_reached(int count, int quorum);
extern int	redlock_quorum_for(int setting, int count);
extern const char *redlock_quorum_problem(int setting, int count);

#endif							/* REDLOCK_TALLY_H */
