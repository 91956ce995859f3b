/*-------------------------------------------------------------------------
 *
 * holds.c
 *	  The holds on one lock, and the transaction holds found lost.
 *
 * Holds stack like PostgreSQL's advisory locks: each acquire adds a hold, at session or
 * transaction scope, and a lock is released when its last hold goes.  The holds the
 * current top-level transaction added are logged with the subtransaction that added
 * them, so that:
 *	- a subtransaction that aborts takes back the holds it added, and one that commits
 *	  passes them to its parent;
 *	- at commit the session holds it added become permanent and its transaction holds
 *	  end; at abort they all end.
 *
 * A transaction hold on a lock found lost is remembered apart, with its subtransaction:
 * it fails the commit unless that subtransaction rolls back (locktable.c asks).
 *
 * Invariant: pending_total is the sum of npending over every lock's holds, so that a
 * transaction that touched no lock costs its end nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "lock/holds.h"

/* A transaction-scoped hold on a lock that was found lost. */
typedef struct LostHold
{
	char		resource[REDLOCK_MAX_RESOURCE_LEN + 1];
	SubTransactionId subid;
} LostHold;

/* Holds in all pending logs: zero means this transaction touched no lock. */
static int	pending_total = 0;

static LostHold *lost_holds = NULL;
static int	nlost = 0;
static int	maxlost = 0;

/* Removes pending hold i, keeping the log's order. */
static void
holds_remove(RedlockHolds *holds, int i)
{
	memmove(&holds->pending[i], &holds->pending[i + 1],
			(holds->npending - i - 1) * sizeof(RedlockPendingHold));
	holds->npending--;
	pending_total--;
}

/*
 * redlock_holds_add
 *		Logs a hold at scope added now, in the current subtransaction; the log grows in
 *		cxt.  Raises only out-of-memory errors.
 */
void
redlock_holds_add(RedlockHolds *holds, RedlockScope scope, MemoryContext cxt)
{
	if (holds->npending == holds->maxpending)
	{
		int			newmax = Max(4, holds->maxpending * 2);

		holds->pending = holds->pending
			? repalloc(holds->pending, newmax * sizeof(RedlockPendingHold))
			: MemoryContextAlloc(cxt, newmax * sizeof(RedlockPendingHold));
		holds->maxpending = newmax;
	}
	holds->pending[holds->npending].subid = GetCurrentSubTransactionId();
	holds->pending[holds->npending].scope = scope;
	holds->npending++;
	pending_total++;
}

/*
 * redlock_holds_count
 *		The holds at session scope (session true) or at transaction scope.
 */
int
redlock_holds_count(const RedlockHolds *holds, bool session)
{
	int			n = session ? holds->session : 0;

	for (int i = 0; i < holds->npending; i++)
		if ((holds->pending[i].scope == REDLOCK_SCOPE_SESSION) == session)
			n++;
	return n;
}

/*
 * redlock_holds_total
 *		Every hold, at either scope.
 */
int
redlock_holds_total(const RedlockHolds *holds)
{
	return holds->session + holds->npending;
}

/*
 * redlock_holds_drop_latest_session
 *		Drops one session hold, the latest one first.  Returns false when there is none.
 */
bool
redlock_holds_drop_latest_session(RedlockHolds *holds)
{
	for (int i = holds->npending - 1; i >= 0; i--)
	{
		if (holds->pending[i].scope == REDLOCK_SCOPE_SESSION)
		{
			holds_remove(holds, i);
			return true;
		}
	}
	if (holds->session == 0)
		return false;
	holds->session--;
	return true;
}

/*
 * redlock_holds_drop_session
 *		Drops every session hold; the transaction holds stay.
 */
void
redlock_holds_drop_session(RedlockHolds *holds)
{
	holds->session = 0;
	for (int i = holds->npending - 1; i >= 0; i--)
		if (holds->pending[i].scope == REDLOCK_SCOPE_SESSION)
			holds_remove(holds, i);
}

/*
 * redlock_holds_clear
 *		Drops every hold; the log's memory stays for the next ones.
 */
void
redlock_holds_clear(RedlockHolds *holds)
{
	pending_total -= holds->npending;
	holds->npending = 0;
	holds->session = 0;
}

/*
 * redlock_holds_free
 *		Drops every hold and frees the log.
 */
void
redlock_holds_free(RedlockHolds *holds)
{
	redlock_holds_clear(holds);
	if (holds->pending)
		pfree(holds->pending);
	holds->pending = NULL;
	holds->maxpending = 0;
}

/*
 * redlock_holds_xact_end
 *		Ends the top-level transaction for these holds: at commit the session holds it
 *		added become permanent; its transaction holds end, and at abort its session
 *		holds too.
 */
void
redlock_holds_xact_end(RedlockHolds *holds, bool commit)
{
	if (holds->npending == 0)
		return;
	if (commit)
		holds->session = redlock_holds_count(holds, true);
	pending_total -= holds->npending;
	holds->npending = 0;
}

/*
 * redlock_holds_subxact_end
 *		Ends subtransaction subid (child of parent) for these holds: at commit the holds
 *		it added pass to parent, at abort they are taken back.
 */
void
redlock_holds_subxact_end(RedlockHolds *holds, bool commit, SubTransactionId subid,
						  SubTransactionId parent)
{
	for (int i = holds->npending - 1; i >= 0; i--)
	{
		if (holds->pending[i].subid != subid)
			continue;
		if (commit)
			holds->pending[i].subid = parent;
		else
			holds_remove(holds, i);
	}
}

/*
 * redlock_holds_any_pending
 *		True when the current transaction added a hold on any lock that is still logged.
 */
bool
redlock_holds_any_pending(void)
{
	return pending_total > 0;
}

/*
 * redlock_holds_mark_lost
 *		Remembers the transaction holds of a lock found lost (resource names it), each
 *		with its subtransaction; the list grows in cxt.  Raises only out-of-memory errors.
 */
void
redlock_holds_mark_lost(const RedlockHolds *holds, const char *resource, MemoryContext cxt)
{
	for (int i = 0; i < holds->npending; i++)
	{
		if (holds->pending[i].scope != REDLOCK_SCOPE_XACT)
			continue;
		if (nlost == maxlost)
		{
			int			newmax = Max(4, maxlost * 2);

			lost_holds = lost_holds
				? repalloc(lost_holds, newmax * sizeof(LostHold))
				: MemoryContextAlloc(cxt, newmax * sizeof(LostHold));
			maxlost = newmax;
		}
		strlcpy(lost_holds[nlost].resource, resource, sizeof(lost_holds[nlost].resource));
		lost_holds[nlost].subid = holds->pending[i].subid;
		nlost++;
	}
}

/*
 * redlock_holds_first_lost
 *		The resource of a transaction hold found lost in this transaction (and not in a
 *		subtransaction that rolled back), or NULL.  Valid until the next call here.
 */
const char *
redlock_holds_first_lost(void)
{
	return nlost > 0 ? lost_holds[0].resource : NULL;
}

/*
 * redlock_holds_lost_xact_end
 *		Forgets the lost holds: the top-level transaction ended.
 */
void
redlock_holds_lost_xact_end(void)
{
	nlost = 0;
}

/*
 * redlock_holds_lost_subxact_end
 *		Ends subtransaction subid (child of parent) for the lost holds: at commit they
 *		pass to parent, at abort they are forgotten (the rollback undid their work).
 */
void
redlock_holds_lost_subxact_end(bool commit, SubTransactionId subid, SubTransactionId parent)
{
	int			kept = 0;

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
}
