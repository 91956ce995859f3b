/*-------------------------------------------------------------------------
 *
 * node.c
 *	  Connections to the Redis masters: one non-blocking hiredis context per master
 *	  per backend, and "send this command to all masters at once and wait until the
 *	  outcome is decided" (spec §3 step 2: multiplexing, a timeout small next to the TTL).
 *
 * This layer knows Redis, not locks.  Connections open lazily and are reused.  AUTH
 * and SELECT are pipelined ahead of the first command on a new connection.
 *
 * A call stops waiting as soon as its outcome is decided (RedlockCommand.need), so a
 * slow or hung master does not slow down an acquire that a majority already granted.
 * The replies it did not wait for stay owed on their connections.  Each connection
 * keeps, oldest first, what every owed reply is for (the handshake, or which call and
 * which script command with its arguments); Redis answers in order, so the next call
 * reads the old replies first, counts them and drops them, except that a script
 * command answered NOSCRIPT is sent again whole with EVAL, whenever that reply is read:
 * a release, an extension or an undo is never lost to an empty script cache.  New
 * connections load the scripts (SCRIPT LOAD) in their handshake, so that NOSCRIPT is
 * rare to begin with.  A connection that owes replies and has made no progress for
 * longer than redlock.timeout is taken for hung and closed.  So is one that failed
 * (I/O, protocol, timeout): it is re-opened on the next call.
 *
 * The wait is one WaitEventSet over every socket, the latch and postmaster death, kept
 * for the backend's life and rebuilt only when a connection opens or closes.  Query
 * cancel and statement_timeout interrupt it (an interrupted call just leaves replies
 * owed), and pg_stat_activity shows wait event type "Extension" meanwhile.
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
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#include <hiredis/hiredis.h>

#include "redlock.h"

/*
 * A reply a connection still owes.  call_id 0 is the handshake (AUTH, SELECT, SCRIPT
 * LOAD).  For a script command the arguments are kept (args, palloc'd in
 * NodeContext), so that it can be sent again with EVAL if the master answers NOSCRIPT.
 */
typedef struct OwedReply
{
	uint64		call_id;
	const RedlockScript *script;
	bool		eval;			/* sent with EVAL already */
	int			argc;
	const char *argv[REDLOCK_MAX_ARGS];
	size_t		argvlen[REDLOCK_MAX_ARGS];
	char	   *args;			/* the block argv points into */
} OwedReply;

/*
 * A configured master.  When ctx is NULL the connection is closed and the fields
 * after it mean nothing.
 */
typedef struct RedlockNode
{
	RedlockNodeAddr addr;
	char		name[REDLOCK_NODE_NAME_LEN];
	redisContext *ctx;
	bool		connecting;		/* non-blocking connect not yet confirmed */
	bool		writing;		/* output not all sent yet */
	OwedReply  *owed;			/* ring of owed replies, oldest at owed_head */
	int			owed_head;
	int			owed_len;
	int			owed_cap;
	double		progress_ms;	/* last reply, or when it began to owe one */
	int			event_pos;		/* position in wait_set */
	uint32		event_mask;		/* socket events registered there */
} RedlockNode;

/* What one redlock_nodes_run() call is doing with one node. */
typedef struct NodeCall
{
	bool		active;			/* still waiting for this call's reply */
	double		deadline_ms;
	bool		polled_after_deadline;	/* a wait begun past the deadline has run */
} NodeCall;

static RedlockNode *nodes = NULL;
static int	node_count = 0;
static MemoryContext NodeContext = NULL;	/* owed-reply rings and their arguments */
static uint64 call_counter = 0;

/* The scripts every connection loads in its handshake. */
#define REDLOCK_MAX_SCRIPTS 4
static RedlockScript *scripts[REDLOCK_MAX_SCRIPTS];
static int	script_count = 0;
static uint64 nodes_generation = 0;
static bool nodes_built = false;

/* The backend's wait set; rebuilt when wait_set_stale (a socket opened or closed). */
static WaitEventSet *wait_set = NULL;
static bool wait_set_stale = true;

/*
 * Logs, at the tail of node's ring, a reply that a command about to be appended will
 * owe.  Done before the append, since it may raise (out of memory) and hiredis must
 * never hold a command whose reply nobody expects.
 */
