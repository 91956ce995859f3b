/*-------------------------------------------------------------------------
 *
 * node.c
 *	  Connections to the Redis masters: one non-blocking hiredis context per master
 *	  per backend, and "send these commands to all masters at once and wait until
 *	  their outcomes are decided" (spec §3 step 2: multiplexing, a timeout small next
 *	  to the TTL).
 *
 * This layer knows Redis, not locks.  The masters of one configuration (server list,
 * credentials, database) form a node set.  The set of the configuration in force is
 * "current"; a lock remembers the set it was taken on (it pins it), so that its
 * release or undo still reaches those masters after the configuration changed.  A
 * set nobody pins and that is no longer current is closed and freed.  A reload that
 * changes nothing finds the same configuration and keeps its set, connections and
 * figures.
 *
 * One master's connection (Conn, below) is opened and taken through its TCP connect,
 * TLS handshake (or, with redlock.tls on in a build without TLS, failure before
 * anything is sent) and AUTH and SELECT by one set of functions, the only code that
 * opens a socket to a master: the calls here use it, and so do connections apart from
 * any call (redlock_conn_*: the worker's subscriptions to release announcements).
 *
 * Connections open lazily and are reused.  The first connection of a configuration to
 * a master runs its handshake (AUTH, SELECT, SCRIPT LOAD) and only then gets the
 * call's commands: nothing that takes or touches a lock may run on a connection whose
 * AUTH or SELECT failed.  Once a handshake of that configuration succeeded there,
 * later connections (after a failure or a restart) pipeline the commands behind it, so
 * that a reconnect costs no round trip; a handshake that fails makes the next one wait
 * again.  A call decided while a handshake was under way leaves its commands queued on
 * that connection; they go out, in order, once the handshake is done.  So that the
 * first call still reaches every master, it waits for first connections to masters that
 * did not fail last time.  An
 * idle connection is checked before it is used, so that one the master closed
 * meanwhile (Redis "timeout", a restart, a NAT cutting idle TCP) is re-opened instead
 * of failing the call: one epoll_wait without waiting looks at every idle socket, and
 * only one with something to read (or every one, when that look cannot be had) is
 * peeked, a non-blocking recv each.
 *
 * A call stops waiting as soon as its outcome is decided (RedlockCommand.need), so a
 * slow or hung master does not slow down an acquire that a majority already granted.
 * The replies it did not wait for stay owed on their connections.  Each connection
 * keeps, oldest first, what every owed reply is for (the handshake, or which call and
 * which script command with its arguments); Redis answers in order, so the next call
 * reads the old replies first, counts them and drops them.  A script command answered
 * NOSCRIPT is sent again whole with EVAL, whenever that reply is read (a release,
 * extension or undo is never lost to an empty script cache), unless a newer script
 * command on the same key and token is already on its way: re-sent behind it, an older
 * extension would set an older TTL over the newer one.  A connection that owes
 * replies and has made no progress for longer than redlock.timeout is taken for hung
 * and closed.  So is one that failed (I/O, protocol, timeout): it is re-opened on the
 * next call.
 *
 * One call may carry several commands (a cleanup releases every lock in one round);
 * every master gets them all at once and each command is decided on its own.
 *
 * The wait is one WaitEventSet over every socket of the set in use, the latch and
 * postmaster death, kept for the backend's life and rebuilt only when a socket opens
 * or closes or another set is used.  Query cancel and statement_timeout interrupt it
 * (an interrupted call just leaves replies owed), and pg_stat_activity shows wait
 * event type "Extension" meanwhile.
 *
 * hiredis allocates with malloc; nothing here hands it palloc'd memory, and replies
 * are freed before anything that may raise.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <poll.h>
#include <sys/socket.h>

#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include <hiredis/hiredis.h>

#include "compat.h"
#include "redlock.h"

/*
 * A reply a connection still owes.  call_id 0 is the handshake (AUTH, SELECT, SCRIPT
 * LOAD).  For a script command the arguments are kept (args, palloc'd in the set's
 * context), so that it can be sent again with EVAL if the master answers NOSCRIPT.
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
 * One connection to one master, as opened by conn_open: a configured master's in a
 * node set (RedlockNode), or one apart from any call (RedlockConn: the worker's
 * subscriptions).  When ctx is NULL it is closed and the other fields mean nothing.
 */
typedef struct Conn
{
	redisContext *ctx;
	bool		connecting;		/* connect (and TLS handshake) not yet done */
	RedlockTlsSession *tls;		/* TLS session once started (ctx owns it), or NULL */
	bool		tls_want_read;	/* the handshake waits to read, not to write */
	bool		writing;		/* output not all sent yet */
} Conn;

/* How far conn_advance took a connect. */
typedef enum ConnStep
{
	CONN_STEP_WAIT,				/* still connecting: wait for conn_wanted_events */
	CONN_STEP_READY,			/* connected (TLS handshake done): commands may go out */
	CONN_STEP_FAILED			/* failed: why says why; close it */
} ConnStep;

/*
 * A configured master.  When conn.ctx is NULL the connection is closed and the fields
 * from conn to event_mask mean nothing.
 */
typedef struct RedlockNode
{
	RedlockNodeAddr addr;
	Conn		conn;
	int			handshake_owed; /* handshake replies not yet read */
	bool		failed_recently;	/* its last call failed; no reply since */
	bool		down;			/* failed since its last reply */
	int			down_calls;		/* calls in a row that a quorum answered and it did
								 * not, with no reply from it between them */
	bool		reported_down;	/* a WARNING said so; no LOG said it answers again */
	bool		handshake_verified; /* a handshake of this set succeeded there */
	OwedReply  *queued;			/* commands to send once the handshake is done */
	int			nqueued;
	int			maxqueued;
	OwedReply  *owed;			/* ring of owed replies, oldest at owed_head */
	int			owed_head;
	int			owed_len;
	int			owed_cap;
	double		progress_ms;	/* last reply or connect step, or when it began
								 * to owe one */
	int			event_pos;		/* position in wait_set */
	uint32		event_mask;		/* socket events registered there */
	bool		looked_quiet;	/* idle, and idle_sockets_look() saw nothing to read */
	RedlockNodeFigures figures; /* what this backend saw of it (redlock_nodes()) */
} RedlockNode;

/* The masters of one configuration, and that configuration. */
struct RedlockNodeSet
{
	int			count;
	RedlockNode *nodes;
	char	   *username;		/* "" for none */
	char	   *password;		/* "" for none */
	int			database;
	int			quorum;			/* masters that must accept (redlock.quorum applied) */
	RedlockTlsConfig tls;
	RedlockTlsContext *tls_context; /* built by the first TLS connect; NULL before */
	int			pins;			/* locks taken on this set */
	MemoryContext context;		/* this struct, nodes, owed rings and arguments */
	RedlockNodeSet *next;		/* in all_sets */
};

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

static RedlockNodeSet *current_set = NULL;
static RedlockNodeSet *all_sets = NULL;
static uint64 current_generation = 0;
static uint64 call_counter = 0;

/* The scripts every connection loads in its handshake. */
#define REDLOCK_MAX_SCRIPTS 8
static RedlockScript *scripts[REDLOCK_MAX_SCRIPTS];
static int	script_count = 0;

