/*-------------------------------------------------------------------------
 *
 * nodeconn.c
 *	  A master's connection apart from any call (the worker's subscriptions to release
 *	  announcements): opened and taken to ready through the funnel every connection
 *	  goes through (node.c: redlock_node_connect, redlock_node_connect_step), and
 *	  driven by its owner's own wait.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/latch.h"
#include "utils/memutils.h"

#include "wire/node.h"
#include "wire/nodeconn.h"
#include "wire/nodeset.h"

/* One master's connection of a node set, outside redlock_nodes_run. */
struct RedlockNodeConn
{
	RedlockNodeSet *set;		/* pinned while the connection exists */
	int			node;			/* which master of set */
	RedlockConn conn;
};

/*
 * Closes conn's socket after a failure (why), counting it in its master's stats.
 */
static void
nodeconn_failed(RedlockNodeConn *conn, const char *why)
{
	redlock_node_note_error(&conn->set->nodes[conn->node], why);
	redlock_conn_close(&conn->conn);
}

/*
 * Queues one handshake command on a subscription's connection (RedlockNodeQueue); a
 * subscription gets no probes, so every reply it owes is the handshake's.
 */
static bool
nodeconn_queue(void *arg, uint64 call_id pg_attribute_unused(), int argc, const char **argv)
{
	return redlock_nodeconn_append((RedlockNodeConn *) arg, argc, argv);
}

/*
 * redlock_nodeconn_open
 *		Opens a connection of its own to master node (0 <= node < set's size) without
 *		blocking, the way every connection of set is opened: TLS when the set uses it
 *		(and, in a build without TLS, failure before anything is sent), then AUTH and
 *		SELECT as configured, queued to go out once the connect (and TLS handshake) is
 *		done.  Their replies (+OK, or an error) come first on the connection.  TCP
 *		keep-alives are on (such a connection is long-lived and mostly idle).  set
 *		stays pinned until redlock_nodeconn_close.  Drive it with
 *		redlock_nodeconn_service.
 *
 * Returns the connection, or NULL with why (whylen bytes) when it failed at once.
 * Raises only out-of-memory errors (53200).
 */
RedlockNodeConn *
redlock_nodeconn_open(RedlockNodeSet *set, int node, char *why, size_t whylen)
{
	RedlockNodeConn *conn;

	Assert(node >= 0 && node < set->count);
	conn = MemoryContextAllocZero(TopMemoryContext, sizeof(RedlockNodeConn));
	conn->set = set;
	conn->node = node;
	redlock_nodeset_pin(set);
	if (!redlock_node_connect(set, &set->nodes[node], &conn->conn, false, true,
							  nodeconn_queue, conn, why, whylen))
	{
		redlock_node_note_error(&set->nodes[node], why);
		redlock_nodeconn_close(conn);
		return NULL;
	}
	return conn;
}

/*
 * redlock_nodeconn_close
 *		Closes conn (NULL is allowed), frees it and unpins its set.  Raises nothing.
 */
void
redlock_nodeconn_close(RedlockNodeConn *conn)
{
	if (conn == NULL)
		return;
	redlock_conn_close(&conn->conn);
	redlock_nodeset_unpin(conn->set);
	pfree(conn);
}

/*
 * redlock_nodeconn_append
 *		Queues a command (argc arguments, NUL-terminated strings) on conn, to go out as
 *		soon as the connection is ready and the socket takes it.  Returns false when
 *		hiredis is out of memory.  Raises nothing.
 */
bool
redlock_nodeconn_append(RedlockNodeConn *conn, int argc, const char **argv)
{
	return redlock_conn_append(&conn->conn, argc, argv, NULL);
}

/*
 * redlock_nodeconn_socket, redlock_nodeconn_events
 *		conn's socket, and the socket events (WL_SOCKET_*) to wait for on it now:
 *		those of its connect and TLS handshake while connecting, then readable, and
 *		writable while output waits.  Raise nothing.
 */
pgsocket
redlock_nodeconn_socket(const RedlockNodeConn *conn)
{
	return redlock_conn_socket(&conn->conn);
}

uint32
redlock_nodeconn_events(const RedlockNodeConn *conn)
{
	if (conn->conn.connecting)
		return redlock_conn_wanted_events(&conn->conn);
	return WL_SOCKET_READABLE | (conn->conn.writing ? WL_SOCKET_WRITEABLE : 0);
}

/*
 * redlock_nodeconn_ready
 *		True once conn's connect (and TLS handshake) is done.  Raises nothing.
 */
bool
redlock_nodeconn_ready(const RedlockNodeConn *conn)
{
	return !conn->conn.connecting;
}

/*
 * redlock_nodeconn_service
 *		Acts on socket events (WL_SOCKET_*) that a wait reported for conn: takes its
 *		connect and TLS handshake further, then sends what is queued as far as the
 *		socket takes it, and reads what arrived into the connection's buffer (collect
 *		it with redlock_nodeconn_next_reply).
 *
 * Returns false when the connection failed, with why (whylen bytes: a refused
 * certificate, a build without TLS, an I/O error, the master closing it); then only
 * redlock_nodeconn_close may be called.  Raises nothing.
 */
bool
redlock_nodeconn_service(RedlockNodeConn *conn, uint32 events, char *why, size_t whylen)
{
	RedlockConn *c = &conn->conn;
	int			done;

	if (c->connecting)
	{
		switch (redlock_node_connect_step(conn->set, &conn->set->nodes[conn->node], c,
										  why, whylen))
		{
			case REDLOCK_CONN_WAIT:
				return true;
			case REDLOCK_CONN_FAILED:
				nodeconn_failed(conn, why);
				return false;
			case REDLOCK_CONN_READY:
				events |= WL_SOCKET_WRITEABLE;	/* the queued handshake goes out now */
				break;
		}
	}
	if ((events & WL_SOCKET_WRITEABLE) && c->writing && !redlock_conn_write(c, &done))
	{
		redlock_conn_io_reason(c, why, whylen);
		nodeconn_failed(conn, why);
		return false;
	}
	if ((events & WL_SOCKET_READABLE) && !redlock_conn_read(c))
	{
		redlock_conn_io_reason(c, why, whylen);
		nodeconn_failed(conn, why);
		return false;
	}
	return true;
}

/*
 * redlock_nodeconn_next_reply
 *		The next complete reply that arrived on conn (a hiredis redisReply; free it
 *		with freeReplyObject) into *reply, or NULL there when more bytes are needed.
 *		Returns false when the connection failed, with why (whylen bytes); then only
 *		redlock_nodeconn_close may be called.  Raises nothing.
 */
bool
redlock_nodeconn_next_reply(RedlockNodeConn *conn, void **reply, char *why, size_t whylen)
{
	switch (redlock_conn_get_reply(&conn->conn, reply))
	{
		case REDLOCK_CONN_REPLY_OK:
			return true;
		case REDLOCK_CONN_REPLY_IO_ERROR:
			redlock_conn_io_reason(&conn->conn, why, whylen);
			break;
		case REDLOCK_CONN_REPLY_PROTOCOL_ERROR:
			redlock_conn_protocol_reason(&conn->conn, why, whylen);
			break;
	}
	nodeconn_failed(conn, why);
	return false;
}
