/*-------------------------------------------------------------------------
 *
 * deadlock.h
 *	  Deadlock detection across clusters for a waiting acquire (deadlock.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_DEADLOCK_H
#define REDLOCK_DEADLOCK_H

#include "redlock.h"

/*
 * What this backend holds on a set of masters, for its wait record: n keys and their
 * tokens (palloc'd arrays).  The lock layer provides it (init.c sets the source):
 * this layer knows rounds, not the backend's locks.
 */
typedef int (*RedlockHeldSource) (RedlockNodeSet *set, char ***keys, char ***tokens);

typedef struct RedlockDeadlockWait RedlockDeadlockWait;

extern void redlock_deadlock_set_held_source(RedlockHeldSource source);
extern RedlockDeadlockWait *redlock_deadlock_begin(RedlockNodeSet *set,
												   const char *const *keys, int nkeys,
												   char kind);
extern char *redlock_deadlock_check(RedlockDeadlockWait *wait);
extern void redlock_deadlock_intends(RedlockDeadlockWait *wait);
extern double redlock_deadlock_next_check_ms(const RedlockDeadlockWait *wait);
extern void redlock_deadlock_end(RedlockDeadlockWait *wait);
extern void redlock_deadlock_withdraw_pending(void);

#endif							/* REDLOCK_DEADLOCK_H */
