/*-------------------------------------------------------------------------
 *
 * locktable.c
 *	  The locks this backend holds: resource -> key, token, node set, holds, validity.
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
 * A lock remembers the configuration it was taken under: its key (redlock.key_prefix
 * and the UTF-8 form of the name, whatever the database encoding) and its node set
 * (servers, credentials, database).  Once the configuration in force is another one,
 * the lock is lost: other sessions now look for it elsewhere, so it protects nothing.
 * Its validity reads 0, the commit guard fails, extend returns false, release warns;
 * its keys are still released on the masters it was taken on.
 *
 * Validity only ever shrinks between successful requests: before an extend (or a
 * re-acquire, which extends) goes out, the validity is cut to what the new TTL allows
 * from now (redlock_validity_bound_ms), since any master may apply the request
 * whatever this backend learns of it; only a success sets it anew.
 *
 * Every release of locks (release, release_all, commit, abort, exit) goes through
 * locks_release(): all of them in one round per node set, with one deadline.  A lock
 * is marked "releasing" (no holds, not valid) before the round and forgotten after it,
 * so that one whose release was interrupted (a cancel during redlock_release_all) is
 * still in the table and is released by the cleanup that follows.
 *
 * A transaction-scoped hold on a lock found lost is remembered with its subtransaction
 * (lost_holds): it fails the commit unless that subtransaction rolls back.
 *
 * A lock acquired while redlock.auto_extend is on (or re-acquired while it is on) is
 * also in the shared registry (registry.c), which the background worker renews.  Its
 * validity is then the registry's; its extensions (redlock_extend, a re-acquire) are
 * asked of the worker rather than sent from here, so that all of them reach each
 * master in order over the worker's connections.  The entry is reserved before the
 * acquire goes out and removed before any release, let-go or forget.  A lock the
 * worker gave up on stays in the table, shown lost, until the owner lets go of it; the
 * transaction that was running when it was lost cannot commit (when its owner asked
 * to be cancelled on loss).
 *
 * Three verbs for a lock that ends, one idea each: a lock is released (its keys deleted
 * on the masters it was taken on, by locks_release, and the entry dropped); lost (found
 * no longer ours: lock_lose releases its keys and marks its transaction holds lost,
 * and the entry stays until the caller drops it or acquires afresh); dropped (the
 * entry leaves the table, lock_drop, and the shared registry, lock_unregister).
 *
 * No network code here: quorum.c does the protocol.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "lease.h"
#include "nodeset.h"
#include "redlock.h"
#include "validity.h"
#include "waiters.h"

/* A hold added in the current top-level transaction. */
typedef struct PendingHold
{
	SubTransactionId subid;
	RedlockScope scope;
} PendingHold;

/*
 * One lock.  key, token and set are always valid (set pinned).  Until "acquired" is
 * set, an acquire attempt is in flight or was cut short, and only the fields up to it
 * and the pending log mean anything.
 */
typedef struct HeldLock
{
	char		resource[REDLOCK_MAX_RESOURCE_LEN + 1];	/* hash key */
	char	   *key;			/* the Redis key, at acquisition */
	int			prefix_len;		/* bytes of redlock.key_prefix at its start */
	char		token[REDLOCK_TOKEN_LEN + 1];	/* of the latest acquire attempt */
	RedlockNodeSet *set;		/* the masters it was taken on */
	bool		releasing;		/* no holds left; its release is under way */
	bool		acquired;
	int			ttl_ms;			/* TTL last set on the masters */
	int			nodes;			/* masters that accepted it last */
	TimestampTz acquired_at;
	double		valid_until_ms; /* redlock_clock_ms() time */
	int			session_holds;	/* session holds from committed transactions */
	int			npending;
	int			maxpending;
	PendingHold *pending;		/* holds added in the current transaction */
	RedlockRegistryHandle reg;	/* auto-extended: its registry entry; index -1: not */
	RedlockLeaseWatch *watch;	/* ... and its lease, watched (lease.c) */
	int64		fence;			/* its fencing token (fence.c), 0 before one is taken */
} HeldLock;

/* A transaction-scoped hold on a lock that was found lost. */
typedef struct LostHold
{
	char		resource[REDLOCK_MAX_RESOURCE_LEN + 1];
	SubTransactionId subid;
} LostHold;

static HTAB *locks = NULL;
static MemoryContext LockTableContext = NULL;

/* Holds in all pending logs: zero means this transaction touched no lock. */
static int	pending_total = 0;

