/*-------------------------------------------------------------------------
 *
 * node.c
 *	  Connections to the Redis masters: one non-blocking hiredis context per master
 *	  per backend, and "send this command to all masters at once and wait for their
 *	  replies" (spec §3 step 2: multiplexing, with a timeout small next to the TTL).
 *
 * This layer knows Redis, not locks.  Connections open lazily on first use and are
 * reused; a connection whose state is uncertain (an I/O or protocol error, a timeout,
 * or a wait interrupted by an error while replies were still owed) is closed and
 * re-opened on the next call.  AUTH and SELECT are pipelined ahead of the first
 * command on a new connection, so connecting costs no extra round trip beyond TCP's.
 *
 * The wait is one WaitEventSet over every socket plus the process latch: query cancel
 * and statement_timeout interrupt it, pg_stat_activity shows wait event type
 * "Extension", and each master costs at most its deadline (connect_timeout for a new
 * connection, then timeout for the request).
 *
 * hiredis allocates with malloc; nothing here hands it palloc'd memory, and replies
 * are freed before anything that may raise.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sys/socket.h>

#include "common/cryptohash.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include <hiredis/hiredis.h>

#include "redlock.h"

/*
 * A configured master.  When ctx is NULL the connection is closed and the fields
 * after it mean nothing.
 */
typedef struct RedlockNode
{
	RedlockNodeAddr addr;
	char		name[REDLOCK_MAX_ADDR_LEN + 10];	/* "host:port" for messages */
	redisContext *ctx;
	bool		connecting;		/* non-blocking connect not yet confirmed */
	int			owed_replies;	/* replies the server still owes on ctx */
} RedlockNode;

/* What one redlock_nodes_run() call is doing with one node. */
typedef struct NodeCall
{
	int			index;
	bool		active;			/* still waiting on this node */
	bool		writing;		/* output not all sent yet */
	bool		eval_sent;		/* NOSCRIPT answered with EVAL already */
	int			handshake_replies;	/* AUTH/SELECT replies to read before ours */
	double		deadline_ms;
	int			event_pos;		/* position in the wait event set, or -1 */
} NodeCall;

static RedlockNode *nodes = NULL;
static int	node_count = 0;
static uint64 nodes_generation = 0;
static bool nodes_built = false;

/* Closes node's connection, if any. */
static void
node_close(RedlockNode *node)
{
	if (node->ctx == NULL)
		return;
	redisFree(node->ctx);
	ReleaseExternalFD();
	node->ctx = NULL;
	node->connecting = false;
	node->owed_replies = 0;
}

/*
 * redlock_nodes_disconnect
 *		Closes every connection to the masters.  Raises nothing.
 */
void
redlock_nodes_disconnect(void)
{
	for (int i = 0; i < node_count; i++)
		node_close(&nodes[i]);
}

/* Rebuilds the node array from redlock.servers when the configuration changed. */
static void
nodes_refresh(void)
{
	const RedlockServerList *list = redlock_server_list;

	if (nodes_built && nodes_generation == redlock_connection_generation)
		return;

	redlock_nodes_disconnect();
	if (nodes)
		pfree(nodes);
	nodes = NULL;
	node_count = list ? list->count : 0;
	if (node_count > 0)
		nodes = MemoryContextAllocZero(TopMemoryContext, node_count * sizeof(RedlockNode));
	for (int i = 0; i < node_count; i++)
	{
		nodes[i].addr = list->nodes[i];
		if (list->nodes[i].port == 0)
			snprintf(nodes[i].name, sizeof(nodes[i].name), "%s", list->nodes[i].host);
		else if (strchr(list->nodes[i].host, ':'))
			snprintf(nodes[i].name, sizeof(nodes[i].name), "[%s]:%d",
					 list->nodes[i].host, list->nodes[i].port);
		else
			snprintf(nodes[i].name, sizeof(nodes[i].name), "%s:%d",
					 list->nodes[i].host, list->nodes[i].port);
	}
	nodes_generation = redlock_connection_generation;
	nodes_built = true;
}

