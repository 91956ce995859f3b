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
extern void redlock_nodes_run_by(RedlockNodeSet *set, const RedlockCommand *commands,
								 int ncommands, double answer_by_ms, const char *why,
								 RedlockNodeOutcome *outcomes);
extern void redlock_nodes_run_within(RedlockNodeSet *set, const RedlockCommand *commands,
									 int ncommands, int timeout_ms,
									 RedlockNodeOutcome *outcomes);

#endif							/* REDLOCK_CALL_H */
