/*-------------------------------------------------------------------------
 *
 * node.c
 *	  A configured master of a node set: its connection (conn.c), opened with the
 *	  handshake of the set's configuration, and what that connection owes (owed.c).
 *
 * THE FUNNEL: every connection to a master, a call's (node->conn, for backends'
 * calls and the worker's renewals) and a subscription's (nodeconn.c, the worker's),
 * is opened by redlock_node_connect and taken to ready by redlock_node_connect_step:
 * one socket code (conn.c), the node set's TLS settings (tls.c), one handshake.
 *
 * Connections open lazily and are reused.  A new connection starts with its handshake:
 * AUTH and SELECT as configured, and, for a call's connection, the probes and SCRIPT
 * EXISTS of every registered script, then SCRIPT LOAD of only those the master's cache
 * lacks (a master's script cache is shared by all its clients: in a burst of new
 * sessions only the first loads them; a connection costs the master one cheap lookup,
 * not a load per script).  Commands are appended with the reply they will owe logged
 * first.  When a connection closes, the releases it may not have delivered are kept for
 * the next one; everything else it owed is forgotten.
 *
 * The scripts are registered here, and run with EVALSHA once their SHA-1 is known (EVAL
 * before).  A command that finds the script missing anyway (a master restarted or
 * flushed behind a pipelined handshake) is answered NOSCRIPT and sent again with EVAL
 * (callnode.c).
 *
 * Only conn.c talks to hiredis; the arguments kept for owed replies are palloc'd in
 * the set's context, copies of what hiredis was given.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "utils/builtins.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "wire/node.h"

/* The scripts every call connection makes sure of in its handshake. */
#define REDLOCK_MAX_SCRIPTS 16

/*
 * SHA-1s per SCRIPT EXISTS: before AUTH, Redis takes a command of more than 10
 * arguments for a protocol error and closes the connection, and the NOAUTH that says
 * what is wrong (no password configured for masters that want one) would be lost.
 */
#define REDLOCK_EXISTS_PER_COMMAND 8
static RedlockScript *scripts[REDLOCK_MAX_SCRIPTS];
static int	script_count = 0;

/*
 * Computes script->sha1 from script->body, for EVALSHA.  Hashing needs a resource
 * owner: the library's load makes one if there is none (the postmaster, preloading:
 * every backend then inherits the hashes and its first call pays nothing for them);
 * backend exit has none, and until a hash is known EVAL sends the body.  Raises ERROR
 * (XX000) if the SHA-1 cannot be computed, which does not happen in practice.
 */
static void
node_script_hash(RedlockScript *script, bool loading)
{
	pg_cryptohash_ctx *ctx;
	uint8		digest[20];
	ResourceOwner temporary = NULL;

	if (script->sha1[0] != '\0' || (CurrentResourceOwner == NULL && !loading))
		return;
	if (CurrentResourceOwner == NULL)
		CurrentResourceOwner = temporary = ResourceOwnerCreate(NULL, "redlock script hashing");
	ctx = pg_cryptohash_create(PG_SHA1);

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) script->body, strlen(script->body)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute SHA-1 of a redlock script");
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, sizeof(digest), script->sha1);
	script->sha1[sizeof(digest) * 2] = '\0';
	if (temporary)
	{
		CurrentResourceOwner = NULL;
		ResourceOwnerRelease(temporary, RESOURCE_RELEASE_BEFORE_LOCKS, true, true);
		ResourceOwnerRelease(temporary, RESOURCE_RELEASE_LOCKS, true, true);
		ResourceOwnerRelease(temporary, RESOURCE_RELEASE_AFTER_LOCKS, true, true);
		ResourceOwnerDelete(temporary);
	}
}