/*
 * redlock_node_count
 *		Returns the number of configured masters, first re-reading redlock.servers
 *		(and closing every connection) if it or the credentials changed.  This is the
 *		only place the node set changes, so callers size their outcome arrays from it.
 *		Raises only out-of-memory errors.
 */
int
redlock_node_count(void)
{
	nodes_refresh();
	return node_count;
}

/*
 * redlock_node_name
 *		Returns the "host:port" (or socket path) of node, 0 <= node < redlock_node_count().
 */
const char *
redlock_node_name(int node)
{
	Assert(node >= 0 && node < node_count);
	return nodes[node].name;
}

/*
 * redlock_script_init
 *		Computes script->sha1 from script->body, for EVALSHA.  Raises ERROR
 *		(XX000) if the SHA-1 cannot be computed, which does not happen in practice.
 */
void
redlock_script_init(RedlockScript *script)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA1);
	uint8		digest[20];

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) script->body, strlen(script->body)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA-1 of a redlock script");
	pg_cryptohash_free(ctx);
	for (int i = 0; i < 20; i++)
		snprintf(script->sha1 + i * 2, 3, "%02x", digest[i]);
}

/* Records a failure of node in outcome and closes its connection. */
static void
node_fail(RedlockNode *node, NodeCall *call, RedlockNodeOutcome *outcome, const char *why)
{
	outcome->kind = REDLOCK_REPLY_NONE;
	strlcpy(outcome->error, why, sizeof(outcome->error));
	call->active = false;
	node_close(node);
}

/* Appends one command to node's output buffer; false when hiredis fails. */
static bool
node_append(RedlockNode *node, int argc, const char **argv, const size_t *argvlen)
{
	if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK)
		return false;
	node->owed_replies++;
	return true;
}

/* Appends command as EVALSHA (or EVAL, when eval is true) or as itself. */
static bool
node_append_command(RedlockNode *node, const RedlockCommand *command, bool eval)
{
	const char *argv[REDLOCK_MAX_ARGS + 3];
	size_t		argvlen[REDLOCK_MAX_ARGS + 3];
	int			argc = 0;

	if (command->script)
	{
		eval = eval || command->script->sha1[0] == '\0';
		argv[argc] = eval ? "EVAL" : "EVALSHA";
		argvlen[argc] = strlen(argv[argc]);
		argc++;
		argv[argc] = eval ? command->script->body : command->script->sha1;
		argvlen[argc] = strlen(argv[argc]);
		argc++;
		argv[argc] = "1";		/* one key: argv[0] */
		argvlen[argc] = 1;
		argc++;
	}
	for (int i = 0; i < command->argc; i++, argc++)
	{
		argv[argc] = command->argv[i];
		argvlen[argc] = command->argvlen[i];
	}
	return node_append(node, argc, argv, argvlen);
}

/*
 * Opens node's connection without blocking and queues AUTH and SELECT as configured.
 * Returns false with why filled when that fails at once.
 */
