/*-------------------------------------------------------------------------
 *
 * conn.c
 *	  One connection to one Redis master: a non-blocking hiredis context taken through
 *	  its TCP connect, its TLS handshake when the configuration uses TLS (and, with
 *	  redlock.tls on in a build without TLS, failure before anything is sent), and then
 *	  reads, writes and replies.  The only code that opens a socket to a master: the
 *	  backends' calls (call.c, through node.c) and the worker's subscriptions (through
 *	  nodeset.c's connections apart from any call) both use it.
 *
 * This layer knows sockets, TLS and hiredis; not node sets, calls or locks.  What a
 * connection sends first (AUTH, SELECT) is built here too, so that every connection
 * starts the same way.  hiredis allocates with malloc; nothing here hands it palloc'd
 * memory.  Nothing here raises.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <poll.h>
#include "wire/tls.h"

#include <sys/socket.h>

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "storage/fd.h"
#include "storage/latch.h"

#include <hiredis/hiredis.h>

#include "wire/conn.h"

/*
 * redlock_conn_open
 *		Opens conn to addr without blocking (TCP, or a unix socket when addr->port is
 *		0), counted as an external FD.  Continue with redlock_conn_advance once the
 *		socket is writable.
 *
 * Returns false with why (whylen bytes) when that fails at once; conn is then closed.
 * Raises nothing.
 */
bool
redlock_conn_open(RedlockConn *conn, const RedlockNodeAddr *addr, char *why, size_t whylen)
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

/*
 * redlock_conn_close
 *		Closes conn, if open (with its TLS session).  Raises nothing.
 */
void
redlock_conn_close(RedlockConn *conn)
{
	if (conn->ctx == NULL)
		return;
	redisFree(conn->ctx);		/* and the TLS session */
	ReleaseExternalFD();
	memset(conn, 0, sizeof(*conn));
}

/*
 * redlock_conn_socket
 *		conn's socket (conn open).  Raises nothing.
 */
pgsocket
redlock_conn_socket(const RedlockConn *conn)
{
	return conn->ctx->fd;
}

/*
 * redlock_conn_handshake
 *		Fills handshake with the commands every connection starts with, before anything
 *		else goes out: AUTH (username, password: "" for none) and SELECT database as
 *		configured (none for database 0).  Raises nothing.
 */
void
redlock_conn_handshake(RedlockConnHandshake *handshake, const char *username,
					   const char *password, int database)
{
	int			n = 0;

	if (password[0] != '\0')
	{
		handshake->argc[n] = 0;
		handshake->argv[n][handshake->argc[n]++] = "AUTH";
		if (username[0] != '\0')
			handshake->argv[n][handshake->argc[n]++] = username;
		handshake->argv[n][handshake->argc[n]++] = password;
		n++;
	}
	if (database != 0)
	{
		snprintf(handshake->dbnum, sizeof(handshake->dbnum), "%d", database);
		handshake->argv[n][0] = "SELECT";
		handshake->argv[n][1] = handshake->dbnum;
		handshake->argc[n] = 2;
		n++;
	}
	handshake->count = n;
}

/*
 * redlock_conn_append
 *		Appends a command (argc arguments, argvlen bytes each; NULL argvlen for
 *		NUL-terminated strings) to conn's output, to go out with the next write.
 *		Returns false when hiredis is out of memory.  Raises nothing.
 */
bool
redlock_conn_append(RedlockConn *conn, int argc, const char **argv, const size_t *argvlen)
{
	if (redisAppendCommandArgv(conn->ctx, argc, argv, argvlen) != REDIS_OK)
		return false;
	conn->writing = true;
	return true;
}

/*
 * redlock_conn_keepalive
 *		Turns TCP keep-alives on for conn (a long-lived, mostly idle connection); does
 *		nothing on a unix socket.  Raises nothing.
 */
void
redlock_conn_keepalive(RedlockConn *conn)
{
	(void) redisEnableKeepAlive(conn->ctx);
}

