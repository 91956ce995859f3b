/*-------------------------------------------------------------------------
 *
 * conn.h
 *	  One connection to one Redis master (conn.c): the only code that opens a socket to
 *	  a master, for the backends' calls and the worker's subscriptions alike.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_CONN_H
#define REDLOCK_CONN_H

#include "redlock.h"
#include "wire/tls.h"

struct redisContext;

/*
 * One connection, as opened by redlock_conn_open.  Its state, from the fields:
 * closed (ctx NULL; the other fields mean nothing), connecting (TCP connect, then the
 * TLS handshake when tls is set), then open, with output waiting while writing.
 */
typedef struct RedlockConn
{
	struct redisContext *ctx;
	bool		connecting;		/* connect (and TLS handshake) not yet done */
	RedlockTlsSession *tls;		/* TLS session once started (ctx owns it), or NULL */
	bool		tls_want_read;	/* the handshake waits to read, not to write */
	bool		writing;		/* output not all sent yet */
} RedlockConn;

/* How far redlock_conn_advance took a connect. */
typedef enum RedlockConnStep
{
	REDLOCK_CONN_WAIT,			/* still connecting: wait for redlock_conn_wanted_events */
	REDLOCK_CONN_READY,			/* connected (TLS handshake done): commands may go out */
	REDLOCK_CONN_FAILED			/* failed: why says why; close it */
} RedlockConnStep;

/* What redlock_conn_get_reply found. */
typedef enum RedlockConnReply
{
	REDLOCK_CONN_REPLY_OK,		/* a reply, or NULL when more bytes are needed */
	REDLOCK_CONN_REPLY_IO_ERROR,	/* reading failed: redlock_conn_io_reason says why */
	REDLOCK_CONN_REPLY_PROTOCOL_ERROR	/* not Redis' protocol: redlock_conn_protocol_reason */
} RedlockConnReply;

/* The AUTH and SELECT a connection starts with (redlock_conn_handshake). */
typedef struct RedlockConnHandshake
{
	int			count;			/* 0 to 2 commands */
	int			argc[2];
	const char *argv[2][3];
	char		dbnum[16];		/* SELECT's argument */
} RedlockConnHandshake;

/* A reply on a subscribed connection (redlock_conn_reply_pubsub). */
typedef enum RedlockPubSubReply
{
	REDLOCK_PUBSUB_SUBSCRIBED,	/* a SUBSCRIBE confirmed */
	REDLOCK_PUBSUB_MESSAGE,		/* a message published on a channel */
	REDLOCK_PUBSUB_ERROR,
	REDLOCK_PUBSUB_OTHER
} RedlockPubSubReply;

/* Bytes inside a reply, not NUL-terminated. */
typedef struct RedlockBytes
{
	const char *data;
	size_t		len;
} RedlockBytes;

extern bool redlock_conn_open(RedlockConn *conn, const RedlockNodeAddr *addr,
							  char *why, size_t whylen);
extern void redlock_conn_close(RedlockConn *conn);
extern pgsocket redlock_conn_socket(const RedlockConn *conn);
extern bool redlock_conn_append(RedlockConn *conn, int argc, const char **argv,
								const size_t *argvlen);
extern void redlock_conn_keepalive(RedlockConn *conn);
extern bool redlock_conn_uses_tls(const RedlockTlsConfig *tls, const RedlockNodeAddr *addr);
extern RedlockConnStep redlock_conn_advance(RedlockConn *conn, const RedlockTlsConfig *tls,
											RedlockTlsContext **tls_context,
											const RedlockNodeAddr *addr,
											char *why, size_t whylen);
extern uint32 redlock_conn_wanted_events(const RedlockConn *conn);
extern bool redlock_conn_gone_while_idle(const RedlockConn *conn);
extern bool redlock_conn_read(RedlockConn *conn);
extern bool redlock_conn_write(RedlockConn *conn, int *done);
extern RedlockConnReply redlock_conn_get_reply(RedlockConn *conn, void **reply);
extern void redlock_conn_protocol_reason(const RedlockConn *conn, char *reason,
										 size_t reasonlen);
extern void redlock_conn_io_reason(const RedlockConn *conn, char *reason, size_t reasonlen);
extern bool redlock_conn_reply_error(const void *reply, const char *lead, char *why,
									 size_t whylen);
extern bool redlock_conn_reply_noscript(const void *reply);
extern void redlock_conn_reply_free(void *reply);
extern RedlockPubSubReply redlock_conn_reply_pubsub(const void *reply, RedlockBytes *channel,
												 RedlockBytes *message);
extern bool redlock_conn_event_ready(const RedlockConn *conn);
extern void redlock_conn_reply_outcome(const void *data, bool keep_text,
									   RedlockNodeOutcome *outcome);
extern void redlock_conn_handshake(RedlockConnHandshake *handshake, const char *username,
								   const char *password, int database);

#endif							/* REDLOCK_CONN_H */