static bool
node_open(RedlockNode *node, NodeCall *call, char *why, size_t whylen)
{
	char		dbnum[16];
	const char *argv[3];
	size_t		argvlen[3];

	if (!AcquireExternalFD())
	{
		snprintf(why, whylen, "too many open files in this backend");
		return false;
	}
	if (node->addr.port == 0)
		node->ctx = redisConnectUnixNonBlock(node->addr.host);
	else
		node->ctx = redisConnectNonBlock(node->addr.host, node->addr.port);
	if (node->ctx == NULL || node->ctx->err)
	{
		snprintf(why, whylen, "could not connect: %s",
				 node->ctx ? node->ctx->errstr : "out of memory");
		if (node->ctx)
			redisFree(node->ctx);
		node->ctx = NULL;
		ReleaseExternalFD();
		return false;
	}
	node->connecting = true;
	node->owed_replies = 0;
	call->handshake_replies = 0;

	if (redlock_password && redlock_password[0] != '\0')
	{
		int			argc = 0;

		argv[argc] = "AUTH";
		argvlen[argc++] = 4;
		if (redlock_username && redlock_username[0] != '\0')
		{
			argv[argc] = redlock_username;
			argvlen[argc] = strlen(redlock_username);
			argc++;
		}
		argv[argc] = redlock_password;
		argvlen[argc] = strlen(redlock_password);
		argc++;
		if (!node_append(node, argc, argv, argvlen))
			goto oom;
		call->handshake_replies++;
	}
	if (redlock_database != 0)
	{
		snprintf(dbnum, sizeof(dbnum), "%d", redlock_database);
		argv[0] = "SELECT";
		argvlen[0] = 6;
		argv[1] = dbnum;
		argvlen[1] = strlen(dbnum);
		if (!node_append(node, 2, argv, argvlen))
			goto oom;
		call->handshake_replies++;
	}
	return true;

oom:
	node_close(node);
	snprintf(why, whylen, "out of memory");
	return false;
}

/* Sends what node has buffered; fails the node on an I/O error. */
static void
node_write(RedlockNode *node, NodeCall *call, RedlockNodeOutcome *outcome)
{
	int			done = 0;

	if (redisBufferWrite(node->ctx, &done) != REDIS_OK)
	{
		node_fail(node, call, outcome, node->ctx->errstr);
		return;
	}
	call->writing = !done;
}

/* Turns one reply to our command into outcome. */
static void
record_reply(const redisReply *reply, RedlockNodeOutcome *outcome)
{
	switch (reply->type)
	{
		case REDIS_REPLY_STATUS:
			outcome->kind = (reply->len == 2 && memcmp(reply->str, "OK", 2) == 0)
				? REDLOCK_REPLY_OK : REDLOCK_REPLY_OTHER;
			break;
		case REDIS_REPLY_NIL:
			outcome->kind = REDLOCK_REPLY_NIL;
			break;
		case REDIS_REPLY_INTEGER:
			outcome->kind = REDLOCK_REPLY_INTEGER;
			outcome->integer = reply->integer;
			break;
		case REDIS_REPLY_ERROR:
			outcome->kind = REDLOCK_REPLY_ERROR;
			snprintf(outcome->error, sizeof(outcome->error), "%.*s",
					 (int) reply->len, reply->str);
			break;
		default:
			outcome->kind = REDLOCK_REPLY_OTHER;
			break;
	}
}

/* Reads what node sent and consumes every complete reply. */
static void
node_read(RedlockNode *node, NodeCall *call, const RedlockCommand *command,
		  RedlockNodeOutcome *outcome)
{
	if (redisBufferRead(node->ctx) != REDIS_OK)
	{
		node_fail(node, call, outcome, node->ctx->errstr);
		return;
	}
	while (call->active)
	{
		void	   *data = NULL;
		redisReply *reply;
		char		why[REDLOCK_NODE_ERROR_LEN];

		if (redisGetReply(node->ctx, &data) != REDIS_OK)
		{
			node_fail(node, call, outcome, node->ctx->errstr);
			return;
		}
		if (data == NULL)
			return;				/* need more bytes */
		reply = data;
		node->owed_replies--;

		if (call->handshake_replies > 0)
		{
			/* AUTH or SELECT: only an error matters, and it ends this connection. */
			call->handshake_replies--;
			if (reply->type == REDIS_REPLY_ERROR)
			{
				snprintf(why, sizeof(why), "%.*s", (int) reply->len, reply->str);
				freeReplyObject(reply);
				node_fail(node, call, outcome, why);
				return;
			}
			freeReplyObject(reply);
			continue;
		}

		if (command->script && !call->eval_sent && reply->type == REDIS_REPLY_ERROR &&
			strncmp(reply->str, "NOSCRIPT", 8) == 0)
		{
			/* The master does not have the script cached: send it whole, once. */
			freeReplyObject(reply);
			call->eval_sent = true;
			if (!node_append_command(node, command, true))
			{
				node_fail(node, call, outcome, "out of memory");
				return;
			}
			node_write(node, call, outcome);
			continue;
		}

		record_reply(reply, outcome);
		freeReplyObject(reply);
		call->active = false;
	}
}

