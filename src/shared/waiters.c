/*-------------------------------------------------------------------------
 *
 * waiters.c
 *	  The waiter board: one slot per backend (by PGPROC number) in shared memory, with
 *	  the key the backend waits to acquire, its hash, and how often it was woken.  A
 *	  release announcement for that key wakes the backend of this cluster that waited
 *	  longest for it (bumping its counts and setting its latch).  The worker reads the
 *	  keys to subscribe to their release channels while someone waits
 *	  (subscription.c).
 *
 * Shared memory, present only when the library is preloaded; without it every wait
 * polls.  Atomics and barriers, no lock: a torn or stale read only costs a spurious
 * wake-up or one ordinary retry delay.  Nothing here is needed for safety.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "clock.h"
#include "compat.h"
#include "shared/registry.h"
#include "shared/shmem.h"
#include "shared/stats.h"
#include "shared/waiters.h"

#define REDLOCK_WAKE_DEDUP_MS		3	/* announcements of one release arrive within it */

/* A backend's wait for a busy lock. */
struct RedlockWaiter
{
	pg_atomic_uint64 key_hash;	/* hash of the key waited for (odd); 0: not waiting */
	pg_atomic_uint64 announced_wakeups; /* by a release announced (or a catch-up) */
	pg_atomic_uint64 direct_wakeups;	/* by a release made in this cluster */
	pg_atomic_uint64 woken_at_us;	/* when last woken (redlock_clock_ms() * 1000) */
	pg_atomic_uint64 since_us;	/* when this wait began (likewise) */
	pg_atomic_uint64 attempts;	/* acquire attempts made in this wait */
	int			prefix_len;		/* bytes of redlock.key_prefix at the start of key */
	char		key[REDLOCK_REGISTRY_KEY_LEN + 1];	/* written before key_hash; "" when
													 * too long to keep (the wait polls) */
};

/* The last wake-up of a key, in a small table of recent ones (by hash). */
typedef struct RecentWake
{
	pg_atomic_uint64 key_hash;
	pg_atomic_uint64 at_us;
} RecentWake;

#define RECENT_WAKES 64

static RedlockWaiter *waiters = NULL;
static RecentWake *recent_wakes = NULL;

/*
 * How many slots wait (key_hash not 0), counted before a slot's key_hash is set and
 * after it is cleared.  A release finding 0 wakes nobody without scanning the board:
 * a waiter it could have woken counted itself before its refused attempt went out,
 * and that attempt reached the masters before the release did.
 */
static pg_atomic_uint32 *waiting_count = NULL;
static bool waiter_exit_registered = false;

/* The board: a slot per backend, then the recent wake-ups, then the count. */
static Size
waiters_shmem_size(void)
{
	return add_size(add_size(MAXALIGN(mul_size(MaxBackends, sizeof(RedlockWaiter))),
							 MAXALIGN(sizeof(RecentWake) * RECENT_WAKES)),
					sizeof(pg_atomic_uint32));
}

static void
waiters_shmem_attach(void *area, LWLock *lock pg_attribute_unused(), bool found)
{
	waiters = area;
	recent_wakes = (RecentWake *) ((char *) area +
								   MAXALIGN(mul_size(MaxBackends, sizeof(RedlockWaiter))));
	waiting_count = (pg_atomic_uint32 *) ((char *) recent_wakes +
										  MAXALIGN(sizeof(RecentWake) * RECENT_WAKES));
	if (found)
		return;
	pg_atomic_init_u32(waiting_count, 0);
	for (int i = 0; i < MaxBackends; i++)
	{
		pg_atomic_init_u64(&waiters[i].key_hash, 0);
		pg_atomic_init_u64(&waiters[i].announced_wakeups, 0);
		pg_atomic_init_u64(&waiters[i].direct_wakeups, 0);
		pg_atomic_init_u64(&waiters[i].woken_at_us, 0);
		pg_atomic_init_u64(&waiters[i].since_us, 0);
		pg_atomic_init_u64(&waiters[i].attempts, 0);
	}
	for (int i = 0; i < RECENT_WAKES; i++)
	{
		pg_atomic_init_u64(&recent_wakes[i].key_hash, 0);
		pg_atomic_init_u64(&recent_wakes[i].at_us, 0);
	}
}

static const RedlockShmemArea waiters_area = {
	.name = "redlock waiters",
	.size = waiters_shmem_size,
	.attach = waiters_shmem_attach
};

/*
 * RedlockWaitersInit
 *		Asks for the board's shared memory when the library is being preloaded
 *		(redlock_shmem_register).  Called from _PG_init.  Raises nothing.
 */
void
RedlockWaitersInit(void)
{
	redlock_shmem_register(&waiters_area);
}

