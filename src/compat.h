/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The PostgreSQL API differences between the server versions redlock builds
 *	  against (15 to 18), guarded by PG_VERSION_NUM in one place, as pgvector does,
 *	  so that the code elsewhere reads the same on every version.
 *
 * Include after postgres.h and the headers named below.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_COMPAT_H
#define REDLOCK_COMPAT_H

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

/* 16 moved the varlena macros (VARSIZE_ANY_EXHDR, ...) out of postgres.h. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * This backend's slot in ProcGlobal->allProcs: 17 replaced PGPROC.pgprocno with
 * MyProcNumber.  NULL-safe only after InitProcess, as both are.
 */
#if PG_VERSION_NUM >= 170000
#define redlock_my_proc_number()	((int) MyProcNumber)
#else
#define redlock_my_proc_number()	(MyProc->pgprocno)
#endif

/*
 * This backend's local transaction id, which names its current top-level transaction:
 * 17 moved PGPROC.lxid into PGPROC.vxid.
 */
#if PG_VERSION_NUM >= 170000
#define redlock_my_lxid()	(MyProc->vxid.lxid)
#else
#define redlock_my_lxid()	(MyProc->lxid)
#endif

/*
 * A wait event set that lives as long as the backend: 17 takes a resource owner (none
 * here: the set is kept across transactions and freed by us) instead of a memory
 * context; both then allocate it in TopMemoryContext.
 */
#if PG_VERSION_NUM >= 170000
#define redlock_create_wait_event_set(nevents)	CreateWaitEventSet(NULL, (nevents))
#else
#define redlock_create_wait_event_set(nevents)	CreateWaitEventSet(TopMemoryContext, (nevents))
#endif

/*
 * Memory for a GUC check hook's "extra", which the GUC code frees: malloc before 16,
 * guc_malloc (in its own memory context, freed with pfree) from 16 on.  NULL when out
 * of memory (16+ also logs it).
 */
#if PG_VERSION_NUM >= 160000
#define redlock_guc_malloc(size)	guc_malloc(LOG, (size))
#else
#define redlock_guc_malloc(size)	malloc(size)
#endif

/* What a backend waits for, shown in pg_stat_activity.wait_event on 17 and later. */
typedef enum RedlockWait
{
	REDLOCK_WAIT_MASTERS,		/* replies from the Redis masters */
	REDLOCK_WAIT_RETRY,			/* the retry delay, or a wake-up, between attempts */
	REDLOCK_WAIT_WORKER,		/* the background worker's answer to a request */
	REDLOCK_WAIT_WORKER_MAIN,	/* the background worker between rounds */
	REDLOCK_WAIT_NOTIFIER_MAIN	/* a database's watch notifier between rounds */
} RedlockWait;

/*
 * The wait_event_info for a wait: on 17 and later a named event of type Extension
 * (WaitEventExtensionNew: "RedlockMasters", ...), registered on first use; before 17
 * all of them are PG_WAIT_EXTENSION ("Extension").  Raises what WaitEventExtensionNew
 * raises (out of shared memory for names: 53200).
 */
static inline uint32
redlock_wait_event(RedlockWait wait)
{
#if PG_VERSION_NUM >= 170000
	static uint32 events[REDLOCK_WAIT_NOTIFIER_MAIN + 1];
	static const char *const names[REDLOCK_WAIT_NOTIFIER_MAIN + 1] = {
		"RedlockMasters", "RedlockRetryDelay", "RedlockWorkerAnswer", "RedlockWorkerMain",
		"RedlockNotifierMain"
	};

	if (events[wait] == 0)
		events[wait] = WaitEventExtensionNew(names[wait]);
	return events[wait];
#else
	(void) wait;
	return PG_WAIT_EXTENSION;
#endif
}

#endif							/* REDLOCK_COMPAT_H */