/* Completes a non-blocking connect once the socket is writable. */
static void
node_finish_connect(RedlockNode *node, NodeCall *call, RedlockNodeOutcome *outcome)
{
	int			err = 0;
	socklen_t	len = sizeof(err);

	if (getsockopt(node->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err != 0)
	{
		char		why[REDLOCK_NODE_ERROR_LEN];

		snprintf(why, sizeof(why), "could not connect: %s", strerror(err));
		node_fail(node, call, outcome, why);
		return;
	}
	node->connecting = false;
	call->deadline_ms = redlock_clock_ms() + redlock_timeout_ms;
}

/* The socket events node waits for now. */
static uint32
node_wanted_events(const RedlockNode *node, const NodeCall *call)
{
	return (node->connecting || call->writing) ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
}

/* A wait event set over the latch, postmaster death and every active node. */
static WaitEventSet *
build_wait_set(NodeCall *calls, int n, bool cleanup)
{
	WaitEventSet *set = CreateWaitEventSet(CurrentMemoryContext, n + 2);

	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, cleanup ? WL_POSTMASTER_DEATH : WL_EXIT_ON_PM_DEATH,
					  PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < n; i++)
	{
		calls[i].event_pos = -1;
		if (calls[i].active)
			calls[i].event_pos = AddWaitEventToSet(set,
												   node_wanted_events(&nodes[i], &calls[i]),
												   nodes[i].ctx->fd, NULL, &calls[i]);
	}
	return set;
}

/*
 * The wait loop: until every node has answered, failed or passed its deadline.
 * Any ERROR thrown from here (query cancel) leaves owed replies behind, which makes
 * the next call re-open those connections.
 */
