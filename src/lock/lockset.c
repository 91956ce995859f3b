/*-------------------------------------------------------------------------
 *
 * lockset.c
 *	  What one call does to a set of this backend's locks, acquired all or nothing
 *	  (doc/sets.md): acquire, release and extend of several resources at once.
 *
 * A set is acquired by one attempt over all its keys (quorumset.c); once held, each
 * of its resources is a lock of its own in the table (the set's token on each, and
 * the set's number in set_id), which release, extension, fencing tokens, the commit
 * guard, the background worker and the ends of transactions and sessions treat as any
 * lock.  So releasing or losing one resource of a set leaves the others held.
 *
 * Invariant: an acquire of a set either adds one hold to every resource of it, each
 * then held on a quorum, or changes nothing in the table; an attempt cut short leaves
 * every resource unacquired with the attempt's token, which the abort's cleanup
 * releases key by key.  A set is never acquired over a resource this backend holds
 * already (the caller refuses it): one attempt, one token, one outcome for all.
 *
 * One room with lockops.c (doc/internals.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "guc.h"
#include "lock/lockends.h"
#include "lock/lockops.h"
#include "lock/locktable.h"
#include "protocol/holder.h"
#include "protocol/quorum.h"
#include "redlock.h"
#include "shared/registry.h"
#include "shared/waiters.h"
#include "wire/nodeset.h"

/* The number of this backend's latest set (0: none yet); locks alone have 0. */
static int64 last_set_id = 0;

/*
 * redlock_lockset_acquire
 *		Adds a hold at scope on each of n resources, acquiring them together on the
 *		masters: all or none (doc/sets.md; spec §3, §4 for the set).
 *
 * resources, n: the resource names, 1..REDLOCK_MAX_SET, distinct, each checked (as for
 *		redlock_lock_acquire) and held by this backend in no form: the caller has
 *		refused the rest (redlock_locktable_kind).
 * ttl_ms: 1..REDLOCK_MAX_TTL_MS, leaving validity after drift.  wait_ms: as for
 *		redlock_quorum_acquire (0: one attempt; < 0: no limit); a waiter is woken by
 *		the release of the first resource.
 * result: the quorum outcome of the last attempt.
 *
 * Returns REDLOCK_HELD, or REDLOCK_FAILED with result->status BUSY or UNAVAILABLE (no
 * hold added anywhere), or with result->quota.refused when the set's locks would take
 * its role past redlock.max_locks_per_role (nothing sent; quota.live: what the role
 * had before the set, quota.asked: n).  Raises what an interrupted network wait
 * raises; the holds logged before the request are then taken back by the abort, which
 * releases the keys.
 */
