/*-------------------------------------------------------------------------
 *
 * lockends.c
 *	  This backend's locks at the ends of transactions, subtransactions, sessions and
 *	  the backend: which holds end, which locks are then released (in one round,
 *	  through redlock_locktable_release), and the checks a commit or a PREPARE asks
 *	  first (a transaction-scoped lock run out or lost, an auto-extended one whose
 *	  lease refuses the commit).  The table itself and how one lock ends are
 *	  locktable.c's; the hooks that call here are sql/xact.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "lock/holds.h"
#include "lock/leasewatch.h"
#include "lock/lockends.h"
#include "lock/locktable.h"
#include "redlock.h"
#include "shared/registry.h"
#include "shared/waiters.h"

/* Drops lock's session holds. */
static void
lt_drop_session_holds(RedlockHeldLock *lock, void *arg pg_attribute_unused())
{
	redlock_holds_drop_session(&lock->holds);
}

/* Keeps a lock while it is held and has holds. */
static bool
lt_keep_if_held(RedlockHeldLock *lock, void *arg pg_attribute_unused())
{
	return redlock_life_held(lock) && redlock_holds_total(&lock->holds) > 0;
}

/* Keeps every lock but those left over: not held (an attempt cut short, a lost lock). */
static bool
lt_keep_unless_left_over(RedlockHeldLock *lock, void *arg pg_attribute_unused())
{
	return redlock_life_held(lock);
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
	RedlockHeldLock **held;
	int			n = redlock_locktable_collect(&held, lt_drop_session_holds, lt_keep_if_held, NULL);

	redlock_locktable_release(held, n, false, false, report);
	return n;
}

/*
 * redlock_lock_finish_left_over
 *		Finishes what earlier calls left unfinished: releases, in one round, every lock
 *		being let go of (a release interrupted) and every attempt cut short that no
 *		cleanup has undone yet, so that a new acquire starts from a table holding only
 *		held locks.  Raises what an interrupted network wait raises (those locks stay
 *		for the cleanup after the error).
 */
void
redlock_lock_finish_left_over(void)
{
	RedlockHeldLock **held;
	int			n = redlock_locktable_collect(&held, NULL, lt_keep_unless_left_over, NULL);

	redlock_locktable_release(held, n, false, false, NULL);
}

/*
 * redlock_lock_list
 *		Copies every held lock into a palloc'd array (*locks_out).  Returns how many.
 */
int
redlock_lock_list(RedlockLockInfo **locks_out)
{
	HASH_SEQ_STATUS scan;
	RedlockHeldLock *lock;
	RedlockLockInfo *out;
	RedlockLease lease;
	int			n = 0;
	TimestampTz now = GetCurrentTimestamp();

	redlock_locktable_scan(&scan);
	out = palloc0(sizeof(RedlockLockInfo) * (redlock_locktable_size() + 1));
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		RedlockLockInfo *info = &out[n];

		if (!redlock_life_held(lock))
			continue;
		info->resource = pstrdup(lock->resource);
		info->key = pstrdup(lock->key);
		info->permits = lock->permits;
		info->set_id = lock->set_id;
		info->shared = lock->shared;
		info->session_holds = redlock_holds_count(&lock->holds, true);
		info->xact_holds = redlock_holds_count(&lock->holds, false);
		info->ttl_ms = lock->ttl_ms;
		info->nodes = lock->nodes;
		info->acquired_at = lock->acquired_at;
		info->validity_ms = redlock_life_validity_left(lock);
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
	return redlock_holds_any_pending() || redlock_holds_first_lost() != NULL;
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

	return redlock_lock_xact_acquired() || redlock_life_letting_go_count() > 0 ||
		redlock_locktable_registered() > 0 ||
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
	RedlockHeldLock *lock;
	const char *lost = redlock_holds_first_lost();

	if (lost)
		return pstrdup(lost);
	if (!redlock_holds_any_pending())
		return NULL;
	redlock_locktable_scan(&scan);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (redlock_holds_count(&lock->holds, false) > 0 && !redlock_life_letting_go(lock) &&
			redlock_life_validity_left(lock) <= redlock_commit_margin_ms)
		{
			hash_seq_term(&scan);
			return pstrdup(lock->resource);
		}
	}
	return NULL;
}

/*
 * redlock_lock_commit_loss
 *		Why the transaction-scoped lock on resource, which redlock_lock_first_expired_xact
 *		named, refuses the commit: REDLOCK_LOSS_RECONFIGURED (taken under another
 *		configuration), REDLOCK_LOSS_TOKEN_GONE (an extension or a re-acquire in this
 *		transaction found it lost), REDLOCK_LOSS_WORKER (auto-extended, given up on by
 *		the worker), REDLOCK_LOSS_MARGIN (less than redlock.commit_margin of validity
 *		left) or REDLOCK_LOSS_EXPIRED (its validity ran out).  *ttl_ms: the TTL it was
 *		given (ms), 0 when the lock is gone.  Raises only encoding conversion errors of
 *		redlock.key_prefix.
 */
