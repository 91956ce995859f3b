/*-------------------------------------------------------------------------
 *
 * locktable.c
 *	  The locks this backend holds: resource -> key, token, holds, validity.
 *
 * Holds stack like PostgreSQL's advisory locks: each acquire adds a hold, at session
 * or transaction scope, and the keys are deleted when the last hold goes.  Holds added
 * in the current transaction are kept in a per-lock log with the subtransaction that
 * added them, so that:
 *	- a (sub)transaction that aborts takes back the holds it added, and a lock left
 *	  with no hold is released: the acquire is undone with the work it was for;
 *	- at commit, session holds become permanent and transaction holds end.
 * The log entry is written before the network request, so that an acquire cut short
 * by an error (query cancel) is undone by the abort that follows.
 *
 * A lock whose last hold goes is "detached" (copied out and removed from the table)
 * before the network release starts, so that an error during the release can never
 * leave the table describing a lock in a half-released state.
 *
 * No network code here: quorum.c does the protocol.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "redlock.h"

/* A hold added in the current top-level transaction. */
typedef struct PendingHold
{
	SubTransactionId subid;
	RedlockScope scope;
} PendingHold;

/*
 * One lock.  Until "acquired" is set, the first acquire is in flight and only
 * resource, key, token and the pending log mean anything.
 */
typedef struct HeldLock
{
	char		resource[REDLOCK_MAX_RESOURCE_LEN + 1];	/* hash key */
	char	   *key;			/* redlock.key_prefix + resource, at acquisition */
	char		token[REDLOCK_TOKEN_LEN + 1];
	bool		acquired;
	int			ttl_ms;			/* TTL of the last acquire or extend */
	int			nodes;			/* masters that accepted it last */
	TimestampTz acquired_at;
	double		valid_until_ms; /* monotonic */
	int			session_holds;	/* session holds from committed transactions */
	int			npending;
	int			maxpending;
	PendingHold *pending;		/* holds added in the current transaction */
} HeldLock;

/* A lock taken out of the table, waiting for its network release. */
typedef struct DetachedLock
{
	char	   *resource;
	char	   *key;
	char		token[REDLOCK_TOKEN_LEN + 1];
	bool		acquired;
	bool		expired;
} DetachedLock;

static HTAB *locks = NULL;
static MemoryContext LockTableContext = NULL;

/* Holds in all pending logs: zero means this transaction touched no lock. */
static int	pending_total = 0;

/* A transaction-scoped lock lost (extend failed) in this transaction, or "". */
static char lost_xact_resource[REDLOCK_MAX_RESOURCE_LEN + 1] = "";

