/*-------------------------------------------------------------------------
 *
 * life.c
 *	  A lock's life in this backend: one state per lock of the lock table, moved by
 *	  one function (redlock_life_move), and the questions the rest of the extension
 *	  asks of it: is it held, did it ever win, is it being let go of, is it lost to a
 *	  configuration change or to the worker, how much validity is left.
 *
 *	              WON                      FOUND_LOST
 *	  ACQUIRING --------> HELD ------------------------> LOST
 *	      ^ |              |                             | |
 *	      | | LET_GO       | LET_GO            RETRY     | | LET_GO
 *	      | v              v                             | v
 *	      | UNDOING     RELEASING                        | UNDOING
 *	      +----------------------------------------------+
 *
 *	  and DROP from every state: the entry leaves the table (GONE).
 *
 * THE INVARIANT: this backend believes it holds a lock (redlock_lock_* act on it,
 * redlock_locks() shows it, its holds count) exactly when its state is HELD; a HELD
 * lock still protects nothing once reconfigured, given up on by the worker, or run
 * out of validity, and every reader asks redlock_life_validity_left, which reads 0
 * then.  An entry whose last hold went stays RELEASING or UNDOING until its release
 * round finished (an interrupted round leaves it for the next cleanup, counted by
 * redlock_life_letting_go_count).  UNDOING differs from RELEASING in what is let go
 * of: an attempt that never won (or a lost lock) may have set any slot of a
 * semaphore, so every slot goes.
 *
 * An auto-extended lock's lease (shared/lease.c: PENDING -> HELD -> LOST) is the
 * worker's record of the same lock in shared memory; the owner reads it only through
 * redlock_life_lost_by_worker and redlock_life_validity_left here.
 *
 * Two events, LET_GO and DROP, are defined from every state, since the ends of
 * transactions and of the backend send them from cleanup, where no error may be
 * raised; the others raise XX000 when sent from a state they do not leave.
 *
 * A lock's life is also its place on the masters, counted against its role's
 * redlock.max_locks_per_role (shared/rolequota.c): redlock_life_begin charges it to
 * the session user before anything of its acquire is sent, and DROP refunds it to
 * that same role, whatever happened between (released, undone, lost, aborted, the
 * backend's exit).  Nothing else charges or refunds a lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"

#include "clock.h"
#include "guc.h"
#include "lock/life.h"
#include "lock/locktable.h"
#include "shared/lease.h"
#include "shared/registry.h"
#include "shared/rolequota.h"
#include "wire/nodeset.h"

/* Locks RELEASING or UNDOING: their release under way, or interrupted. */
static int	letting_go_total = 0;

static const char *const life_names[] = {
	"acquiring", "held", "lost", "releasing", "undoing", "gone"
};

static bool
life_lets_go(RedlockLife life)
{
	return life == REDLOCK_LIFE_RELEASING || life == REDLOCK_LIFE_UNDOING;
}

/*
 * redlock_life_move
 *		Moves lock by event, as drawn above; DROP also refunds its place on the masters
 *		to the role redlock_life_begin charged.  lock: an entry of the lock table.
 *		Raises XX000 when event does not leave lock's state (a bug), except LET_GO and
 *		DROP, which raise nothing.
 */
void
redlock_life_move(RedlockHeldLock *lock, RedlockLifeEvent event)
{
	RedlockLife from = lock->life;
	RedlockLife to = from;

	switch (event)
	{
		case REDLOCK_LIFE_WON:
			if (from == REDLOCK_LIFE_ACQUIRING)
				to = REDLOCK_LIFE_HELD;
			break;
		case REDLOCK_LIFE_FOUND_LOST:
			if (from == REDLOCK_LIFE_HELD)
				to = REDLOCK_LIFE_LOST;
			break;
		case REDLOCK_LIFE_RETRY:
			if (from == REDLOCK_LIFE_LOST)
				to = REDLOCK_LIFE_ACQUIRING;
			break;
		case REDLOCK_LIFE_LET_GO:
			if (from == REDLOCK_LIFE_HELD)
				to = REDLOCK_LIFE_RELEASING;
			else if (!life_lets_go(from))
				to = REDLOCK_LIFE_UNDOING;
			break;
		case REDLOCK_LIFE_DROP:
			to = REDLOCK_LIFE_GONE;
			break;
	}
	if (to == from && event != REDLOCK_LIFE_LET_GO)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("redlock: lock on resource \"%s\" is %s, and cannot take event %d",
								 lock->resource, life_names[from], (int) event)));
	if (to == REDLOCK_LIFE_GONE && OidIsValid(lock->charged_role))
	{
		redlock_rolequota_refund(lock->charged_role);
		lock->charged_role = InvalidOid;
	}
	letting_go_total += (int) life_lets_go(to) - (int) life_lets_go(from);
	lock->life = to;
}

