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

/* A waiting backend, as redlock_waiters_list reads it. */
typedef struct RedlockWaiterRow
{
	int			proc_number;	/* its PGPROC number */
	char	   *key;			/* the Redis key it waits for, or NULL (too long to keep) */
	int			prefix_len;		/* bytes of redlock.key_prefix at the start of key */
	double		since_ms;		/* when the wait began (a redlock_clock_ms() time) */
	uint64		attempts;		/* acquire attempts made in this wait */
} RedlockWaiterRow;

extern void RedlockWaitersInit(void);
extern RedlockWaiter *redlock_waiters_begin(const char *key, int prefix_len, bool *behind);
extern void redlock_waiters_count_attempt(RedlockWaiter *waiter);
extern int	redlock_waiters_list(RedlockWaiterRow **rows);
extern void redlock_waiters_end(void);
extern void redlock_waiters_read(RedlockWaiter *waiter, RedlockWakeCount *count);
extern int	redlock_waiters_wake(const char *key, size_t len, const char *released,
								 size_t released_len, bool direct);
extern int	redlock_waiters_wake_again(const char *key, size_t len, const char *released,
									   size_t released_len);
extern void redlock_waiters_catch_up(const char *key, size_t len);
extern void redlock_waiters_keys(void (*fn) (const char *key, size_t len, void *arg),
								 void *arg);
extern int	redlock_waiters_count(void);

#endif							/* REDLOCK_WAITERS_H */