static void
table_init(void)
{
	HASHCTL		ctl;

	if (locks)
		return;
	LockTableContext = AllocSetContextCreate(TopMemoryContext, "redlock lock table",
											 ALLOCSET_SMALL_SIZES);
	ctl.keysize = REDLOCK_MAX_RESOURCE_LEN + 1;
	ctl.entrysize = sizeof(HeldLock);
	ctl.hcxt = LockTableContext;
	locks = hash_create("redlock held locks", 16, &ctl,
						HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

static HeldLock *
lock_find(const char *resource)
{
	table_init();
	return hash_search(locks, resource, HASH_FIND, NULL);
}

static int
count_holds(const HeldLock *lock, bool session)
{
	int			n = session ? lock->session_holds : 0;

	for (int i = 0; i < lock->npending; i++)
		if ((lock->pending[i].scope == REDLOCK_SCOPE_SESSION) == session)
			n++;
	return n;
}

static int
total_holds(const HeldLock *lock)
{
	return lock->session_holds + lock->npending;
}

static bool
lock_expired(const HeldLock *lock)
{
	return lock->acquired && redlock_clock_ms() >= lock->valid_until_ms;
}

/* The Redis key for resource, in LockTableContext. */
static char *
make_key(const char *resource)
{
	MemoryContext old = MemoryContextSwitchTo(LockTableContext);
	char	   *key = psprintf("%s%s", redlock_key_prefix ? redlock_key_prefix : "", resource);

	MemoryContextSwitchTo(old);
	return key;
}

/* Logs a hold added now, in the current subtransaction. */
static void
hold_add(HeldLock *lock, RedlockScope scope)
{
	if (lock->npending == lock->maxpending)
	{
		int			newmax = Max(4, lock->maxpending * 2);

		lock->pending = lock->pending
			? repalloc(lock->pending, newmax * sizeof(PendingHold))
			: MemoryContextAlloc(LockTableContext, newmax * sizeof(PendingHold));
		lock->maxpending = newmax;
	}
	lock->pending[lock->npending].subid = GetCurrentSubTransactionId();
	lock->pending[lock->npending].scope = scope;
	lock->npending++;
	pending_total++;
}

/* Removes pending hold i, keeping the log's order. */
static void
hold_remove(HeldLock *lock, int i)
{
	memmove(&lock->pending[i], &lock->pending[i + 1],
			(lock->npending - i - 1) * sizeof(PendingHold));
	lock->npending--;
	pending_total--;
}

/* Removes lock from the table, freeing what it owns. */
static void
lock_forget(HeldLock *lock)
{
	pending_total -= lock->npending;
	if (lock->key)
		pfree(lock->key);
	if (lock->pending)
		pfree(lock->pending);
	hash_search(locks, lock->resource, HASH_REMOVE, NULL);
}

/* Copies lock out (into CurrentMemoryContext) and removes it from the table. */
static DetachedLock
lock_detach(HeldLock *lock)
{
	DetachedLock detached;

	detached.resource = pstrdup(lock->resource);
	detached.key = pstrdup(lock->key);
	memcpy(detached.token, lock->token, sizeof(detached.token));
	detached.acquired = lock->acquired;
	detached.expired = lock_expired(lock);
	lock_forget(lock);
	return detached;
}

/* Releases a detached lock on the nodes (spec §5), filling info. */
static void
release_detached(const DetachedLock *detached, bool cleanup, RedlockReleaseInfo *info)
{
	info->resource = detached->resource;
	info->acquired = detached->acquired;
	info->expired = detached->expired;
	if (detached->acquired && detached->expired)
		redlock_stats_count(REDLOCK_STAT_RELEASED_EXPIRED);
	redlock_quorum_release(detached->key, detached->token, cleanup, &info->result);
}

/* Releases each of n detached locks in cleanup mode and reports it. */
static void
release_all_detached(DetachedLock *detached, int n, RedlockReleaseReport report)
{
	for (int i = 0; i < n; i++)
	{
		RedlockReleaseInfo info;

		release_detached(&detached[i], true, &info);
		if (report)
			report(&info);
	}
}

/*
 * Sets a new TTL on a held lock (spec §6).  Returns REDLOCK_HELD when extended,
 * REDLOCK_FAILED when fewer than a quorum answered (nothing changed), REDLOCK_LOST when
 * the lock is no longer ours: it is then forgotten and let go of on the masters, and
 * a transaction-scoped hold on it makes this transaction's commit fail.
 */
static RedlockHoldStatus
lock_refresh(HeldLock *lock, int ttl_ms, RedlockResult *result)
{
	DetachedLock detached;
	RedlockReleaseInfo info;

	redlock_quorum_extend(lock->key, lock->token, ttl_ms, result);
	if (result->status == REDLOCK_OK)
	{
		lock->ttl_ms = ttl_ms;
		lock->valid_until_ms = result->valid_until_ms;
		lock->nodes = result->accepted;
		return REDLOCK_HELD;
	}
	if (result->status == REDLOCK_UNAVAILABLE)
		return REDLOCK_FAILED;

	if (count_holds(lock, false) > 0)
		strlcpy(lost_xact_resource, lock->resource, sizeof(lost_xact_resource));
	detached = lock_detach(lock);
	release_detached(&detached, false, &info);
	return REDLOCK_LOST;
}

/*
 * redlock_lock_acquire
 *		Adds a hold on resource at scope, acquiring the lock on the masters first when
 *		this backend does not hold it (spec §3, §4), or refreshing its TTL when it does
 *		(spec §6).
 *
 * resource: the resource name (checked by the caller: non-empty, at most
 *		REDLOCK_MAX_RESOURCE_LEN bytes).  ttl_ms: 1..REDLOCK_MAX_TTL_MS.  wait_ms: as
 *		for redlock_quorum_acquire (0: one attempt; < 0: no limit).
 * was_lost: set true when this backend believed it held the lock but the refresh
 *		found it lost; the lock was then acquired afresh.
 * result: the quorum outcome of the request that decided.
 *
 * Returns REDLOCK_HELD, or REDLOCK_FAILED with result->status BUSY or UNAVAILABLE (no
 * hold added).  Raises what an interrupted network wait raises; the hold logged
 * before the request is then taken back by the abort.
 */
RedlockHoldStatus
redlock_lock_acquire(const char *resource, RedlockScope scope, int ttl_ms, int wait_ms,
					 bool *was_lost, RedlockResult *result)
{
	HeldLock   *lock;

	*was_lost = false;
	lock = lock_find(resource);

	if (lock && lock->acquired)
	{
		/*
		 * Held already: refresh the TTL, then stack a hold.  (An interrupted refresh
		 * leaves nothing to undo.)
		 */
		RedlockHoldStatus status = lock_refresh(lock, ttl_ms, result);

		if (status == REDLOCK_HELD)
		{
			hold_add(lock, scope);
			return REDLOCK_HELD;
		}
		if (status == REDLOCK_FAILED)
			return REDLOCK_FAILED;
		/* Lost, and forgotten: acquire afresh. */
		*was_lost = true;
		lock = NULL;
	}

	if (lock == NULL)
	{
		/* Everything that can fail is done before the entry exists. */
		char	   *key = make_key(resource);
		char		token[REDLOCK_TOKEN_LEN + 1];

		redlock_new_token(token);
		lock = hash_search(locks, resource, HASH_ENTER, NULL);
		memset(((char *) lock) + offsetof(HeldLock, key), 0,
			   sizeof(HeldLock) - offsetof(HeldLock, key));
		lock->key = key;
		memcpy(lock->token, token, sizeof(token));
	}

	hold_add(lock, scope);
	redlock_quorum_acquire(lock->key, lock->token, ttl_ms, wait_ms, result);
	if (result->status != REDLOCK_OK)
	{
		/* The attempt was undone on the masters already (spec §3 step 5). */
		lock_forget(lock);
		return REDLOCK_FAILED;
	}
	lock->acquired = true;
	lock->ttl_ms = ttl_ms;
	lock->nodes = result->accepted;
	lock->valid_until_ms = result->valid_until_ms;
	lock->acquired_at = GetCurrentTimestamp();
	return REDLOCK_HELD;
}

/*
 * redlock_lock_release
 *		Drops one session hold on resource, the latest one first, and releases the lock
 *		on the masters (spec §5) when no hold is left.
 *
 * info: filled when REDLOCK_RELEASED is returned (resource, whether the validity had
 *		run out, the quorum outcome).
 *
 * Returns REDLOCK_NOT_HELD when this backend has no session hold on resource,
 * REDLOCK_HELD when holds remain, REDLOCK_RELEASED otherwise.  Raises what an
 * interrupted network wait raises (the lock is already forgotten then; its keys
 * expire with their TTL).
 */
RedlockHoldStatus
redlock_lock_release(const char *resource, RedlockReleaseInfo *info)
{
	HeldLock   *lock = lock_find(resource);
	DetachedLock detached;
	bool		removed = false;

	if (lock == NULL || !lock->acquired || count_holds(lock, true) == 0)
		return REDLOCK_NOT_HELD;

	for (int i = lock->npending - 1; i >= 0 && !removed; i--)
	{
		if (lock->pending[i].scope == REDLOCK_SCOPE_SESSION)
		{
			hold_remove(lock, i);
			removed = true;
		}
	}
	if (!removed)
		lock->session_holds--;

	if (total_holds(lock) > 0)
		return REDLOCK_HELD;

	detached = lock_detach(lock);
	release_detached(&detached, false, info);
	return REDLOCK_RELEASED;
}

/*
 * redlock_lock_extend
 *		Sets a new TTL on a lock this backend holds (spec §6).
 *
 * ttl_ms: the new TTL, 1..REDLOCK_MAX_TTL_MS, or 0 for the TTL it was acquired with.
 * result: the quorum outcome.
 *
 * Returns REDLOCK_NOT_HELD, REDLOCK_HELD (extended), REDLOCK_LOST (a quorum answered
 * but no longer holds our token: the lock is forgotten and let go of on the masters)
 * or REDLOCK_FAILED (fewer than a quorum answered: nothing changed).  Raises what an
 * interrupted network wait raises.
 */
RedlockHoldStatus
redlock_lock_extend(const char *resource, int ttl_ms, RedlockResult *result)
{
	HeldLock   *lock = lock_find(resource);

	if (lock == NULL || !lock->acquired)
		return REDLOCK_NOT_HELD;
	return lock_refresh(lock, ttl_ms == 0 ? lock->ttl_ms : ttl_ms, result);
}

/*
 * redlock_lock_release_session
 *		Drops every session hold of this backend (transaction holds stay) and releases
 *		the locks left with no hold, calling report (may be NULL) for each.
 *
 * Returns the number of locks released.  Raises what an interrupted network wait
 * raises.
 */
int
redlock_lock_release_session(RedlockReleaseReport report)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	DetachedLock *detached;
	int			n = 0;

	table_init();
	detached = palloc(sizeof(DetachedLock) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (!lock->acquired)
			continue;
		lock->session_holds = 0;
		for (int i = lock->npending - 1; i >= 0; i--)
			if (lock->pending[i].scope == REDLOCK_SCOPE_SESSION)
				hold_remove(lock, i);
		if (total_holds(lock) == 0)
			detached[n++] = lock_detach(lock);
	}

	for (int i = 0; i < n; i++)
	{
		RedlockReleaseInfo info;

		release_detached(&detached[i], false, &info);
		if (report)
			report(&info);
	}
	return n;
}

/*
 * redlock_lock_list
 *		Copies every held lock into a palloc'd array (*locks_out).  Returns how many.
 */
int
redlock_lock_list(RedlockLockInfo **locks_out)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	RedlockLockInfo *out;
	int			n = 0;
	double		now_ms = redlock_clock_ms();
	TimestampTz now = GetCurrentTimestamp();

	table_init();
	out = palloc0(sizeof(RedlockLockInfo) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		RedlockLockInfo *info = &out[n];

		if (!lock->acquired)
			continue;
		info->resource = pstrdup(lock->resource);
		info->key = pstrdup(lock->key);
		info->session_holds = count_holds(lock, true);
		info->xact_holds = count_holds(lock, false);
		info->ttl_ms = lock->ttl_ms;
		info->nodes = lock->nodes;
		info->acquired_at = lock->acquired_at;
		info->validity_ms = lock->valid_until_ms - now_ms;
		info->valid_until = TimestampTzPlusMilliseconds(now, (int64) info->validity_ms);
		n++;
	}
	*locks_out = out;
	return n;
}

