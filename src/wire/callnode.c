/*-------------------------------------------------------------------------
 *
 * callnode.c
 *	  One master's part in a call (call.c): its connection opened or checked, its
 *	  handshake, the call's commands sent or held, its replies read, its deadline
 *	  (spec §3 step 2).  This layer knows Redis, not locks.
 *
 * The first connection of a configuration to a master runs its handshake (AUTH,
 * SELECT, the probes INFO and CONFIG GET, the scripts: node.c), within
 * redlock.connect_timeout.  With AUTH or SELECT configured, the call's commands wait
 * for it: nothing that takes or touches a lock may run on a connection whose AUTH or
 * SELECT failed; once a handshake of that configuration succeeded there, later
 * connections pipeline the commands behind it, so that a reconnect costs no round
 * trip.  Without them the commands follow the handshake at once (script commands as
 * EVAL until the scripts are known to be loaded).  A call decided while a handshake
 * was under way leaves its commands held on that connection; they go out, in order,
 * once the handshake is done.  So that the first call still reaches every master, it
 * awaits first connections to masters that did not fail last time (must_answer).  An
 * idle connection is checked before it is used, so that one the master closed
 * meanwhile (Redis "timeout", a restart, a NAT cutting idle TCP) is re-opened instead
 * of failing the call: one look without waiting at every idle socket (waitset.c), and
 * only one with something to read (or every one, when that look cannot be had) is
 * peeked, a non-blocking recv each.
 *
 * The replies a call did not wait for stay owed on their connections (owed.c); Redis
 * answers in order, so the next call reads the old replies first, counts them and
 * drops them.  A script command answered NOSCRIPT is sent again whole with EVAL,
 * whenever that reply is read (a release, extension or undo is never lost to an empty
 * script cache), unless a newer script command on the same key and token is already
 * on its way: re-sent behind it, an older extension would set an older TTL over the
 * newer one.  A connection that owes replies and has made no progress for longer than
 * redlock.quorum_timeout (a connect: redlock.connect_timeout) is taken for hung and
 * closed (call_node_hung_after_ms).  So is one that failed (I/O, protocol): it is
 * re-opened on the next call.  A call that stops waiting for a master at its deadline
 * keeps that connection open with the replies owed (redlock_callnode_give_up), also in
 * its handshake, so that what the next call sends (an attempt's undo) follows in
 * order and a slow master's queue is not lengthened by a new handshake.
 *
 * hiredis allocates with malloc; replies are freed before anything that may raise.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "clock.h"
#include "guc.h"
#include "wire/callnode.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/*
 * Records a failure of node i (why; timed_out: its deadline passed, rather than its
 * connection failing) for every command of the call still waiting on it; the
 * connection is left as it is.
 */
static void
call_node_record_failure(CallState *cs, int i, const char *why, bool timed_out)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];

	for (int c = 0; c < cs->ncommands; c++)
	{
		if (!CALL_AWAITING(cs, c, i) && !call->deferred)
			continue;
		CALL_OUTCOME(cs, c, i)->kind = REDLOCK_REPLY_NONE;
		CALL_OUTCOME(cs, c, i)->timed_out = timed_out;
		strlcpy(CALL_OUTCOME(cs, c, i)->error, why, sizeof(CALL_OUTCOME(cs, c, i)->error));
		CALL_OUTCOME(cs, c, i)->elapsed_ms = redlock_clock_ms() - cs->start_ms;
		CALL_AWAITING(cs, c, i) = false;
	}
	call->awaited = 0;
	call->deferred = false;
	call->must_answer = false;
	node->failed_recently = true;
	redlock_node_note_error(node, why);
}

/*
 * How long node's connection may go without progress in call cs: redlock.connect_timeout
 * while it is being established (its TCP connect, TLS handshake, or the handshake sent
 * at connect: under a burst of new sessions a master answers handshakes in a queue, and
 * a connection reopened after each timeout only lengthens it); the call's timeout
 * (redlock.timeout, or more: redlock_nodes_run_within) once it is, even while SCRIPT
 * LOADs its handshake's answers asked for are owed (they may be, long after, to a master
 * frozen since: TAP 034).  Never less than the call's timeout.
 */
static int
call_node_budget_ms(const CallState *cs, const RedlockNode *node)
{
	return node->conn.connecting || node->establishing_owed > 0 ?
		Max(redlock_connect_timeout_ms, cs->timeout_ms) : cs->timeout_ms;
}