static OwedReply *
owed_push(RedlockNode *node, uint64 call_id, const RedlockScript *script, bool eval,
		  int argc, const char *const *argv, const size_t *argvlen)
{
	OwedReply  *entry;

	if (node->owed_len == node->owed_cap)
	{
		int			newcap = Max(8, node->owed_cap * 2);
		OwedReply  *ring = MemoryContextAlloc(NodeContext, newcap * sizeof(OwedReply));

		for (int k = 0; k < node->owed_len; k++)
			ring[k] = node->owed[(node->owed_head + k) % node->owed_cap];
		if (node->owed)
			pfree(node->owed);
		node->owed = ring;
		node->owed_cap = newcap;
		node->owed_head = 0;
	}
	entry = &node->owed[(node->owed_head + node->owed_len) % node->owed_cap];
	memset(entry, 0, sizeof(*entry));
	entry->call_id = call_id;
	entry->script = script;
	entry->eval = eval;
	if (script)
	{
		size_t		total = 0;
		char	   *p;

		for (int k = 0; k < argc; k++)
			total += argvlen[k] + 1;
		entry->args = p = MemoryContextAlloc(NodeContext, Max(total, 1));
		for (int k = 0; k < argc; k++)
		{
			memcpy(p, argv[k], argvlen[k]);
			p[argvlen[k]] = '\0';
			entry->argv[k] = p;
			entry->argvlen[k] = argvlen[k];
			p += argvlen[k] + 1;
		}
		entry->argc = argc;
	}
	if (node->owed_len++ == 0)
		node->progress_ms = redlock_clock_ms();
	return entry;
}

/* Takes the oldest owed reply off node's ring into *entry (free with owed_free). */
static void
owed_pop(RedlockNode *node, OwedReply *entry)
{
	Assert(node->owed_len > 0);
	*entry = node->owed[node->owed_head];
	node->owed_head = (node->owed_head + 1) % node->owed_cap;
	node->owed_len--;
}

/* Forgets the newest owed reply (its command could not be appended). */
static void
owed_drop_newest(RedlockNode *node)
{
	OwedReply  *entry = &node->owed[(node->owed_head + node->owed_len - 1) % node->owed_cap];

	if (entry->args)
		pfree(entry->args);
	node->owed_len--;
}

static void
owed_free(OwedReply *entry)
{
	if (entry->args)
		pfree(entry->args);
	entry->args = NULL;
}

/* Closes node's connection, if any, forgetting what it owed. */
static void
node_close(int i)
{
	RedlockNode *node = &nodes[i];

	if (node->ctx == NULL)
		return;
	redisFree(node->ctx);
	ReleaseExternalFD();
	node->ctx = NULL;
	node->connecting = false;
	node->writing = false;
	while (node->owed_len > 0)
	{
		OwedReply	entry;

		owed_pop(node, &entry);
		owed_free(&entry);
	}
	wait_set_stale = true;
	redlock_stats_node(i)->connected = false;
}

/*
 * redlock_nodes_disconnect
 *		Closes every connection to the masters.  Raises nothing.
 */
void
redlock_nodes_disconnect(void)
{
	for (int i = 0; i < node_count; i++)
		node_close(i);
}