/* The backend's wait set, for wait_set_for; rebuilt when stale or for another set. */
static WaitEventSet *wait_set = NULL;
static RedlockNodeSet *wait_set_for = NULL;
static bool wait_set_stale = true;

/*---- one connection to one master: the only code that opens a socket to one ----*/

/*
 * Opens conn to addr without blocking (TCP, or a unix socket when addr->port is 0),
 * counted as an external FD.  Continue with conn_advance once the socket is writable.
 * Returns false with why (whylen bytes) when that fails at once.
 */
static bool
conn_open(Conn *conn, const RedlockNodeAddr *addr, char *why, size_t whylen)
{
	memset(conn, 0, sizeof(*conn));
	if (!AcquireExternalFD())
	{
		snprintf(why, whylen, "too many open files in this backend");
		return false;
	}
	if (addr->port == 0)
		conn->ctx = redisConnectUnixNonBlock(addr->host);
	else
		conn->ctx = redisConnectNonBlock(addr->host, addr->port);
	if (conn->ctx == NULL || conn->ctx->err)
	{
		snprintf(why, whylen, "could not connect: %s",
				 conn->ctx ? conn->ctx->errstr : "out of memory");
		if (conn->ctx)
			redisFree(conn->ctx);
		conn->ctx = NULL;
		ReleaseExternalFD();
		return false;
	}
	conn->connecting = true;
	return true;
}

/* Closes conn, if open (with its TLS session). */
static void
conn_close(Conn *conn)
{
	if (conn->ctx == NULL)
		return;
	redisFree(conn->ctx);		/* and the TLS session */
	ReleaseExternalFD();
	memset(conn, 0, sizeof(*conn));
}

/*
 * The commands every connection of set starts with, before anything else goes out:
 * AUTH and SELECT as configured.  Fills argv[k] and argc[k] for each (dbnum, 16 bytes,
 * holds SELECT's argument) and returns how many there are (0 to 2).
 */
static int
conn_handshake(const RedlockNodeSet *set, char *dbnum, const char *argv[2][3], int argc[2])
{
	int			n = 0;

	if (set->password[0] != '\0')
	{
		argc[n] = 0;
		argv[n][argc[n]++] = "AUTH";
		if (set->username[0] != '\0')
			argv[n][argc[n]++] = set->username;
		argv[n][argc[n]++] = set->password;
		n++;
	}
	if (set->database != 0)
	{
		snprintf(dbnum, 16, "%d", set->database);
		argv[n][0] = "SELECT";
		argv[n][1] = dbnum;
		argc[n] = 2;
		n++;
	}
	return n;
}

/* True when set's connections to addr use TLS: redlock.tls, and not a unix socket (clear). */
static bool
conn_uses_tls(const RedlockNodeSet *set, const RedlockNodeAddr *addr)
{
	return set->tls.enabled && addr->port != 0;
}