/* Locks marked releasing. */
static int	releasing_total = 0;

/* Locks in the shared registry (auto-extended). */
static int	registered_total = 0;

static LostHold *lost_holds = NULL;
static int	nlost = 0;
static int	maxlost = 0;

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

/*
 * True when the configuration in force is no longer the one lock was taken under: its
 * node set, or redlock.key_prefix (its key starts with the prefix it was taken under).
 */
static bool
lock_reconfigured(const HeldLock *lock)
{
	const char *prefix = redlock_key_prefix ? redlock_key_prefix : "";
	char	   *prefix_utf8;
	bool		same_prefix;

	if (lock->set != redlock_nodeset_current())
		return true;
	prefix_utf8 = pg_server_to_any(prefix, strlen(prefix), PG_UTF8);
	same_prefix = strlen(prefix_utf8) == (size_t) lock->prefix_len &&
		strncmp(lock->key, prefix_utf8, lock->prefix_len) == 0;
	if (prefix_utf8 != prefix)
		pfree(prefix_utf8);
	return !same_prefix;
}

/* True when lock is auto-extended and the worker gave up on it. */
static bool
lock_lost_by_worker(const HeldLock *lock)
{
	RedlockLease lease;

	return lock->reg.index >= 0 && redlock_registry_view(&lock->reg, &lease) &&
		lease.state == LEASE_LOST;
}

/*
 * Validity time left (ms), <= 0 once run out, lost to a configuration change, or
 * given up on by the worker.  An auto-extended lock's validity is the registry's.
 */
static double
lock_validity_left(const HeldLock *lock)
{
	RedlockLease lease;

	if (!lock->acquired || lock_reconfigured(lock))
		return 0;
	if (lock->reg.index >= 0 && redlock_registry_view(&lock->reg, &lease))
		return lease.state == LEASE_LOST ? 0 : lease.valid_until_ms - redlock_clock_ms();
	return lock->valid_until_ms - redlock_clock_ms();
}

/*
 * The Redis key for resource, in LockTableContext: the prefix and the UTF-8 name.
 * *prefix_len (may be NULL) is set to the prefix's length in the key.
 */
static char *
make_key(const char *resource, int *prefix_len)
{
	const char *prefix = redlock_key_prefix ? redlock_key_prefix : "";
	char	   *prefix_utf8 = pg_server_to_any(prefix, strlen(prefix), PG_UTF8);
	char	   *name_utf8 = pg_server_to_any(resource, strlen(resource), PG_UTF8);

	if (prefix_len)
		*prefix_len = strlen(prefix_utf8);
	return MemoryContextStrdup(LockTableContext, psprintf("%s%s", prefix_utf8, name_utf8));
}

/* Puts lock in the shared registry (auto-extension) before its acquire goes out. */
static void
lock_register(HeldLock *lock)
{
	int			prefix_len;
	char	   *key = make_key(lock->resource, &prefix_len);

	redlock_registry_reserve(key, prefix_len, redlock_cancel_on_loss, &lock->reg);
	pfree(key);
	lock->watch = redlock_lease_watch(&lock->reg, lock->resource);
	registered_total++;
}

