/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  The shared memory areas of the modules, asked for and attached in one place
 *	  (shmem.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_SHMEM_H
#define REDLOCK_SHMEM_H

#include "storage/lwlock.h"

/*
 * One area of shared memory a module keeps (stats, patience, registry, lock configurations,
 * waiters, role quotas, watches).
 */
typedef struct RedlockShmemArea
{
	const char *name;			/* ShmemInitStruct's name, and the LWLock tranche's */
	Size		(*size) (void); /* bytes; GUCs and MaxBackends are final when called */
	bool		with_lock;		/* one LWLock of its own, passed to attach */
	Size		(*also_size) (void);	/* NULL, or bytes asked for beside the area, for
										 * what attach allocates itself (a shared hash
										 * table: ShmemInitHash) */

	/*
	 * Called in every process that attaches: keeps area in the module's statics,
	 * and initialises it when found is false (a fresh start, or a restart after a
	 * crash: the area is then all zeroes).  lock: the area's LWLock when with_lock
	 * and found is false (to be kept in the area), else NULL.
	 */
	void		(*attach) (void *area, LWLock *lock, bool found);
} RedlockShmemArea;

extern void redlock_shmem_register(const RedlockShmemArea *area);

#endif							/* REDLOCK_SHMEM_H */