/* The hash a waiter slot holds for key: never 0, which means "not waiting". */
static uint64
waiters_key_hash(const char *key, size_t len)
{
	return hash_bytes_extended((const unsigned char *) key, (int) len, 0) | 1;
}

static void
waiters_clear_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	redlock_waiters_end();
}

/*
 * redlock_waiters_begin
 *		Announces that this backend is waiting to acquire key, so that a release of it
 *		wakes it (redlock_waiters_wake), and nudges the worker to subscribe to key's
 *		release channel unless another waiter of this cluster has it subscribed already.
 *		Returns this backend's slot (read its wake-ups with redlock_waiters_read), or
 *		NULL when there is no board (not preloaded): the wait then polls.  Sets
 *		*behind to whether another backend of this cluster already waits for key (it
 *		is woken first).  prefix_len: bytes of redlock.key_prefix at the start of key
 *		(redlock_waiters_list shows the rest as the resource).  Pair with
 *		redlock_waiters_end (also run at exit).  Raises nothing.
 */
RedlockWaiter *
redlock_waiters_begin(const char *key, int prefix_len, bool *behind)
{
	RedlockWaiter *w;
	uint64		h;
	size_t		len = strlen(key);

	*behind = false;
	if (waiters == NULL || MyProc == NULL || redlock_my_proc_number() >= MaxBackends)
		return NULL;
	if (!waiter_exit_registered)
	{
		before_shmem_exit(waiters_clear_at_exit, (Datum) 0);
		waiter_exit_registered = true;
	}
	h = waiters_key_hash(key, len);
	for (int i = 0; i < MaxBackends && !*behind; i++)
		*behind = i != redlock_my_proc_number() && pg_atomic_read_u64(&waiters[i].key_hash) == h;
	w = &waiters[redlock_my_proc_number()];
	pg_atomic_write_u64(&w->since_us, (uint64) (redlock_clock_ms() * 1000.0));
	pg_atomic_write_u64(&w->attempts, 0);
	w->prefix_len = prefix_len;
	if (len <= REDLOCK_REGISTRY_KEY_LEN)
		memcpy(w->key, key, len + 1);
	else
		w->key[0] = '\0';
	if (pg_atomic_read_u64(&w->key_hash) == 0)
		pg_atomic_fetch_add_u32(waiting_count, 1);	/* a full barrier */
	pg_write_barrier();			/* the worker checks the key against key_hash */
	pg_atomic_write_u64(&w->key_hash, h);
	if (!*behind)
		redlock_registry_wake_worker();
	return w;
}

/*
 * redlock_waiters_end
 *		This backend no longer waits (acquired, gave up, interrupted).  Raises nothing.
 */
void
redlock_waiters_end(void)
{
	if (waiters == NULL || MyProc == NULL || redlock_my_proc_number() >= MaxBackends)
		return;
	if (pg_atomic_read_u64(&waiters[redlock_my_proc_number()].key_hash) == 0)
		return;
	pg_atomic_write_u64(&waiters[redlock_my_proc_number()].key_hash, 0);
	pg_atomic_fetch_sub_u32(waiting_count, 1);
}

/*
 * redlock_waiters_read
 *		How often waiter (this backend's, from redlock_waiters_begin) has been woken so
 *		far, into *count.  Raises nothing.
 */
void
redlock_waiters_read(RedlockWaiter *waiter, RedlockWakeCount *count)
{
	count->announced = pg_atomic_read_u64(&waiter->announced_wakeups);
	count->direct = pg_atomic_read_u64(&waiter->direct_wakeups);
}

/*
 * redlock_waiters_count_attempt
 *		Counts one acquire attempt of waiter's wait (shown by redlock_waiters_list).
 *		Raises nothing.
 */
void
redlock_waiters_count_attempt(RedlockWaiter *waiter)
{
	pg_atomic_fetch_add_u64(&waiter->attempts, 1);
}

/*
 * Reads slot i between two reads of its hash: returns the hash of the key its backend
 * waits for, or 0 when it waits for none or rewrote the slot meanwhile.  key (of
 * REDLOCK_REGISTRY_KEY_LEN + 1 bytes) gets the key, or "" when the slot could not keep
 * it (too long) or the key read does not hash to the hash; row, unless NULL, gets the
 * slot's other fields.
 */