/* The pending error of conn's non-blocking connect (SO_ERROR), 0 while none. */
static int
conn_connect_error(const Conn *conn)
{
	int			err = 0;
	socklen_t	len = sizeof(err);

	if (getsockopt(conn->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	return err;
}

/*
 * Takes conn's connect one step further, on the socket event it waited for: the TCP
 * connect once the socket is writable, then, when set uses TLS to addr, the TLS
 * handshake (the set's TLS context is built on its first use).  In a build without
 * TLS, or with a TLS file that cannot be loaded, a TCP connection fails here, before
 * anything is sent in clear.  Returns CONN_STEP_FAILED with why (whylen bytes).
 */
static ConnStep
conn_advance(Conn *conn, RedlockNodeSet *set, const RedlockNodeAddr *addr,
			 char *why, size_t whylen)
{
	if (conn->tls == NULL)
	{
		int			err = conn_connect_error(conn);

		if (err != 0)
		{
			snprintf(why, whylen, "could not connect: %s", strerror(err));
			return CONN_STEP_FAILED;
		}
		if (!conn_uses_tls(set, addr))
		{
			conn->connecting = false;
			return CONN_STEP_READY;
		}
		if (set->tls_context == NULL)
			set->tls_context = redlock_tls_context_new(&set->tls, why, whylen);
		if (set->tls_context == NULL)
			return CONN_STEP_FAILED;
		conn->tls = redlock_tls_session_start(set->tls_context, set->tls.verify, conn->ctx,
											  addr->host, why, whylen);
		if (conn->tls == NULL)
			return CONN_STEP_FAILED;
	}
	switch (redlock_tls_handshake(conn->tls, why, whylen))
	{
		case REDLOCK_TLS_DONE:
			conn->connecting = false;
			return CONN_STEP_READY;
		case REDLOCK_TLS_WANT_READ:
			conn->tls_want_read = true;
			return CONN_STEP_WAIT;
		case REDLOCK_TLS_WANT_WRITE:
			conn->tls_want_read = false;
			return CONN_STEP_WAIT;
		case REDLOCK_TLS_FAILED:
			break;
	}
	return CONN_STEP_FAILED;
}

/* The socket events conn waits for now (a node waits to read or to write, not both). */
static uint32
conn_wanted_events(const Conn *conn)
{
	if (conn->connecting && conn->tls)
		return conn->tls_want_read ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
	return (conn->connecting || conn->writing) ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
}

/*
 * True when an idle connection (nothing owed) can no longer be used: the master
 * closed it (EOF), reset it, or sent something nobody asked for.
 */
static bool
conn_gone_while_idle(const Conn *conn)
{
	char		byte;
	ssize_t		r;

	if (conn->tls)
		return redlock_tls_gone_while_idle(conn->tls);
	r = recv(conn->ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
	if (r >= 0)
		return true;			/* EOF, or bytes out of step */
	return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

/* Reads what conn's socket holds into hiredis' buffer; false on an I/O error. */
static bool
conn_buffer_read(Conn *conn)
{
	if (conn->tls)
		redlock_tls_clear_errors();
	return redisBufferRead(conn->ctx) == REDIS_OK;
}

/*
 * Sends what conn has buffered, as far as the socket takes it; *done says whether all
 * went.  False on an I/O error.
 */
static bool
conn_buffer_write(Conn *conn, int *done)
{
	*done = 0;
	if (conn->tls)
		redlock_tls_clear_errors();
	if (redisBufferWrite(conn->ctx, done) != REDIS_OK)
		return false;
	conn->writing = !*done;
	return true;
}

/* What conn_get_reply found. */
typedef enum ConnReply
{
	CONN_REPLY_OK,				/* a reply, or NULL when more bytes are needed */
	CONN_REPLY_IO_ERROR,		/* reading failed: conn_io_reason says why */
	CONN_REPLY_PROTOCOL_ERROR	/* the stream is not Redis' protocol: ctx->errstr */
} ConnReply;

/*
 * The next complete reply on conn into *reply (NULL when more bytes are needed),
 * reading on while TLS holds decrypted bytes that the socket will not signal.
 */
static ConnReply
conn_get_reply(Conn *conn, void **reply)
{
	for (;;)
	{
		*reply = NULL;
		if (redisGetReply(conn->ctx, reply) != REDIS_OK)
			return CONN_REPLY_PROTOCOL_ERROR;
		if (*reply != NULL || conn->tls == NULL || !redlock_tls_pending(conn->tls))
			return CONN_REPLY_OK;
		if (!conn_buffer_read(conn))
			return CONN_REPLY_IO_ERROR;
	}
}

/*
 * After a protocol error on conn: hiredis' text (e.g. 'Protocol error, got "H" as reply
 * type byte') and what it most likely means.
 */
static void
conn_protocol_reason(const Conn *conn, char *reason, size_t reasonlen)
{
	snprintf(reason, reasonlen,
			 "%s: not the Redis protocol (is a Redis master listening on this port%s?)",
			 conn->ctx->errstr, conn->tls ? "" : ", without TLS");
}

/* After a failed read or write on conn: OpenSSL's reason when it has one, else hiredis'. */
static void
conn_io_reason(const Conn *conn, char *reason, size_t reasonlen)
{
	if (conn->tls == NULL || !redlock_tls_io_error(reason, reasonlen))
		strlcpy(reason, conn->ctx->errstr[0] ? conn->ctx->errstr : "connection closed",
				reasonlen);
}

/* Fills entry with a command and a copy of its arguments (in set's context). */
static void
entry_fill(RedlockNodeSet *set, OwedReply *entry, uint64 call_id, const RedlockScript *script,
		   bool eval, int argc, const char *const *argv, const size_t *argvlen)
{
	size_t		total = 0;
	char	   *p;

	memset(entry, 0, sizeof(*entry));
	entry->call_id = call_id;
	entry->script = script;
	entry->eval = eval;
	for (int k = 0; k < argc; k++)
		total += argvlen[k] + 1;
	entry->args = p = MemoryContextAlloc(set->context, Max(total, 1));
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

/*
 * Logs, at the tail of node's ring, a reply that a command about to be appended will
 * owe.  Done before the append, since it may raise (out of memory) and hiredis must
 * never hold a command whose reply nobody expects.
 */
static OwedReply *
owed_push(RedlockNodeSet *set, RedlockNode *node, uint64 call_id,
		  const RedlockScript *script, bool eval,
		  int argc, const char *const *argv, const size_t *argvlen)
{
	OwedReply  *entry;

	if (node->owed_len == node->owed_cap)
	{
		int			newcap = Max(8, node->owed_cap * 2);
		OwedReply  *ring = MemoryContextAlloc(set->context, newcap * sizeof(OwedReply));

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
	if (script)
		entry_fill(set, entry, call_id, script, eval, argc, argv, argvlen);
	else
	{
		memset(entry, 0, sizeof(*entry));
		entry->call_id = call_id;
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

/* Most release commands kept for a master's next connection. */
#define REDLOCK_MAX_REDELIVER 1024

/* Appends entry (taking over its arguments) to node's queue for the next handshake. */
static void
queued_push(RedlockNodeSet *set, RedlockNode *node, const OwedReply *entry)
{
	if (node->nqueued == node->maxqueued)
	{
		int			newmax = Max(4, node->maxqueued * 2);

		node->queued = node->queued
			? repalloc(node->queued, newmax * sizeof(OwedReply))
			: MemoryContextAlloc(set->context, newmax * sizeof(OwedReply));
		node->maxqueued = newmax;
	}
	node->queued[node->nqueued++] = *entry;
}

/*
 * Closes node's connection, if any, forgetting what it owed, but for the releases it
 * may not have delivered, which wait for the next connection.
 */
static void
node_close(RedlockNodeSet *set, RedlockNode *node)
{
	if (node->conn.ctx == NULL)
		return;
	conn_close(&node->conn);
	node->handshake_owed = 0;

	/*
	 * Releases the master may not have received go out again on its next connection
	 * (an undo lost with a hung connection would leave a key with an old token until
	 * its TTL); everything else is forgotten.  At most REDLOCK_MAX_REDELIVER are kept.
	 */
	{
		int			kept = 0;

		for (int k = 0; k < node->nqueued; k++)
		{
			if (node->queued[k].script && node->queued[k].script->redeliver &&
				kept < REDLOCK_MAX_REDELIVER)
				node->queued[kept++] = node->queued[k];
			else
				owed_free(&node->queued[k]);
		}
		node->nqueued = kept;
		while (node->owed_len > 0)
		{
			OwedReply	entry;

			owed_pop(node, &entry);
			if (entry.script && entry.script->redeliver && node->nqueued < REDLOCK_MAX_REDELIVER)
				queued_push(set, node, &entry);
			else
				owed_free(&entry);
		}
	}
	if (set == wait_set_for)
		wait_set_stale = true;
	node->figures.connected = false;
}

/* Records error as node's last one. */
static void
node_note_error(RedlockNode *node, const char *error)
{
	node->down = true;
	node->figures.errors++;
	strlcpy(node->figures.last_error, error, sizeof(node->figures.last_error));
	node->figures.last_error_at = GetCurrentTimestamp();
}

/*
 * Says once per change of a master's state that it stopped or resumed answering, while
 * a quorum of set still answers: then nothing else shows a dead master (the calls
 * succeed), and without a quorum the caller's 08006 names every failed master.  A
 * WARNING when it stops (the session and the server log), a LOG when it answers again.
 * A master counts as stopped once it failed two such calls in a row, with no reply
 * from it between them (a blip that ended is not counted on): the first call
 * after a master came back can still fail it for what an earlier call left (a connect
 * begun while it was down, replies owed from before a freeze), and the next call reads
 * its answer.  Per backend, as the state it reads (redlock_nodes()).
 */
static void
set_report_changes(RedlockNodeSet *set)
{
	int			answering = 0;
	char		name[REDLOCK_NODE_NAME_LEN];

	if (in_error_recursion_trouble())
		return;
	for (int i = 0; i < set->count; i++)
		if (!set->nodes[i].down)
			answering++;
	if (answering < set->quorum)
		return;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		node->down_calls = node->down ? node->down_calls + 1 : 0;
		if (node->reported_down ? node->down : node->down_calls < 2)
			continue;
		node->reported_down = node->down;
		redlock_node_addr_name(&node->addr, name, sizeof(name));
		if (node->down)
			ereport(WARNING,
					(errmsg("Redis master \"%s\" is not answering", name),
					 errdetail_internal("%s", node->figures.last_error),
					 errhint("Locks are still taken while %d of the %d masters answer; "
							 "redlock_nodes() shows each master's state.",
							 set->quorum, set->count)));
		else
			ereport(LOG,
					(errmsg("Redis master \"%s\" answers again", name)));
	}
}

/* Closes every connection of set and frees it. */
static void
set_free(RedlockNodeSet *set)
{
	RedlockNodeSet **link;

	for (int i = 0; i < set->count; i++)
		node_close(set, &set->nodes[i]);
	for (link = &all_sets; *link; link = &(*link)->next)
	{
		if (*link == set)
		{
			*link = set->next;
			break;
		}
	}
	if (wait_set_for == set)
	{
		wait_set_for = NULL;
		wait_set_stale = true;
	}
	redlock_tls_context_free(set->tls_context);
	MemoryContextDelete(set->context);
}

/* Frees set when no lock pins it and it is no longer the configuration in force. */
static void
set_free_if_unused(RedlockNodeSet *set)
{
	if (set != current_set && set->pins == 0)
		set_free(set);
}

/* A configuration: what a node set is built for. */
typedef struct SetConfig
{
	const RedlockServerList *list;
	const char *username;
	const char *password;
	int			database;
	int			quorum;			/* redlock.quorum: 0 for a majority */
	const RedlockTlsConfig *tls;
} SetConfig;

/* True when set was built for config. */
static bool
set_matches(const RedlockNodeSet *set, const SetConfig *config)
{
	int			count = config->list ? config->list->count : 0;

	if (set->count != count || set->database != config->database ||
		set->quorum != redlock_quorum_for(config->quorum, count) ||
		strcmp(set->username, config->username) != 0 ||
		strcmp(set->password, config->password) != 0 ||
		!redlock_tls_config_equal(&set->tls, config->tls))
		return false;
	for (int i = 0; i < count; i++)
		if (set->nodes[i].addr.port != config->list->nodes[i].port ||
			strcmp(set->nodes[i].addr.host, config->list->nodes[i].host) != 0)
			return false;
	return true;
}

/* The existing set of config, or a new, unconnected one. */
static RedlockNodeSet *
set_find_or_build(const SetConfig *config)
{
	MemoryContext context;
	RedlockNodeSet *set;

	for (set = all_sets; set; set = set->next)
		if (set_matches(set, config))
			return set;

	context = AllocSetContextCreate(TopMemoryContext, "redlock node set",
									ALLOCSET_SMALL_SIZES);
	set = MemoryContextAllocZero(context, sizeof(RedlockNodeSet));
	set->context = context;
	set->count = config->list ? config->list->count : 0;
	set->nodes = MemoryContextAllocZero(context, Max(set->count, 1) * sizeof(RedlockNode));
	set->username = MemoryContextStrdup(context, config->username);
	set->password = MemoryContextStrdup(context, config->password);
	set->database = config->database;
	set->quorum = redlock_quorum_for(config->quorum, set->count);
	set->tls = *config->tls;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		node->addr = config->list->nodes[i];
		redlock_node_addr_name(&node->addr, node->figures.name, sizeof(node->figures.name));
		node->figures.last_rtt_ms = -1;
	}
	set->next = all_sets;
	all_sets = set;
	return set;
}

/*
 * redlock_nodeset_current
 *		Returns the node set of the configuration in force (redlock.servers, username,
 *		password, database, quorum, TLS), building it when the configuration changed
 *		and no set of it exists yet.  The previous current set is freed unless a lock
 *		pins it.  Raises only out-of-memory errors.
 */
RedlockNodeSet *
redlock_nodeset_current(void)
{
	RedlockNodeSet *previous = current_set;
	SetConfig	config;
	RedlockTlsConfig tls;

	if (current_set && current_generation == redlock_connection_generation)
		return current_set;

	config.list = redlock_server_list;
	config.username = redlock_username ? redlock_username : "";
	config.password = redlock_effective_password();
	config.database = redlock_database;
	config.quorum = redlock_quorum;
	redlock_tls_config(&tls);
	config.tls = &tls;
	current_set = set_find_or_build(&config);
	current_generation = redlock_connection_generation;
	if (previous && previous != current_set)
		set_free_if_unused(previous);
	return current_set;
}

/*
 * redlock_nodeset_for
 *		Returns a node set for an explicit configuration (the background worker renews
 *		locks under the configuration each was taken with), pinned: the caller unpins it
 *		when done.  list: the masters (may be NULL: none); username, password: "" for
 *		none; database: the Redis database number; quorum: the redlock.quorum setting
 *		(0 for a majority); tls: the TLS settings.  Raises only out-of-memory errors.
 */
RedlockNodeSet *
redlock_nodeset_for(const RedlockServerList *list, const char *username,
					const char *password, int database, int quorum,
					const RedlockTlsConfig *tls)
{
	SetConfig	config = {list, username, password, database, quorum, tls};
	RedlockNodeSet *set = set_find_or_build(&config);

	redlock_nodeset_pin(set);
	return set;
}

/*
 * redlock_nodeset_pin, redlock_nodeset_unpin
 *		A lock taken on set pins it, so that it stays (with its connections) until the
 *		lock is released, even after the configuration changed.  Unpinning the last pin
 *		of a set that is no longer current frees it.  Raise nothing.
 */
void
redlock_nodeset_pin(RedlockNodeSet *set)
{
	set->pins++;
}

void
redlock_nodeset_unpin(RedlockNodeSet *set)
{
	Assert(set->pins > 0);
	set->pins--;
	set_free_if_unused(set);
}

/*
 * redlock_nodeset_size
 *		Returns the number of masters in set.
 */
int
redlock_nodeset_size(const RedlockNodeSet *set)
{
	return set->count;
}

/*
 * redlock_nodeset_quorum
 *		Returns how many masters of set must accept for a lock to be held: a majority,
 *		or what redlock.quorum said when the set was built.  Raises nothing.
 */
int
redlock_nodeset_quorum(const RedlockNodeSet *set)
{
	return set->quorum;
}

/*
 * redlock_node_name
 *		Returns the "host:port" (or socket path) of node, 0 <= node < set's size.
 */
const char *
redlock_node_name(const RedlockNodeSet *set, int node)
{
	Assert(node >= 0 && node < set->count);
	return set->nodes[node].figures.name;
}

/*
 * redlock_nodes_figures
 *		Returns a palloc'd copy of what this backend saw of each master of the current
 *		set (*figures), and how many there are.  Raises only out-of-memory errors.
 */
int
redlock_nodes_figures(RedlockNodeFigures **figures)
{
	RedlockNodeSet *set = redlock_nodeset_current();

	*figures = palloc(Max(set->count, 1) * sizeof(RedlockNodeFigures));
	for (int i = 0; i < set->count; i++)
		(*figures)[i] = set->nodes[i].figures;
	return set->count;
}

/*
 * redlock_nodes_disconnect
 *		Closes every connection of every set, and forgets their TLS contexts so that
 *		the next connections read the TLS files again.  Raises nothing.
 */
void
redlock_nodes_disconnect(void)
{
	for (RedlockNodeSet *set = all_sets; set; set = set->next)
	{
		for (int i = 0; i < set->count; i++)
			node_close(set, &set->nodes[i]);
		redlock_tls_context_free(set->tls_context);
		set->tls_context = NULL;
	}
}

/*---- a connection apart from any call: the worker's subscriptions ----*/

/* One master's connection of a node set, outside redlock_nodes_run. */
struct RedlockConn
{
	RedlockNodeSet *set;		/* pinned while the connection exists */
	int			node;			/* which master of set */
	Conn		conn;
};

/*
 * Closes conn's socket after a failure (why), counting it in its master's figures.
 */
static void
redlock_conn_failed(RedlockConn *conn, const char *why)
{
	node_note_error(&conn->set->nodes[conn->node], why);
	conn_close(&conn->conn);
}

/*
 * redlock_conn_open
 *		Opens a connection of its own to master node (0 <= node < set's size) without
 *		blocking, the way every connection of set is opened: TLS when the set uses it
 *		(and, in a build without TLS, failure before anything is sent), then AUTH and
 *		SELECT as configured, queued to go out once the connect (and TLS handshake) is
 *		done.  Their replies (+OK, or an error) come first on the connection.  TCP
 *		keep-alives are on (such a connection is long-lived and mostly idle).  set
 *		stays pinned until redlock_conn_close.  Drive it with redlock_conn_service.
 *
 * Returns the connection, or NULL with why (whylen bytes) when it failed at once.
 * Raises only out-of-memory errors (53200).
 */
RedlockConn *
redlock_conn_open(RedlockNodeSet *set, int node, char *why, size_t whylen)
{
	RedlockConn *conn;
	char		dbnum[16];
	const char *argv[2][3];
	int			argc[2];
	int			n;

	Assert(node >= 0 && node < set->count);
	conn = MemoryContextAllocZero(TopMemoryContext, sizeof(RedlockConn));
	conn->set = set;
	conn->node = node;
	redlock_nodeset_pin(set);
	if (!conn_open(&conn->conn, &set->nodes[node].addr, why, whylen))
	{
		node_note_error(&set->nodes[node], why);
		redlock_conn_close(conn);
		return NULL;
	}
	if (set->nodes[node].addr.port != 0)
		(void) redisEnableKeepAlive(conn->conn.ctx);	/* long-lived, mostly idle */
	n = conn_handshake(set, dbnum, argv, argc);
	for (int k = 0; k < n; k++)
		if (!redlock_conn_append(conn, argc[k], argv[k]))
		{
			snprintf(why, whylen, "out of memory");
			redlock_conn_close(conn);
			return NULL;
		}
	return conn;
}

/*
 * redlock_conn_close
 *		Closes conn (NULL is allowed), frees it and unpins its set.  Raises nothing.
 */
void
redlock_conn_close(RedlockConn *conn)
{
	if (conn == NULL)
		return;
	conn_close(&conn->conn);
	redlock_nodeset_unpin(conn->set);
	pfree(conn);
}

/*
 * redlock_conn_append
 *		Queues a command (argc arguments, NUL-terminated strings) on conn, to go out as
 *		soon as the connection is ready and the socket takes it.  Returns false when
 *		hiredis is out of memory.  Raises nothing.
 */
bool
redlock_conn_append(RedlockConn *conn, int argc, const char **argv)
{
	if (redisAppendCommandArgv(conn->conn.ctx, argc, argv, NULL) != REDIS_OK)
		return false;
	conn->conn.writing = true;
	return true;
}

/*
 * redlock_conn_socket, redlock_conn_events
 *		conn's socket, and the socket events (WL_SOCKET_*) to wait for on it now:
 *		those of its connect and TLS handshake while connecting, then readable, and
 *		writable while output waits.  Raise nothing.
 */
pgsocket
redlock_conn_socket(const RedlockConn *conn)
{
	return conn->conn.ctx->fd;
}

uint32
redlock_conn_events(const RedlockConn *conn)
{
	if (conn->conn.connecting)
		return conn_wanted_events(&conn->conn);
	return WL_SOCKET_READABLE | (conn->conn.writing ? WL_SOCKET_WRITEABLE : 0);
}

/*
 * redlock_conn_ready
 *		True once conn's connect (and TLS handshake) is done.  Raises nothing.
 */
bool
redlock_conn_ready(const RedlockConn *conn)
{
	return !conn->conn.connecting;
}

/*
 * redlock_conn_service
 *		Acts on socket events (WL_SOCKET_*) that a wait reported for conn: takes its
 *		connect and TLS handshake further, then sends what is queued as far as the
 *		socket takes it, and reads what arrived into the connection's buffer (collect
 *		it with redlock_conn_next_reply).
 *
 * Returns false when the connection failed, with why (whylen bytes: a refused
 * certificate, a build without TLS, an I/O error, the master closing it); then only
 * redlock_conn_close may be called.  Raises nothing.
 */
bool
redlock_conn_service(RedlockConn *conn, uint32 events, char *why, size_t whylen)
{
	Conn	   *c = &conn->conn;
	int			done;

	if (c->connecting)
	{
		switch (conn_advance(c, conn->set, &conn->set->nodes[conn->node].addr, why, whylen))
		{
			case CONN_STEP_WAIT:
				return true;
			case CONN_STEP_FAILED:
				redlock_conn_failed(conn, why);
				return false;
			case CONN_STEP_READY:
				events |= WL_SOCKET_WRITEABLE;	/* the queued handshake goes out now */
				break;
		}
	}
	if ((events & WL_SOCKET_WRITEABLE) && c->writing && !conn_buffer_write(c, &done))
	{
		conn_io_reason(c, why, whylen);
		redlock_conn_failed(conn, why);
		return false;
	}
	if ((events & WL_SOCKET_READABLE) && !conn_buffer_read(c))
	{
		conn_io_reason(c, why, whylen);
		redlock_conn_failed(conn, why);
		return false;
	}
	return true;
}

/*
 * redlock_conn_next_reply
 *		The next complete reply that arrived on conn (a hiredis redisReply; free it
 *		with freeReplyObject) into *reply, or NULL there when more bytes are needed.
 *		Returns false when the connection failed, with why (whylen bytes); then only
 *		redlock_conn_close may be called.  Raises nothing.
 */
bool
redlock_conn_next_reply(RedlockConn *conn, void **reply, char *why, size_t whylen)
{
	switch (conn_get_reply(&conn->conn, reply))
	{
		case CONN_REPLY_OK:
			return true;
		case CONN_REPLY_IO_ERROR:
			conn_io_reason(&conn->conn, why, whylen);
			break;
		case CONN_REPLY_PROTOCOL_ERROR:
			conn_protocol_reason(&conn->conn, why, whylen);
			break;
	}
	redlock_conn_failed(conn, why);
	return false;
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

/*---- one call ----*/

/* The outcome slot of command c at node i. */
#define CALL_OUTCOME(cs, c, i)	(&(cs)->outcomes[(c) * (cs)->set->count + (i)])
#define CALL_AWAITING(cs, c, i)	((cs)->awaiting[(c) * (cs)->set->count + (i)])

/*
 * Records a failure of node i (why) for every command of the call still waiting on it,
 * and closes its connection.
 */
static void
node_fail(CallState *cs, int i, const char *why)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];

	for (int c = 0; c < cs->ncommands; c++)
	{
		if (!CALL_AWAITING(cs, c, i) && !call->deferred)
			continue;
		CALL_OUTCOME(cs, c, i)->kind = REDLOCK_REPLY_NONE;
		strlcpy(CALL_OUTCOME(cs, c, i)->error, why, sizeof(CALL_OUTCOME(cs, c, i)->error));
		CALL_OUTCOME(cs, c, i)->elapsed_ms = redlock_clock_ms() - cs->start_ms;
		CALL_AWAITING(cs, c, i) = false;
	}
	call->awaited = 0;
	call->deferred = false;
	call->must_answer = false;
	node->failed_recently = true;
	node_note_error(node, why);
	node_close(cs->set, node);
}

/*
 * Appends one command to node's output buffer, logging the reply it will owe (for
 * call_id; for a script command, with its arguments).  False when hiredis fails.
 */
static bool
node_append(RedlockNodeSet *set, RedlockNode *node, uint64 call_id,
			const RedlockScript *script, bool eval,
			int argc, const char **argv, const size_t *argvlen,
			int script_argc, const char *const *script_argv, const size_t *script_argvlen)
{
	owed_push(set, node, call_id, script, eval, script_argc, script_argv, script_argvlen);
	if (redisAppendCommandArgv(node->conn.ctx, argc, argv, argvlen) != REDIS_OK)
	{
		owed_drop_newest(node);
		return false;
	}
	node->conn.writing = true;
	return true;
}

/*
 * Appends a command for call_id: argv as it is, or, with a script, EVALSHA (EVAL when
 * asked for or no SHA-1 is known) of the script with its keys first in argv.
 */
static bool
node_append_command(RedlockNodeSet *set, RedlockNode *node, uint64 call_id,
					const RedlockScript *script, bool eval,
					int argc, const char *const *argv, const size_t *argvlen)
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
		full[n] = script->nkeys == 2 ? "2" : "1";
		fulllen[n] = 1;
		n++;
	}
	for (int k = 0; k < argc; k++, n++)
	{
		full[n] = argv[k];
		fulllen[n] = argvlen[k];
	}
	if (!node_append(set, node, call_id, script, eval, n, full, fulllen, argc, argv, argvlen))
		return false;
	node->figures.requests++;
	return true;
}

/* Appends one handshake command (its reply is owed to call_id 0). */
static bool
node_append_handshake(RedlockNodeSet *set, RedlockNode *node, int argc, const char **argv)
{
	size_t		argvlen[3];

	for (int k = 0; k < argc; k++)
		argvlen[k] = strlen(argv[k]);
	if (!node_append(set, node, 0, NULL, false, argc, argv, argvlen, 0, NULL, NULL))
		return false;
	node->handshake_owed++;
	return true;
}

/*
 * Opens node i's connection without blocking and queues its handshake: AUTH and SELECT
 * as configured in the set (conn_handshake), and SCRIPT LOAD of every script.  Returns
 * false with why filled when that fails at once.
 */
static bool
node_open(RedlockNodeSet *set, int i, char *why, size_t whylen)
{
	RedlockNode *node = &set->nodes[i];
	char		dbnum[16];
	const char *argv[2][3];
	int			argc[2];
	int			n;

	if (!conn_open(&node->conn, &node->addr, why, whylen))
		return false;
	node->handshake_owed = 0;
	if (set == wait_set_for)
		wait_set_stale = true;

	n = conn_handshake(set, dbnum, argv, argc);
	for (int k = 0; k < n; k++)
		if (!node_append_handshake(set, node, argc[k], argv[k]))
			goto oom;
	for (int k = 0; k < script_count; k++)
	{
		const char *load[3] = {"SCRIPT", "LOAD", scripts[k]->body};

		if (!node_append_handshake(set, node, 3, load))
			goto oom;
	}
	return true;

oom:
	node_close(set, node);
	snprintf(why, whylen, "out of memory");
	return false;
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
	double		deadline_ms = redlock_clock_ms() + redlock_timeout_ms;

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
node_fail_io(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	char		why[REDLOCK_NODE_ERROR_LEN];
	char		reason[REDLOCK_NODE_ERROR_LEN];

	conn_io_reason(&node->conn, reason, sizeof(reason));

	/*
	 * A master that wants a client certificate closes a connection without one after
	 * the handshake, and its alert is often lost to the reset: say what it may be.
	 */
	if (node->conn.tls && node->handshake_owed > 0 && !node->handshake_verified &&
		strstr(reason, "certificate") == NULL)
		snprintf(why, sizeof(why), "%s, right after the TLS handshake: does the master require a client certificate (redlock.tls_cert_file)?",
				 reason);
	else
		strlcpy(why, reason, sizeof(why));
	node_fail(cs, i, why);
}

/* Sends what node i has buffered; fails the node on an I/O error. */
static void
node_write(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		was_writing = node->conn.writing;
	int			done;

	if (!conn_buffer_write(&node->conn, &done))
	{
		node_fail_io(cs, i);
		return;
	}
	if (done && was_writing)
		call_progressed(cs, i);
}

/*
 * Appends every command of the call to node i, now that its connection can take them,
 * and sends what it can.  The node's deadline runs from now.
 */
static void
node_send_call(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];

	call->deferred = false;
	for (int c = 0; c < cs->ncommands; c++)
	{
		const RedlockCommand *command = &cs->commands[c];

		if (!node_append_command(cs->set, node, cs->first_id + c, command->script, false,
								 command->argc, command->argv, command->argvlen))
		{
			node_fail(cs, i, "out of memory");
			return;
		}
		CALL_AWAITING(cs, c, i) = true;
		call->awaited++;
	}
	if (!node->conn.connecting)
		node_write(cs, i);
	call->deadline_ms = redlock_clock_ms() +
		(node->conn.connecting ? redlock_connect_timeout_ms : redlock_timeout_ms);
	call->polled_after_deadline = false;
}

/*
 * Sends, now that node i's handshake is done, the commands of earlier calls that were
 * decided while it was under way: they go out in their order, before this call's.
 */
static void
node_send_queued(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		appended = true;

	for (int k = 0; k < node->nqueued; k++)
	{
		OwedReply  *q = &node->queued[k];

		appended = appended &&
			node_append_command(cs->set, node, q->call_id, q->script, q->eval,
								q->argc, q->argv, q->argvlen);
		owed_free(q);
	}
	node->nqueued = 0;
	if (!appended)
		node_fail(cs, i, "out of memory");
	else if (!node->conn.connecting)
		node_write(cs, i);
}

/*
 * Keeps the commands of a call that was decided while node i's handshake was under
 * way, to be sent once it is done (so that every master still gets them, but none
 * runs on a connection whose AUTH or SELECT failed).
 */
static void
node_queue_call(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];

	for (int c = 0; c < cs->ncommands; c++)
	{
		const RedlockCommand *command = &cs->commands[c];
		OwedReply	entry;

		entry_fill(cs->set, &entry, cs->first_id + c, command->script, false,
				   command->argc, command->argv, command->argvlen);
		queued_push(cs->set, node, &entry);
	}
	cs->calls[i].deferred = false;
}

/*
 * True when node owes a reply to a later script command on the same key with the same
 * token as entry (just taken off the ring): that command will run after a re-send of
 * entry, so re-sending entry could undo its effect (an older TTL over a newer one).
 */
static bool
owed_newer_for_same_lock(const RedlockNode *node, const OwedReply *entry)
{
	for (int k = 0; k < node->owed_len; k++)
	{
		const OwedReply *later = &node->owed[(node->owed_head + k) % node->owed_cap];

		if (later->script && later->argc >= 2 && entry->argc >= 2 &&
			later->argvlen[0] == entry->argvlen[0] &&
			memcmp(later->argv[0], entry->argv[0], entry->argvlen[0]) == 0 &&
			later->argvlen[1] == entry->argvlen[1] &&
			memcmp(later->argv[1], entry->argv[1], entry->argvlen[1]) == 0)
			return true;
	}
	return false;
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
		case REDIS_REPLY_STRING:
			/* Only compared with other masters' values: keep a hash. */
			outcome->kind = REDLOCK_REPLY_STRING;
			outcome->integer = (long long)
				hash_bytes_extended((const unsigned char *) reply->str, (int) reply->len, 0);
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

/* The index of the call's command that entry is owed for, or -1 for another call's. */
static int
call_command_of(const CallState *cs, const OwedReply *entry)
{
	if (entry->call_id < cs->first_id || entry->call_id >= cs->first_id + cs->ncommands)
		return -1;
	return (int) (entry->call_id - cs->first_id);
}

/*
 * Reads what node i sent and consumes every complete reply, oldest first: handshake
 * replies (queued commands, then the call's, go out once the last one is read),
 * replies owed to earlier calls (counted and dropped), then this call's.  A script
 * command answered NOSCRIPT is sent again whole with EVAL unless a newer command for
 * the same lock follows it.
 */
static void
node_read(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];

	if (!conn_buffer_read(&node->conn))
	{
		node_fail_io(cs, i);
		return;
	}
	while (node->conn.ctx)
	{
		void	   *data = NULL;
		redisReply *reply;
		OwedReply	entry;
		int			c;
		char		why[REDLOCK_NODE_ERROR_LEN];

		switch (conn_get_reply(&node->conn, &data))
		{
			case CONN_REPLY_IO_ERROR:
				node_fail_io(cs, i);
				return;
			case CONN_REPLY_PROTOCOL_ERROR:
				conn_protocol_reason(&node->conn, why, sizeof(why));
				node_fail(cs, i, why);
				return;
			case CONN_REPLY_OK:
				break;
		}
		if (data == NULL)
			return;				/* more bytes needed */
		reply = data;

		if (node->owed_len == 0)
		{
			/* Nothing was owed: the stream is out of step. */
			freeReplyObject(reply);
			node_fail(cs, i, "unexpected reply");
			return;
		}
		owed_pop(node, &entry);
		node->progress_ms = redlock_clock_ms();
		call_progressed(cs, i);

		if (entry.call_id == 0)
		{
			/* Handshake: an error ends this connection before any command ran on it. */
			bool		failed = (reply->type == REDIS_REPLY_ERROR);

			if (failed)
				snprintf(why, sizeof(why), "handshake failed: %.*s",
						 (int) reply->len, reply->str);
			freeReplyObject(reply);
			if (failed)
			{
				node->handshake_verified = false;
				node_fail(cs, i, why);
				return;
			}
			if (--node->handshake_owed == 0)
			{
				node->handshake_verified = true;
				node_send_queued(cs, i);
				if (node->conn.ctx && cs->calls[i].deferred)
					node_send_call(cs, i);
			}
			continue;
		}

		c = call_command_of(cs, &entry);
		if (entry.script && !entry.eval && reply->type == REDIS_REPLY_ERROR &&
			strncmp(reply->str, "NOSCRIPT", 8) == 0 &&
			!owed_newer_for_same_lock(node, &entry))
		{
			/* The master's script cache is empty: send this very command whole. */
			bool		appended;

			freeReplyObject(reply);
			appended = node_append_command(cs->set, node, entry.call_id, entry.script, true,
										   entry.argc, entry.argv, entry.argvlen);
			owed_free(&entry);
			if (!appended)
			{
				node_fail(cs, i, "out of memory");
				return;
			}
			node_write(cs, i);
			continue;
		}
		node->figures.replies++;
		node->down = false;
		node->down_calls = 0;	/* a reply ends a row of failed calls */

		if (c < 0 || !CALL_AWAITING(cs, c, i))
		{
			/* A reply an earlier call decided without: counted, then dropped. */
			node->figures.late_replies++;
			freeReplyObject(reply);
			owed_free(&entry);
			continue;
		}

		record_reply(reply, CALL_OUTCOME(cs, c, i));
		freeReplyObject(reply);
		owed_free(&entry);
		CALL_AWAITING(cs, c, i) = false;
		if (--cs->calls[i].awaited == 0)
			cs->calls[i].must_answer = false;
		node->failed_recently = false;
		CALL_OUTCOME(cs, c, i)->elapsed_ms = node->progress_ms - cs->start_ms;
		node->figures.last_rtt_ms = CALL_OUTCOME(cs, c, i)->elapsed_ms;
	}
}

/* The connection to node i is ready: commands may go out once its handshake is sent. */
static void
node_connected(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];

	node->figures.connected = true;
	node->progress_ms = redlock_clock_ms();	/* the handshake is owed from now */
	if (call_waits_on(call))
	{
		call->deadline_ms = redlock_clock_ms() + redlock_timeout_ms;
		call->polled_after_deadline = false;
	}
	/* Out at once: a call decided meanwhile would leave it unsent, then judged stale. */
	node_write(cs, i);
}

/* True when node's connections use TLS: redlock.tls, and not a unix socket (clear). */
static bool
node_uses_tls(const RedlockNodeSet *set, const RedlockNode *node)
{
	return conn_uses_tls(set, &node->addr);
}

/*
 * Takes node i's connect further on the event it waited for (conn_advance): the TCP
 * connect, then, with TLS, the handshake; a failure (a refused certificate, say)
 * fails the node with the reason.
 */
static void
node_finish_connect(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	bool		tls_started = node->conn.tls != NULL;
	char		why[REDLOCK_NODE_ERROR_LEN];

	switch (conn_advance(&node->conn, cs->set, &node->addr, why, sizeof(why)))
	{
		case CONN_STEP_READY:
			node_connected(cs, i);
			break;
		case CONN_STEP_WAIT:
			if (!tls_started)
				node->progress_ms = redlock_clock_ms();	/* the TCP connect is done */
			break;
		case CONN_STEP_FAILED:
			node_fail(cs, i, why);
			break;
	}
}

/* The socket events node waits for now. */
static uint32
node_wanted_events(const RedlockNode *node)
{
	return conn_wanted_events(&node->conn);
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
node_continue_connect(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	struct pollfd pfd;

	pfd.fd = node->conn.ctx->fd;
	pfd.events = node_wanted_events(node) == WL_SOCKET_READABLE ? POLLIN : POLLOUT;
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) > 0)
		node_finish_connect(cs, i);
}