/* Rebuilds the node array from redlock.servers when the configuration changed. */
static void
nodes_refresh(void)
{
	const RedlockServerList *list = redlock_server_list;

	if (nodes_built && nodes_generation == redlock_connection_generation)
		return;

	if (NodeContext == NULL)
		NodeContext = AllocSetContextCreate(TopMemoryContext, "redlock connections",
											ALLOCSET_SMALL_SIZES);

	/* Close with the old array, whose figures still describe the old nodes. */
	for (int i = 0; i < node_count; i++)
	{
		RedlockNode *node = &nodes[i];

		if (node->ctx)
		{
			redisFree(node->ctx);
			ReleaseExternalFD();
		}
	}
	MemoryContextReset(NodeContext);
	wait_set_stale = true;
	if (nodes)
		pfree(nodes);
	nodes = NULL;
	node_count = list ? list->count : 0;
	if (node_count > 0)
		nodes = MemoryContextAllocZero(TopMemoryContext, node_count * sizeof(RedlockNode));
	for (int i = 0; i < node_count; i++)
	{
		nodes[i].addr = list->nodes[i];
		redlock_node_addr_name(&list->nodes[i], nodes[i].name, sizeof(nodes[i].name));
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
 * Computes script->sha1 from script->body, for EVALSHA.  Hashing needs a resource
 * owner, which backend exit no longer has; until it is known, EVAL sends the body.
 * Raises ERROR (XX000) if the SHA-1 cannot be computed, which does not happen in
 * practice.
 */
static void
script_hash(RedlockScript *script)
{
	pg_cryptohash_ctx *ctx;
	uint8		digest[20];

	if (script->sha1[0] != '\0' || CurrentResourceOwner == NULL)
		return;
	ctx = pg_cryptohash_create(PG_SHA1);

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) script->body, strlen(script->body)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA-1 of a redlock script");
	pg_cryptohash_free(ctx);
	for (int i = 0; i < 20; i++)
		snprintf(script->sha1 + i * 2, 3, "%02x", digest[i]);
}

/*
 * redlock_script_register
 *		Makes script known to this layer: new connections load it in their handshake,
 *		and script commands run it with EVALSHA.  At most REDLOCK_MAX_SCRIPTS scripts;
 *		registering one twice does nothing.  Raises ERROR (XX000) only if hashing fails.
 */
void
redlock_script_register(RedlockScript *script)
{
	for (int i = 0; i < script_count; i++)
		if (scripts[i] == script)
			return;
	if (script_count == REDLOCK_MAX_SCRIPTS)
		elog(ERROR, "too many redlock scripts");
	scripts[script_count++] = script;
	script_hash(script);
}

/* Records a failure of node i in this call and closes its connection. */
static void
node_fail(int i, NodeCall *call, RedlockNodeOutcome *outcome, const char *why)
{
	if (call->active)
	{
		outcome->kind = REDLOCK_REPLY_NONE;
		strlcpy(outcome->error, why, sizeof(outcome->error));
		call->active = false;
	}
	redlock_stats_node_error(i, why);
	node_close(i);
}

/*
 * Appends one command to node's output buffer, logging the reply it will owe (for
 * call_id; for a script command, with its arguments).  False when hiredis fails.
 */
static bool
node_append(RedlockNode *node, uint64 call_id, const RedlockScript *script, bool eval,
			int argc, const char **argv, const size_t *argvlen,
			int script_argc, const char *const *script_argv, const size_t *script_argvlen)
{
	owed_push(node, call_id, script, eval, script_argc, script_argv, script_argvlen);
	if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK)
	{
		owed_drop_newest(node);
		return false;
	}
	node->writing = true;
	return true;
}

/*
 * Appends a command for call_id: argv as it is, or, with a script, EVALSHA (EVAL when
 * asked for or no SHA-1 is known) of the script with one key, argv[0].
 */
static bool
node_append_command(RedlockNode *node, uint64 call_id, const RedlockScript *script,
					bool eval, int argc, const char *const *argv, const size_t *argvlen)
{
	const char *full[REDLOCK_MAX_ARGS + 3];
	size_t		fulllen[REDLOCK_MAX_ARGS + 3];
	int			n = 0;

	if (script)
	{
		eval = eval || script->sha1[0] == '\0';
		full[n] = eval ? "EVAL" : "EVALSHA";
		fulllen[n] = strlen(full[n]);
		n++;
		full[n] = eval ? script->body : script->sha1;
		fulllen[n] = strlen(full[n]);
		n++;
		full[n] = "1";
		fulllen[n] = 1;
		n++;
	}
	for (int k = 0; k < argc; k++, n++)
	{
		full[n] = argv[k];
		fulllen[n] = argvlen[k];
	}
	if (!node_append(node, call_id, script, eval, n, full, fulllen, argc, argv, argvlen))
		return false;
	redlock_stats_node(node - nodes)->requests++;
	return true;
}

/*
 * Opens node i's connection without blocking and queues AUTH and SELECT as
 * configured.  Returns false with why filled when that fails at once.
 */
