/*-------------------------------------------------------------------------
 *
 * redlock.c
 *	  Module entry point.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "fence.h"
#include "guc.h"
#include "lockconfig.h"
#include "inspect.h"
#include "quorum.h"
#include "redlock.h"
#include "registry.h"
#include "stats.h"
#include "waiters.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Defines the redlock.* GUCs when the library is loaded.  When it is preloaded,
 *		also asks for shared memory (cluster-wide counters, the registry of
 *		auto-extended locks and the configurations they were taken under, the waiter
 *		board) and registers the background worker that renews them.
 */
void
_PG_init(void)
{
	RedlockGucInit();
	RedlockStatsInit();
	RedlockQuorumInit();
	RedlockFenceInit();
	RedlockInspectInit();
	RedlockRegistryInit();
	RedlockLockConfigInit();
	RedlockWaitersInit();
	RedlockWorkerInit();
}