/*
 * redlock_lock_xact_pending
 *		True when the current transaction added a hold or lost a transaction-scoped
 *		lock: the transaction hooks have work to do.
 */
bool
redlock_lock_xact_pending(void)
{
	return pending_total > 0 || lost_xact_resource[0] != '\0';
}

/*
 * redlock_lock_first_expired_xact
 *		Returns (palloc'd) the resource of a transaction-scoped lock whose validity has
 *		run out or that was lost in this transaction, or NULL when there is none.
 */
const char *
redlock_lock_first_expired_xact(void)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;

	if (lost_xact_resource[0] != '\0')
		return pstrdup(lost_xact_resource);
	if (pending_total == 0)
		return NULL;
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (count_holds(lock, false) > 0 && lock_expired(lock))
		{
			hash_seq_term(&scan);
			return pstrdup(lock->resource);
		}
	}
	return NULL;
}

/*
 * redlock_lock_xact_end
 *		Ends the top-level transaction for the lock table.  At commit the session holds
 *		it added become permanent; at commit or abort its transaction holds end, and at
 *		abort its session holds too.  Locks left with no hold are released on the
 *		masters in cleanup mode (bounded, never raising on network trouble) and passed
 *		to report.
 */
void
redlock_lock_xact_end(bool commit, RedlockReleaseReport report)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	DetachedLock *detached;
	int			n = 0;

	lost_xact_resource[0] = '\0';
	if (pending_total == 0)
		return;

	detached = palloc(sizeof(DetachedLock) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (lock->npending == 0)
			continue;
		if (commit)
			lock->session_holds = count_holds(lock, true);
		pending_total -= lock->npending;
		lock->npending = 0;
		if (total_holds(lock) == 0)
			detached[n++] = lock_detach(lock);
	}
	release_all_detached(detached, n, report);
}