/*
 * redlock_life_begin
 *		Starts the life of lock, a new entry of the lock table (ACQUIRING, nothing sent
 *		yet): charges its place on the masters to this backend's session user
 *		(shared/rolequota.c), which DROP refunds.  Returns false, charging nothing and
 *		with *refusal filled, when that role has redlock.max_locks_per_role locks and
 *		claims counted already (or no room is left for one more role): the caller
 *		drops lock then, and sends nothing.  Raises only out-of-memory errors.
 */
bool
redlock_life_begin(RedlockHeldLock *lock, RedlockQuotaRefusal *refusal)
{
	Oid			role = GetSessionUserId();

	Assert(lock->life == REDLOCK_LIFE_ACQUIRING && !OidIsValid(lock->charged_role));
	if (!redlock_rolequota_charge(role, refusal))
		return false;
	lock->charged_role = role;
	return true;
}

/*
 * redlock_life_held
 *		True when this backend holds lock (may be NULL): its state is HELD.  A held lock
 *		may still be lost to a change it was not yet told of (redlock_life_validity_left
 *		reads 0 then).  Raises nothing.
 */
bool
redlock_life_held(const RedlockHeldLock *lock)
{
	return lock != NULL && lock->life == REDLOCK_LIFE_HELD;
}

/*
 * redlock_life_won
 *		True when lock's latest attempt won, held or being released since (HELD or
 *		RELEASING): its key is its own (a permit's: its slot's).  Raises nothing.
 */
bool
redlock_life_won(const RedlockHeldLock *lock)
{
	return lock->life == REDLOCK_LIFE_HELD || lock->life == REDLOCK_LIFE_RELEASING;
}

/*
 * redlock_life_letting_go, redlock_life_letting_go_count
 *		Whether lock is being let go of (RELEASING or UNDOING: no hold left, its round
 *		under way or interrupted), and how many locks of this backend are.  Raise
 *		nothing.
 */
bool
redlock_life_letting_go(const RedlockHeldLock *lock)
{
	return life_lets_go(lock->life);
}

int
redlock_life_letting_go_count(void)
{
	return letting_go_total;
}

/*
 * redlock_life_reconfigured
 *		True when the configuration in force is no longer the one lock was taken under:
 *		its node set, or redlock.key_prefix (its key starts with the prefix it was
 *		taken under).  Such a lock is lost: other sessions look for it elsewhere.
 *		Raises only encoding conversion errors of the prefix.
 */
bool
redlock_life_reconfigured(const RedlockHeldLock *lock)
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

/*
 * redlock_life_lost_by_worker
 *		True when lock is auto-extended and the worker gave up on it (its lease is
 *		LOST).  Raises nothing.
 */
bool
redlock_life_lost_by_worker(const RedlockHeldLock *lock)
{
	RedlockLease lease;

	return lock->reg.index >= 0 && redlock_registry_view(&lock->reg, &lease) &&
		lease.state == LEASE_LOST;
}

/*
 * redlock_life_validity_left
 *		Validity time left (ms), <= 0 once run out, never won, lost to a configuration
 *		change, or given up on by the worker (spec §3 step 4: what the acquire's
 *		validity leaves now).  An auto-extended lock's validity is its lease's.  Raises
 *		what redlock_life_reconfigured raises.
 */
double
redlock_life_validity_left(const RedlockHeldLock *lock)
{
	RedlockLease lease;

	if (!redlock_life_won(lock) || redlock_life_reconfigured(lock))
		return 0;
	if (lock->reg.index >= 0 && redlock_registry_view(&lock->reg, &lease))
		return lease.state == LEASE_LOST ? 0 : lease.valid_until_ms - redlock_clock_ms();
	return lock->valid_until_ms - redlock_clock_ms();
}
