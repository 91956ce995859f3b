/*-------------------------------------------------------------------------
 *
 * call.c
 *	  One call: "send these commands to all masters of a node set at once and wait
 *	  until their outcomes are decided" (spec §3 step 2: multiplexing, a timeout small
 *	  next to the TTL).  This layer knows Redis, not locks.  Each master's part (its
 *	  connection, handshake, commands, replies, deadline) is callnode.c's.
 *
 * A call stops waiting as soon as its outcome is decided (RedlockCommand.need), so a
 * slow or hung master does not slow down an acquire that a majority already granted;
 * what it did not wait for stays owed on the connections (callnode.c).
 *
 * One call may carry several commands (a cleanup releases every lock in one round);
 * every master gets them all at once and each command is decided on its own.
 *
 * The wait (waitset.c) covers every socket of the set in use, the latch and
 * postmaster death.  Query cancel and statement_timeout interrupt it (an interrupted
 * call just leaves replies owed), and pg_stat_activity shows a wait event meanwhile.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/ipc.h"

#include "clock.h"
#include "guc.h"
#include "wire/call.h"
#include "wire/callnode.h"
#include "wire/node.h"
#include "wire/nodeset.h"
#include "wire/waitset.h"

static uint64 call_counter = REDLOCK_CALL_ID_HANDSHAKE_LAST;	/* calls' ids start above */

/* A need-0 command's own test (RedlockCommand.decided) on the replies so far. */
static bool
call_command_certain(const CallState *cs, int c)
{
	int			n = cs->set->count;
	bool		awaited[REDLOCK_MAX_NODES];

	for (int i = 0; i < n; i++)
		awaited[i] = cs->awaiting[c * n + i] || cs->calls[i].deferred;
	return cs->commands[c].decided(&cs->outcomes[c * n], awaited, n,
								   cs->commands[c].decided_arg);
}

/*
 * True when command c of the call is decided (see RedlockCommand): need nodes
 * accepted, or enough refused that they cannot; for need 0, every node answered or
 * failed, or its decided test says the outcome is certain.
 */
static bool
call_command_decided(const CallState *cs, int c)
{
	const RedlockCommand *command = &cs->commands[c];
	int			accepted = 0,
				refused = 0,
				waiting = 0;

	for (int i = 0; i < cs->set->count; i++)
	{
		const RedlockNodeOutcome *outcome = &cs->outcomes[c * cs->set->count + i];

		if (cs->awaiting[c * cs->set->count + i] || cs->calls[i].deferred)
			waiting++;
		else if (redlock_outcome_failed(outcome))
			continue;
		else if (command->accept(outcome))
			accepted++;
		else
			refused++;
	}
	if (waiting == 0 || command->need < 0)
		return true;
	if (command->need == 0)
		return command->decided && call_command_certain(cs, c);
	for (int i = 0; i < cs->set->count; i++)
		if (cs->calls[i].must_answer)
			return false;
	if (accepted >= command->need)
		return true;

	/*
	 * Refused for certain by enough answers: decided.  When failures are what makes
	 * success impossible, the others are still awaited (within their deadlines), so
	 * that an error can say exactly which masters answered and which did not.
	 */
	return accepted + waiting < command->need && accepted + refused >= command->need;
}

static bool
call_decided(const CallState *cs)
{
	for (int c = 0; c < cs->ncommands; c++)
		if (!call_command_decided(cs, c))
			return false;
	return true;
}

/*
 * The longest a cleanup call (commit, abort, exit: deaf to interrupts) waits, whatever
 * redlock.timeout and redlock.connect_timeout say (any user may set them to 60 s): as
 * postgres_fdw bounds its abort cleanup.  Keys not released by then expire with their TTL.
 */
#define CLEANUP_MAX_MS	10000

/*
 * Waits until the call is decided, every node has answered or failed, or deadlines
 * pass.  In cleanup, interrupts are not serviced, postmaster death ends the wait, and
 * no deadline is later than CLEANUP_MAX_MS after the call's start.
 */
