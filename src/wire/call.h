/*-------------------------------------------------------------------------
 *
 * call.h
 *	  One call over every master of a node set (call.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_CALL_H
#define REDLOCK_CALL_H

#include "redlock.h"

extern void redlock_nodes_run(RedlockNodeSet *set, const RedlockCommand *commands,
							  int ncommands, bool cleanup, RedlockNodeOutcome *outcomes);

#endif							/* REDLOCK_CALL_H */