/* Takes lock out of the shared registry, if it is there: the worker lets go of it. */
static void
lock_unregister(HeldLock *lock)
{
	if (lock->reg.index < 0)
		return;
	redlock_lease_unwatch(lock->watch, lock->acquired && lock_reconfigured(lock));
	lock->watch = NULL;
	redlock_registry_remove(&lock->reg);
	registered_total--;
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

/* Drops every hold of lock. */
static void
holds_clear(HeldLock *lock)
{
	pending_total -= lock->npending;
	lock->npending = 0;
	lock->session_holds = 0;
}

/* A new entry for resource, on set, with a key but no token or hold yet. */
static HeldLock *
lock_create(const char *resource, RedlockNodeSet *set)
{
	int			prefix_len;
	char	   *key = make_key(resource, &prefix_len);
	HeldLock   *lock = hash_search(locks, resource, HASH_ENTER, NULL);

	memset(((char *) lock) + offsetof(HeldLock, key), 0,
		   sizeof(HeldLock) - offsetof(HeldLock, key));
	lock->reg.index = -1;
	lock->key = key;
	lock->prefix_len = prefix_len;
	lock->set = set;
	redlock_nodeset_pin(set);
	return lock;
}

/* Drops lock: removes it from the table (and the registry), freeing what it owns. */
static void
lock_drop(HeldLock *lock)
{
	lock_unregister(lock);
	holds_clear(lock);
	if (lock->releasing)
		releasing_total--;
	if (lock->key)
		pfree(lock->key);
	if (lock->pending)
		pfree(lock->pending);
	redlock_nodeset_unpin(lock->set);
	hash_search(locks, lock->resource, HASH_REMOVE, NULL);
}

/* Remembers lock's transaction-scoped holds as lost, each with its subtransaction. */
static void
holds_mark_lost(HeldLock *lock)
{
	for (int i = 0; i < lock->npending; i++)
	{
		if (lock->pending[i].scope != REDLOCK_SCOPE_XACT)
			continue;
		if (nlost == maxlost)
		{
			int			newmax = Max(4, maxlost * 2);

			lost_holds = lost_holds
				? repalloc(lost_holds, newmax * sizeof(LostHold))
				: MemoryContextAlloc(LockTableContext, newmax * sizeof(LostHold));
			maxlost = newmax;
		}
		strlcpy(lost_holds[nlost].resource, lock->resource, sizeof(lost_holds[nlost].resource));
		lost_holds[nlost].subid = lock->pending[i].subid;
		nlost++;
	}
}

/*
 * Releases held[0..n-1] on the masters they were taken on (spec §5): one round per
 * node set, all locks at once, and forgets them; then passes each to report (may be
 * NULL).  Returns what happened to each (palloc'd, n entries).  Each is marked releasing first, so that an interrupted round leaves them in
 * the table for the next cleanup.  cleanup: on commit, abort and exit (bounded, deaf to
 * interrupts; nothing on the network when error recovery is itself in trouble).
 * wait_all: wait for every master (within its one deadline) rather than only for a
 * decision: cleanup passes it, since no later call may come to send what a new
 * connection's handshake held back or to read late replies.
 */
static RedlockReleaseInfo *
locks_release(HeldLock **held, int n, bool cleanup, bool wait_all, RedlockReleaseReport report)
{
	RedlockReleaseInfo *infos;
	RedlockKeyToken *batch;
	RedlockResult *results;
	int		   *index;
	bool		skip_network = cleanup && in_error_recursion_trouble();

	if (n == 0)
		return NULL;
	infos = palloc0(sizeof(RedlockReleaseInfo) * n);
	batch = palloc(sizeof(RedlockKeyToken) * n);
	results = palloc0(sizeof(RedlockResult) * n);
	index = palloc(sizeof(int) * n);

	for (int k = 0; k < n; k++)
	{
		HeldLock   *lock = held[k];

		RedlockLease lease;

		infos[k].resource = pstrdup(lock->resource);
		infos[k].acquired = lock->acquired;
		infos[k].reconfigured = lock->acquired && lock_reconfigured(lock);
		if (lock->acquired && lock->reg.index >= 0 &&
			redlock_registry_view(&lock->reg, &lease) && lease.state == LEASE_LOST)
		{
			infos[k].lost_reason = pstrdup(lease.lost_reason);
			infos[k].loss_reported = redlock_lease_was_told(lock->watch);
		}
		infos[k].expired = lock->acquired && !infos[k].reconfigured &&
			!infos[k].lost_reason && lock_validity_left(lock) <= 0;
		lock_unregister(lock);
		if (infos[k].expired)
			redlock_stats_count(REDLOCK_STAT_RELEASED_EXPIRED);
		holds_clear(lock);
		if (!lock->releasing)
		{
			lock->releasing = true;
			releasing_total++;
		}
	}

	/* One round per node set; almost always there is one. */
	for (int first = 0; first < n && !skip_network; first++)
	{
		RedlockNodeSet *set = held[first]->set;
		int			m = 0;
		bool		done_before = false;

		for (int k = 0; k < first && !done_before; k++)
			done_before = (held[k]->set == set);
		if (done_before)
			continue;
		for (int k = first; k < n; k++)
		{
			if (held[k]->set != set)
				continue;
			batch[m].key = held[k]->key;
			batch[m].token = held[k]->token;
			index[m++] = k;
		}
		redlock_quorum_release_many(set, batch, m, wait_all, cleanup, results);
		for (int j = 0; j < m; j++)
			infos[index[j]].result = results[j];
	}

	/* Waiters in this cluster need not wait for the announcement to come back. */
	for (int k = 0; k < n && !skip_network; k++)
		if (infos[k].result.accepted > 0)
			(void) redlock_waiters_wake(held[k]->key, strlen(held[k]->key), true);
	for (int k = 0; k < n; k++)
		lock_drop(held[k]);
	if (report && !skip_network)
		for (int k = 0; k < n; k++)
			report(&infos[k]);
	return infos;
}

/*
 * Loses lock, found lost (another token on the masters, or a configuration change):
 * marks its transaction holds lost and releases it on the masters it was taken on.
 * The entry stays, not acquired: the caller drops it or acquires afresh.
 */
static void
lock_lose(HeldLock *lock)
{
	RedlockKeyToken kt = {lock->key, lock->token};
	RedlockResult released;

	lock_unregister(lock);
	holds_mark_lost(lock);
	lock->acquired = false;
	redlock_quorum_release_many(lock->set, &kt, 1, false, false, &released);
}

/*
 * Sets a new TTL on a held lock (spec §6).  Returns REDLOCK_HELD when extended,
 * REDLOCK_FAILED when fewer than a quorum answered, REDLOCK_LOST when the lock is no
 * longer ours: it is lost (lock_lose), but the entry stays (the caller drops it or
 * acquires afresh).  Unless extended, the validity is now at most what ttl_ms allows
 * from the start of the request.
 */
static RedlockHoldStatus
lock_refresh(HeldLock *lock, int ttl_ms, RedlockResult *result)
{
	bool		expired = lock_validity_left(lock) <= 0;

	if (lock->reg.index >= 0)
		redlock_registry_extend(&lock->reg, ttl_ms, result);
	else
	{
		lock->valid_until_ms = Min(lock->valid_until_ms, redlock_validity_bound_ms(ttl_ms));
		redlock_quorum_extend(lock->set, lock->key, lock->token, ttl_ms, result);
	}
	if (result->status == REDLOCK_OK)
	{
		lock->ttl_ms = ttl_ms;
		lock->valid_until_ms = result->valid_until_ms;
		lock->nodes = result->accepted;
		return REDLOCK_HELD;
	}
	if (result->status == REDLOCK_UNAVAILABLE)
		return REDLOCK_FAILED;

	if (expired)
		redlock_stats_count(REDLOCK_STAT_RELEASED_EXPIRED);
	if (lock->watch)
		redlock_lease_told(lock->watch);	/* the false it returns tells the owner */
	lock_lose(lock);
	return REDLOCK_LOST;
}

/*
 * redlock_lock_acquire
 *		Adds a hold on resource at scope, acquiring the lock on the masters first when
 *		this backend does not hold it (spec §3, §4), or refreshing its TTL when it does
 *		(spec §6): to the larger of ttl_ms and the TTL last set, so that a re-acquire
 *		(which a rollback may undo) never shortens a lock held by an outer hold.
 *
 * resource: the resource name (checked by the caller: non-empty, at most
 *		REDLOCK_MAX_RESOURCE_LEN bytes).  ttl_ms: 1..REDLOCK_MAX_TTL_MS, leaving
 *		validity after drift.  wait_ms: as for redlock_quorum_acquire (0: one attempt;
 *		< 0: no limit).
 * was_lost: set true when this backend believed it held the lock but it was lost
 *		(the refresh found another token, or the configuration changed); the lock was
 *		then acquired afresh, keeping the holds it had.
 * result: the quorum outcome of the request that decided.
 *
 * Returns REDLOCK_HELD, or REDLOCK_FAILED with result->status BUSY or UNAVAILABLE (no
 * hold added; a lock found lost is then forgotten with all its holds).  Raises what an
 * interrupted network wait raises; the hold logged before the request is then taken
 * back by the abort.
 */
RedlockHoldStatus
redlock_lock_acquire(const char *resource, RedlockScope scope, int ttl_ms, int wait_ms,
					 bool *was_lost, RedlockResult *result)
{
	RedlockNodeSet *set = redlock_nodeset_current();
	HeldLock   *lock;

	*was_lost = false;
	lock = lock_find(resource);

	/* A release that was interrupted, or an attempt that was cut short: finish it. */
	if (lock && (lock->releasing || !lock->acquired))
	{
		locks_release(&lock, 1, false, false, NULL);
		lock = NULL;
	}

	if (lock && (lock->set != set || lock_lost_by_worker(lock)))
	{
		lock_lose(lock);
		*was_lost = true;
	}
	else if (lock)
	{
		/* Held already: refresh the TTL, then stack a hold. */
		RedlockHoldStatus status = lock_refresh(lock, Max(ttl_ms, lock->ttl_ms), result);

		if (status == REDLOCK_HELD)
		{
			/* Auto-extension asked for now: the worker takes it over from here. */
			if (redlock_auto_extend && lock->reg.index < 0)
			{
				lock_register(lock);
				redlock_registry_activate(&lock->reg, lock->token, lock->ttl_ms,
										  lock->valid_until_ms);
			}
			hold_add(lock, scope);
			return REDLOCK_HELD;
		}
		if (status == REDLOCK_FAILED)
			return REDLOCK_FAILED;
		*was_lost = true;
	}

	if (lock == NULL)
		lock = lock_create(resource, set);
	else
	{
		/* Lost: acquire afresh on the configuration in force, keeping the holds. */
		redlock_nodeset_unpin(lock->set);
		lock->set = set;
		redlock_nodeset_pin(set);
		pfree(lock->key);
		lock->key = make_key(resource, &lock->prefix_len);
		lock->fence = 0;		/* a new hold, a new fencing token */
	}

	hold_add(lock, scope);
	if (redlock_auto_extend)
		lock_register(lock);
	if (wait_ms == 0)
		redlock_quorum_acquire(lock->set, lock->key, lock->token, ttl_ms, 0, NULL, false,
							   result);
	else
	{
		/*
		 * A waiter: a release announced on the masters (or here) wakes it.  An
		 * interrupted wait is unregistered by the (sub)transaction abort that follows.
		 */
		bool		behind;
		RedlockWaiter *waiter = redlock_waiters_begin(lock->key, &behind);

		redlock_quorum_acquire(lock->set, lock->key, lock->token, ttl_ms, wait_ms,
							   waiter, behind, result);
		redlock_waiters_end();
	}
	if (result->status != REDLOCK_OK)
	{
		/* The attempt was undone on the masters already (spec §3 step 5). */
		lock_drop(lock);
		return REDLOCK_FAILED;
	}
	lock->acquired = true;
	lock->ttl_ms = ttl_ms;
	lock->nodes = result->accepted;
	lock->valid_until_ms = result->valid_until_ms;
	lock->acquired_at = GetCurrentTimestamp();
	if (lock->reg.index >= 0)
		redlock_registry_activate(&lock->reg, lock->token, ttl_ms, result->valid_until_ms);
	return REDLOCK_HELD;
}

/*
 * redlock_lock_claim
 *		One quorum acquire of resource for ttl_ms milliseconds (spec §3) that never
 *		enters the lock table: nothing releases it, at commit, abort or exit; it ends
 *		when its TTL runs out, so one caller per resource wins within the TTL.
 *
 * resource, ttl_ms: checked by the caller, as for redlock_lock_acquire.
 * result: the quorum outcome (BUSY: claimed elsewhere; UNAVAILABLE: fewer than a
 *		quorum answered).
 *
 * Returns true when claimed.  Raises what an interrupted network wait raises (an
 * attempt cut short then lives until its TTL runs out) and XX000 if the strong random
 * source fails.
 */
bool
redlock_lock_claim(const char *resource, int ttl_ms, RedlockResult *result)
{
	char		token[REDLOCK_TOKEN_LEN + 1];
	char	   *key;

	table_init();
	key = make_key(resource, NULL);
	redlock_quorum_acquire(redlock_nodeset_current(), key, token, ttl_ms, 0, NULL, false,
						   result);
	pfree(key);
	return result->status == REDLOCK_OK;
}

/*
 * redlock_lock_release
 *		Drops one session hold on resource, the latest one first, and releases the lock
 *		on the masters it was taken on (spec §5) when no hold is left.
 *
 * info: filled when REDLOCK_RELEASED is returned (resource, whether the validity had
 *		run out or the configuration changed, the quorum outcome).
 *
 * Returns REDLOCK_NOT_HELD when this backend has no session hold on resource,
 * REDLOCK_HELD when holds remain, REDLOCK_RELEASED otherwise.  Raises what an
 * interrupted network wait raises (the lock then stays marked releasing, and the
 * cleanup after the error releases it).
 */
RedlockHoldStatus
redlock_lock_release(const char *resource, RedlockReleaseInfo *info)
{
	HeldLock   *lock = lock_find(resource);
	bool		removed = false;

	if (lock == NULL || !lock->acquired || lock->releasing || count_holds(lock, true) == 0)
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

	*info = locks_release(&lock, 1, false, false, NULL)[0];
	return REDLOCK_RELEASED;
}

/*
 * redlock_lock_extend
 *		Sets a new TTL on a lock this backend holds (spec §6).
 *
 * ttl_ms: the new TTL, 1..REDLOCK_MAX_TTL_MS leaving validity after drift, or 0 for
 *		the TTL last set on the masters (by the acquire, a re-acquire or an extend).
 * result: the quorum outcome.
 *
 * Returns REDLOCK_NOT_HELD, REDLOCK_HELD (extended), REDLOCK_LOST (a quorum answered
 * but no longer holds our token, or the configuration changed since it was taken: the
 * lock is forgotten and let go of on the masters it was taken on) or REDLOCK_FAILED
 * (fewer than a quorum answered: the lock is kept, its validity cut to what the new
 * TTL allows from the start of the request).  Raises what an interrupted network wait
 * raises (the validity stays cut likewise).
 */
RedlockHoldStatus
redlock_lock_extend(const char *resource, int ttl_ms, RedlockResult *result)
{
	HeldLock   *lock = lock_find(resource);
	RedlockHoldStatus status;

	if (lock == NULL || !lock->acquired || lock->releasing)
		return REDLOCK_NOT_HELD;
	if (lock_reconfigured(lock))
	{
		lock_lose(lock);
		lock_drop(lock);
		memset(result, 0, sizeof(*result));
		result->status = REDLOCK_BUSY;
		return REDLOCK_LOST;
	}
	status = lock_refresh(lock, ttl_ms == 0 ? lock->ttl_ms : ttl_ms, result);
	if (status == REDLOCK_LOST)
		lock_drop(lock);
	return status;
}

/*
 * redlock_lock_fencing_token
 *		The fencing token of a lock this backend holds, at either scope (doc/redlock.md
 *		§9): taken from the masters on the first call of a hold, the same number for
 *		the rest of it (stacking and extending keep it; a lock found lost and acquired
 *		again gets a new one).
 *
 * fence: set to the token when REDLOCK_HELD is returned.
 * cause: set when REDLOCK_LOST is returned: REDLOCK_LOSS_EXPIRED (validity ran out,
 *		or the background worker gave up on it: the lock stays in the table, as any
 *		expired lock does), REDLOCK_LOSS_RECONFIGURED or REDLOCK_LOSS_TOKEN_GONE (the
 *		masters no longer hold its token: let go of and forgotten, as an extend that
 *		finds it lost does).
 * result: the quorum outcome of the rounds, when the masters were asked.
 *
 * Returns REDLOCK_NOT_HELD, REDLOCK_HELD, REDLOCK_LOST, or REDLOCK_FAILED (fewer than a
 * quorum answered; the lock is kept).  Raises what an interrupted network wait raises.
 */
RedlockHoldStatus
redlock_lock_fencing_token(const char *resource, int64 *fence, RedlockLossCause *cause,
						   RedlockResult *result)
{
	HeldLock   *lock = lock_find(resource);

	memset(result, 0, sizeof(*result));
	*cause = REDLOCK_LOSS_NONE;
	if (lock == NULL || !lock->acquired || lock->releasing)
		return REDLOCK_NOT_HELD;
	if (lock_reconfigured(lock))
	{
		lock_lose(lock);
		lock_drop(lock);
		*cause = REDLOCK_LOSS_RECONFIGURED;
		return REDLOCK_LOST;
	}
	if (lock_validity_left(lock) <= 0)
	{
		*cause = REDLOCK_LOSS_EXPIRED;
		return REDLOCK_LOST;
	}
	if (lock->fence != 0)
	{
		*fence = lock->fence;
		return REDLOCK_HELD;
	}

	redlock_quorum_fence(lock->set, lock->key, lock->token,
						 redlock_clock_ms() + lock_validity_left(lock), fence, result);
	if (result->status == REDLOCK_OK)
	{
		lock->fence = *fence;
		return REDLOCK_HELD;
	}
	if (result->status == REDLOCK_UNAVAILABLE)
		return REDLOCK_FAILED;
	if (lock_validity_left(lock) <= 0)
	{
		*cause = REDLOCK_LOSS_EXPIRED;
		return REDLOCK_LOST;
	}
	lock_lose(lock);
	lock_drop(lock);
	*cause = REDLOCK_LOSS_TOKEN_GONE;
	return REDLOCK_LOST;
}

/*
 * Collects into a palloc'd array (*held) the locks for which keep() is false, after
 * calling prepare() (may be NULL) on each; returns how many.
 */
static int
collect_locks(HeldLock ***held, void (*prepare) (HeldLock *lock, void *arg),
			  bool (*keep) (HeldLock *lock, void *arg), void *arg)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	int			n = 0;

	table_init();
	*held = palloc(sizeof(HeldLock *) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (prepare && !lock->releasing)
			prepare(lock, arg);
		if (lock->releasing || !keep(lock, arg))
			(*held)[n++] = lock;
	}
	return n;
}