/*
 * redlock_script_register
 *		Makes script known to the connection layer (at the library's load): new
 *		connections make sure of it in their handshake, and script commands run it
 *		with EVALSHA.  At most REDLOCK_MAX_SCRIPTS scripts; registering one twice does
 *		nothing.  Raises ERROR (XX000) only if hashing fails.
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
	node_script_hash(script, true);
}

/*
 * redlock_scripts_hash
 *		Computes the SHA-1 of every registered script that has none yet (when its
 *		registration could not).  Raises ERROR (XX000) only if hashing fails.
 */
void
redlock_scripts_hash(void)
{
	for (int k = 0; k < script_count; k++)
		node_script_hash(scripts[k], false);
}

/*
 * redlock_node_close
 *		Closes node's connection (node of set), if any, forgetting what it owed, but
 *		for the releases it may not have delivered, which wait for the next connection.
 *		Raises only out-of-memory errors (53200).
 */
void
redlock_node_close(RedlockNodeSet *set, RedlockNode *node)
{
	if (node->conn.ctx == NULL)
		return;
	redlock_conn_close(&node->conn);
	node->handshake_owed = 0;
	node->establishing_owed = 0;
	redlock_owed_keep_redeliveries(set->context, &node->owed, &node->queued);
	set->sockets_version++;
	node->stats.connected = false;
}

/*
 * redlock_node_note_error
 *		Records error as node's last one (redlock_nodes()) and marks it down until its
 *		next reply.  Raises nothing.
 */
void
redlock_node_note_error(RedlockNode *node, const char *error)
{
	node->down = true;
	node->stats.errors++;
	strlcpy(node->stats.last_error, error, sizeof(node->stats.last_error));
	node->stats.last_error_at = GetCurrentTimestamp();
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
	redlock_owed_push(set->context, &node->owed, call_id, script, eval,
					  script_argc, script_argv, script_argvlen);
	if (node->owed.len == 1)
		node->progress_ms = redlock_clock_ms();	/* it owes a reply from now */
	if (!redlock_conn_append(&node->conn, argc, argv, argvlen))
	{
		redlock_owed_drop_newest(&node->owed);
		return false;
	}
	return true;
}

/*
 * redlock_node_append_command
 *		Appends a command for call_id to node's connection (open): argv (argc
 *		arguments, argvlen bytes each) as it is, or, with script, EVALSHA of the script
 *		with its keys first in argv; EVAL when eval, when no SHA-1 is known, or while
 *		the connection's handshake is under way (whether the master has the script is
 *		known only once SCRIPT EXISTS is answered and what it lacked loaded: an EVALSHA
 *		pipelined before that could be refused NOSCRIPT, and its resending would come
 *		after commands sent since, such as the next attempt's SET).  It goes out with
 *		the next write.  Returns false when hiredis is out of memory.  Raises only
 *		out-of-memory errors (53200).
 */
