/*-------------------------------------------------------------------------
 *
 * callnode.h
 *	  One master's part in a call (callnode.c), for call.c only: the call's state
 *	  and the steps that take one master through it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_CALLNODE_H
#define REDLOCK_CALLNODE_H

#include "redlock.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/* What one redlock_nodes_run() call is doing with one node. */
typedef struct NodeCall
{
	int			awaited;		/* commands of this call whose reply is awaited */
	bool		deferred;		/* commands held back until the handshake is done */
	bool		must_answer;	/* opened by this call on a healthy master: awaited */
	double		deadline_ms;
	bool		polled_after_deadline;	/* a wait begun past the deadline has run */
} NodeCall;

/* One redlock_nodes_run() call. */
typedef struct CallState
{
	RedlockNodeSet *set;
	const RedlockCommand *commands;
	int			ncommands;
	uint64		first_id;		/* call_id of commands[0]; commands[c] has first_id + c */
	double		start_ms;
	int			timeout_ms;		/* redlock.timeout, or a retry's longer patience */
	double		last_deadline_ms;	/* > 0: no node's deadline is later (a cleanup's
									 * CLEANUP_MAX_MS, redlock_nodes_run_by's time) */
	const char *last_deadline_why;	/* NULL, or why a node given up then was */
	NodeCall	calls[REDLOCK_MAX_NODES];
	bool	   *awaiting;		/* [c * count + i]: command c's reply from node i */
	RedlockNodeOutcome *outcomes;	/* [c * count + i] */
} CallState;

/* True while a call still has something at the node: replies awaited or commands held. */
static inline bool
call_waits_on(const NodeCall *call)
{
	return call->awaited > 0 || call->deferred;
}

/* The outcome slot of command c at node i. */
#define CALL_OUTCOME(cs, c, i)	(&(cs)->outcomes[(c) * (cs)->set->count + (i)])
#define CALL_AWAITING(cs, c, i)	((cs)->awaiting[(c) * (cs)->set->count + (i)])

extern void redlock_callnode_start(CallState *cs, int i);
extern void redlock_callnode_finish_connect(CallState *cs, int i);
extern void redlock_callnode_write(CallState *cs, int i);
extern void redlock_callnode_read(CallState *cs, int i);
extern void redlock_callnode_fail(CallState *cs, int i, const char *why);
extern void redlock_callnode_give_up(CallState *cs, int i, const char *why);
extern void redlock_callnode_hold_commands(CallState *cs, int i);

#endif							/* REDLOCK_CALLNODE_H */