/* Drops lock's session holds. */
static void
drop_session_holds(HeldLock *lock, void *arg pg_attribute_unused())
{
	lock->session_holds = 0;
	for (int i = lock->npending - 1; i >= 0; i--)
		if (lock->pending[i].scope == REDLOCK_SCOPE_SESSION)
			hold_remove(lock, i);
}

/* Keeps a lock while it has holds and is acquired (or being acquired, outside aborts). */
static bool
keep_if_held(HeldLock *lock, void *arg pg_attribute_unused())
{
	return total_holds(lock) > 0 && lock->acquired;
}

/*
 * redlock_lock_release_session
 *		Drops every session hold of this backend (transaction holds stay) and releases
 *		the locks left with no hold, in one round, calling report (may be NULL) for
 *		each.
 *
 * Returns the number of locks released.  Raises what an interrupted network wait
 * raises; the locks not yet released stay marked releasing, and the cleanup after the
 * error releases them.
 */
int
redlock_lock_release_session(RedlockReleaseReport report)
{
	HeldLock  **held;
	int			n = collect_locks(&held, drop_session_holds, keep_if_held, NULL);

	locks_release(held, n, false, false, report);
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
	RedlockLease lease;
	int			n = 0;
	TimestampTz now = GetCurrentTimestamp();

	table_init();
	out = palloc0(sizeof(RedlockLockInfo) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		RedlockLockInfo *info = &out[n];

		if (!lock->acquired || lock->releasing)
			continue;
		info->resource = pstrdup(lock->resource);
		info->key = pstrdup(lock->key);
		info->session_holds = count_holds(lock, true);
		info->xact_holds = count_holds(lock, false);
		info->ttl_ms = lock->ttl_ms;
		info->nodes = lock->nodes;
		info->acquired_at = lock->acquired_at;
		info->validity_ms = lock_validity_left(lock);
		info->valid_until = TimestampTzPlusMilliseconds(now, (int64) Max(info->validity_ms, 0));
		info->auto_extended = lock->reg.index >= 0;
		if (info->auto_extended && redlock_registry_view(&lock->reg, &lease))
		{
			info->lost = lease.state == LEASE_LOST;
			info->last_renewal = lease.last_renewal;
			info->renewals = lease.renewals;
			info->ttl_ms = lease.ttl_ms;
		}
		n++;
	}
	*locks_out = out;
	return n;
}