static void
wait_for_nodes(const RedlockCommand *command, NodeCall *calls, int n, bool cleanup,
			   double start_ms, RedlockNodeOutcome *outcomes)
{
	WaitEventSet *volatile set = NULL;

	PG_TRY();
	{
		WaitEvent	events[REDLOCK_MAX_NODES + 2];
		bool		stale = true;

		for (;;)
		{
			double		now = redlock_clock_ms();
			double		next_deadline = -1;
			int			nevents;
			int			active = 0;

			/* Expire nodes past their deadline; find the nearest remaining one. */
			for (int i = 0; i < n; i++)
			{
				if (!calls[i].active)
					continue;
				if (now >= calls[i].deadline_ms)
				{
					char		why[REDLOCK_NODE_ERROR_LEN];

					snprintf(why, sizeof(why), "timed out after %d ms",
							 (int) (now - start_ms));
					outcomes[i].elapsed_ms = now - start_ms;
					node_fail(&nodes[i], &calls[i], &outcomes[i], why);
					stale = true;
					continue;
				}
				active++;
				if (next_deadline < 0 || calls[i].deadline_ms < next_deadline)
					next_deadline = calls[i].deadline_ms;
			}
			if (active == 0)
				break;

			/* A closed socket cannot stay in the set: build it anew. */
			if (stale)
			{
				if (set)
					FreeWaitEventSet(set);
				set = NULL;
				set = build_wait_set(calls, n, cleanup);
				stale = false;
			}

			nevents = WaitEventSetWait(set, (long) ceil(next_deadline - now), events,
									   lengthof(events), PG_WAIT_EXTENSION);

			for (int e = 0; e < nevents; e++)
			{
				NodeCall   *call = events[e].user_data;
				RedlockNode *node;
				RedlockNodeOutcome *outcome;

				if (events[e].events & WL_LATCH_SET)
				{
					ResetLatch(MyLatch);
					if (!cleanup)
						CHECK_FOR_INTERRUPTS();
					continue;
				}
				if (events[e].events & WL_POSTMASTER_DEATH)
				{
					/* Only in cleanup: give up on every node still pending. */
					for (int i = 0; i < n; i++)
						if (calls[i].active)
							node_fail(&nodes[i], &calls[i], &outcomes[i], "postmaster died");
					stale = true;
					break;
				}
				if (call == NULL)
					continue;
				if (!call->active)
				{
					/*
					 * A node that answered owes nothing: what arrives is a close or
					 * garbage.  Drop the connection rather than spin on the event.
					 */
					if (nodes[call->index].ctx)
					{
						node_close(&nodes[call->index]);
						stale = true;
					}
					continue;
				}

				node = &nodes[call->index];
				outcome = &outcomes[call->index];
				if ((events[e].events & WL_SOCKET_WRITEABLE) && node->connecting)
					node_finish_connect(node, call, outcome);
				if (call->active && (events[e].events & WL_SOCKET_WRITEABLE) && call->writing)
					node_write(node, call, outcome);
				if (call->active && (events[e].events & WL_SOCKET_READABLE))
					node_read(node, call, command, outcome);

				if (!call->active)
				{
					outcome->elapsed_ms = redlock_clock_ms() - start_ms;
					/* A failed node closed its socket; a finished one stays idle. */
					if (node->ctx == NULL)
						stale = true;
				}
				else if (!stale)
					ModifyWaitEvent(set, call->event_pos, node_wanted_events(node, call), NULL);
			}
		}
	}
	PG_CATCH();
	{
		if (set)
			FreeWaitEventSet(set);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (set)
		FreeWaitEventSet(set);
}

/*
 * redlock_nodes_run
 *		Sends command to every master at once and waits for their replies (spec §3
 *		step 2).
 *
 * command: the command, or a script call with one key (see RedlockCommand).
 * cleanup: true on abort and exit paths: interrupts are not serviced and postmaster
 *		death ends the wait instead of the process.
 * outcomes: an array of redlock_node_count() entries, filled with each master's reply
 *		or failure.  A master gets at most connect_timeout (ms) to connect and then
 *		timeout (ms) to answer.
 *
 * Outside cleanup, raises whatever CHECK_FOR_INTERRUPTS raises (query cancel, 57014;
 * statement_timeout), and out-of-memory errors.
 */
void
redlock_nodes_run(const RedlockCommand *command, bool cleanup, RedlockNodeOutcome *outcomes)
{
	NodeCall	calls[REDLOCK_MAX_NODES];
	double		start_ms = redlock_clock_ms();
	int			n = node_count;

	for (int i = 0; i < n; i++)
	{
		RedlockNode *node = &nodes[i];
		NodeCall   *call = &calls[i];
		char		why[REDLOCK_NODE_ERROR_LEN];

		memset(call, 0, sizeof(*call));
		memset(&outcomes[i], 0, sizeof(outcomes[i]));
		call->index = i;
		call->active = true;
		call->event_pos = -1;

		/* Replies still owed from an interrupted call would be read as ours. */
		if (node->ctx && node->owed_replies > 0)
			node_close(node);

		if (node->ctx == NULL)
		{
			if (!node_open(node, call, why, sizeof(why)))
			{
				node_fail(node, call, &outcomes[i], why);
				continue;
			}
			call->deadline_ms = start_ms + redlock_connect_timeout_ms;
		}
		else
			call->deadline_ms = start_ms + redlock_timeout_ms;

		if (!node_append_command(node, command, false))
		{
			node_fail(node, call, &outcomes[i], "out of memory");
			continue;
		}
		call->writing = true;
		/* A ready connection can take the request now, before we wait. */
		if (!node->connecting)
			node_write(node, call, &outcomes[i]);
	}

	wait_for_nodes(command, calls, n, cleanup, start_ms, outcomes);
}