/*
 * Makes the backend's wait set cover the latch, postmaster death and every open
 * socket of set with the events each node waits for now: rebuilt when a socket opened
 * or closed or another set is in use, otherwise only the masks that changed are
 * modified.
 */
static void
wait_set_refresh(RedlockNodeSet *set)
{
	if (wait_set && !wait_set_stale && wait_set_for == set)
	{
		for (int i = 0; i < set->count; i++)
		{
			RedlockNode *node = &set->nodes[i];
			uint32		wanted;

			if (node->conn.ctx == NULL)
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
	wait_set_for = NULL;
	wait_set = redlock_create_wait_event_set(REDLOCK_MAX_NODES + 2);
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_POSTMASTER_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		if (node->conn.ctx == NULL)
			continue;
		node->event_mask = node_wanted_events(node);
		node->event_pos = AddWaitEventToSet(wait_set, node->event_mask, node->conn.ctx->fd,
											NULL, node);
	}
	wait_set_for = set;
	wait_set_stale = false;
}

/*
 * True when command c of the call is decided (see RedlockCommand): need nodes
 * accepted, or enough refused that they cannot.
 */
static bool
command_decided(const CallState *cs, int c)
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
		return false;
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
		if (!command_decided(cs, c))
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
wait_for_nodes(CallState *cs, bool cleanup)
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
			if (cleanup)
				call->deadline_ms = Min(call->deadline_ms, cs->start_ms + CLEANUP_MAX_MS);
			if (call->polled_after_deadline)
			{
				char		why[REDLOCK_NODE_ERROR_LEN];

				snprintf(why, sizeof(why), "timed out after %d ms%s", (int) (now - cs->start_ms),
						 set->nodes[i].conn.connecting && set->nodes[i].conn.tls ?
						 " in the TLS handshake: does the master serve TLS on this port?" : "");
				node_fail(cs, i, why);
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

		wait_set_refresh(set);
		nevents = WaitEventSetWait(wait_set, (long) Max(ceil(next_deadline - now), 0), events,
								   lengthof(events),
								   redlock_wait_event(REDLOCK_WAIT_MASTERS));

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
						node_fail(cs, j, "postmaster died");
				return;
			}
			if (node == NULL || node->conn.ctx == NULL)
				continue;		/* closed earlier in this batch */

			i = node - set->nodes;
			if (node->conn.connecting)
				node_finish_connect(cs, i);
			if (node->conn.ctx == NULL || node->conn.connecting)
				continue;		/* the event was the TLS handshake's */
			if (node->conn.writing && (events[e].events & WL_SOCKET_WRITEABLE))
				node_write(cs, i);
			if (node->conn.ctx && (events[e].events & WL_SOCKET_READABLE))
				node_read(cs, i);
		}
	}

	/*
	 * Handshakes that finished meanwhile (their replies are often in already): send
	 * their commands now rather than at the next call.  Nothing waits for them.
	 */
	for (int i = 0; i < n; i++)
		if (cs->calls[i].deferred && set->nodes[i].conn.ctx && !set->nodes[i].conn.connecting)
			node_read(cs, i);

	/* Whoever is still awaited was not needed for the outcome. */
	for (int c = 0; c < cs->ncommands; c++)
		for (int i = 0; i < n; i++)
			if (CALL_AWAITING(cs, c, i) || cs->calls[i].deferred)
				CALL_OUTCOME(cs, c, i)->kind = REDLOCK_REPLY_PENDING;
	for (int i = 0; i < n; i++)
		if (cs->calls[i].deferred)
			node_queue_call(cs, i);
}