/*
 * redlock_lock_subxact_end
 *		Ends subtransaction subid (child of parent) for the lock table: at commit its
 *		holds pass to the parent; at abort they are taken back and locks left with no
 *		hold are released in cleanup mode and passed to report.
 */
void
redlock_lock_subxact_end(bool commit, SubTransactionId subid, SubTransactionId parent,
						 RedlockReleaseReport report)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	DetachedLock *detached;
	int			n = 0;

	if (pending_total == 0)
		return;

	detached = palloc(sizeof(DetachedLock) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		for (int i = lock->npending - 1; i >= 0; i--)
		{
			if (lock->pending[i].subid != subid)
				continue;
			if (commit)
				lock->pending[i].subid = parent;
			else
				hold_remove(lock, i);
		}
		if (total_holds(lock) == 0)
			detached[n++] = lock_detach(lock);
	}
	release_all_detached(detached, n, report);
}

/*
 * redlock_lock_release_everything
 *		Forgets every lock and releases each on the masters in cleanup mode, passing it
 *		to report: for backend exit.
 */
void
redlock_lock_release_everything(RedlockReleaseReport report)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	DetachedLock *detached;
	int			n = 0;

	if (locks == NULL)
		return;
	detached = palloc(sizeof(DetachedLock) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
		detached[n++] = lock_detach(lock);
	release_all_detached(detached, n, report);
}
