/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The background worker that renews auto-extended locks (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_WORKER_H
#define REDLOCK_WORKER_H

#include "redlock.h"

extern void RedlockWorkerInit(void);

#endif							/* REDLOCK_WORKER_H */