static void
call_wait_for_nodes(CallState *cs, bool cleanup)
{
	RedlockNodeSet *set = cs->set;
	int			n = set->count;
	WaitEvent	events[REDLOCK_MAX_NODES + 2];

	while (!call_decided(cs))
	{
		double		now = redlock_clock_ms();
		double		next_deadline = -1;
		int			nevents;

		/*
		 * Nodes whose deadline passed before an earlier wait that polled at once (so
		 * whatever they had sent was read) have timed out.  Checking only after such
		 * a poll means a backend that was itself paused (descheduled, stopped) past
		 * the deadlines still reads the replies that arrived meanwhile.
		 */
		for (int i = 0; i < n; i++)
		{
			NodeCall   *call = &cs->calls[i];

			if (!call_waits_on(call))
				continue;
			if (cs->last_deadline_ms > 0)
				call->deadline_ms = Min(call->deadline_ms, cs->last_deadline_ms);
			if (call->polled_after_deadline)
			{
				char		why[REDLOCK_NODE_ERROR_LEN];

				if (cs->last_deadline_why && call->deadline_ms >= cs->last_deadline_ms)
					snprintf(why, sizeof(why), "no answer after %d ms, when %s",
							 (int) (now - cs->start_ms), cs->last_deadline_why);
				else
					snprintf(why, sizeof(why), "timed out after %d ms%s", (int) (now - cs->start_ms),
							 set->nodes[i].conn.connecting && set->nodes[i].conn.tls ?
							 " in the TLS handshake: does the master serve TLS on this port?" : "");
				redlock_callnode_give_up(cs, i, why);
				continue;
			}
			if (next_deadline < 0 || call->deadline_ms < next_deadline)
				next_deadline = call->deadline_ms;
		}
		if (next_deadline < 0)
			break;
		for (int i = 0; i < n; i++)
			if (call_waits_on(&cs->calls[i]) &&
				cs->calls[i].deadline_ms <= now)
				cs->calls[i].polled_after_deadline = true;

		nevents = redlock_waitset_wait(set, (long) Max(ceil(next_deadline - now), 0), events,
									   lengthof(events));

		for (int e = 0; e < nevents; e++)
		{
			RedlockNode *node = events[e].user_data;
			int			i;

			if (events[e].events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				if (!cleanup)
					CHECK_FOR_INTERRUPTS();
				continue;
			}
			if (events[e].events & WL_POSTMASTER_DEATH)
			{
				if (!cleanup)
					proc_exit(1);
				for (int j = 0; j < n; j++)
					if (call_waits_on(&cs->calls[j]))
						redlock_callnode_fail(cs, j, "postmaster died");
				return;
			}
			if (node == NULL || node->conn.ctx == NULL)
				continue;		/* closed earlier in this batch */

			i = node - set->nodes;
			if (node->conn.connecting)
				redlock_callnode_finish_connect(cs, i);
			if (node->conn.ctx == NULL || node->conn.connecting)
				continue;		/* the event was the TLS handshake's */
			if (node->conn.writing && (events[e].events & WL_SOCKET_WRITEABLE))
				redlock_callnode_write(cs, i);
			if (node->conn.ctx && (events[e].events & WL_SOCKET_READABLE))
				redlock_callnode_read(cs, i);
		}
	}

	/*
	 * Handshakes that finished meanwhile (their replies are often in already): send
	 * their commands now rather than at the next call.  Nothing waits for them.
	 */
	for (int i = 0; i < n; i++)
		if (cs->calls[i].deferred && set->nodes[i].conn.ctx && !set->nodes[i].conn.connecting)
			redlock_callnode_read(cs, i);

	/* Whoever is still awaited was not needed for the outcome. */
	for (int c = 0; c < cs->ncommands; c++)
		for (int i = 0; i < n; i++)
			if (CALL_AWAITING(cs, c, i) || cs->calls[i].deferred)
				CALL_OUTCOME(cs, c, i)->kind = REDLOCK_REPLY_PENDING;
	for (int i = 0; i < n; i++)
		if (cs->calls[i].deferred)
			redlock_callnode_hold_commands(cs, i);
}

/*
 * redlock_nodes_run and its variants: one call, each master given timeout_ms without
 * progress, answer_by_ms 0 for none.
 */
