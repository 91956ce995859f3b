/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The shared memory areas of the modules, asked for and attached in one place.
 *
 * Each module that keeps state in shared memory describes its area once (a
 * RedlockShmemArea: name, size, whether it has an LWLock, how to attach it) and
 * registers it from _PG_init; this file installs the one pair of shmem_request and
 * shmem_startup hooks that ask for every area and attach it, under
 * AddinShmemInitLock.  Without shared_preload_libraries there is no shared memory to
 * ask for: registering does nothing, and each module keeps its NULL pointer (and its
 * backend-local fallback, where it has one).  A leaf: it calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "shared/shmem.h"

/*
 * Areas the modules register: stats, patience, registry, lock configurations, waiters,
 * role quotas, watches, and room for more.
 */
#define SHMEM_MAX_AREAS 12

static const RedlockShmemArea *shmem_areas[SHMEM_MAX_AREAS];
static int	shmem_area_count = 0;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Asks for every registered area, and its LWLock. */
static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < shmem_area_count; i++)
	{
		RequestAddinShmemSpace(MAXALIGN(shmem_areas[i]->size()));
		if (shmem_areas[i]->also_size)
			RequestAddinShmemSpace(shmem_areas[i]->also_size());
		if (shmem_areas[i]->with_lock)
			RequestNamedLWLockTranche(shmem_areas[i]->name, 1);
	}
}

/* Attaches every registered area; one not found yet is zeroed first. */
static void
shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < shmem_area_count; i++)
	{
		const RedlockShmemArea *a = shmem_areas[i];
		bool		found;
		void	   *area = ShmemInitStruct(a->name, a->size(), &found);
		LWLock	   *lock = NULL;

		if (!found)
			memset(area, 0, a->size());
		if (a->with_lock && !found)
			lock = &(GetNamedLWLockTranche(a->name))->lock;

		a->attach(area, lock, found);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * redlock_shmem_register
 *		Registers area (kept by reference: a static of the caller) to be asked for and
 *		attached with the others.  Does nothing unless the library is being preloaded.
 *		Called from _PG_init (through each module's Init).  Raises ERROR (XX000) past
 *		SHMEM_MAX_AREAS areas, a programming error.
 */
void
redlock_shmem_register(const RedlockShmemArea *area)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	if (shmem_area_count >= SHMEM_MAX_AREAS)
		elog(ERROR, "too many redlock shared memory areas");
	if (shmem_area_count == 0)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = shmem_startup;
	}
	shmem_areas[shmem_area_count++] = area;
}
