/*-------------------------------------------------------------------------
 *
 * waiters.h
 *	  The waiter board (waiters.c): which backend waits for which key, and the wake-ups
 *	  a release gives them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_WAITERS_H
#define REDLOCK_WAITERS_H

#include "redlock.h"

/* A backend's slot on the board; opaque. */
typedef struct RedlockWaiter RedlockWaiter;

/*
 * How often a waiter has been woken, read from its slot: two readings differ once it
 * was woken between them.  Two counts, each wake-up in one of them: direct, by a
 * release made in this very cluster (then nobody else was woken with it), and
 * announced, by a release announced on the masters (or a catch-up).  Each is read on
 * its own, so a reading cannot tear a wake-up in two.
 */
typedef struct RedlockWakeCount
{
	uint64		announced;
	uint64		direct;
} RedlockWakeCount;

extern void RedlockWaitersInit(void);
extern RedlockWaiter *redlock_waiters_begin(const char *key, bool *behind);
extern void redlock_waiters_end(void);
extern void redlock_waiters_read(RedlockWaiter *waiter, RedlockWakeCount *count);
extern int	redlock_waiters_wake(const char *key, size_t len, bool direct);
extern void redlock_waiters_catch_up(const char *key, size_t len);
extern void redlock_waiters_keys(void (*fn) (const char *key, size_t len, void *arg),
								 void *arg);
extern int	redlock_waiters_count(void);

#endif							/* REDLOCK_WAITERS_H */
