/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters since start or reset.
 *
 * The counters are cluster-wide, in shared memory, when the library is in
 * shared_preload_libraries; otherwise each backend counts its own.  They are atomics
 * so that counting never takes a lock on the hot path.  (What this backend saw of each
 * master is kept with its node, in nodeset.c and node.c.)
 *
 * It calls only shmem.c (for its area); quorum.c, lockops.c, locktable.c, lease.c and
 * waiters.c feed it, and the SQL functions read it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"
#include "shared/stats.h"

#include "port/atomics.h"
#include "utils/timestamp.h"

#include "redlock.h"
#include "shared/shmem.h"

/* The counters, as kept in shared memory or in this backend. */
typedef struct RedlockCounters
{
	pg_atomic_uint64 counters[REDLOCK_STAT_COUNT];
	pg_atomic_uint64 latency_sum_us;
	pg_atomic_uint64 latency_max_us;
	pg_atomic_uint64 reset_at;	/* a TimestampTz */
} RedlockCounters;

static RedlockCounters *shared_counters = NULL;
static RedlockCounters local_counters;
static bool local_ready = false;

static void
stats_counters_init(RedlockCounters *c)
{
	for (int i = 0; i < REDLOCK_STAT_COUNT; i++)
		pg_atomic_init_u64(&c->counters[i], 0);
	pg_atomic_init_u64(&c->latency_sum_us, 0);
	pg_atomic_init_u64(&c->latency_max_us, 0);
	pg_atomic_init_u64(&c->reset_at, (uint64) GetCurrentTimestamp());
}

static Size
stats_shmem_size(void)
{
	return sizeof(RedlockCounters);
}

static void
stats_shmem_attach(void *area, LWLock *lock pg_attribute_unused(), bool found)
{
	shared_counters = area;
	if (!found)
		stats_counters_init(shared_counters);
}

static const RedlockShmemArea stats_area = {
	.name = "redlock counters",
	.size = stats_shmem_size,
	.attach = stats_shmem_attach
};

/*
 * RedlockStatsInit
 *		Asks for shared memory for the counters when the library is being preloaded
 *		(redlock_shmem_register).  Called from _PG_init.  Raises nothing.
 */
void
RedlockStatsInit(void)
{
	redlock_shmem_register(&stats_area);
}

static RedlockCounters *
stats_counters(void)
{
	if (shared_counters)
		return shared_counters;
	if (!local_ready)
	{
		stats_counters_init(&local_counters);
		local_ready = true;
	}
	return &local_counters;
}

/*
 * redlock_stats_count
 *		Adds one to counter.
 */
void
redlock_stats_count(RedlockCounter counter)
{
	pg_atomic_fetch_add_u64(&stats_counters()->counters[counter], 1);
}

/*
 * redlock_stats_acquire_latency
 *		Records the duration (ms) of an acquire attempt that won.
 */
void
redlock_stats_acquire_latency(double ms)
{
	RedlockCounters *c = stats_counters();
	uint64		us = (uint64) (ms * 1000.0);
	uint64		max = pg_atomic_read_u64(&c->latency_max_us);

	pg_atomic_fetch_add_u64(&c->latency_sum_us, us);
	while (us > max && !pg_atomic_compare_exchange_u64(&c->latency_max_us, &max, us))
		;
}

/*
 * redlock_stats_snapshot
 *		Copies the counters into *snapshot.
 */
void
redlock_stats_snapshot(RedlockStatsSnapshot *snapshot)
{
	RedlockCounters *c = stats_counters();
	uint64		acquired;

	snapshot->cluster_wide = (shared_counters != NULL);
	for (int i = 0; i < REDLOCK_STAT_COUNT; i++)
		snapshot->counters[i] = pg_atomic_read_u64(&c->counters[i]);
	acquired = snapshot->counters[REDLOCK_STAT_ACQUIRED];
	snapshot->acquire_latency_mean_ms = acquired == 0 ? 0 :
		pg_atomic_read_u64(&c->latency_sum_us) / 1000.0 / acquired;
	snapshot->acquire_latency_max_ms = pg_atomic_read_u64(&c->latency_max_us) / 1000.0;
	snapshot->reset_at = (TimestampTz) pg_atomic_read_u64(&c->reset_at);
}

/*
 * redlock_stats_reset_counters
 *		Sets every counter back to zero (cluster-wide when in shared memory).
 */
void
redlock_stats_reset_counters(void)
{
	RedlockCounters *c = stats_counters();

	for (int i = 0; i < REDLOCK_STAT_COUNT; i++)
		pg_atomic_write_u64(&c->counters[i], 0);
	pg_atomic_write_u64(&c->latency_sum_us, 0);
	pg_atomic_write_u64(&c->latency_max_us, 0);
	pg_atomic_write_u64(&c->reset_at, (uint64) GetCurrentTimestamp());
}