/*
 * How long node's connection may owe replies without progress before a call takes it
 * for hung and closes it: a connect under way, its budget; an open connection, as
 * long as an acquire keeps retrying slow masters (redlock.quorum_timeout), and at
 * least its budget.  Closing a connection to a master that is only slow would put
 * its requests at the back of the master's queue again, and each reopening adds a
 * handshake to that queue.
 */
static int
call_node_hung_after_ms(const CallState *cs, const RedlockNode *node)
{
	if (node->conn.connecting)
		return call_node_budget_ms(cs, node);
	return Max(call_node_budget_ms(cs, node), redlock_quorum_timeout_ms);
}

/*
 * redlock_callnode_fail
 *		Records a failure of master i (an index into cs's node set) for every command of
 *		call cs still waiting on it, why being the reason an error shows, and closes its
 *		connection: the next call reopens it (spec §3 step 2: a master that fails is
 *		skipped, not waited for).  Raises nothing.
 */
void
redlock_callnode_fail(CallState *cs, int i, const char *why)
{
	call_node_record_failure(cs, i, why, false);
	redlock_node_close(cs->set, &cs->set->nodes[i]);
}

/*
 * redlock_callnode_give_up
 *		Gives up waiting for master i (why: its deadline passed, spec §3 step 2) but keeps its connection when
 * the call's commands went out on it: their replies stay owed, and the next call's
 * commands follow them in order.  So an acquire attempt's undo, sent right after the
 * attempt, reaches a master that was only paused behind the attempt's SET, on the same
 * socket: a new connection's undo could run first, or stay unsent in a connect that
 * no call drives, and the late SET would hold the key for its whole TTL.  The wait for
 * it restarts from now: a later call takes the connection for hung (and closes it)
 * only after another wait without progress (call_node_budget_ms).  A connection whose
 * handshake is still under way is kept too, and the call's commands are held for it
 * (redlock_callnode_hold_commands), as for a call decided without it: closing it would throw the
 * handshake's work away and make the next call start another.  A TCP connect or TLS
 * handshake still under way is closed.  Raises only out-of-memory errors (53200,
 * keeping held commands).
 */
void
redlock_callnode_give_up(CallState *cs, int i, const char *why)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		held = cs->calls[i].deferred;

	if (node->conn.ctx == NULL || node->conn.connecting)
	{
		redlock_callnode_fail(cs, i, why);
		return;
	}
	call_node_record_failure(cs, i, why, true);
	if (held)
		redlock_callnode_hold_commands(cs, i);
	node->progress_ms = redlock_clock_ms();
}

/*
 * A node that makes progress on a call (its commands all written, a reply read) gets
 * another redlock.timeout: the timeout bounds a wait without progress, so that a
 * batch of thousands of commands (a cleanup, the worker's renewals) is not cut short
 * while a hung master still costs one timeout.
 */
static void
call_progressed(CallState *cs, int i)
{
	NodeCall   *call = &cs->calls[i];
	double		deadline_ms = redlock_clock_ms() + call_node_budget_ms(cs, &cs->set->nodes[i]);

	if (call_waits_on(call) && deadline_ms > call->deadline_ms)
	{
		call->deadline_ms = deadline_ms;
		call->polled_after_deadline = false;
	}
}

/*
 * Fails node i after hiredis could not read or write: with TLS, OpenSSL's reason when
 * it has one (a master's alert says more than hiredis' "Server closed the connection").
 */
static void
call_node_fail_io(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	char		why[REDLOCK_NODE_ERROR_LEN];
	char		reason[REDLOCK_NODE_ERROR_LEN];

	redlock_conn_io_reason(&node->conn, reason, sizeof(reason));

	/*
	 * A master that wants a client certificate closes a connection without one after
	 * the handshake, and its alert is often lost to the reset: say what it may be.
	 */
	if (node->conn.tls && node->establishing_owed > 0 && strstr(reason, "certificate") == NULL)
		snprintf(why, sizeof(why), "%s, right after the TLS handshake: does the master require a client certificate (redlock.tls_cert_file)?",
				 reason);
	else
		strlcpy(why, reason, sizeof(why));
	redlock_callnode_fail(cs, i, why);
}

/*
 * redlock_callnode_write
 *		Sends what master i's connection has buffered for call cs, as far as the socket
 *		takes it; all of it written counts as progress (another timeout, in ms, from
 *		now).  An I/O error fails the master (redlock_callnode_fail).  Raises nothing.
 */
void
redlock_callnode_write(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		was_writing = node->conn.writing;
	int			done;

	if (!redlock_conn_write(&node->conn, &done))
	{
		call_node_fail_io(cs, i);
		return;
	}
	if (done && was_writing)
		call_progressed(cs, i);
}