static bool
node_open(int i, char *why, size_t whylen)
{
	RedlockNode *node = &nodes[i];
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
	node->writing = false;
	wait_set_stale = true;

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
		if (!node_append(node, 0, NULL, false, argc, argv, argvlen, 0, NULL, NULL))
			goto oom;
	}
	if (redlock_database != 0)
	{
		snprintf(dbnum, sizeof(dbnum), "%d", redlock_database);
		argv[0] = "SELECT";
		argvlen[0] = 6;
		argv[1] = dbnum;
		argvlen[1] = strlen(dbnum);
		if (!node_append(node, 0, NULL, false, 2, argv, argvlen, 0, NULL, NULL))
			goto oom;
	}
	for (int k = 0; k < script_count; k++)
	{
		argv[0] = "SCRIPT";
		argvlen[0] = 6;
		argv[1] = "LOAD";
		argvlen[1] = 4;
		argv[2] = scripts[k]->body;
		argvlen[2] = strlen(scripts[k]->body);
		if (!node_append(node, 0, NULL, false, 3, argv, argvlen, 0, NULL, NULL))
			goto oom;
	}
	return true;

oom:
	node_close(i);
	snprintf(why, whylen, "out of memory");
	return false;
}

/* Sends what node i has buffered; fails the node on an I/O error. */
static void
node_write(int i, NodeCall *call, RedlockNodeOutcome *outcome)
{
	RedlockNode *node = &nodes[i];
	int			done = 0;

	if (redisBufferWrite(node->ctx, &done) != REDIS_OK)
	{
		node_fail(i, call, outcome, node->ctx->errstr);
		return;
	}
	node->writing = !done;
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

/*
 * Reads what node i sent and consumes every complete reply, oldest first: handshake
 * replies, replies owed to earlier calls (counted and dropped), then call_id's.  A
 * script command answered NOSCRIPT, whichever call it belongs to, is sent again whole
 * with EVAL.
 */
static void
node_read(int i, NodeCall *call, uint64 call_id, double start_ms, RedlockNodeOutcome *outcome)
{
	RedlockNode *node = &nodes[i];
	RedlockNodeFigures *figures = redlock_stats_node(i);

	if (redisBufferRead(node->ctx) != REDIS_OK)
	{
		node_fail(i, call, outcome, node->ctx->errstr);
		return;
	}
	while (node->ctx)
	{
		void	   *data = NULL;
		redisReply *reply;
		OwedReply	entry;
		char		why[REDLOCK_NODE_ERROR_LEN];

		if (redisGetReply(node->ctx, &data) != REDIS_OK)
		{
			node_fail(i, call, outcome, node->ctx->errstr);
			return;
		}
		if (data == NULL)
			return;				/* need more bytes */
		reply = data;

		if (node->owed_len == 0)
		{
			/* Nothing was owed: the stream is out of step. */
			freeReplyObject(reply);
			node_fail(i, call, outcome, "unexpected reply");
			return;
		}
		owed_pop(node, &entry);
		node->progress_ms = redlock_clock_ms();

		if (entry.call_id == 0)
		{
			/* Handshake: only an error matters, and it ends this connection. */
			bool		failed = (reply->type == REDIS_REPLY_ERROR);

			if (failed)
				snprintf(why, sizeof(why), "%.*s", (int) reply->len, reply->str);
			freeReplyObject(reply);
			if (failed)
			{
				node_fail(i, call, outcome, why);
				return;
			}
			continue;
		}

		if (entry.script && !entry.eval && reply->type == REDIS_REPLY_ERROR &&
			strncmp(reply->str, "NOSCRIPT", 8) == 0)
		{
			/* The master's script cache is empty: send this very command whole. */
			bool		appended;

			freeReplyObject(reply);
			appended = node_append_command(node, entry.call_id, entry.script, true,
										   entry.argc, entry.argv, entry.argvlen);
			owed_free(&entry);
			if (!appended)
			{
				node_fail(i, call, outcome, "out of memory");
				return;
			}
			node_write(i, call, outcome);
			continue;
		}
		figures->replies++;

		if (entry.call_id != call_id || !call->active)
		{
			/* A reply an earlier call decided without: counted, then dropped. */
			figures->late_replies++;
			freeReplyObject(reply);
			owed_free(&entry);
			continue;
		}

		record_reply(reply, outcome);
		freeReplyObject(reply);
		owed_free(&entry);
		call->active = false;
		outcome->elapsed_ms = node->progress_ms - start_ms;
		figures->last_rtt_ms = outcome->elapsed_ms;
	}
}

/* Completes node i's non-blocking connect once its socket is writable. */
static void
node_finish_connect(int i, NodeCall *call, RedlockNodeOutcome *outcome)
{
	RedlockNode *node = &nodes[i];
	int			err = 0;
	socklen_t	len = sizeof(err);

	if (getsockopt(node->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err != 0)
	{
		char		why[REDLOCK_NODE_ERROR_LEN];

		snprintf(why, sizeof(why), "could not connect: %s", strerror(err));
		node_fail(i, call, outcome, why);
		return;
	}
	node->connecting = false;
	redlock_stats_node(i)->connected = true;
	if (call->active)
	{
		call->deadline_ms = redlock_clock_ms() + redlock_timeout_ms;
		call->polled_after_deadline = false;
	}
}

/* The socket events node waits for now. */
static uint32
node_wanted_events(const RedlockNode *node)
{
	return (node->connecting || node->writing) ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
}

/*
 * Makes the backend's wait set cover the latch, postmaster death and every open
 * socket with the events each node waits for now: rebuilt when a socket opened or
 * closed, otherwise only the masks that changed are modified.
 */
static void
wait_set_refresh(void)
{
	if (wait_set && !wait_set_stale)
	{
		for (int i = 0; i < node_count; i++)
		{
			RedlockNode *node = &nodes[i];
			uint32		wanted;

			if (node->ctx == NULL)
				continue;
			wanted = node_wanted_events(node);
			if (wanted != node->event_mask)
			{
				ModifyWaitEvent(wait_set, node->event_pos, wanted, NULL);
				node->event_mask = wanted;
			}
		}
		return;
	}

	if (wait_set)
		FreeWaitEventSet(wait_set);
	wait_set = NULL;
	wait_set = CreateWaitEventSet(TopMemoryContext, node_count + 2);
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_POSTMASTER_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < node_count; i++)
	{
		RedlockNode *node = &nodes[i];

		if (node->ctx == NULL)
			continue;
		node->event_mask = node_wanted_events(node);
		node->event_pos = AddWaitEventToSet(wait_set, node->event_mask, node->ctx->fd,
											NULL, node);
	}
	wait_set_stale = false;
}

/*
 * True when the call's outcome is decided (see RedlockCommand): need nodes accepted,
 * or enough refused that they cannot.
 */
static bool
call_decided(const RedlockCommand *command, const NodeCall *calls,
			 const RedlockNodeOutcome *outcomes, int n)
{
	int			accepted = 0,
				refused = 0,
				waiting = 0;

	for (int i = 0; i < n; i++)
	{
		if (calls[i].active)
			waiting++;
		else if (redlock_outcome_failed(&outcomes[i]))
			continue;
		else if (command->accept(&outcomes[i]))
			accepted++;
		else
			refused++;
	}
	if (waiting == 0 || command->need < 0)
		return true;
	if (command->need == 0)
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

/*
 * Waits until the call is decided, every node has answered or failed, or deadlines
 * pass.  In cleanup, interrupts are not serviced and postmaster death ends the wait.
 */
static void
wait_for_nodes(const RedlockCommand *command, uint64 call_id, NodeCall *calls,
			   bool cleanup, double start_ms, RedlockNodeOutcome *outcomes)
{
	int			n = node_count;
	WaitEvent	events[REDLOCK_MAX_NODES + 2];

	while (!call_decided(command, calls, outcomes, n))
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
			if (!calls[i].active)
				continue;
			if (calls[i].polled_after_deadline)
			{
				char		why[REDLOCK_NODE_ERROR_LEN];

				snprintf(why, sizeof(why), "timed out after %d ms", (int) (now - start_ms));
				outcomes[i].elapsed_ms = now - start_ms;
				node_fail(i, &calls[i], &outcomes[i], why);
				continue;
			}
			if (next_deadline < 0 || calls[i].deadline_ms < next_deadline)
				next_deadline = calls[i].deadline_ms;
		}
		if (next_deadline < 0)
			break;
		for (int i = 0; i < n; i++)
			if (calls[i].active && calls[i].deadline_ms <= now)
				calls[i].polled_after_deadline = true;

		wait_set_refresh();
		nevents = WaitEventSetWait(wait_set, (long) Max(ceil(next_deadline - now), 0), events,
								   lengthof(events), PG_WAIT_EXTENSION);

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
					if (calls[j].active)
						node_fail(j, &calls[j], &outcomes[j], "postmaster died");
				return;
			}
			if (node == NULL || node->ctx == NULL)
				continue;		/* closed earlier in this batch */

			i = node - nodes;
			if ((events[e].events & WL_SOCKET_WRITEABLE) && node->connecting)
				node_finish_connect(i, &calls[i], &outcomes[i]);
			if (node->ctx && node->writing && (events[e].events & WL_SOCKET_WRITEABLE))
				node_write(i, &calls[i], &outcomes[i]);
			if (node->ctx && (events[e].events & WL_SOCKET_READABLE))
				node_read(i, &calls[i], call_id, start_ms, &outcomes[i]);
		}
	}

	/* Whoever is still awaited was not needed for the outcome. */
	for (int i = 0; i < n; i++)
		if (calls[i].active)
			outcomes[i].kind = REDLOCK_REPLY_PENDING;
}