/*
 * redlock_lock_xact_acquired
 *		True when the current transaction added a hold or lost a transaction-scoped
 *		lock: what PREPARE TRANSACTION cannot carry.
 */
bool
redlock_lock_xact_acquired(void)
{
	return pending_total > 0 || nlost > 0;
}

/*
 * redlock_lock_xact_pending
 *		True when the current transaction added a hold or lost a transaction-scoped
 *		lock, a release is unfinished, an auto-extended lock is held, or one let go of
 *		in this transaction refuses its commit: the transaction hooks have work to do.
 */
bool
redlock_lock_xact_pending(void)
{
	const char *reason;

	return pending_total > 0 || nlost > 0 || releasing_total > 0 || registered_total > 0 ||
		redlock_lease_carried_refusal(&reason) != NULL;
}

/*
 * redlock_lock_first_expired_xact
 *		Returns (palloc'd) the resource of a transaction-scoped lock that was lost in
 *		this transaction (and not in a subtransaction that rolled back), that was taken
 *		under another configuration than the one in force, or whose validity has less
 *		than redlock.commit_margin left; NULL when there is none.
 */
const char *
redlock_lock_first_expired_xact(void)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;

	if (nlost > 0)
		return pstrdup(lost_holds[0].resource);
	if (pending_total == 0)
		return NULL;
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (count_holds(lock, false) > 0 && !lock->releasing &&
			lock_validity_left(lock) <= redlock_commit_margin_ms)
		{
			hash_seq_term(&scan);
			return pstrdup(lock->resource);
		}
	}
	return NULL;
}

