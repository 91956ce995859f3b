/*-------------------------------------------------------------------------
 *
 * life.h
 *	  A lock's life in this backend (life.c): its states, the events that move it,
 *	  and the questions every other module asks of it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LIFE_H
#define REDLOCK_LIFE_H

#include "redlock.h"

struct RedlockHeldLock;

/*
 * Where a lock of the lock table stands (life.c draws the transitions).  Only
 * redlock_life_move changes it.
 */
typedef enum RedlockLife
{
	REDLOCK_LIFE_ACQUIRING = 0,	/* an attempt in flight, or cut short: holds only */
	REDLOCK_LIFE_HELD,			/* won on a quorum (spec §3) */
	REDLOCK_LIFE_LOST,			/* found no longer ours: its keys let go of; the entry
								 * waits to be dropped or acquired afresh */
	REDLOCK_LIFE_RELEASING,		/* no hold left: the release of a held lock under way
								 * (or interrupted) */
	REDLOCK_LIFE_UNDOING,		/* no hold left: an attempt that never won, or a lost
								 * lock, being undone on every key it may have set */
	REDLOCK_LIFE_GONE			/* dropped from the table */
} RedlockLife;

/* What happens to a lock (redlock_life_move). */
typedef enum RedlockLifeEvent
{
	REDLOCK_LIFE_WON,			/* its attempt won: ACQUIRING -> HELD */
	REDLOCK_LIFE_FOUND_LOST,	/* another token, or another configuration: HELD -> LOST */
	REDLOCK_LIFE_RETRY,			/* acquired afresh, keeping its holds: LOST -> ACQUIRING */
	REDLOCK_LIFE_LET_GO,		/* its last hold went: -> RELEASING or UNDOING */
	REDLOCK_LIFE_DROP			/* the entry leaves the table: -> GONE */
} RedlockLifeEvent;

extern bool redlock_life_begin(struct RedlockHeldLock *lock, RedlockQuotaRefusal *refusal);
extern void redlock_life_move(struct RedlockHeldLock *lock, RedlockLifeEvent event);
extern bool redlock_life_held(const struct RedlockHeldLock *lock);
extern bool redlock_life_won(const struct RedlockHeldLock *lock);
extern bool redlock_life_letting_go(const struct RedlockHeldLock *lock);
extern int	redlock_life_letting_go_count(void);
extern bool redlock_life_reconfigured(const struct RedlockHeldLock *lock);
extern bool redlock_life_lost_by_worker(const struct RedlockHeldLock *lock);
extern double redlock_life_validity_left(const struct RedlockHeldLock *lock);

#endif							/* REDLOCK_LIFE_H */