/* Command's arguments as node i gets them: its own last argument, if it has one. */
static void
call_node_argv(const RedlockCommand *command, int i, const char **argv, size_t *argvlen)
{
	memcpy(argv, command->argv, sizeof(command->argv[0]) * command->argc);
	memcpy(argvlen, command->argvlen, sizeof(command->argvlen[0]) * command->argc);
	if (command->node_last_arg)
	{
		argv[command->argc - 1] = command->node_last_arg[i];
		argvlen[command->argc - 1] = strlen(command->node_last_arg[i]);
	}
}

/*
 * Appends every command of the call to node i, now that its connection can take them,
 * and sends what it can.  The node's deadline runs from now.
 */
static void
call_send_commands(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];

	call->deferred = false;
	for (int c = 0; c < cs->ncommands; c++)
	{
		const RedlockCommand *command = &cs->commands[c];
		const char *argv[REDLOCK_MAX_ARGS];
		size_t		argvlen[REDLOCK_MAX_ARGS];

		call_node_argv(command, i, argv, argvlen);
		if (!redlock_node_append_command(cs->set, node, cs->first_id + c, command->script, false,
								 command->argc, argv, argvlen))
		{
			redlock_callnode_fail(cs, i, "out of memory");
			return;
		}
		CALL_AWAITING(cs, c, i) = true;
		call->awaited++;
	}
	if (!node->conn.connecting)
		redlock_callnode_write(cs, i);
	call->deadline_ms = redlock_clock_ms() + call_node_budget_ms(cs, node);
	call->polled_after_deadline = false;
}

/*
 * Sends, now that node i's handshake is done, the commands of earlier calls that were
 * decided while it was under way: they go out in their order, before this call's.
 */
static void
call_send_held(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		appended = true;

	for (int k = 0; k < node->queued.len; k++)
	{
		RedlockOwed  *q = &node->queued.entries[k];

		appended = appended &&
			redlock_node_append_command(cs->set, node, q->call_id, q->script, q->eval,
								q->argc, q->argv, q->argvlen);
		redlock_owed_free(q);
	}
	node->queued.len = 0;
	if (!appended)
		redlock_callnode_fail(cs, i, "out of memory");
	else if (!node->conn.connecting)
		redlock_callnode_write(cs, i);
}

/*
 * redlock_callnode_hold_commands
 *		Keeps every command of call cs for master i, whose handshake is still under way
 *		as the call ends, to be sent once it is done: every master still gets them,
 *		none runs on a connection whose AUTH or SELECT failed (spec §3 step 2).  Raises
 *		only out-of-memory errors (53200).
 */
void
redlock_callnode_hold_commands(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];

	for (int c = 0; c < cs->ncommands; c++)
	{
		const RedlockCommand *command = &cs->commands[c];
		const char *argv[REDLOCK_MAX_ARGS];
		size_t		argvlen[REDLOCK_MAX_ARGS];
		RedlockOwed	entry;

		call_node_argv(command, i, argv, argvlen);
		redlock_owed_fill(cs->set->context, &entry, cs->first_id + c, command->script, false,
				   command->argc, argv, argvlen);
		redlock_owed_queue_push(cs->set->context, &node->queued, &entry);
	}
	cs->calls[i].deferred = false;
}

/* The index of the call's command that entry is owed for, or -1 for another call's. */
static int
call_command_of(const CallState *cs, const RedlockOwed *entry)
{
	if (entry->call_id < cs->first_id || entry->call_id >= cs->first_id + cs->ncommands)
		return -1;
	return (int) (entry->call_id - cs->first_id);
}

/*
 * redlock_callnode_read
 *		Reads what master i sent and consumes every complete reply, oldest first:
 *		handshake replies (queued commands, then call cs's, go out once the last one is
 *		read), replies owed to earlier calls (counted and dropped), then cs's own, each
 *		into its outcome (spec §3 step 2).  A script command answered NOSCRIPT is sent
 *		again whole with EVAL unless a newer command for the same lock follows it.  An
 *		I/O or protocol error, or a reply nothing was owed for, fails the master.
 *		Raises only out-of-memory errors (53200).
 */
