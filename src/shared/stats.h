/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters (stats.c): cluster-wide when the library is preloaded, else this
 *	  backend's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_STATS_H
#define REDLOCK_STATS_H

#include "redlock.h"

typedef struct RedlockStatsSnapshot
{
	bool		cluster_wide;	/* from shared memory (preloaded) or this backend */
	uint64		counters[REDLOCK_STAT_COUNT];
	double		acquire_latency_mean_ms;
	double		acquire_latency_max_ms;
	TimestampTz reset_at;
} RedlockStatsSnapshot;

extern void RedlockStatsInit(void);
extern void redlock_stats_count(RedlockCounter counter);
extern void redlock_stats_acquire_latency(double ms);
extern void redlock_stats_snapshot(RedlockStatsSnapshot *snapshot);
extern void redlock_stats_reset_counters(void);

#endif							/* REDLOCK_STATS_H */