static uint64
waiters_read_slot(int i, char *key, RedlockWaiterRow *row)
{
	RedlockWaiter *w = &waiters[i];
	uint64		h = pg_atomic_read_u64(&w->key_hash);

	if (h == 0)
		return 0;
	pg_read_barrier();
	memcpy(key, w->key, REDLOCK_REGISTRY_KEY_LEN + 1);	/* not strlcpy: it may be mid-write */
	key[REDLOCK_REGISTRY_KEY_LEN] = '\0';
	if (row)
	{
		row->proc_number = i;
		row->prefix_len = w->prefix_len;
		row->since_ms = pg_atomic_read_u64(&w->since_us) / 1000.0;
		row->attempts = pg_atomic_read_u64(&w->attempts);
	}
	pg_read_barrier();
	if (pg_atomic_read_u64(&w->key_hash) != h)
		return 0;
	if (key[0] != '\0' && waiters_key_hash(key, strlen(key)) != h)
		key[0] = '\0';
	return h;
}

/*
 * redlock_waiters_list
 *		The backends of this cluster waiting for a busy lock now, into *rows (palloc'd):
 *		each one's PGPROC number, Redis key (palloc'd; NULL when too long to keep),
 *		prefix length, when its wait began (a redlock_clock_ms() time) and the attempts
 *		made.  A slot read while its backend rewrites it is skipped.  Returns how many;
 *		-1 without the board (not preloaded).  Raises only out-of-memory errors.
 */
int
redlock_waiters_list(RedlockWaiterRow **rows)
{
	char		key[REDLOCK_REGISTRY_KEY_LEN + 1];
	int			n = 0;

	*rows = NULL;
	if (waiters == NULL)
		return -1;
	*rows = palloc(sizeof(RedlockWaiterRow) * MaxBackends);
	for (int i = 0; i < MaxBackends; i++)
	{
		RedlockWaiterRow *row = &(*rows)[n];

		if (waiters_read_slot(i, key, row) == 0)
			continue;
		if (key[0] != '\0' && row->prefix_len >= 0 && (size_t) row->prefix_len <= strlen(key))
			row->key = pstrdup(key);
		else
			row->key = NULL;
		n++;
	}
	return n;
}

/*
 * redlock_waiters_keys
 *		Calls fn(key, len, arg) once for each backend waiting for a busy lock now, with
 *		the key it waits for (a key waited for by several backends comes once per
 *		backend).  A slot read while its backend rewrites it is skipped: the read key
 *		must hash to the hash read before and after it.  For the worker's subscriptions;
 *		fn must not raise.  Raises nothing.
 */
void
redlock_waiters_keys(void (*fn) (const char *key, size_t len, void *arg), void *arg)
{
	char		key[REDLOCK_REGISTRY_KEY_LEN + 1];

	if (waiters == NULL)
		return;
	for (int i = 0; i < MaxBackends; i++)
		if (waiters_read_slot(i, key, NULL) != 0 && key[0] != '\0')
			fn(key, strlen(key), arg);
}

/*
 * The backend that has waited longest for the key of hash h, or -1 when none waits; and
 * in *last_woken_us when any of them was last woken (0: never).  skip_woken_since: 0,
 * or leave out the waiters woken at or after that time (us).
 */
static int
waiters_oldest(uint64 h, uint64 skip_woken_since, uint64 *last_woken_us)
{
	int			oldest = -1;
	uint64		oldest_since = PG_UINT64_MAX;

	*last_woken_us = 0;
	for (int i = 0; i < MaxBackends; i++)
	{
		uint64		since;
		uint64		woken;

		if (pg_atomic_read_u64(&waiters[i].key_hash) != h)
			continue;
		woken = pg_atomic_read_u64(&waiters[i].woken_at_us);
		if (skip_woken_since > 0 && woken >= skip_woken_since)
			continue;
		*last_woken_us = Max(*last_woken_us, woken);
		since = pg_atomic_read_u64(&waiters[i].since_us);
		if (since < oldest_since)
		{
			oldest = i;
			oldest_since = since;
		}
	}
	return oldest;
}

/*
 * Counts a wake-up of waiter i, direct or announced, and sets its latch (a full
 * barrier: the waiter that wakes reads the new count).
 */
static void
waiters_wake_one(int i, bool direct)
{
	pg_atomic_fetch_add_u64(direct ? &waiters[i].direct_wakeups :
							&waiters[i].announced_wakeups, 1);
	SetLatch(&ProcGlobal->allProcs[i].procLatch);
}

static int	waiters_wake(const char *key, size_t len, const char *released,
						 size_t released_len, bool direct, bool dedup);