bool
redlock_node_append_command(RedlockNodeSet *set, RedlockNode *node, uint64 call_id,
							const RedlockScript *script, bool eval,
							int argc, const char *const *argv, const size_t *argvlen)
{
	const char *full[REDLOCK_MAX_ARGS + 3];
	size_t		fulllen[REDLOCK_MAX_ARGS + 3];
	int			n = 0;

	if (script)
	{
		eval = eval || script->sha1[0] == '\0' || node->handshake_owed > 0;
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
	node->stats.requests++;
	return true;
}

/* Appends one handshake command (its reply is owed to call_id: see node.h). */
static bool
node_append_handshake(RedlockNodeSet *set, RedlockNode *node, uint64 call_id, int argc,
					  const char **argv)
{
	size_t		argvlen[REDLOCK_EXISTS_PER_COMMAND + 2];	/* the longest: SCRIPT EXISTS */

	Assert(argc <= (int) lengthof(argvlen));

	for (int k = 0; k < argc; k++)
		argvlen[k] = strlen(argv[k]);
	if (!node_append(set, node, call_id, NULL, false, argc, argv, argvlen, 0, NULL, NULL))
		return false;
	node->handshake_owed++;
	return true;
}

/*
 * redlock_node_connect
 *		The one way to open a connection to a master (the funnel above): opens conn to
 *		node (a master of set) without blocking, with set's TLS settings applied as
 *		redlock_node_connect_step takes it further, and queues its handshake: AUTH
 *		and SELECT as set's configuration says, then, when load_scripts (a call's
 *		connection), the probes of what the master is (INFO, CONFIG GET appendfsync:
 *		masterinfo.c; owed to REDLOCK_CALL_ID_PROBE) and SCRIPT EXISTS of every
 *		registered script whose SHA-1 is known (owed to REDLOCK_CALL_ID_SCRIPTS; those
 *		missing are loaded when its reply is read).  Each handshake command goes to queue(arg, call_id, argc, argv), which
 *		appends it (logging the reply it will owe, if its owner reads replies that way);
 *		queue returns false when out of memory.  long_lived: TCP
 *		keep-alives on (a mostly idle connection; not on a unix socket).
 *
 * Returns false with why (whylen bytes) when the open failed at once, or "out of
 * memory" when queueing failed (conn is then open: the caller closes it).  Raises only
 * out-of-memory errors (53200).
 */
bool
redlock_node_connect(RedlockNodeSet *set, RedlockNode *node, RedlockConn *conn,
					 bool load_scripts, bool long_lived, RedlockNodeQueue queue, void *arg,
					 char *why, size_t whylen)
{
	RedlockConnHandshake handshake;

	if (!redlock_conn_open(conn, &node->addr, why, whylen))
		return false;
	if (long_lived && node->addr.port != 0)
		redlock_conn_keepalive(conn);
	redlock_conn_handshake(&handshake, set->username, set->password, set->database);

	/*
	 * Without AUTH and SELECT nothing in the handshake can make a command run as
	 * another user or in another database: a call's commands may follow it at once
	 * (one round trip for a new connection's first call, not two).
	 */
	if (load_scripts && handshake.count == 0)
		node->handshake_verified = true;
	for (int k = 0; k < handshake.count; k++)
		if (!queue(arg, 0, handshake.argc[k], handshake.argv[k]))
			goto oom;
	if (load_scripts)
	{
		const char *info[1] = {"INFO"};
		const char *fsync[3] = {"CONFIG", "GET", "appendfsync"};

		redlock_masterinfo_reset(&node->info);
		if (!queue(arg, REDLOCK_CALL_ID_PROBE, 1, info) ||
			!queue(arg, REDLOCK_CALL_ID_PROBE, 3, fsync))
			goto oom;
	}
	if (load_scripts)
	{
		const char *exists[REDLOCK_EXISTS_PER_COMMAND + 2] = {"SCRIPT", "EXISTS"};
		int			argc = 2;

		node->scripts_asked = 0;
		for (int k = 0; k < script_count; k++)
		{
			if (scripts[k]->sha1[0] != '\0')
			{
				exists[argc++] = scripts[k]->sha1;
				node->scripts_asked |= (uint32) 1 << k;
			}
			if (argc == lengthof(exists) || (k == script_count - 1 && argc > 2))
			{
				if (!queue(arg, REDLOCK_CALL_ID_SCRIPTS, argc, exists))
					goto oom;
				argc = 2;
			}
		}
	}
	return true;

oom:
	snprintf(why, whylen, "out of memory");
	return false;
}

/* What node_queue_handshake needs: a call connection's set and node. */
typedef struct NodeHandshake
{
	RedlockNodeSet *set;
	RedlockNode *node;
} NodeHandshake;

/* Queues one handshake command on a call connection (RedlockNodeQueue). */
static bool
node_queue_handshake(void *arg, uint64 call_id, int argc, const char **argv)
{
	NodeHandshake *h = arg;

	return node_append_handshake(h->set, h->node, call_id, argc, argv);
}

/*
 * redlock_node_open
 *		Opens node's call connection (node of set, closed) through the funnel
 *		(redlock_node_connect), with the probes and the scripts in its handshake, each
 *		reply owed logged.  Returns false with why (whylen bytes) when
 *		that fails at once.  Raises only out-of-memory errors (53200).
 */
bool
redlock_node_open(RedlockNodeSet *set, RedlockNode *node, char *why, size_t whylen)
{
	NodeHandshake h = {set, node};

	node->handshake_owed = 0;
	if (!redlock_node_connect(set, node, &node->conn, true, false, node_queue_handshake, &h,
							  why, whylen))
	{
		if (node->conn.ctx)
			redlock_node_close(set, node);
		return false;
	}
	node->establishing_owed = node->handshake_owed;
	set->sockets_version++;
	return true;
}

/*
 * redlock_node_uses_tls
 *		True when set's connections to node use TLS: redlock.tls, and not a unix socket
 *		(clear).  Raises nothing.
 */
bool
redlock_node_uses_tls(const RedlockNodeSet *set, const RedlockNode *node)
{
	return redlock_conn_uses_tls(&set->tls, &node->addr);
}

/*
 * redlock_node_connect_step
 *		Takes conn's connect (a connection to node, a master of set, opened by
 *		redlock_node_connect and still connecting) one step further on the socket event
 *		it waited for, with set's TLS settings (redlock_conn_advance): the funnel's
 *		second half.  Returns how far it got; REDLOCK_CONN_FAILED with why (whylen
 *		bytes).  Raises nothing.
 */
RedlockConnStep
redlock_node_connect_step(RedlockNodeSet *set, RedlockNode *node, RedlockConn *conn,
						  char *why, size_t whylen)
{
	return redlock_conn_advance(conn, &set->tls, &set->tls_context, &node->addr, why, whylen);
}

/* Takes in a probe's reply (INFO's text, CONFIG GET's pair, or an error): masterinfo.c. */
static void
node_take_probe(RedlockNode *node, const void *reply)
{
	RedlockNodeOutcome probe;

	memset(&probe, 0, sizeof(probe));
	redlock_conn_reply_outcome(reply, true, &probe);
	if (probe.kind == REDLOCK_REPLY_STRING)
		redlock_masterinfo_read(&node->info, probe.text, node->progress_ms);
	else
		redlock_masterinfo_refused(&node->info, probe.kind == REDLOCK_REPLY_ERROR
								   ? probe.error : "an unexpected reply");
	if (probe.text)
		pfree(probe.text);
}

/*
 * Takes in the reply to one SCRIPT EXISTS (a 1 or 0 for each of the next scripts asked,
 * up to REDLOCK_EXISTS_PER_COMMAND, in the order of scripts[]: they leave
 * node->scripts_asked as they are answered) and appends SCRIPT LOAD, owed to the
 * handshake, of each script the master lacks.  False when out of memory.
 */
static bool
node_load_missing_scripts(RedlockNodeSet *set, RedlockNode *node, const void *reply)
{
	RedlockNodeOutcome answer;
	const char *next;
	bool		ok = true;
	int			answered = 0;

	memset(&answer, 0, sizeof(answer));
	redlock_conn_reply_outcome(reply, true, &answer);
	next = answer.kind == REDLOCK_REPLY_STRING ? answer.text : "";
	for (int k = 0; k < script_count && ok && answered < REDLOCK_EXISTS_PER_COMMAND; k++)
	{
		const char *load[3] = {"SCRIPT", "LOAD", scripts[k]->body};

		if ((node->scripts_asked & ((uint32) 1 << k)) == 0)
			continue;
		node->scripts_asked &= ~((uint32) 1 << k);
		answered++;
		/* An answer cut short (it cannot be) loads the rest: loading is always safe. */
		if (*next != '1')
			ok = node_append_handshake(set, node, 0, 3, load);
		next = strchr(next, '\n');
		next = next ? next + 1 : "";
	}
	if (answer.text)
		pfree(answer.text);
	return ok;
}

/*
 * redlock_node_handshake_reply
 *		Takes in reply, read on node's call connection (node of set) for its handshake
 *		(call_id 0: AUTH, SELECT, SCRIPT LOAD; REDLOCK_CALL_ID_PROBE: INFO, CONFIG GET,
 *		whose error only leaves what they asked unknown; REDLOCK_CALL_ID_SCRIPTS: SCRIPT
 *		EXISTS, after which SCRIPT LOAD of each script the master lacks is appended to
 *		the connection, and owed by the handshake).  Returns REDLOCK_HANDSHAKE_FAILED
 *		with why (whylen bytes) for an error reply to AUTH, SELECT or a SCRIPT command
 *		(the caller closes the connection: nothing may run on it), or when out of
 *		memory; REDLOCK_HANDSHAKE_DONE when it was the last reply the handshake owed
 *		(held commands may go out), else REDLOCK_HANDSHAKE_MORE (the caller writes
 *		what was appended).  Does not free reply.  Raises only out-of-memory errors
 *		(53200).
 */
RedlockHandshakeStep
redlock_node_handshake_reply(RedlockNodeSet *set, RedlockNode *node, uint64 call_id,
							 const void *reply, char *why, size_t whylen)
{
	if (node->establishing_owed > 0)
		node->establishing_owed--;	/* replies come in order: those sent at connect first */
	if (call_id == REDLOCK_CALL_ID_PROBE)
		node_take_probe(node, reply);
	else if (redlock_conn_reply_error(reply, "handshake failed: ", why, whylen))
	{
		node->handshake_verified = false;
		return REDLOCK_HANDSHAKE_FAILED;
	}
	else if (call_id == REDLOCK_CALL_ID_SCRIPTS && !node_load_missing_scripts(set, node, reply))
	{
		snprintf(why, whylen, "out of memory");
		return REDLOCK_HANDSHAKE_FAILED;
	}
	if (--node->handshake_owed > 0)
		return REDLOCK_HANDSHAKE_MORE;
	node->handshake_verified = true;
	return REDLOCK_HANDSHAKE_DONE;
}

/*
 * redlock_node_reply_counts
 *		Whether a reply of node to a command sent at sent_ms (redlock_clock_ms) counts
 *		toward a quorum (masterinfo.c: not after a restart without its data within the
 *		quarantine, not when it may evict keys, not from a master that did not say what
 *		it is), late or not.  Judged at the sending, not at the reading: a reply made
 *		in the quarantine and read after it ends would carry a fencing floor from before
 *		(test/model's QLATE breaks token order so).  One that does not
 *		sets node->left_out and marks the master down with the reason, for the reports
 *		(nodeset.c) and redlock_nodes(), until a reply of it counts again.  facts_only:
 *		a reply to a question about the master itself (redlock_check), not judged.
 *		Raises nothing.
 */
bool
redlock_node_reply_counts(RedlockNode *node, bool facts_only, double sent_ms)
{
	char		why[REDLOCK_NODE_ERROR_LEN];

	if (facts_only)
		return !node->left_out;
	node->left_out = redlock_masterinfo_left_out(&node->info, sent_ms, why, sizeof(why));
	if (node->left_out)
		redlock_node_note_error(node, why);
	return !node->left_out;
}

/*
 * redlock_node_leave_out
 *		Turns outcome, a reply of node that does not count (node->left_out), into a
 *		failure with the reason (node's last error), marked left_out for tally.c.
 *		Raises nothing.
 */
void
redlock_node_leave_out(const RedlockNode *node, RedlockNodeOutcome *outcome)
{
	if (outcome->text)
		pfree(outcome->text);
	memset(outcome, 0, sizeof(*outcome));
	outcome->kind = REDLOCK_REPLY_NONE;
	outcome->left_out = true;
	strlcpy(outcome->error, node->stats.last_error, sizeof(outcome->error));
}
