/*-------------------------------------------------------------------------
 *
 * node.h
 *	  A configured master of a node set and its connection (node.c), and the node set
 *	  itself as the connection layer sees it (built and freed by nodeset.c).  Used
 *	  inside that layer (node.c, nodeset.c, nodeconn.c, call.c, callnode.c, waitset.c), and by
 *	  quorum.c and fence.c for redlock_script_register only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_NODE_H
#define REDLOCK_NODE_H

#include "redlock.h"
#include "wire/conn.h"
#include "wire/masterinfo.h"
#include "wire/owed.h"
#include "wire/tls.h"

/*
 * A configured master.  When conn.ctx is NULL the connection is closed and the fields
 * from conn to looked_quiet mean nothing.
 */
typedef struct RedlockNode
{
	RedlockNodeAddr addr;
	RedlockConn conn;
	int			handshake_owed; /* handshake replies not yet read */
	int			establishing_owed;	/* ... of them, of the handshake sent at connect
									 * (not the SCRIPT LOADs its answers asked for):
									 * the connection is still being established */
	bool		failed_recently;	/* its last call failed; no reply since */
	bool		down;			/* failed since its last reply */
	int			down_calls;		/* calls in a row that a quorum answered and it did
								 * not, with no reply from it between them */
	bool		reported_down;	/* a WARNING said so; no LOG said it answers again */
	bool		handshake_verified; /* a handshake of this set succeeded there, or it
									 * has no AUTH or SELECT to fail (node.c) */
	uint32		scripts_asked;	/* bit k: scripts[k] is in a SCRIPT EXISTS not yet answered */
	RedlockOwedQueue queued;	/* commands to send once the handshake is done */
	RedlockOwedRing owed;		/* replies owed, oldest first */
	double		progress_ms;	/* last reply or connect step, or when it began
								 * to owe one */
	int			event_pos;		/* position in the wait set (waitset.c) */
	uint32		event_mask;		/* socket events registered there */
	bool		looked_quiet;	/* idle, and the idle look saw nothing to read */
	RedlockNodeStats stats; /* what this backend saw of it (redlock_nodes()) */
	RedlockMasterInfo info;		/* what it said of itself on this connection */
	bool		left_out;		/* its last reply did not count (masterinfo.c) */
} RedlockNode;

/*
 * The call_ids of a call connection's handshake: 0 for AUTH, SELECT and SCRIPT LOAD;
 * REDLOCK_CALL_ID_PROBE for the probes (INFO, CONFIG GET appendfsync), whose reply is
 * read by masterinfo.c and whose error does not end the connection;
 * REDLOCK_CALL_ID_SCRIPTS for SCRIPT EXISTS, whose reply says which scripts the
 * master's cache lacks (node.c loads those).  Calls' ids start above
 * REDLOCK_CALL_ID_HANDSHAKE_LAST.
 */
#define REDLOCK_CALL_ID_PROBE	1
#define REDLOCK_CALL_ID_SCRIPTS	2
#define REDLOCK_CALL_ID_HANDSHAKE_LAST	REDLOCK_CALL_ID_SCRIPTS

/* The masters of one configuration, and that configuration. */
struct RedlockNodeSet
{
	uint64		id;				/* unique in this backend, never reused */
	uint64		sockets_version;	/* bumped when a socket of it opens or closes */
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
	RedlockNodeSet *next;		/* in the list of every set */
};

/* What one handshake reply did (redlock_node_handshake_reply). */
typedef enum RedlockHandshakeStep
{
	REDLOCK_HANDSHAKE_MORE,		/* more handshake replies are owed */
	REDLOCK_HANDSHAKE_DONE,		/* the last one: the connection is ready */
	REDLOCK_HANDSHAKE_FAILED	/* AUTH, SELECT or a SCRIPT command refused: close it */
} RedlockHandshakeStep;

/*
 * Queues one handshake command (redlock_node_connect) whose reply is owed to call_id (0,
 * or REDLOCK_CALL_ID_PROBE); false when out of memory.
 */
typedef bool (*RedlockNodeQueue) (void *arg, uint64 call_id, int argc, const char **argv);

extern bool redlock_node_connect(RedlockNodeSet *set, RedlockNode *node, RedlockConn *conn,
								 bool load_scripts, bool long_lived, RedlockNodeQueue queue,
								 void *arg, char *why, size_t whylen);
extern RedlockConnStep redlock_node_connect_step(RedlockNodeSet *set, RedlockNode *node,
												 RedlockConn *conn, char *why, size_t whylen);
extern bool redlock_node_open(RedlockNodeSet *set, RedlockNode *node, char *why,
							  size_t whylen);
extern void redlock_node_close(RedlockNodeSet *set, RedlockNode *node);
extern bool redlock_node_append_command(RedlockNodeSet *set, RedlockNode *node,
										uint64 call_id, const RedlockScript *script,
										bool eval, int argc, const char *const *argv,
										const size_t *argvlen);
extern void redlock_node_note_error(RedlockNode *node, const char *error);
extern RedlockHandshakeStep redlock_node_handshake_reply(RedlockNodeSet *set,
														 RedlockNode *node, uint64 call_id,
														 const void *reply, char *why,
														 size_t whylen);
extern bool redlock_node_reply_counts(RedlockNode *node, bool facts_only, double sent_ms);
extern void redlock_node_leave_out(const RedlockNode *node, RedlockNodeOutcome *outcome);
extern bool redlock_node_uses_tls(const RedlockNodeSet *set, const RedlockNode *node);
extern void redlock_scripts_hash(void);

extern void redlock_script_register(RedlockScript *script);	/* node.c */

#endif							/* REDLOCK_NODE_H */
