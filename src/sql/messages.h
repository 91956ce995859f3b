/*-------------------------------------------------------------------------
 *
 * messages.h
 *	  Messages shared by the SQL functions and the hooks (messages.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_MESSAGES_H
#define REDLOCK_MESSAGES_H

#include "redlock.h"

/* The hint of every 08006 that fewer than a quorum of masters answered. */
#define REDLOCK_HINT_CHECK_MASTERS \
	"Check redlock.servers and redlock_nodes(): the masters the detail names must be up and reachable."

extern void redlock_warn_release(const RedlockReleaseInfo *info);
extern void redlock_warn_release_at_abort(const RedlockReleaseInfo *info);
extern int	redlock_errdetail_nodes(const RedlockResult *result);
extern void redlock_report_unanswered(const char *doing, const RedlockResult *result);
extern void redlock_warn_not_held(const char *resource);
extern void redlock_report_worker_silent(const char *resource, const RedlockResult *result);
extern void redlock_report_extend_failed(const char *resource, const RedlockResult *result);
extern void redlock_warn_ran_out(const char *resource, const RedlockResult *result);
extern void redlock_refuse_other_kind(const char *resource, int kind);
extern void redlock_report_not_acquired(const char *resource, const char *what, int permits,
										const RedlockResult *result,
										bool bounded_by_lock_timeout, int wait_ms);
extern char *redlock_set_words(char **resources, int n);
extern void redlock_report_over_quota(const RedlockQuotaRefusal *quota);

#endif							/* REDLOCK_MESSAGES_H */
