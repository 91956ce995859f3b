/*-------------------------------------------------------------------------
 *
 * locktable.c
 *	  The locks this backend holds: resource -> key, token, node set, holds, validity;
 *	  and how a lock ends.  The ends of transactions, sessions and the backend, which
 *	  collect the locks to release from here, are lockends.c's.
 *
 * Holds stack like PostgreSQL's advisory locks (holds.c keeps them): the keys are
 * deleted when the last hold goes, so a (sub)transaction that aborts, taking back the
 * holds it added, releases a lock left with no hold: the acquire is undone with the
 * work it was for.  The hold is logged before the network request (lockops.c), so that
 * an acquire cut short by an error (query cancel) is undone by the abort that follows.
 *
 * A lock remembers the configuration it was taken under: its key (redlock.key_prefix
 * and the UTF-8 form of the name, whatever the database encoding) and its node set
 * (servers, credentials, database).  Once the configuration in force is another one,
 * the lock is lost: other sessions now look for it elsewhere, so it protects nothing.
 * Its validity reads 0, the commit guard fails, extend returns false, release warns;
 * its keys are still released on the masters it was taken on.
 *
 * Every release of locks (release, release_all, commit, abort, exit) goes through
 * redlock_locktable_release(): all of them in one round per node set, with one
 * deadline.  A lock is let go of (life.c: RELEASING or UNDOING, no holds, not valid)
 * before the round and forgotten after it, so that one whose release was interrupted (a cancel during
 * redlock_release_all) is still in the table and is released by the cleanup that
 * follows.
 *
 * A transaction-scoped hold on a lock found lost is remembered with its subtransaction
 * (holds.c): it fails the commit unless that subtransaction rolls back.
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
 * on the masters it was taken on, by redlock_locktable_release, and the entry
 * dropped); lost (found no longer ours: redlock_locktable_lose releases its keys and
 * marks its transaction holds lost, and the entry stays until the caller drops it or
 * acquires afresh); dropped (the entry leaves the table and the shared registry,
 * redlock_locktable_drop).
 *
 * Where a lock stands (acquiring, held, lost, let go of) is life.c's: the verbs here
 * move it there, and read it from there.  No protocol here: quorum.c runs it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "guc.h"
#include "lock/holds.h"
#include "lock/leasewatch.h"
#include "lock/locktable.h"
#include "protocol/quorum.h"
#include "redlock.h"
#include "shared/registry.h"
#include "shared/stats.h"
#include "shared/waiters.h"
#include "wire/nodeset.h"

static HTAB *locks = NULL;
static MemoryContext LockTableContext = NULL;

/* Locks in the shared registry (auto-extended). */
static int	registered_total = 0;