/*
 * redlock_conn_uses_tls
 *		True when connections to addr under the TLS settings tls use TLS: redlock.tls,
 *		and not a unix socket (clear).  Raises nothing.
 */
bool
redlock_conn_uses_tls(const RedlockTlsConfig *tls, const RedlockNodeAddr *addr)
{
	return tls->enabled && addr->port != 0;
}

/* The pending error of conn's non-blocking connect (SO_ERROR), 0 while none. */
static int
conn_connect_error(const RedlockConn *conn)
{
	int			err = 0;
	socklen_t	len = sizeof(err);

	if (getsockopt(conn->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	return err;
}

/*
 * redlock_conn_advance
 *		Takes conn's connect one step further, on the socket event it waited for: the
 *		TCP connect once the socket is writable, then, when tls says so for addr, the
 *		TLS handshake (*tls_context, shared by the connections of one configuration, is
 *		built on its first use).  In a build without TLS, or with a TLS file that cannot
 *		be loaded, a TCP connection fails here, before anything is sent in clear.
 *
 * Returns REDLOCK_CONN_FAILED with why (whylen bytes).  Raises nothing.
 */
RedlockConnStep
redlock_conn_advance(RedlockConn *conn, const RedlockTlsConfig *tls,
					 RedlockTlsContext **tls_context, const RedlockNodeAddr *addr,
					 char *why, size_t whylen)
{
	if (conn->tls == NULL)
	{
		int			err = conn_connect_error(conn);

		if (err != 0)
		{
			snprintf(why, whylen, "could not connect: %s", strerror(err));
			return REDLOCK_CONN_FAILED;
		}
		if (!redlock_conn_uses_tls(tls, addr))
		{
			conn->connecting = false;
			return REDLOCK_CONN_READY;
		}
		if (*tls_context == NULL)
			*tls_context = redlock_tls_context_new(tls, why, whylen);
		if (*tls_context == NULL)
			return REDLOCK_CONN_FAILED;
		conn->tls = redlock_tls_session_start(*tls_context, tls->verify, conn->ctx,
											  addr->host, why, whylen);
		if (conn->tls == NULL)
			return REDLOCK_CONN_FAILED;
	}
	switch (redlock_tls_handshake(conn->tls, why, whylen))
	{
		case REDLOCK_TLS_DONE:
			conn->connecting = false;
			return REDLOCK_CONN_READY;
		case REDLOCK_TLS_WANT_READ:
			conn->tls_want_read = true;
			return REDLOCK_CONN_WAIT;
		case REDLOCK_TLS_WANT_WRITE:
			conn->tls_want_read = false;
			return REDLOCK_CONN_WAIT;
		case REDLOCK_TLS_FAILED:
			break;
	}
	return REDLOCK_CONN_FAILED;
}

/*
 * redlock_conn_wanted_events
 *		The socket events (WL_SOCKET_*) conn waits for now, one of the two: those of
 *		its connect or TLS handshake, writable while output waits, else readable.
 *		Raises nothing.
 */
uint32
redlock_conn_wanted_events(const RedlockConn *conn)
{
	if (conn->connecting && conn->tls)
		return conn->tls_want_read ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
	return (conn->connecting || conn->writing) ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE;
}

/*
 * redlock_conn_gone_while_idle
 *		True when an idle connection (nothing owed) can no longer be used: the master
 *		closed it (EOF), reset it, or sent something nobody asked for.  One
 *		non-blocking peek.  Raises nothing.
 */
bool
redlock_conn_gone_while_idle(const RedlockConn *conn)
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

/*
 * redlock_conn_read
 *		Reads what conn's socket holds into hiredis' buffer.  Returns false on an I/O
 *		error (redlock_conn_io_reason says which).  Raises nothing.
 */
bool
redlock_conn_read(RedlockConn *conn)
{
	if (conn->tls)
		redlock_tls_clear_errors();
	return redisBufferRead(conn->ctx) == REDIS_OK;
}

/*
 * redlock_conn_write
 *		Sends what conn has buffered, as far as the socket takes it; *done says whether
 *		all went.  Returns false on an I/O error.  Raises nothing.
 */
bool
redlock_conn_write(RedlockConn *conn, int *done)
{
	*done = 0;
	if (conn->tls)
		redlock_tls_clear_errors();
	if (redisBufferWrite(conn->ctx, done) != REDIS_OK)
		return false;
	conn->writing = !*done;
	return true;
}

/*
 * redlock_conn_get_reply
 *		The next complete reply on conn (a redisReply, freed with freeReplyObject) into
 *		*reply, NULL there when more bytes are needed; reads on while TLS holds
 *		decrypted bytes that the socket will not signal.  Raises nothing.
 */
RedlockConnReply
redlock_conn_get_reply(RedlockConn *conn, void **reply)
{
	for (;;)
	{
		*reply = NULL;
		if (redisGetReply(conn->ctx, reply) != REDIS_OK)
			return REDLOCK_CONN_REPLY_PROTOCOL_ERROR;
		if (*reply != NULL || conn->tls == NULL || !redlock_tls_pending(conn->tls))
			return REDLOCK_CONN_REPLY_OK;
		if (!redlock_conn_read(conn))
			return REDLOCK_CONN_REPLY_IO_ERROR;
	}
}

/*
 * redlock_conn_protocol_reason
 *		After a protocol error on conn: hiredis' text (e.g. 'Protocol error, got "H" as
 *		reply type byte') and what it most likely means, into reason (reasonlen bytes).
 *		Raises nothing.
 */
void
redlock_conn_protocol_reason(const RedlockConn *conn, char *reason, size_t reasonlen)
{
	snprintf(reason, reasonlen,
			 "%s: not the Redis protocol (is a Redis master listening on this port%s?)",
			 conn->ctx->errstr, conn->tls ? "" : ", without TLS");
}

/*
 * redlock_conn_io_reason
 *		After a failed read or write on conn: OpenSSL's reason when it has one, else
 *		hiredis', into reason (reasonlen bytes).  Raises nothing.
 */
void
redlock_conn_io_reason(const RedlockConn *conn, char *reason, size_t reasonlen)
{
	if (conn->tls == NULL || !redlock_tls_io_error(reason, reasonlen))
		strlcpy(reason, conn->ctx->errstr[0] ? conn->ctx->errstr : "connection closed",
				reasonlen);
}

/*
 * redlock_conn_reply_error
 *		Returns true when reply (from redlock_conn_get_reply) is an error; when why is
 *		not NULL, writes its text there (whylen bytes, after lead).  Raises nothing.
 */
bool
redlock_conn_reply_error(const void *data, const char *lead, char *why, size_t whylen)
{
	const redisReply *reply = data;

	if (reply->type != REDIS_REPLY_ERROR)
		return false;
	if (why)
		snprintf(why, whylen, "%s%.*s", lead, (int) reply->len, reply->str);
	return true;
}

/*
 * redlock_conn_reply_noscript
 *		Returns true when reply (from redlock_conn_get_reply) is Redis' NOSCRIPT error:
 *		a script command found the master's script cache empty.  Raises nothing.
 */
bool
redlock_conn_reply_noscript(const void *data)
{
	const redisReply *reply = data;

	return reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0;
}

/*
 * redlock_conn_reply_free
 *		Frees reply (from redlock_conn_get_reply; malloc'd by hiredis).  Raises nothing.
 */
void
redlock_conn_reply_free(void *data)
{
	freeReplyObject(data);
}

/*
 * redlock_conn_reply_pubsub
 *		Reads reply (from redlock_conn_get_reply) on a subscribed connection: a
 *		subscription's confirmation (REDLOCK_PUBSUB_SUBSCRIBED, *channel its channel),
 *		a message (REDLOCK_PUBSUB_MESSAGE, *channel and *message), an error
 *		(REDLOCK_PUBSUB_ERROR, *message its text) or anything else
 *		(REDLOCK_PUBSUB_OTHER).  The pointers point into reply.  Raises nothing.
 */
RedlockPubSubReply
redlock_conn_reply_pubsub(const void *data, RedlockBytes *channel, RedlockBytes *message)
{
	const redisReply *reply = data;

	if (reply->type == REDIS_REPLY_ERROR)
	{
		message->data = reply->str;
		message->len = reply->len;
		return REDLOCK_PUBSUB_ERROR;
	}
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
		reply->element[0]->type != REDIS_REPLY_STRING ||
		reply->element[1]->type != REDIS_REPLY_STRING)
		return REDLOCK_PUBSUB_OTHER;
	channel->data = reply->element[1]->str;
	channel->len = reply->element[1]->len;
	if (strcmp(reply->element[0]->str, "subscribe") == 0)
		return REDLOCK_PUBSUB_SUBSCRIBED;
	if (strcmp(reply->element[0]->str, "message") != 0 ||
		reply->element[2]->type != REDIS_REPLY_STRING)
		return REDLOCK_PUBSUB_OTHER;
	message->data = reply->element[2]->str;
	message->len = reply->element[2]->len;
	return REDLOCK_PUBSUB_MESSAGE;
}

/*
 * redlock_conn_event_ready
 *		Returns true when the event a connection under way waits for
 *		(redlock_conn_wanted_events) has come, looked at without waiting (poll, 0 ms).
 *		Raises nothing.
 */
bool
redlock_conn_event_ready(const RedlockConn *conn)
{
	struct pollfd pfd;

	pfd.fd = redlock_conn_socket(conn);
	pfd.events = redlock_conn_wanted_events(conn) == WL_SOCKET_READABLE ? POLLIN : POLLOUT;
	pfd.revents = 0;
	return poll(&pfd, 1, 0) > 0;
}

/*
 * An array of strings and integers (TIME, CONFIG GET) as one string outcome: its
 * elements joined by newlines, palloc'd; any other array stays REDLOCK_REPLY_OTHER.
 */
static void
conn_array_text(const redisReply *reply, RedlockNodeOutcome *outcome)
{
	StringInfoData buf;

	for (size_t k = 0; k < reply->elements; k++)
		if (reply->element[k]->type != REDIS_REPLY_STRING &&
			reply->element[k]->type != REDIS_REPLY_INTEGER)
			return;
	initStringInfo(&buf);
	for (size_t k = 0; k < reply->elements; k++)
	{
		const redisReply *e = reply->element[k];

		if (k > 0)
			appendStringInfoChar(&buf, '\n');
		if (e->type == REDIS_REPLY_INTEGER)
			appendStringInfo(&buf, "%lld", (long long) e->integer);
		else
			appendBinaryStringInfo(&buf, e->str, (int) e->len);
	}
	outcome->kind = REDLOCK_REPLY_STRING;
	outcome->integer = (long long) hash_bytes_extended((const unsigned char *) buf.data, buf.len, 0);
	outcome->text = buf.data;
	outcome->text_len = buf.len;
}

/*
 * redlock_conn_reply_outcome
 *		Turns one reply (from redlock_conn_get_reply, a redisReply) to one of our
 *		commands into outcome: OK, nil, an integer, a string (kept as a hash: values are
 *		only compared between masters; with keep_text also whole, palloc'd in the
 *		current memory context; with keep_text an array of strings and integers too,
 *		joined by newlines), Redis' error text, or anything else.  Raises only
 *		out-of-memory errors (ERROR 53200), and only with keep_text.
 */
void
redlock_conn_reply_outcome(const void *data, bool keep_text, RedlockNodeOutcome *outcome)
{
	const redisReply *reply = data;

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
			outcome->kind = REDLOCK_REPLY_STRING;
			outcome->integer = (long long)
				hash_bytes_extended((const unsigned char *) reply->str, (int) reply->len, 0);
			if (keep_text)
			{
				outcome->text = palloc(reply->len + 1);
				memcpy(outcome->text, reply->str, reply->len);
				outcome->text[reply->len] = '\0';
				outcome->text_len = (int) reply->len;
			}
			break;
		case REDIS_REPLY_ARRAY:
			outcome->kind = REDLOCK_REPLY_OTHER;
			if (keep_text)
				conn_array_text(reply, outcome);
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