void
redlock_callnode_read(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];

	if (!redlock_conn_read(&node->conn))
	{
		call_node_fail_io(cs, i);
		return;
	}
	while (node->conn.ctx)
	{
		void	   *reply = NULL;
		RedlockOwed	entry;
		int			c;
		char		why[REDLOCK_NODE_ERROR_LEN];

		switch (redlock_conn_get_reply(&node->conn, &reply))
		{
			case REDLOCK_CONN_REPLY_IO_ERROR:
				call_node_fail_io(cs, i);
				return;
			case REDLOCK_CONN_REPLY_PROTOCOL_ERROR:
				redlock_conn_protocol_reason(&node->conn, why, sizeof(why));
				redlock_callnode_fail(cs, i, why);
				return;
			case REDLOCK_CONN_REPLY_OK:
				break;
		}
		if (reply == NULL)
			return;				/* more bytes needed */

		if (node->owed.len == 0)
		{
			/* Nothing was owed: the stream is out of step. */
			redlock_conn_reply_free(reply);
			redlock_callnode_fail(cs, i, "unexpected reply");
			return;
		}
		redlock_owed_pop(&node->owed, &entry);
		node->progress_ms = redlock_clock_ms();
		call_progressed(cs, i);

		if (entry.call_id <= REDLOCK_CALL_ID_HANDSHAKE_LAST)
		{
			/* The handshake's (node.c): AUTH's, SELECT's or a SCRIPT command's error ends it. */
			RedlockHandshakeStep step = redlock_node_handshake_reply(cs->set, node, entry.call_id,
																	 reply, why, sizeof(why));

			redlock_conn_reply_free(reply);
			if (step == REDLOCK_HANDSHAKE_FAILED)
			{
				redlock_callnode_fail(cs, i, why);
				return;
			}
			if (step == REDLOCK_HANDSHAKE_DONE)
			{
				call_send_held(cs, i);
				if (node->conn.ctx && cs->calls[i].deferred)
					call_send_commands(cs, i);
			}
			else if (node->conn.writing)
				redlock_callnode_write(cs, i);	/* the SCRIPT LOADs of scripts it lacks */
			continue;
		}

		c = call_command_of(cs, &entry);
		if (entry.script && !entry.eval && redlock_conn_reply_noscript(reply) &&
			!redlock_owed_newer_for_same_lock(&node->owed, &entry) &&
			(!entry.script->acquires || (c >= 0 && CALL_AWAITING(cs, c, i))))
		{
			/*
			 * The master's script cache is empty: send this very command whole.  Not an
			 * acquire whose call is over: its attempt was decided (and undone) without
			 * this master, and a late run would set keys nobody holds, after commands
			 * (the release) that went out since.
			 */
			bool		appended;

			redlock_conn_reply_free(reply);
			appended = redlock_node_append_command(cs->set, node, entry.call_id, entry.script, true,
										   entry.argc, entry.argv, entry.argvlen);
			redlock_owed_free(&entry);
			if (!appended)
			{
				redlock_callnode_fail(cs, i, "out of memory");
				return;
			}
			redlock_callnode_write(cs, i);
			continue;
		}
		node->stats.replies++;
		/* Judged as of the call's start, no later than its commands went out. */
		if (redlock_node_reply_counts(node, c >= 0 && cs->commands[c].facts_only, cs->start_ms))
		{
			node->down = false;
			node->down_calls = 0;	/* a reply that counts ends a row of failed calls */
		}

		if (c < 0 || !CALL_AWAITING(cs, c, i))
		{
			/* A reply an earlier call decided without: counted, then dropped. */
			node->stats.late_replies++;
			redlock_conn_reply_free(reply);
			redlock_owed_free(&entry);
			continue;
		}

		redlock_conn_reply_outcome(reply, cs->commands[c].keep_text, CALL_OUTCOME(cs, c, i));
		redlock_conn_reply_free(reply);
		redlock_owed_free(&entry);
		if (node->left_out && !cs->commands[c].facts_only)
			redlock_node_leave_out(node, CALL_OUTCOME(cs, c, i));
		CALL_AWAITING(cs, c, i) = false;
		if (--cs->calls[i].awaited == 0)
			cs->calls[i].must_answer = false;
		node->failed_recently = false;
		CALL_OUTCOME(cs, c, i)->elapsed_ms = node->progress_ms - cs->start_ms;
		node->stats.last_rtt_ms = CALL_OUTCOME(cs, c, i)->elapsed_ms;
	}
}

/* The connection to node i is ready: commands may go out once its handshake is sent. */
static void
call_node_connected(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];

	node->stats.connected = true;
	node->progress_ms = redlock_clock_ms();	/* the handshake is owed from now */
	if (call_waits_on(call))
	{
		call->deadline_ms = redlock_clock_ms() + call_node_budget_ms(cs, node);
		call->polled_after_deadline = false;
	}
	/* Out at once: a call decided meanwhile would leave it unsent, then judged stale. */
	redlock_callnode_write(cs, i);
}

