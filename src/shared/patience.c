/*-------------------------------------------------------------------------
 *
 * patience.c
 *	  The patience this cluster's acquires start with: how long an attempt lets its
 *	  masters take to answer, as a level k (redlock.timeout x 2^k, retry.c), learned
 *	  from the attempts of every backend, as TCP learns its retransmission timeout
 *	  from the round trips it sees.
 *
 * Invariant: the level rises only after a slow attempt (fewer than a quorum answered
 * in time, and those that did not would have made one: retry.c), to one above that
 * attempt's level; it falls only after a quick one (a quorum answered within half its
 * patience), by one step, and only from that attempt's level; it stays within
 * 0 .. REDLOCK_PATIENCE_MAX_LEVEL.  So a burst of new sessions, or masters slowed for
 * everyone, does not make every acquire of the cluster time out at redlock.timeout,
 * undo and send again (load the storm adds to itself: doc/performance.md), and a
 * cluster whose masters answer promptly is back at redlock.timeout after a few quick
 * attempts.  The level only sets how long an attempt waits before it is retried;
 * retry.c still caps the patience at a tenth of the TTL and what is left of
 * redlock.quorum_timeout, and every attempt's validity counts the time it took (spec
 * §3 step 4), so no lock's safety depends on it.
 *
 * The level is one atomic in shared memory when the library is preloaded, else this
 * backend's (a new backend then starts at 0).  It has no unit: a session whose
 * redlock.timeout is twice another's waits twice as long at the same level, and
 * every session's attempts teach it, also those of a session whose
 * redlock.quorum_timeout of 0 keeps its own attempts at redlock.timeout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/atomics.h"

#include "shared/patience.h"
#include "shared/shmem.h"

typedef struct RedlockPatience
{
	pg_atomic_uint32 level;
} RedlockPatience;

static RedlockPatience *shared_patience = NULL;
static RedlockPatience local_patience;
static bool local_ready = false;

static Size
patience_shmem_size(void)
{
	return sizeof(RedlockPatience);
}

static void
patience_shmem_attach(void *area, LWLock *lock pg_attribute_unused(), bool found)
{
	shared_patience = area;
	if (!found)
		pg_atomic_init_u32(&shared_patience->level, 0);
}

static const RedlockShmemArea patience_area = {
	.name = "redlock patience",
	.size = patience_shmem_size,
	.attach = patience_shmem_attach
};

/*
 * RedlockPatienceInit
 *		Asks for shared memory for the level when the library is being preloaded
 *		(redlock_shmem_register).  Called from _PG_init.  Raises nothing.
 */
void
RedlockPatienceInit(void)
{
	redlock_shmem_register(&patience_area);
}

static RedlockPatience *
patience_state(void)
{
	if (shared_patience)
		return shared_patience;
	if (!local_ready)
	{
		pg_atomic_init_u32(&local_patience.level, 0);
		local_ready = true;
	}
	return &local_patience;
}

/*
 * redlock_patience_level
 *		The level an acquire's first attempt starts at (0: redlock.timeout).  Raises
 *		nothing.  spec §3 step 2's timeout, backed off (retry.c).
 */
int
redlock_patience_level(void)
{
	return (int) pg_atomic_read_u32(&patience_state()->level);
}

/*
 * redlock_patience_slow
 *		An attempt at level (0 .. REDLOCK_PATIENCE_MAX_LEVEL) was slow: the level
 *		becomes at least level + 1 (the invariant above).  Raises nothing.
 */
void
redlock_patience_slow(int level)
{
	pg_atomic_uint32 *p = &patience_state()->level;
	uint32		want = (uint32) Min(level + 1, REDLOCK_PATIENCE_MAX_LEVEL);
	uint32		now = pg_atomic_read_u32(p);

	while (now < want && !pg_atomic_compare_exchange_u32(p, &now, want))
		;
}

/*
 * redlock_patience_quick
 *		An attempt at level was answered by a quorum within half its patience: the
 *		level goes down one step if it is still level (an attempt that started at
 *		another level says nothing about this one).  Raises nothing.
 */
void
redlock_patience_quick(int level)
{
	uint32		expected = (uint32) level;

	if (level > 0)
		(void) pg_atomic_compare_exchange_u32(&patience_state()->level, &expected,
											  expected - 1);
}
