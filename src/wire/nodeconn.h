/*-------------------------------------------------------------------------
 *
 * nodeconn.h
 *	  A master's connection apart from any call (nodeconn.c): the worker's
 *	  subscriptions, opened by the same code as every other connection.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_NODECONN_H
#define REDLOCK_NODECONN_H

#include "redlock.h"

/* One master's connection of a node set, outside any call; opaque. */
typedef struct RedlockNodeConn RedlockNodeConn;

extern RedlockNodeConn *redlock_nodeconn_open(RedlockNodeSet *set, int node, char *why,
											  size_t whylen);
extern void redlock_nodeconn_close(RedlockNodeConn *conn);
extern bool redlock_nodeconn_append(RedlockNodeConn *conn, int argc, const char **argv);
extern pgsocket redlock_nodeconn_socket(const RedlockNodeConn *conn);
extern uint32 redlock_nodeconn_events(const RedlockNodeConn *conn);
extern bool redlock_nodeconn_ready(const RedlockNodeConn *conn);
extern bool redlock_nodeconn_service(RedlockNodeConn *conn, uint32 events, char *why,
									 size_t whylen);
extern bool redlock_nodeconn_next_reply(RedlockNodeConn *conn, void **reply, char *why,
										size_t whylen);

#endif							/* REDLOCK_NODECONN_H */