RedlockHoldStatus
redlock_lockset_acquire(const char *const *resources, int n, RedlockScope scope,
						int ttl_ms, int wait_ms, RedlockResult *result)
{
	RedlockNodeSet *set = redlock_nodeset_current();
	RedlockHeldLock **locks = palloc(sizeof(RedlockHeldLock *) * n);
	const char **keys = palloc(sizeof(char *) * n);
	char	  **tokens = palloc(sizeof(char *) * n);
	char	   *holder = NULL;
	RedlockWaiter *waiter = NULL;
	bool		behind = false;
	int64		set_id = ++last_set_id;

	Assert(n >= 1 && n <= REDLOCK_MAX_SET);
	/* A release that was interrupted, or an attempt cut short: finish it. */
	for (int k = 0; k < n; k++)
	{
		RedlockHeldLock *left_over = redlock_locktable_find(resources[k]);

		if (left_over != NULL)
		{
			Assert(!redlock_life_held(left_over));
			redlock_lock_finish_left_over();
			break;
		}
	}
	/* Each resource is a lock of its role's count: all of them, or nothing is sent. */
	memset(result, 0, sizeof(*result));
	result->status = REDLOCK_BUSY;
	for (int k = 0; k < n; k++)
	{
		locks[k] = redlock_locktable_create(resources[k], 0, set, &result->quota);
		if (locks[k] != NULL)
			continue;
		for (int j = 0; j < k; j++)
			redlock_locktable_drop(locks[j]);
		if (!result->quota.roles_full)
			result->quota.live -= k;	/* the set's own, dropped again */
		result->quota.asked = n;
		pfree(tokens);
		pfree(keys);
		pfree(locks);
		return REDLOCK_FAILED;
	}
	for (int k = 0; k < n; k++)
	{
		locks[k]->set_id = set_id;
		redlock_locktable_add_hold(locks[k], scope);
		if (redlock_auto_extend)
			redlock_locktable_register(locks[k]);
		keys[k] = locks[k]->key;
		tokens[k] = locks[k]->token;
	}
	if (redlock_record_holder)
		holder = redlock_holder_record(scope == REDLOCK_SCOPE_XACT ? "transaction" : "session");

	/* As for a lock (lockops.c); the abort unregisters an interrupted wait. */
	if (wait_ms != 0)
		waiter = redlock_waiters_begin(locks[0]->key, locks[0]->prefix_len, &behind);
	redlock_quorum_acquire_all(set, keys, n, tokens, ttl_ms, wait_ms, holder, waiter, behind,
							   result);
	if (wait_ms != 0)
		redlock_waiters_end();
	if (holder)
		pfree(holder);

	for (int k = 0; k < n; k++)
	{
		RedlockHeldLock *lock = locks[k];

		if (result->status != REDLOCK_OK)
		{
			/* The attempt was undone on the masters already (spec §3 step 5). */
			redlock_locktable_drop(lock);
			continue;
		}
		redlock_locktable_acquired(lock, ttl_ms, result);
	}
	pfree(tokens);
	pfree(keys);
	pfree(locks);
	return result->status == REDLOCK_OK ? REDLOCK_HELD : REDLOCK_FAILED;
}

/*
 * redlock_lockset_release
 *		Drops one session hold on each of n resources, and releases on the masters
 *		(spec §5), all in one round, those that have no hold left.
 *
 * not_held: n flags, set for each resource this backend holds no session hold on
 *		(nothing is done to it).
 * infos: set to what happened to each lock released (palloc'd; NULL when none).
 *
 * Returns how many were released on the masters.  Raises what an interrupted network
 * wait raises (those locks stay marked releasing, and the cleanup after the error
 * releases them).
 */
int
redlock_lockset_release(const char *const *resources, int n, bool *not_held,
						RedlockReleaseInfo **infos)
{
	RedlockHeldLock **batch = palloc(sizeof(RedlockHeldLock *) * n);
	int			nbatch = 0;

	for (int k = 0; k < n; k++)
	{
		RedlockHeldLock *lock = redlock_locktable_find(resources[k]);

		not_held[k] = !redlock_life_held(lock) ||
			!redlock_holds_drop_latest_session(&lock->holds);
		if (!not_held[k] && redlock_holds_total(&lock->holds) == 0)
			batch[nbatch++] = lock;
	}
	*infos = redlock_locktable_release(batch, nbatch, false, false, NULL);
	pfree(batch);
	return nbatch;
}

/*
 * Whether an extension's outcome one says more than the set's outcome so far: failed
 * (the answers cannot tell, an error for the caller) over lost over extended.
 */
static bool
lockset_worse(RedlockHoldStatus one, RedlockHoldStatus so_far)
{
	return one != so_far && one != REDLOCK_HELD &&
		(so_far == REDLOCK_HELD || one == REDLOCK_FAILED);
}

