/*-------------------------------------------------------------------------
 *
 * patience.h
 *	  How patient this cluster's acquires are with their masters, learned from the
 *	  attempts (patience.c): cluster-wide when the library is preloaded, else this
 *	  backend's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_PATIENCE_H
#define REDLOCK_PATIENCE_H

/* The highest level: redlock.timeout x 2^10 (retry.c caps it lower anyway). */
#define REDLOCK_PATIENCE_MAX_LEVEL 10

extern void RedlockPatienceInit(void);
extern int	redlock_patience_level(void);
extern void redlock_patience_slow(int level);
extern void redlock_patience_quick(int level);

#endif							/* REDLOCK_PATIENCE_H */