static void
call_run(RedlockNodeSet *set, const RedlockCommand *commands, int ncommands, bool cleanup,
		 int timeout_ms, double answer_by_ms, const char *answer_by_why,
		 RedlockNodeOutcome *outcomes)
{
	CallState	cs;

	Assert(ncommands > 0);
	redlock_scripts_hash();

	memset(&cs, 0, sizeof(cs));
	cs.set = set;
	cs.commands = commands;
	cs.ncommands = ncommands;
	cs.first_id = call_counter + 1;
	call_counter += ncommands;
	cs.start_ms = redlock_clock_ms();
	cs.timeout_ms = timeout_ms;
	cs.last_deadline_ms = cleanup ? cs.start_ms + CLEANUP_MAX_MS : answer_by_ms;
	cs.last_deadline_why = cleanup ? NULL : answer_by_why;
	cs.outcomes = outcomes;
	cs.awaiting = palloc0(Max(ncommands * set->count, 1) * sizeof(bool));
	memset(outcomes, 0, ncommands * set->count * sizeof(RedlockNodeOutcome));

	redlock_waitset_idle_look(set);
	for (int i = 0; i < set->count; i++)
		redlock_callnode_start(&cs, i);
	call_wait_for_nodes(&cs, cleanup);
	pfree(cs.awaiting);
	redlock_nodeset_report_changes(set);
}

/*
 * redlock_nodes_run
 *		Sends commands to every master of set at once and waits until the outcome of
 *		each is decided (spec §3 step 2).
 *
 * set: the masters (redlock_nodeset_current(), or the set a lock was taken on).
 * commands, ncommands: the commands or script calls (1..), and for each when to stop
 *		waiting (need/accept).
 * cleanup: true on abort and exit paths: interrupts are not serviced and postmaster
 *		death ends the wait instead of the process.
 * outcomes: ncommands * set's size entries, command-major ([c * size + node]), filled
 *		with each master's reply, failure, or REDLOCK_REPLY_PENDING when the outcome
 *		was decided without it.  A master gets at most connect_timeout (ms) to connect,
 *		connect_timeout (ms) without progress in its handshake and then timeout (ms)
 *		without progress to answer, all commands at once.
 *
 * Outside cleanup, raises whatever CHECK_FOR_INTERRUPTS raises (query cancel, 57014;
 * statement_timeout), and out-of-memory errors; the connections stay usable.
 */
void
redlock_nodes_run(RedlockNodeSet *set, const RedlockCommand *commands, int ncommands,
				  bool cleanup, RedlockNodeOutcome *outcomes)
{
	call_run(set, commands, ncommands, cleanup, redlock_timeout_ms, 0, NULL, outcomes);
}

/*
 * redlock_nodes_run_within
 *		redlock_nodes_run (not in cleanup) with timeout_ms (>= 1) in place of
 *		redlock.timeout: how long a master may go without progress (spec §3 step 2).
 *		For an acquire's retry after masters did not answer in time (retry.c's
 *		patience).  Raises what redlock_nodes_run raises.
 */
void
redlock_nodes_run_within(RedlockNodeSet *set, const RedlockCommand *commands, int ncommands,
						 int timeout_ms, RedlockNodeOutcome *outcomes)
{
	Assert(timeout_ms >= 1);
	call_run(set, commands, ncommands, false, timeout_ms, 0, NULL, outcomes);
}

/*
 * redlock_nodes_run_by
 *		redlock_nodes_run (not in cleanup) whose wait also ends at answer_by_ms, a
 *		redlock_clock_ms() time (> 0): a master that has not answered by then is given
 *		up as at its deadline, why naming the moment ("the lock's validity ran out");
 *		replies that arrived by then are read.  For a round whose answer is worthless
 *		later (spec §6: an extension answered after the validity it extends).  Raises
 *		what redlock_nodes_run raises.
 */
void
redlock_nodes_run_by(RedlockNodeSet *set, const RedlockCommand *commands, int ncommands,
					 double answer_by_ms, const char *why, RedlockNodeOutcome *outcomes)
{
	Assert(answer_by_ms > 0);
	call_run(set, commands, ncommands, false, redlock_timeout_ms, answer_by_ms, why, outcomes);
}