/*
 * Gets node i ready for a call: reads what earlier calls left owed, takes further a
 * connect they left under way, closes a connection that went quiet while owing
 * replies or connecting (hung; a failed connect) or that the master closed while it
 * was idle (peeked unless idle_sockets_look saw its socket quiet), and opens one if
 * needed.  Then sends the call's commands, or
 * holds them back until the handshake of a new connection is done.
 */
static void
node_start_call(CallState *cs, int i)
{
	RedlockNode *node = &cs->set->nodes[i];
	NodeCall   *call = &cs->calls[i];
	char		why[REDLOCK_NODE_ERROR_LEN];

	/* As the last call left it: an old connection found dead below does not count. */
	bool		failed_last_time = node->failed_recently;

	if (node->conn.ctx && node->owed_len > 0 && !node->conn.connecting)
		node_read(cs, i);
	if (node->conn.ctx && node->conn.connecting)
		node_continue_connect(cs, i);
	if (node->conn.ctx && node->owed_len > 0 &&
		cs->start_ms - node->progress_ms >
		(node->conn.connecting ? redlock_connect_timeout_ms : redlock_timeout_ms))
	{
		snprintf(why, sizeof(why), "no reply for %d ms: connection closed",
				 (int) (cs->start_ms - node->progress_ms));
		node_note_error(node, why);
		node_close(cs->set, node);
	}
	if (node->conn.ctx && node->owed_len == 0 && !node->conn.connecting &&
		!node->looked_quiet && conn_gone_while_idle(&node->conn))
		node_close(cs->set, node);

	if (node->conn.ctx == NULL)
	{
		if (!node_open(cs->set, i, why, sizeof(why)))
		{
			call->deferred = true;	/* so that node_fail fails every command here */
			node_fail(cs, i, why);
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
			(!node->handshake_verified || node_uses_tls(cs->set, node));
	}
	if (node->handshake_owed > 0 && !node->handshake_verified)
	{
		call->deferred = true;
		call->deadline_ms = redlock_clock_ms() +
			(node->conn.connecting ? redlock_connect_timeout_ms : redlock_timeout_ms);
		if (!node->conn.connecting)
			node_write(cs, i);
		return;
	}
	if (node->nqueued > 0)
		node_send_queued(cs, i);	/* releases carried over go first */
	if (node->conn.ctx)
		node_send_call(cs, i);
}

/*
 * One look, without waiting, at every idle connection of set through the wait set
 * the last call left (one epoll_wait instead of a peek per master).  A node whose
 * idle socket showed nothing to read is marked looked_quiet, and node_start_call does
 * not peek it; something to read on an idle connection means the master closed or
 * reset it or sent what nobody asked for, and is peeked as before.  Nothing is marked
 * when the wait set cannot answer for every idle socket (rebuilt since, built for
 * another set, a socket registered for writing, TLS, whose library may hold bytes
 * the socket no longer shows) or did not look at the sockets (a set latch is
 * returned alone).
 */
static void
idle_sockets_look(RedlockNodeSet *set)
{
	WaitEvent	events[REDLOCK_MAX_NODES + 2];
	int			nevents;

	for (int i = 0; i < set->count; i++)
		set->nodes[i].looked_quiet = false;
	if (wait_set == NULL || wait_set_stale || wait_set_for != set)
		return;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		if (node->conn.ctx && node->owed_len == 0 && !node->conn.connecting &&
			(node->conn.tls || node->event_mask != WL_SOCKET_READABLE))
			return;
	}
	nevents = WaitEventSetWait(wait_set, 0, events, lengthof(events),
							   redlock_wait_event(REDLOCK_WAIT_MASTERS));
	for (int k = 0; k < nevents; k++)
		if (events[k].events & (WL_LATCH_SET | WL_POSTMASTER_DEATH))
			return;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		node->looked_quiet = node->conn.ctx && node->owed_len == 0 && !node->conn.connecting;
	}
	for (int k = 0; k < nevents; k++)
		((RedlockNode *) events[k].user_data)->looked_quiet = false;
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
 *		timeout (ms) for its handshake and then timeout (ms) to answer, all commands at
 *		once.
 *
 * Outside cleanup, raises whatever CHECK_FOR_INTERRUPTS raises (query cancel, 57014;
 * statement_timeout), and out-of-memory errors; the connections stay usable.
 */
void
redlock_nodes_run(RedlockNodeSet *set, const RedlockCommand *commands, int ncommands,
				  bool cleanup, RedlockNodeOutcome *outcomes)
{
	CallState	cs;

	Assert(ncommands > 0);
	for (int k = 0; k < script_count; k++)
		script_hash(scripts[k]);

	memset(&cs, 0, sizeof(cs));
	cs.set = set;
	cs.commands = commands;
	cs.ncommands = ncommands;
	cs.first_id = call_counter + 1;
	call_counter += ncommands;
	cs.start_ms = redlock_clock_ms();
	cs.outcomes = outcomes;
	cs.awaiting = palloc0(Max(ncommands * set->count, 1) * sizeof(bool));
	memset(outcomes, 0, ncommands * set->count * sizeof(RedlockNodeOutcome));

	idle_sockets_look(set);
	for (int i = 0; i < set->count; i++)
		node_start_call(&cs, i);
	wait_for_nodes(&cs, cleanup);
	pfree(cs.awaiting);
	set_report_changes(set);
}