/*
 * redlock_waiters_wake
 *		A release of key (len bytes) was announced: wakes the backend of this cluster
 *		that has waited longest for key (bumps its counter and sets its latch).  One
 *		waiter a release, not all: each cluster's woken waiter races the others' for
 *		the lock, and waking every waiter would make them all retry, be refused and
 *		wait again, a herd that cost more CPU than the handoff on 2 cores.  Waiters are
 *		thus woken oldest first within a cluster; the others keep their own retry
 *		delays.  One release is announced by every master that deleted the key, and
 *		also directly in its own cluster: when key woke a waiter less than
 *		REDLOCK_WAKE_DEDUP_MS ago (a table of recent wake-ups by key hash; a collision
 *		only costs a waiter its ordinary retry delay), this is the same release and
 *		nobody else is woken.
 *		released: the key the release deleted (released_len bytes): key itself for a
 *		lock; for a semaphore, whose waiters wait on its own key, the slot released.
 *		Releases are told apart by it: two slots released within the dedup time wake
 *		two waiters, each the oldest not woken within it.
 *		direct: the release was made in this cluster and has just completed (not an
 *		announcement): it counts as a direct wake-up too, and the waiter
 *		retries without jitter (see retry_sleep in quorum.c).
 *		Returns how many were woken (0 or 1).  Raises nothing.
 */
int
redlock_waiters_wake(const char *key, size_t len, const char *released, size_t released_len,
					 bool direct)
{
	return waiters_wake(key, len, released, released_len, direct, true);
}

/*
 * redlock_waiters_wake_again
 *		Another release of released (a semaphore's slot freed again at once: an attempt
 *		giving back a slot it took twice), which the caller told apart from the one
 *		that woke a waiter just now (the release announcements' count per master, in
 *		subscription.c): wakes as redlock_waiters_wake does, but not deduplicated
 *		against that recent wake-up.  Arguments and result as redlock_waiters_wake's,
 *		not direct.  Raises nothing.
 */
int
redlock_waiters_wake_again(const char *key, size_t len, const char *released,
						   size_t released_len)
{
	return waiters_wake(key, len, released, released_len, false, false);
}

/* redlock_waiters_wake's and redlock_waiters_wake_again's; dedup: as the former. */
static int
waiters_wake(const char *key, size_t len, const char *released, size_t released_len,
			 bool direct, bool dedup)
{
	uint64		h;
	uint64		r;
	uint64		now_us = (uint64) (redlock_clock_ms() * 1000.0);
	uint64		dedup_us = REDLOCK_WAKE_DEDUP_MS * 1000;
	bool		slot = released_len != len || memcmp(released, key, len) != 0;
	int			oldest;
	uint64		last_us;
	RecentWake *recent;

	if (waiters == NULL || pg_atomic_read_u32(waiting_count) == 0)
		return 0;
	h = waiters_key_hash(key, len);
	r = waiters_key_hash(released, released_len);
	recent = &recent_wakes[r % RECENT_WAKES];
	if (dedup && pg_atomic_read_u64(&recent->key_hash) == r &&
		now_us - pg_atomic_read_u64(&recent->at_us) < dedup_us)
		return 0;
	/* A lock: nobody if a waiter of it was just woken; a slot: the oldest not just woken. */
	oldest = waiters_oldest(h, slot ? now_us - dedup_us : 0, &last_us);
	if (oldest < 0 || (!slot && now_us - last_us < dedup_us))
		return 0;
	last_us = pg_atomic_read_u64(&waiters[oldest].woken_at_us);
	if (!pg_atomic_compare_exchange_u64(&waiters[oldest].woken_at_us, &last_us, now_us))
		return 0;				/* another process woke it just now */
	pg_atomic_write_u64(&recent->at_us, now_us);
	pg_atomic_write_u64(&recent->key_hash, r);
	waiters_wake_one(oldest, direct);
	redlock_stats_count(REDLOCK_STAT_WAKEUPS);
	return 1;
}

/*
 * redlock_waiters_catch_up
 *		Key's release channel has just been subscribed to on a quorum of masters: wakes
 *		the backend of this cluster that has waited longest for key, to try once more.
 *		A release made between its last attempt and the subscription was announced to
 *		nobody; this retry finds the lock free instead of waiting a retry delay.  Not a
 *		release: no dedup record is left, so that a release announced just after still
 *		wakes the waiter.  Raises nothing.
 */
void
redlock_waiters_catch_up(const char *key, size_t len)
{
	int			oldest;
	uint64		last_woken_us;

	if (waiters == NULL)
		return;
	oldest = waiters_oldest(waiters_key_hash(key, len), 0, &last_woken_us);
	if (oldest >= 0)
		waiters_wake_one(oldest, false);
}

/*
 * redlock_waiters_count
 *		The number of backends waiting for a busy lock now.  Raises nothing.
 */
int
redlock_waiters_count(void)
{
	int			n = 0;

	if (waiters == NULL)
		return 0;
	for (int i = 0; i < MaxBackends; i++)
		if (pg_atomic_read_u64(&waiters[i].key_hash) != 0)
			n++;
	return n;
}