/*
 * redlock_lock_first_lost_in_xact
 *		The commit check of auto-extended locks (either scope) taken with
 *		redlock.cancel_on_loss on: returns (palloc'd) the resource of one whose lease
 *		refuses the commit of the current transaction (lease.c states the rule), or of
 *		one let go of in this transaction that did; sets *reason to why.  NULL when
 *		there is none.  Raises only out-of-memory errors.
 */
const char *
redlock_lock_first_lost_in_xact(const char **reason)
{
	HASH_SEQ_STATUS scan;
	HeldLock   *lock;
	const char *resource = redlock_lease_carried_refusal(reason);

	if (resource)
		return pstrdup(resource);
	if (registered_total == 0)
		return NULL;
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (lock->watch == NULL || lock->releasing)
			continue;
		*reason = redlock_lease_commit_refusal(lock->watch,
											   lock->acquired && lock_reconfigured(lock));
		if (*reason == NULL)
			continue;
		hash_seq_term(&scan);
		return pstrdup(lock->resource);
	}
	return NULL;
}

/* Ends the current transaction's holds on lock; arg points to "commit". */
static void
end_xact_holds(HeldLock *lock, void *arg)
{
	if (lock->npending == 0)
		return;
	if (*(bool *) arg)
		lock->session_holds = count_holds(lock, true);
	pending_total -= lock->npending;
	lock->npending = 0;
}

