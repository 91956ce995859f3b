/*-------------------------------------------------------------------------
 *
 * redlock.c
 *	  Module entry point.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "guc.h"
#include "lock/locktable.h"
#include "protocol/deadlock.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "shared/lockconfig.h"
#include "shared/patience.h"
#include "shared/registry.h"
#include "shared/rolequota.h"
#include "shared/stats.h"
#include "shared/waiters.h"
#include "shared/watches.h"
#include "worker/worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Defines the redlock.* GUCs and registers the Lua scripts when the library is
 *		loaded.  When it is preloaded, *		also asks for shared memory (cluster-wide counters, the registry of
 *		auto-extended locks and the configurations they were taken under, the waiter
 *		board, the role quotas, the watched locks) and registers the background worker that renews them.
 *		Then tells deadlock detection (protocol/deadlock.c) where this backend's held
 *		locks are listed (lock/locktable.c).
 */
void
_PG_init(void)
{
	RedlockGucInit();
	RedlockStatsInit();
	RedlockPatienceInit();
	RedlockScriptsInit();
	RedlockRegistryInit();
	RedlockLockConfigInit();
	RedlockWaitersInit();
	RedlockRoleQuotaInit();
	RedlockWatchesInit();
	RedlockWorkerInit();
	redlock_deadlock_set_held_source(redlock_locktable_held_on);
}
