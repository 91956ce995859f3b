/*-------------------------------------------------------------------------
 *
 * lockops.c
 *	  What one call does to one lock of this backend: acquire (or re-acquire), claim,
 *	  release, extend, and its fencing token.
 *
 * Each operation finds the lock in the table (locktable.c), asks the protocol
 * (quorum.c, fence.c, or the worker through the registry for an auto-extended lock)
 * and records the outcome through the table's verbs.  The rules of what a lock is
 * (lost to a configuration change, its validity, how it ends) are locktable.c's.
 *
 * Invariant: a lock's validity only shrinks between successful requests.  Before an
 * extend (or a re-acquire, which extends) goes out, its validity is cut to what the new
 * TTL allows from now (redlock_validity_bound_ms), since any master may apply the
 * request whatever this backend learns of it; only a success sets it anew.
 *
 * Invariant: an extension of a valid lock is answered by the end of that validity
 * (doc/redlock.md §6): its round waits no longer (redlock_lock_answer_by_ms), and a
 * lock that no quorum extended by then has run out and is lost, so that its holder,
 * waiting in the call, hears before anyone else can take the lock.  An auto-extended
 * lock's owner, waiting for the worker, hears by then through the loss protocol
 * (leasewatch.c cancels the wait when the lease runs out).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "clock.h"
#include "guc.h"
#include "lock/leasewatch.h"
#include "lock/lockends.h"
#include "lock/lockops.h"
#include "lock/locktable.h"
#include "protocol/fence.h"
#include "protocol/holder.h"
#include "protocol/quorum.h"
#include "protocol/quorumshared.h"
#include "redlock.h"
#include "shared/registry.h"
#include "shared/rolequota.h"
#include "shared/stats.h"
#include "shared/waiters.h"
#include "validity.h"
#include "wire/nodeset.h"

/*
 * Sets a new TTL on a held lock (spec §6).  Returns REDLOCK_HELD when extended,
 * REDLOCK_FAILED when fewer than a quorum answered, REDLOCK_LOST when the lock is no
 * longer ours: it is lost (redlock_locktable_lose), but the entry stays (the caller
 * drops it or acquires afresh).  Unless extended, the validity is now at most what
 * ttl_ms allows from the start of the request.
 */
static RedlockHoldStatus
lockops_refresh(RedlockHeldLock *lock, int ttl_ms, RedlockResult *result)
{
	bool		expired;

	if (lock->reg.index >= 0)
	{
		expired = redlock_life_validity_left(lock) <= 0;
		redlock_registry_extend(&lock->reg, ttl_ms, result);
	}
	else
	{
		expired = redlock_lock_refresh_begin(lock, ttl_ms);
		redlock_quorum_extend(lock->set, lock->key, lock->token, ttl_ms,
							  redlock_lock_answer_by_ms(lock), result);
	}
	return redlock_lock_refreshed(lock, ttl_ms, expired, result);
}

/*
 * redlock_lock_refresh_begin
 *		Readies lock for an extension to ttl_ms milliseconds that this backend sends
 *		(spec §6), per the invariant above: its validity is cut to what ttl_ms allows
 *		from now.  Returns whether its validity had run out before (for
 *		redlock_lock_refreshed).  For lockset.c, this module's room.  Raises nothing.
 */
bool
redlock_lock_refresh_begin(RedlockHeldLock *lock, int ttl_ms)
{
	bool		expired = redlock_life_validity_left(lock) <= 0;

	lock->valid_until_ms = Min(lock->valid_until_ms, redlock_validity_bound_ms(ttl_ms));
	return expired;
}

/*
 * redlock_lock_answer_by_ms
 *		When an extension of lock sent now must be answered (the invariant above): the
 *		end of its validity (a redlock_clock_ms() time), or 0 (wait as long as the
 *		timeouts allow) when it has none left, as an extension of a lock already run
 *		out, which may still find its keys, has nothing to keep.  For lockset.c, this
 *		module's room.  Raises nothing.
 */
double
redlock_lock_answer_by_ms(const RedlockHeldLock *lock)
{
	return redlock_life_validity_left(lock) > 0 ? lock->valid_until_ms : 0;
}

/*
 * redlock_lock_refreshed
 *		Records the outcome of an extension of lock to ttl_ms milliseconds (spec §6),
 *		sent with its validity cut first (the invariant above): result is the quorum
 *		outcome, expired whether its validity had run out before the request.  Returns
 *		REDLOCK_HELD, REDLOCK_FAILED or REDLOCK_LOST as lockops_refresh does (lost: the
 *		lock is lost, its entry stays).  For lockset.c, this module's room.  Raises
 *		what an interrupted network wait raises (the loss lets go of the keys).
 */