/*
 * redlock_lock_xact_end
 *		Ends the top-level transaction for the lock table.  At commit the session holds
 *		it added become permanent; at commit or abort its transaction holds end, and at
 *		abort its session holds too.  Locks left with no hold (or whose acquire was cut
 *		short) are released on the masters in one round, in cleanup mode (one deadline
 *		per master, never raising on network trouble), and passed to report.
 */
void
redlock_lock_xact_end(bool commit, RedlockReleaseReport report)
{
	HeldLock  **held;
	int			n;

	nlost = 0;
	redlock_waiters_end();
	if (pending_total == 0 && releasing_total == 0)
		return;
	n = collect_locks(&held, end_xact_holds, keep_if_held, &commit);
	locks_release(held, n, true, true, report);
}

/* What subxact_end_holds needs. */
typedef struct SubxactEnd
{
	bool		commit;
	SubTransactionId subid;
	SubTransactionId parent;
} SubxactEnd;

/* Passes subid's holds on lock to its parent (commit) or takes them back (abort). */
static void
end_subxact_holds(HeldLock *lock, void *arg)
{
	SubxactEnd *end = arg;

	for (int i = lock->npending - 1; i >= 0; i--)
	{
		if (lock->pending[i].subid != end->subid)
			continue;
		if (end->commit)
			lock->pending[i].subid = end->parent;
		else
			hold_remove(lock, i);
	}
}