static void
lt_init(void)
{
	HASHCTL		ctl;

	if (locks)
		return;
	LockTableContext = AllocSetContextCreate(TopMemoryContext, "redlock lock table",
											 ALLOCSET_SMALL_SIZES);
	ctl.keysize = REDLOCK_MAX_RESOURCE_LEN + 1;
	ctl.entrysize = sizeof(RedlockHeldLock);
	ctl.hcxt = LockTableContext;
	locks = hash_create("redlock held locks", 16, &ctl,
						HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/*
 * redlock_locktable_find
 *		This backend's entry for resource, or NULL.  Raises only out-of-memory errors
 *		(the first call creates the table).
 */
RedlockHeldLock *
redlock_locktable_find(const char *resource)
{
	lt_init();
	return hash_search(locks, resource, HASH_FIND, NULL);
}

/*
 * redlock_locktable_make_key
 *		The Redis key for resource under the configuration in force, palloc'd in the
 *		table's context: redlock.key_prefix and the name, both in UTF-8.  *prefix_len
 *		(may be NULL) is set to the prefix's length in the key, in bytes.  Raises
 *		encoding conversion errors (22021).
 */
char *
redlock_locktable_make_key(const char *resource, int *prefix_len)
{
	const char *prefix = redlock_key_prefix ? redlock_key_prefix : "";
	char	   *prefix_utf8;
	char	   *name_utf8;

	lt_init();
	prefix_utf8 = pg_server_to_any(prefix, strlen(prefix), PG_UTF8);
	name_utf8 = pg_server_to_any(resource, strlen(resource), PG_UTF8);
	if (prefix_len)
		*prefix_len = strlen(prefix_utf8);
	return MemoryContextStrdup(LockTableContext, psprintf("%s%s", prefix_utf8, name_utf8));
}

/*
 * redlock_locktable_register
 *		Puts lock in the shared registry (auto-extension), before its acquire goes out.
 *		Raises what redlock_registry_reserve raises (55000, 54000, 53400).
 */
void
redlock_locktable_register(RedlockHeldLock *lock)
{
	int			prefix_len;
	char	   *key = redlock_locktable_make_key(lock->resource, &prefix_len);

	/* A permit's key is its slot's, known at acquisition: check the longest fits. */
	if (lock->permits > 0)
	{
		char	   *longest = psprintf("%s" REDLOCK_PERMIT_SLOT_SEPARATOR "%d", key,
									   lock->permits);

		pfree(key);
		key = longest;
	}
	redlock_registry_reserve(key, prefix_len, redlock_cancel_on_loss, &lock->reg);
	pfree(key);
	lock->watch = redlock_lease_watch(&lock->reg, lock->resource);
	registered_total++;
}

/* Takes lock out of the shared registry, if it is there: the worker lets go of it. */
static void
lt_unregister(RedlockHeldLock *lock)
{
	if (lock->reg.index < 0)
		return;
	redlock_lease_unwatch(lock->watch, redlock_life_won(lock) && redlock_life_reconfigured(lock));
	lock->watch = NULL;
	redlock_registry_remove(&lock->reg);
	registered_total--;
}

/* Gives lock its key under the configuration in force (a permit: its semaphore's). */
static void
lt_set_key(RedlockHeldLock *lock)
{
	int			prefix_len;
	char	   *key = redlock_locktable_make_key(lock->resource, &prefix_len);
	char	   *semaphore_key = lock->permits > 0
		? MemoryContextStrdup(LockTableContext, key) : NULL;

	/* Only now that nothing can fail: an error above leaves the entry as it was. */
	if (lock->key)
		pfree(lock->key);
	if (lock->semaphore_key)
		pfree(lock->semaphore_key);
	lock->key = key;
	lock->semaphore_key = semaphore_key;
	lock->prefix_len = prefix_len;
}

/*
 * redlock_locktable_create
 *		A new entry for resource, on set (pinned), with its key but no token or hold
 *		yet, its life begun (life.c: charged to its role).  kind: REDLOCK_KIND_LOCK,
 *		REDLOCK_KIND_SHARED, or 1..REDLOCK_MAX_PERMITS for a semaphore's permit.
 *		Returns NULL, with *refusal filled and no entry made, when the role has
 *		redlock.max_locks_per_role locks and claims already (redlock_life_begin).
 *		Raises what redlock_locktable_make_key raises.
 */
RedlockHeldLock *
redlock_locktable_create(const char *resource, int kind, RedlockNodeSet *set,
						 RedlockQuotaRefusal *refusal)
{
	RedlockHeldLock *lock;

	lt_init();
	lock = hash_search(locks, resource, HASH_ENTER, NULL);
	memset(((char *) lock) + offsetof(RedlockHeldLock, key), 0,
		   sizeof(RedlockHeldLock) - offsetof(RedlockHeldLock, key));
	lock->reg.index = -1;
	lock->permits = Max(kind, 0);
	lock->shared = kind == REDLOCK_KIND_SHARED;
	PG_TRY();
	{
		lt_set_key(lock);
	}
	PG_CATCH();
	{
		hash_search(locks, resource, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	lock->set = set;
	redlock_nodeset_pin(set);
	if (!redlock_life_begin(lock, refusal))
	{
		redlock_locktable_drop(lock);
		return NULL;
	}
	return lock;
}

/*
 * redlock_locktable_slot_keys
 *		A permit's slot keys (doc/semaphores.md): the semaphore's key, then
 *		REDLOCK_PERMIT_SLOT_SEPARATOR and 1..permits; palloc'd, permits entries.  For
 *		a lock, its one key.  Raises only out-of-memory errors.
 */
char	  **
redlock_locktable_slot_keys(const RedlockHeldLock *lock)
{
	int			n = Max(lock->permits, 1);
	char	  **keys = palloc(sizeof(char *) * n);

	if (lock->permits == 0)
		keys[0] = pstrdup(lock->key);
	for (int s = 0; s < lock->permits; s++)
		keys[s] = psprintf("%s" REDLOCK_PERMIT_SLOT_SEPARATOR "%d", lock->semaphore_key, s + 1);
	return keys;
}

/*
 * redlock_locktable_take_slot
 *		Records that lock's acquire kept slot_keys[slot] (redlock_locktable_slot_keys):
 *		a permit's key is its slot's from now on.  Raises nothing.
 */
void
redlock_locktable_take_slot(RedlockHeldLock *lock, char **slot_keys, int slot)
{
	char	   *key;

	if (lock->permits == 0)
		return;
	key = MemoryContextStrdup(LockTableContext, slot_keys[slot]);
	pfree(lock->key);
	lock->key = key;
}

/*
 * redlock_locktable_acquired
 *		Records that lock's acquire won (spec §3): held from now with ttl_ms and the
 *		outcome's masters and validity; an auto-extended lock's registry entry is made
 *		live, for the worker to renew.  Raises what redlock_registry_activate raises.
 */
void
redlock_locktable_acquired(RedlockHeldLock *lock, int ttl_ms, const RedlockResult *result)
{
	redlock_life_move(lock, REDLOCK_LIFE_WON);
	lock->ttl_ms = ttl_ms;
	lock->nodes = result->accepted;
	lock->valid_until_ms = result->valid_until_ms;
	lock->acquired_at = GetCurrentTimestamp();
	if (lock->reg.index >= 0)
		redlock_registry_activate(&lock->reg, lock->key, lock->token, ttl_ms,
								  result->valid_until_ms);
}

/*
 * redlock_locktable_kind
 *		What this backend holds of resource: REDLOCK_KIND_NONE (nothing, or only a
 *		release or an attempt left unfinished), REDLOCK_KIND_LOCK, REDLOCK_KIND_SHARED,
 *		else a permit of a semaphore of that many permits.  Raises only out-of-memory
 *		errors.
 */
int
redlock_locktable_kind(const char *resource)
{
	RedlockHeldLock *lock = redlock_locktable_find(resource);

	if (!redlock_life_held(lock))
		return REDLOCK_KIND_NONE;
	return lock->shared ? REDLOCK_KIND_SHARED : lock->permits;
}

/*
 * redlock_locktable_rebase
 *		Moves a lock found lost to set, the configuration in force, to be acquired
 *		afresh with the holds it has: a new key, and no fencing token (a new hold, a
 *		new token).  Raises what redlock_locktable_make_key raises.
 */
void
redlock_locktable_rebase(RedlockHeldLock *lock, RedlockNodeSet *set)
{
	lt_set_key(lock);
	redlock_life_move(lock, REDLOCK_LIFE_RETRY);
	redlock_nodeset_unpin(lock->set);
	lock->set = set;
	redlock_nodeset_pin(set);
	lock->fence = 0;
}

/*
 * redlock_locktable_add_hold
 *		Logs a hold on lock at scope, in the current subtransaction (holds.c).  Raises
 *		only out-of-memory errors.
 */
void
redlock_locktable_add_hold(RedlockHeldLock *lock, RedlockScope scope)
{
	redlock_holds_add(&lock->holds, scope, LockTableContext);
}

/*
 * redlock_locktable_drop
 *		Drops lock: removes it from the table and the shared registry, freeing what it
 *		owns.  Nothing goes to the masters.  Raises nothing.
 */
void
redlock_locktable_drop(RedlockHeldLock *lock)
{
	lt_unregister(lock);
	redlock_holds_free(&lock->holds);
	redlock_life_move(lock, REDLOCK_LIFE_DROP);
	if (lock->key)
		pfree(lock->key);
	if (lock->semaphore_key)
		pfree(lock->semaphore_key);
	redlock_nodeset_unpin(lock->set);
	hash_search(locks, lock->resource, HASH_REMOVE, NULL);
}

/*
 * The keys to release for lock, with its token, written into batch (may be NULL: only
 * counted); returns how many.  A permit whose acquire did not finish may have set any
 * of its slots (the attempt's one token is on each), so all of them go.
 */
static int
lt_release_keys(RedlockHeldLock *lock, RedlockKeyToken *batch)
{
	char	  **slots;
	int			n = (lock->permits > 0 && !redlock_life_won(lock)) ? lock->permits : 1;

	if (batch == NULL)
		return n;
	if (n == 1)
	{
		batch[0].key = lock->key;
		batch[0].token = lock->token;
		batch[0].announce = lock->semaphore_key;
		return 1;
	}
	slots = redlock_locktable_slot_keys(lock);
	for (int s = 0; s < n; s++)
	{
		batch[s].key = slots[s];
		batch[s].token = lock->token;
		batch[s].announce = lock->semaphore_key;
	}
	return n;
}

/*
 * redlock_locktable_release
 *		Releases held[0..n-1] on the masters they were taken on (spec §5): one round per
 *		node set, all locks at once, and drops them; then passes each to report (may be
 *		NULL).  Each is marked releasing first, so that an interrupted round leaves
 *		them in the table for the next cleanup.
 *
 * cleanup: on commit, abort and exit (bounded, deaf to interrupts; nothing on the
 *		network when error recovery is itself in trouble).
 * wait_all: wait for every master (within its one deadline) rather than only for a
 *		decision: cleanup passes it, since no later call may come to send what a new
 *		connection's handshake held back or to read late replies.
 *
 * Returns what happened to each (palloc'd, n entries; NULL when n is 0).  Raises what
 * an interrupted network wait raises, unless cleanup.
 */
RedlockReleaseInfo *
redlock_locktable_release(RedlockHeldLock **held, int n, bool cleanup, bool wait_all,
						  RedlockReleaseReport report)
{
	RedlockReleaseInfo *infos;
	RedlockKeyToken *batch;
	RedlockResult *results;
	int		   *index;
	int			nkeys = 0;
	bool		skip_network = cleanup && in_error_recursion_trouble();

	if (n == 0)
		return NULL;
	infos = palloc0(sizeof(RedlockReleaseInfo) * n);
	for (int k = 0; k < n; k++)
		nkeys += lt_release_keys(held[k], NULL);
	batch = palloc(sizeof(RedlockKeyToken) * nkeys);
	results = palloc0(sizeof(RedlockResult) * nkeys);
	index = palloc(sizeof(int) * nkeys);

	for (int k = 0; k < n; k++)
	{
		RedlockHeldLock *lock = held[k];

		RedlockLease lease;

		infos[k].resource = pstrdup(lock->resource);
		infos[k].acquired = redlock_life_won(lock);
		infos[k].reconfigured = infos[k].acquired && redlock_life_reconfigured(lock);
		if (infos[k].acquired && lock->reg.index >= 0 &&
			redlock_registry_view(&lock->reg, &lease) && lease.state == LEASE_LOST)
		{
			infos[k].lost_reason = pstrdup(lease.lost_reason);
			infos[k].loss_reported = redlock_lease_was_told(lock->watch);
		}
		infos[k].expired = infos[k].acquired && !infos[k].reconfigured &&
			!infos[k].lost_reason && redlock_life_validity_left(lock) <= 0;
		lt_unregister(lock);
		if (infos[k].expired)
			redlock_stats_count(REDLOCK_STAT_RELEASED_EXPIRED);
		redlock_holds_clear(&lock->holds);
		redlock_life_move(lock, REDLOCK_LIFE_LET_GO);
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
			int			added;

			if (held[k]->set != set)
				continue;
			added = lt_release_keys(held[k], &batch[m]);
			for (int j = 0; j < added; j++)
				index[m++] = k;
		}
		redlock_quorum_release_many(set, batch, m, wait_all, cleanup, results);
		/* A lock's result is its key's (a permit's attempt: the slot most deleted). */
		for (int j = 0; j < m; j++)
			if (j == 0 || index[j] != index[j - 1] ||
				results[j].accepted > infos[index[j]].result.accepted)
				infos[index[j]].result = results[j];
	}

	/* Waiters in this cluster need not wait for the announcement to come back. */
	for (int k = 0; k < n && !skip_network; k++)
	{
		const char *announced = held[k]->semaphore_key ? held[k]->semaphore_key : held[k]->key;

		if (infos[k].result.accepted > 0)
			(void) redlock_waiters_wake(announced, strlen(announced), held[k]->key,
										strlen(held[k]->key), true);
	}
	for (int k = 0; k < n; k++)
		redlock_locktable_drop(held[k]);
	if (report && !skip_network)
		for (int k = 0; k < n; k++)
			report(&infos[k]);
	return infos;
}

/*
 * redlock_locktable_lose
 *		Loses lock, found lost (another token on the masters, a configuration change,
 *		or its validity run out during an extension): marks its transaction holds lost
 *		and lets go of it on the masters it was taken on, without waiting for their
 *		answers (redlock_quorum_let_go).  The entry stays, not acquired: the caller
 *		drops it or acquires afresh.  Raises what an interrupted network wait raises.
 */
void
redlock_locktable_lose(RedlockHeldLock *lock)
{
	RedlockKeyToken kt = {lock->key, lock->token, lock->semaphore_key};

	lt_unregister(lock);
	redlock_holds_mark_lost(&lock->holds, lock->resource, LockTableContext);
	redlock_life_move(lock, REDLOCK_LIFE_FOUND_LOST);
	redlock_quorum_let_go(lock->set, &kt);
}

/*
 * redlock_locktable_collect
 *		Collects into a palloc'd array (*held) the locks for which keep() is false (and
 *		those marked releasing), after calling prepare() (may be NULL) with arg on each
 *		not releasing; returns how many.  For the ends of transactions, sessions and the
 *		backend (lockends.c), which then release them (redlock_locktable_release).
 *		Raises only out-of-memory errors.
 */
int
redlock_locktable_collect(RedlockHeldLock ***held, void (*prepare) (RedlockHeldLock *lock, void *arg),
		   bool (*keep) (RedlockHeldLock *lock, void *arg), void *arg)
{
	HASH_SEQ_STATUS scan;
	RedlockHeldLock *lock;
	int			n = 0;

	lt_init();
	*held = palloc(sizeof(RedlockHeldLock *) * (hash_get_num_entries(locks) + 1));
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (prepare && !redlock_life_letting_go(lock))
			prepare(lock, arg);
		if (redlock_life_letting_go(lock) || !keep(lock, arg))
			(*held)[n++] = lock;
	}
	return n;
}

/*
 * redlock_locktable_scan
 *		Starts scan over every entry of the lock table (hash_seq_search gives them, and
 *		hash_seq_term ends a scan left early).  Raises only out-of-memory errors (the
 *		first call creates the table).
 */
void
redlock_locktable_scan(HASH_SEQ_STATUS *scan)
{
	lt_init();
	hash_seq_init(scan, locks);
}

/*
 * redlock_locktable_registered
 *		How many locks of this backend are in the shared registry (auto-extended).
 *		Raises nothing.
 */
int
redlock_locktable_registered(void)
{
	return registered_total;
}

/*
 * redlock_locktable_size
 *		The number of entries in the lock table (0 before it is made).  Raises nothing.
 */
long
redlock_locktable_size(void)
{
	return locks ? hash_get_num_entries(locks) : 0;
}

/*
 * redlock_locktable_held_on
 *		What this backend holds on the masters of set, for a wait record (deadlock
 *		detection, protocol/deadlock.c): each held lock's key (a permit's slot key) and
 *		token, in palloc'd arrays *keys and *tokens.  Returns how many.  Raises only
 *		out-of-memory errors (53200).  Not a distlock section: doc/deadlock.md §2.
 */
int
redlock_locktable_held_on(RedlockNodeSet *set, char ***keys, char ***tokens)
{
	HASH_SEQ_STATUS scan;
	RedlockHeldLock *lock;
	int			n = 0;
	long		size = redlock_locktable_size();

	*keys = palloc(sizeof(char *) * Max(size, 1));
	*tokens = palloc(sizeof(char *) * Max(size, 1));
	if (size == 0)
		return 0;
	hash_seq_init(&scan, locks);
	while ((lock = hash_seq_search(&scan)) != NULL)
		if (lock->set == set && redlock_life_held(lock))
		{
			(*keys)[n] = lock->key;
			(*tokens)[n] = lock->token;
			n++;
		}
	return n;
}