/*
 * redlock_lockset_extend
 *		Sets a new TTL on each of n locks this backend holds (spec §6): those the
 *		background worker renews through it, one by one; the others in one round.
 *
 * ttl_ms: the new TTL, 1..REDLOCK_MAX_TTL_MS leaving validity after drift, or 0 for
 *		each lock's TTL last set.
 * not_held: n flags, set for each resource this backend does not hold; when any is
 *		set, nothing is sent and REDLOCK_NOT_HELD is returned.
 * decided_by: set to the resource whose outcome is returned, when not REDLOCK_HELD.
 * result: that resource's quorum outcome (else the last lock's).
 *
 * Returns REDLOCK_HELD when every lock was extended; REDLOCK_FAILED when fewer than a
 * quorum answered for one (kept, its validity cut to what the new TTL allows), whatever
 * became of the others; else REDLOCK_LOST when one or more were lost (as
 * redlock_lock_extend finds them: forgotten, let go of).  Raises what an interrupted
 * network wait raises.
 */
RedlockHoldStatus
redlock_lockset_extend(const char *const *resources, int n, int ttl_ms, bool *not_held,
					   const char **decided_by, RedlockResult *result)
{
	RedlockHeldLock **locks = palloc(sizeof(RedlockHeldLock *) * n);
	RedlockHeldLock **batch = palloc(sizeof(RedlockHeldLock *) * n);
	RedlockKeyToken *kts = palloc(sizeof(RedlockKeyToken) * n);
	RedlockResult *results = palloc0(sizeof(RedlockResult) * n);
	int		   *ttls = palloc(sizeof(int) * n);
	bool	   *expired = palloc(sizeof(bool) * n);
	int		   *batch_k = palloc(sizeof(int) * n);
	RedlockHoldStatus status = REDLOCK_HELD;
	int			nbatch = 0;
	bool		any_not_held = false;
	double		answer_by_ms = 0;	/* the earliest validity end of the batch */

	*decided_by = NULL;
	for (int k = 0; k < n; k++)
	{
		locks[k] = redlock_locktable_find(resources[k]);
		not_held[k] = !redlock_life_held(locks[k]);
		any_not_held |= not_held[k];
	}
	if (any_not_held)
		return REDLOCK_NOT_HELD;

	for (int k = 0; k < n; k++)
	{
		RedlockHeldLock *lock = locks[k];
		RedlockHoldStatus one = REDLOCK_HELD;

		/* Auto-extended, or taken under another configuration: as one lock. */
		if (lock->reg.index >= 0 || redlock_life_reconfigured(lock))
			one = redlock_lock_extend(resources[k], ttl_ms, &results[k]);
		else
		{
			int			b = nbatch++;
			double		by_ms;

			batch[b] = lock;
			batch_k[b] = k;
			ttls[b] = ttl_ms == 0 ? lock->ttl_ms : ttl_ms;
			expired[b] = redlock_lock_refresh_begin(lock, ttls[b]);
			by_ms = redlock_lock_answer_by_ms(lock);
			if (by_ms > 0 && (answer_by_ms == 0 || by_ms < answer_by_ms))
				answer_by_ms = by_ms;
			kts[b].key = lock->key;
			kts[b].token = lock->token;
			kts[b].announce = NULL;
		}
		if (lockset_worse(one, status))
		{
			status = one;
			*decided_by = resources[k];
			*result = results[k];
		}
	}

	/* Every lock of the batch was taken on the configuration in force (checked above). */
	if (nbatch > 0)
		redlock_quorum_extend_many(batch[0]->set, kts, ttls, nbatch, false, answer_by_ms,
								   results);
	for (int b = 0; b < nbatch; b++)
	{
		const char *resource = resources[batch_k[b]];
		RedlockHoldStatus one = redlock_lock_refreshed(batch[b], ttls[b], expired[b],
													   &results[b]);

		if (one == REDLOCK_LOST)
			redlock_locktable_drop(batch[b]);
		if (lockset_worse(one, status))
		{
			status = one;
			*decided_by = resource;
			*result = results[b];
		}
		else if (status == REDLOCK_HELD)
			*result = results[b];
	}
	return status;
}
