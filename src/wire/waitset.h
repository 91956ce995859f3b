/*-------------------------------------------------------------------------
 *
 * waitset.h
 *	  The backend's one wait over a node set's sockets (waitset.c), for call.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_WAITSET_H
#define REDLOCK_WAITSET_H

#include "storage/latch.h"

#include "wire/node.h"

extern int	redlock_waitset_wait(RedlockNodeSet *set, long timeout_ms, WaitEvent *events,
								 int nevents);
extern void redlock_waitset_idle_look(RedlockNodeSet *set);

#endif							/* REDLOCK_WAITSET_H */