RedlockHoldStatus
redlock_lock_refreshed(RedlockHeldLock *lock, int ttl_ms, bool expired,
					   RedlockResult *result)
{
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
	redlock_locktable_lose(lock);
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
 *		REDLOCK_MAX_RESOURCE_LEN bytes).
 * kind: REDLOCK_KIND_LOCK for an exclusive lock; REDLOCK_KIND_SHARED for a shared hold
 *		(doc/shared.md: no holder record); 1..REDLOCK_MAX_PERMITS for a permit of the
 *		semaphore of that many permits (doc/semaphores.md): one of its slots, each a
 *		lock of its own.  The caller has checked that this backend holds no other kind
 *		of it (redlock_locktable_kind).  ttl_ms: 1..REDLOCK_MAX_TTL_MS, leaving
 *		validity after drift.  wait_ms: as for redlock_quorum_acquire (0: one attempt;
 *		< 0: no limit).
 * was_lost: set true when this backend believed it held the lock but it was lost
 *		(the refresh found another token, or the configuration changed); the lock was
 *		then acquired afresh, keeping the holds it had.
 * result: the quorum outcome of the request that decided.
 *
 * Returns REDLOCK_HELD, or REDLOCK_FAILED with result->status BUSY or UNAVAILABLE (no
 * hold added; a lock found lost is then forgotten with all its holds), or with
 * result->quota.refused when a new lock would take its role past
 * redlock.max_locks_per_role (shared/rolequota.c: nothing was sent).  Raises what an
 * interrupted network wait raises; the hold logged before the request is then taken
 * back by the abort; and what redlock_life_reconfigured raises (the prefix's encoding
 * conversion).
 */
RedlockHoldStatus
redlock_lock_acquire(const char *resource, int kind, RedlockScope scope, int ttl_ms,
					 int wait_ms, bool *was_lost, RedlockResult *result)
{
	RedlockNodeSet *set = redlock_nodeset_current();
	RedlockHeldLock *lock;
	char	   *holder = NULL;
	char	  **keys;
	int			slot;
	RedlockWaiter *waiter = NULL;
	bool		behind = false;

	*was_lost = false;
	lock = redlock_locktable_find(resource);

	/* A release that was interrupted, or an attempt that was cut short: finish it. */
	if (lock && !redlock_life_held(lock))
	{
		redlock_lock_finish_left_over();
		lock = NULL;
	}

	/*
	 * Taken under another configuration (node set or key prefix: other sessions look
	 * for it elsewhere), or lost: acquired afresh below, never refreshed where it was.
	 */
	if (lock && (redlock_life_reconfigured(lock) || redlock_life_lost_by_worker(lock)))
	{
		redlock_locktable_lose(lock);
		*was_lost = true;
	}
	else if (lock)
	{
		/* Held already: refresh the TTL, then stack a hold. */
		RedlockHoldStatus status = lockops_refresh(lock, Max(ttl_ms, lock->ttl_ms), result);

		if (status == REDLOCK_HELD)
		{
			/* Auto-extension asked for now: the worker takes it over from here. */
			if (redlock_auto_extend && lock->reg.index < 0)
			{
				redlock_locktable_register(lock);
				redlock_registry_activate(&lock->reg, lock->key, lock->token, lock->ttl_ms,
										  lock->valid_until_ms);
			}
			redlock_locktable_add_hold(lock, scope);
			return REDLOCK_HELD;
		}
		if (status == REDLOCK_FAILED)
			return REDLOCK_FAILED;
		*was_lost = true;
	}

	if (lock == NULL)
	{
		/* Refused for its role's count of locks: nothing sent (result->quota says). */
		memset(result, 0, sizeof(*result));
		result->status = REDLOCK_BUSY;
		lock = redlock_locktable_create(resource, kind, set, &result->quota);
		if (lock == NULL)
			return REDLOCK_FAILED;
	}
	else
	{
		/* Lost: acquire afresh on the configuration in force, keeping the holds. */
		redlock_locktable_rebase(lock, set);
	}

	redlock_locktable_add_hold(lock, scope);
	if (redlock_auto_extend)
		redlock_locktable_register(lock);
	if (redlock_record_holder && !lock->shared)
		holder = redlock_holder_record(scope == REDLOCK_SCOPE_XACT ? "transaction" : "session");
	keys = redlock_locktable_slot_keys(lock);

	/*
	 * A waiter: a release announced on the masters (or here) wakes it; a permit's waiter
	 * waits on its semaphore's key, which its slots' releases announce.  An interrupted
	 * wait is unregistered by the (sub)transaction abort that follows.
	 */
	if (wait_ms != 0)
		waiter = redlock_waiters_begin(lock->key, lock->prefix_len, &behind);
	slot = 0;
	if (lock->shared)
		redlock_quorum_acquire_shared(lock->set, lock->key, lock->token, ttl_ms, wait_ms,
									  waiter, behind, result);
	else
		redlock_quorum_acquire_one_of(lock->set, (const char *const *) keys,
									  Max(lock->permits, 1), lock->semaphore_key,
									  lock->token, ttl_ms, wait_ms, holder, waiter, behind,
									  result, &slot);
	if (wait_ms != 0)
		redlock_waiters_end();
	if (holder)
		pfree(holder);
	if (result->status != REDLOCK_OK)
	{
		/* The attempt was undone on the masters already (spec §3 step 5). */
		redlock_locktable_drop(lock);
		return REDLOCK_FAILED;
	}
	redlock_locktable_take_slot(lock, keys, slot);
	redlock_locktable_acquired(lock, ttl_ms, result);
	return REDLOCK_HELD;
}