/*
 * redlock_callnode_finish_connect
 *		Takes master i's connect further on the event call cs waited for
 *		(redlock_node_connect_step): the TCP connect, then, with TLS, the handshake;
 *		once ready, the handshake goes out.  A failure (a refused certificate, say)
 *		fails the master with the reason.  Raises only out-of-memory errors (53200).
 */
void
redlock_callnode_finish_connect(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		tls_started = node->conn.tls != NULL;
	char		why[REDLOCK_NODE_ERROR_LEN];

	switch (redlock_node_connect_step(cs->set, node, &node->conn, why, sizeof(why)))
	{
		case REDLOCK_CONN_READY:
			call_node_connected(cs, i);
			break;
		case REDLOCK_CONN_WAIT:
			if (!tls_started)
				node->progress_ms = redlock_clock_ms();	/* the TCP connect is done */
			break;
		case REDLOCK_CONN_FAILED:
			redlock_callnode_fail(cs, i, why);
			break;
	}
}

/*
 * Takes a connect (and TLS handshake) that an earlier call left under way as far as
 * what arrived since allows, without waiting: only a call's wait drives it, and a
 * call decided by the other masters (one that failed last time is not awaited) can
 * end before its next step.  Otherwise a master slower to connect than the quorum to
 * answer, or any restarted master under TLS, would be judged stale at every call and
 * reopened, and never get a lock again while calls come further apart than
 * redlock.connect_timeout.
 */
static void
call_node_continue_connect(CallState *cs, int i)
{
	if (redlock_conn_event_ready(&cs->set->nodes[i].conn))
		redlock_callnode_finish_connect(cs, i);
}

/*
 * redlock_callnode_start
 *		Gets master i ready for call cs (spec §3 step 2): reads what earlier calls left
 *		owed, takes further a connect they left under way, closes a connection that
 *		went quiet while owing replies or connecting (hung after
 *		call_node_hung_after_ms, in ms; a failed connect) or that the master closed
 *		while it was idle (peeked unless redlock_waitset_idle_look saw its socket
 *		quiet), and opens one if needed.  Then sends the call's commands, or holds them
 *		back until the handshake of a new connection is done.  A master that cannot be
 *		opened fails for every command.  Raises only out-of-memory errors (53200).
 */
void
redlock_callnode_start(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];
	char		why[REDLOCK_NODE_ERROR_LEN];

	/* As the last call left it: an old connection found dead below does not count. */
	bool		failed_last_time = node->failed_recently;

	if (node->conn.ctx && node->owed.len > 0 && !node->conn.connecting)
		redlock_callnode_read(cs, i);
	if (node->conn.ctx && node->conn.connecting)
		call_node_continue_connect(cs, i);
	if (node->conn.ctx && node->owed.len > 0 &&
		cs->start_ms - node->progress_ms > call_node_hung_after_ms(cs, node))
	{
		snprintf(why, sizeof(why), "no reply for %d ms: connection closed",
				 (int) (cs->start_ms - node->progress_ms));
		redlock_node_note_error(node, why);
		redlock_node_close(cs->set, node);
	}
	if (node->conn.ctx && node->owed.len == 0 && !node->conn.connecting &&
		!node->looked_quiet && redlock_conn_gone_while_idle(&node->conn))
		redlock_node_close(cs->set, node);

	if (node->conn.ctx == NULL)
	{
		if (!redlock_node_open(cs->set, node, why, sizeof(why)))
		{
			call->deferred = true;	/* so that redlock_callnode_fail fails every command here */
			redlock_callnode_fail(cs, i, why);
			return;
		}

		/*
		 * The first connection of this configuration to a master that did not fail
		 * last time is awaited, so that its handshake does not keep the command from
		 * it; one that failed is not, so that a hung master costs one timeout, not
		 * one per call.  With TLS every new connection is awaited: its commands cannot
		 * go out before the TLS handshake, which only a call's wait drives, so a call
		 * decided without it would leave a restarted master without the lock.
		 */
		call->must_answer = !failed_last_time &&
			(!node->handshake_verified || redlock_node_uses_tls(cs->set, node));
	}
	if (node->handshake_owed > 0 && !node->handshake_verified)
	{
		call->deferred = true;
		call->deadline_ms = redlock_clock_ms() + call_node_budget_ms(cs, node);
		if (!node->conn.connecting)
			redlock_callnode_write(cs, i);
		return;
	}
	if (node->queued.len > 0)
		call_send_held(cs, i);	/* releases carried over go first */
	if (node->conn.ctx)
		call_send_commands(cs, i);
}
