/*-------------------------------------------------------------------------
 *
 * lockends.h
 *	  This backend's locks at the ends of transactions, sessions and the backend, and
 *	  the checks before a commit (lockends.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LOCKENDS_H
#define REDLOCK_LOCKENDS_H

#include "datatype/timestamp.h"

#include "lock/locktable.h"
#include "redlock.h"

/* A copy of one held lock, for redlock_locks(). */
typedef struct RedlockLockInfo
{
	char	   *resource;
	char	   *key;
	int			permits;		/* a semaphore's permit: its permits; 0: a lock */
	int64		set_id;			/* acquired in a set: its number; 0: alone */
	bool		shared;			/* a shared hold */
	int			session_holds;
	int			xact_holds;
	int			ttl_ms;
	int			nodes;
	TimestampTz acquired_at;
	TimestampTz valid_until;
	double		validity_ms;	/* remaining, <= 0 once run out */
	bool		auto_extended;	/* renewed by the background worker */
	bool		lost;			/* ... which gave up on it */
	TimestampTz last_renewal;	/* 0 before the first */
	int64		renewals;
} RedlockLockInfo;

extern int	redlock_lock_release_session(RedlockReleaseReport report);
extern void redlock_lock_finish_left_over(void);
extern int	redlock_lock_list(RedlockLockInfo **locks);
extern bool redlock_lock_xact_pending(void);
extern bool redlock_lock_xact_acquired(void);
extern const char *redlock_lock_first_expired_xact(void);
extern RedlockLossCause redlock_lock_commit_loss(const char *resource, int *ttl_ms);
extern const char *redlock_lock_first_guarding(void);
extern const char *redlock_lock_first_lost_in_xact(const char **reason);
extern void redlock_lock_xact_end(bool commit, RedlockReleaseReport report);
extern void redlock_lock_subxact_end(bool commit, SubTransactionId subid,
									 SubTransactionId parent,
									 RedlockReleaseReport report);
extern void redlock_lock_release_everything(RedlockReleaseReport report);

#endif							/* REDLOCK_LOCKENDS_H */