/*
 * redlock_lock_subxact_end
 *		Ends subtransaction subid (child of parent) for the lock table: at commit its
 *		holds (and lost holds) pass to the parent; at abort they are taken back, and
 *		locks left with no hold are released in one round in cleanup mode and passed
 *		to report.
 */
void
redlock_lock_subxact_end(bool commit, SubTransactionId subid, SubTransactionId parent,
						 RedlockReleaseReport report)
{
	SubxactEnd	end = {commit, subid, parent};
	HeldLock  **held;
	int			n;
	int			kept = 0;

	if (!commit)
		redlock_waiters_end();

	for (int i = 0; i < nlost; i++)
	{
		if (lost_holds[i].subid == subid)
		{
			if (!commit)
				continue;
			lost_holds[i].subid = parent;
		}
		lost_holds[kept++] = lost_holds[i];
	}
	nlost = kept;

	if (pending_total == 0 && releasing_total == 0)
		return;
	n = collect_locks(&held, end_subxact_holds, keep_if_held, &end);
	locks_release(held, n, true, true, report);
}

/* Keeps nothing. */
static bool
keep_none(HeldLock *lock pg_attribute_unused(), void *arg pg_attribute_unused())
{
	return false;
}

/*
 * redlock_lock_release_everything
 *		Forgets every lock and releases them all on the masters in one round, in
 *		cleanup mode, waiting for every master within its deadline, passing each to
 *		report: for backend exit.
 */
void
redlock_lock_release_everything(RedlockReleaseReport report)
{
	HeldLock  **held;
	int			n;

	if (locks == NULL)
		return;
	n = collect_locks(&held, NULL, keep_none, NULL);
	locks_release(held, n, true, true, report);
}
