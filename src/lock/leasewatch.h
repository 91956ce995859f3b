/*-------------------------------------------------------------------------
 *
 * leasewatch.h
 *	  The owner's side of an auto-extended lock's lease (leasewatch.c): watchdog,
 *	  commit check, telling.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LEASEWATCH_H
#define REDLOCK_LEASEWATCH_H

#include "redlock.h"
#include "shared/registry.h"

typedef struct RedlockLeaseWatch RedlockLeaseWatch;

extern RedlockLeaseWatch *redlock_lease_watch(const RedlockRegistryHandle *handle,
											  const char *resource);
extern void redlock_lease_unwatch(RedlockLeaseWatch *watch, bool reconfigured);
extern void redlock_lease_rearm(bool check);
extern const char *redlock_lease_commit_refusal(RedlockLeaseWatch *watch, bool reconfigured);
extern void redlock_lease_told(RedlockLeaseWatch *watch);
extern const char *redlock_lease_cancel_explanation(const char **reason);
extern const char *redlock_lease_carried_refusal(const char **reason);
extern bool redlock_lease_was_told(const RedlockLeaseWatch *watch);
extern bool redlock_lease_guards_commits(const RedlockLeaseWatch *watch);
extern void redlock_lease_xact_ended(void);
extern void redlock_lease_hush(bool on);

#endif							/* REDLOCK_LEASEWATCH_H */