/*
 * redlock_lock_claim
 *		One quorum acquire of resource for ttl_ms milliseconds (spec §3) that never
 *		enters the lock table: nothing releases it, at commit, abort or exit; it ends
 *		when its TTL runs out, so one caller per resource wins within the TTL.  It is
 *		counted against its role's redlock.max_locks_per_role (shared/rolequota.c)
 *		from before it is sent until its key can have expired; one that was not taken
 *		stops counting at once.
 *
 * resource, ttl_ms: checked by the caller, as for redlock_lock_acquire.
 * result: the quorum outcome (BUSY: claimed elsewhere; UNAVAILABLE: fewer than a
 *		quorum answered), or result->quota.refused with nothing sent.
 *
 * Returns true when claimed.  Raises what an interrupted network wait raises (an
 * attempt cut short then lives until its TTL runs out, and is counted as long) and
 * XX000 if the strong random source fails.
 */
bool
redlock_lock_claim(const char *resource, int ttl_ms, RedlockResult *result)
{
	char		token[REDLOCK_TOKEN_LEN + 1];
	char	   *key;
	char	   *holder = NULL;
	Oid			role = GetSessionUserId();
	double		drift_ms = redlock_clock_drift_ms(ttl_ms);
	double		until_ms = redlock_clock_ms() + ttl_ms + drift_ms;

	key = redlock_locktable_make_key(resource, NULL);
	if (redlock_record_holder)
		holder = redlock_holder_record("claim");
	memset(result, 0, sizeof(*result));
	result->status = REDLOCK_BUSY;
	if (redlock_rolequota_claim(role, until_ms, &result->quota))
	{
		redlock_quorum_acquire(redlock_nodeset_current(), key, token, ttl_ms, 0, holder,
							   NULL, false, result);
		/* Its key, if set, was set before the reply: it expires by now + TTL + drift. */
		redlock_rolequota_claim_end(role, until_ms, result->status == REDLOCK_OK ?
									redlock_clock_ms() + ttl_ms + drift_ms : 0);
	}
	pfree(key);
	if (holder)
		pfree(holder);
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
	RedlockHeldLock *lock = redlock_locktable_find(resource);

	if (!redlock_life_held(lock) ||
		!redlock_holds_drop_latest_session(&lock->holds))
		return REDLOCK_NOT_HELD;
	if (redlock_holds_total(&lock->holds) > 0)
		return REDLOCK_HELD;

	*info = redlock_locktable_release(&lock, 1, false, false, NULL)[0];
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
	RedlockHeldLock *lock = redlock_locktable_find(resource);
	RedlockHoldStatus status;

	if (!redlock_life_held(lock))
		return REDLOCK_NOT_HELD;
	if (redlock_life_reconfigured(lock))
	{
		redlock_locktable_lose(lock);
		redlock_locktable_drop(lock);
		memset(result, 0, sizeof(*result));
		result->status = REDLOCK_BUSY;
		return REDLOCK_LOST;
	}
	status = lockops_refresh(lock, ttl_ms == 0 ? lock->ttl_ms : ttl_ms, result);
	if (status == REDLOCK_LOST)
		redlock_locktable_drop(lock);
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
	RedlockHeldLock *lock = redlock_locktable_find(resource);

	memset(result, 0, sizeof(*result));
	*cause = REDLOCK_LOSS_NONE;
	if (!redlock_life_held(lock))
		return REDLOCK_NOT_HELD;
	if (redlock_life_reconfigured(lock))
	{
		redlock_locktable_lose(lock);
		redlock_locktable_drop(lock);
		*cause = REDLOCK_LOSS_RECONFIGURED;
		return REDLOCK_LOST;
	}
	if (redlock_life_validity_left(lock) <= 0)
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
						 redlock_clock_ms() + redlock_life_validity_left(lock), fence, result);
	if (result->status == REDLOCK_OK)
	{
		lock->fence = *fence;
		return REDLOCK_HELD;
	}
	if (result->status == REDLOCK_UNAVAILABLE)
		return REDLOCK_FAILED;
	if (redlock_life_validity_left(lock) <= 0)
	{
		*cause = REDLOCK_LOSS_EXPIRED;
		return REDLOCK_LOST;
	}
	redlock_locktable_lose(lock);
	redlock_locktable_drop(lock);
	*cause = REDLOCK_LOSS_TOKEN_GONE;
	return REDLOCK_LOST;
}
