/*-------------------------------------------------------------------------
 *
 * holds.h
 *	  The holds on one lock, stacked as PostgreSQL's advisory locks, with the log of
 *	  those the current transaction added; and the transaction holds found lost
 *	  (holds.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_HOLDS_H
#define REDLOCK_HOLDS_H

#include "redlock.h"

/* A hold added in the current top-level transaction, by subtransaction subid. */
typedef struct RedlockPendingHold
{
	SubTransactionId subid;
	RedlockScope scope;
} RedlockPendingHold;

/* The holds on one lock; all zero: none. */
typedef struct RedlockHolds
{
	int			session;		/* session holds from committed transactions */
	int			npending;
	int			maxpending;
	RedlockPendingHold *pending;	/* holds added in the current transaction */
} RedlockHolds;

extern void redlock_holds_add(RedlockHolds *holds, RedlockScope scope, MemoryContext cxt);
extern int	redlock_holds_count(const RedlockHolds *holds, bool session);
extern int	redlock_holds_total(const RedlockHolds *holds);
extern bool redlock_holds_drop_latest_session(RedlockHolds *holds);
extern void redlock_holds_drop_session(RedlockHolds *holds);
extern void redlock_holds_clear(RedlockHolds *holds);
extern void redlock_holds_free(RedlockHolds *holds);
extern void redlock_holds_xact_end(RedlockHolds *holds, bool commit);
extern void redlock_holds_subxact_end(RedlockHolds *holds, bool commit,
									  SubTransactionId subid, SubTransactionId parent);
extern bool redlock_holds_any_pending(void);

extern void redlock_holds_mark_lost(const RedlockHolds *holds, const char *resource,
									MemoryContext cxt);
extern const char *redlock_holds_first_lost(void);
extern void redlock_holds_lost_xact_end(void);
extern void redlock_holds_lost_subxact_end(bool commit, SubTransactionId subid,
										   SubTransactionId parent);

#endif							/* REDLOCK_HOLDS_H */