/*
 * redlock_nodes_run
 *		Sends command to every master at once and waits until its outcome is decided
 *		(spec §3 step 2).
 *
 * command: the command or script call, and when to stop waiting (need/accept).
 * cleanup: true on abort and exit paths: interrupts are not serviced and postmaster
 *		death ends the wait instead of the process.
 * outcomes: an array of redlock_node_count() entries, filled with each master's reply,
 *		failure, or REDLOCK_REPLY_PENDING when the call was decided without it.  A
 *		master gets at most connect_timeout (ms) to connect and then timeout (ms) to
 *		answer.
 *
 * Outside cleanup, raises whatever CHECK_FOR_INTERRUPTS raises (query cancel, 57014;
 * statement_timeout), and out-of-memory errors; the connections stay usable.
 */
void
redlock_nodes_run(const RedlockCommand *command, bool cleanup, RedlockNodeOutcome *outcomes)
{
	NodeCall	calls[REDLOCK_MAX_NODES];
	double		start_ms = redlock_clock_ms();
	uint64		call_id = ++call_counter;

	for (int k = 0; k < script_count; k++)
		script_hash(scripts[k]);

	for (int i = 0; i < node_count; i++)
	{
		RedlockNode *node = &nodes[i];
		NodeCall   *call = &calls[i];
		char		why[REDLOCK_NODE_ERROR_LEN];

		memset(call, 0, sizeof(*call));
		memset(&outcomes[i], 0, sizeof(outcomes[i]));

		/*
		 * Read what earlier calls left owed (this also notices a connection the
		 * server closed); one that still owes replies and has gone quiet is hung.
		 */
		if (node->ctx && node->owed_len > 0 && !node->connecting)
			node_read(i, call, call_id, start_ms, &outcomes[i]);
		if (node->ctx && node->owed_len > 0 &&
			start_ms - node->progress_ms >
			(node->connecting ? redlock_connect_timeout_ms : redlock_timeout_ms))
		{
			snprintf(why, sizeof(why), "no reply for %d ms: connection closed",
					 (int) (start_ms - node->progress_ms));
			redlock_stats_node_error(i, why);
			node_close(i);
		}

		call->active = true;
		if (node->ctx == NULL && !node_open(i, why, sizeof(why)))
		{
			node_fail(i, call, &outcomes[i], why);
			continue;
		}
		if (!node_append_command(node, call_id, command->script, false, command->argc,
								 command->argv, command->argvlen))
		{
			node_fail(i, call, &outcomes[i], "out of memory");
			continue;
		}
		/* A ready connection can take the request now, before we wait. */
		if (!node->connecting)
			node_write(i, call, &outcomes[i]);

		/*
		 * The deadline runs from when this node's request went out, so that a backend
		 * paused between two nodes does not give the later ones less time.
		 */
		call->deadline_ms = redlock_clock_ms() +
			(node->connecting ? redlock_connect_timeout_ms : redlock_timeout_ms);
	}

	wait_for_nodes(command, call_id, calls, cleanup, start_ms, outcomes);
}