RedlockLossCause
redlock_lock_commit_loss(const char *resource, int *ttl_ms)
{
	RedlockHeldLock *lock = redlock_locktable_find(resource);
	double		left;

	*ttl_ms = redlock_life_held(lock) ? lock->ttl_ms : 0;
	if (!redlock_life_held(lock))
		return REDLOCK_LOSS_TOKEN_GONE;
	if (redlock_life_reconfigured(lock))
		return REDLOCK_LOSS_RECONFIGURED;
	left = redlock_life_validity_left(lock);
	if (left > redlock_commit_margin_ms)
		return REDLOCK_LOSS_TOKEN_GONE;
	if (redlock_life_lost_by_worker(lock))
		return REDLOCK_LOSS_WORKER;
	return left > 0 ? REDLOCK_LOSS_MARGIN : REDLOCK_LOSS_EXPIRED;
}

/*
 * redlock_lock_first_lost_in_xact
 *		The commit check of auto-extended locks (either scope) taken with
 *		redlock.cancel_on_loss on: returns (palloc'd) the resource of one whose lease
 *		refuses the commit of the current transaction (lock/leasewatch.c states the rule), or of
 *		one let go of in this transaction that did; sets *reason to why.  NULL when
 *		there is none.  Raises only out-of-memory errors.
 */
const char *
redlock_lock_first_lost_in_xact(const char **reason)
{
	HASH_SEQ_STATUS scan;
	RedlockHeldLock *lock;
	const char *resource = redlock_lease_carried_refusal(reason);

	if (resource)
		return pstrdup(resource);
	if (redlock_locktable_registered() == 0)
		return NULL;
	redlock_locktable_scan(&scan);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (lock->watch == NULL || redlock_life_letting_go(lock))
			continue;
		*reason = redlock_lease_commit_refusal(lock->watch,
											   redlock_life_held(lock) && redlock_life_reconfigured(lock));
		if (*reason == NULL)
			continue;
		hash_seq_term(&scan);
		return pstrdup(lock->resource);
	}
	return NULL;
}

/*
 * redlock_lock_first_guarding
 *		Returns (palloc'd) the resource of a lock this session holds whose loss must
 *		stop its owner's work (auto-extended, taken with redlock.cancel_on_loss on),
 *		or NULL: what PREPARE TRANSACTION must not escape.  Raises only out-of-memory
 *		errors.
 */
const char *
redlock_lock_first_guarding(void)
{
	HASH_SEQ_STATUS scan;
	RedlockHeldLock *lock;

	if (redlock_locktable_registered() == 0)
		return NULL;
	redlock_locktable_scan(&scan);
	while ((lock = hash_seq_search(&scan)) != NULL)
	{
		if (lock->watch == NULL || redlock_life_letting_go(lock) ||
			!redlock_lease_guards_commits(lock->watch))
			continue;
		hash_seq_term(&scan);
		return pstrdup(lock->resource);
	}
	return NULL;
}

/* Ends the current transaction's holds on lock; arg points to "commit". */
static void
lt_end_xact_holds(RedlockHeldLock *lock, void *arg)
{
	redlock_holds_xact_end(&lock->holds, *(bool *) arg);
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
	RedlockHeldLock **held;
	int			n;

	redlock_holds_lost_xact_end();
	redlock_waiters_end();
	if (!redlock_holds_any_pending() && redlock_life_letting_go_count() == 0)
		return;
	n = redlock_locktable_collect(&held, lt_end_xact_holds, lt_keep_if_held, &commit);
	redlock_locktable_release(held, n, true, true, report);
}

/* What lt_end_subxact_holds needs. */
typedef struct SubxactEnd
{
	bool		commit;
	SubTransactionId subid;
	SubTransactionId parent;
} SubxactEnd;

/* Passes subid's holds on lock to its parent (commit) or takes them back (abort). */
static void
lt_end_subxact_holds(RedlockHeldLock *lock, void *arg)
{
	SubxactEnd *end = arg;

	redlock_holds_subxact_end(&lock->holds, end->commit, end->subid, end->parent);
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
	RedlockHeldLock **held;
	int			n;

	if (!commit)
		redlock_waiters_end();
	redlock_holds_lost_subxact_end(commit, subid, parent);
	if (!redlock_holds_any_pending() && redlock_life_letting_go_count() == 0)
		return;
	n = redlock_locktable_collect(&held, lt_end_subxact_holds, lt_keep_if_held, &end);
	redlock_locktable_release(held, n, true, true, report);
}

/* Keeps nothing. */
static bool
lt_keep_none(RedlockHeldLock *lock pg_attribute_unused(), void *arg pg_attribute_unused())
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
	RedlockHeldLock **held;
	int			n;

	if (redlock_locktable_size() == 0)
		return;
	n = redlock_locktable_collect(&held, NULL, lt_keep_none, NULL);
	redlock_locktable_release(held, n, true, true, report);
}
