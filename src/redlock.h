/*-------------------------------------------------------------------------
 *
 * redlock.h
 *	  The limits, and the types and enums that several modules share.
 *
 * Each module's functions are in its own header (src/NAME.h for src/NAME.c);
 * doc/internals.md draws the layers, which test/layers checks against the calls.
 * Times are milliseconds on every interface, read with redlock_clock_ms().  The lower
 * layers return outcomes; only the SQL functions and the hooks turn them into errors
 * or warnings (messages.c holds their shared words).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_H
#define REDLOCK_H

#include "datatype/timestamp.h"
#include "port/atomics.h"

/* Limits, documented in README. */
#define REDLOCK_MAX_NODES			64
#define REDLOCK_MAX_ADDR_LEN		255		/* host name, IP address or socket path */
#define REDLOCK_MAX_RESOURCE_LEN	1024	/* bytes of a resource name */
#define REDLOCK_MAX_TTL_MS			86400000	/* one day */
#define REDLOCK_TOKEN_BYTES			20		/* random bytes in a token (spec §2) */
#define REDLOCK_TOKEN_LEN			(REDLOCK_TOKEN_BYTES * 2)	/* hex characters */
#define REDLOCK_NODE_ERROR_LEN		160		/* bytes kept of a node's error text */
#define REDLOCK_NODE_NAME_LEN		(REDLOCK_MAX_ADDR_LEN + 10)	/* "[host]:port" */
#define REDLOCK_MAX_PERMITS			64		/* permits of one semaphore: its slots' SETs
											 * go out in one round trip */
#define REDLOCK_MAX_SET				64		/* resources of one set: one script sets
											 * them all, in one round trip */
#define REDLOCK_RELEASE_GROUP		52		/* locks sharing a token released by one
											 * script: a bit each in a Lua number */

/*
 * A semaphore of k permits is k exclusive locks, its slots: the resource's key followed
 * by this separator and the slot number, 1..k (doc/semaphores.md).
 */
#define REDLOCK_PERMIT_SLOT_SEPARATOR "#"

/* ---- configuration: the masters (servers.c parses them) ---- */

/* One Redis master: a TCP host and port, or a unix socket path (port 0). */
typedef struct RedlockNodeAddr
{
	char		host[REDLOCK_MAX_ADDR_LEN + 1];
	int			port;
} RedlockNodeAddr;

/* A parsed redlock.servers value, allocated in one malloc'd block. */
typedef struct RedlockServerList
{
	int			count;
	RedlockNodeAddr nodes[FLEXIBLE_ARRAY_MEMBER];
} RedlockServerList;

/* ---- TLS settings (guc.c sets them, tls.c and conn.c use them) ---- */

/* How much of a master's certificate redlock.tls_verify checks. */
typedef enum RedlockTlsVerify
{
	REDLOCK_TLS_VERIFY_FULL,	/* a trusted chain that names the configured host */
	REDLOCK_TLS_VERIFY_CA,		/* a trusted chain only */
	REDLOCK_TLS_VERIFY_NONE		/* nothing: encryption without authentication */
} RedlockTlsVerify;

/* The TLS settings of one configuration. */
typedef struct RedlockTlsConfig
{
	bool		enabled;		/* redlock.tls */
	RedlockTlsVerify verify;
	char		ca_file[MAXPGPATH]; /* "" for the system's trusted CAs */
	char		cert_file[MAXPGPATH];	/* "" for no client certificate */
	char		key_file[MAXPGPATH];
} RedlockTlsConfig;

/* ---- the connection layer (call.c, nodeset.c and below): what its callers share ---- */

/* What one node made of one command. */
typedef enum RedlockReplyKind
{
	REDLOCK_REPLY_NONE,			/* no reply: connect, I/O or timeout failure */
	REDLOCK_REPLY_PENDING,		/* not awaited: the outcome was decided without it */
	REDLOCK_REPLY_OK,			/* status reply "OK" */
	REDLOCK_REPLY_NIL,			/* nil reply */
	REDLOCK_REPLY_INTEGER,		/* integer reply, in integer */
	REDLOCK_REPLY_STRING,		/* bulk string reply, a hash of it in integer */
	REDLOCK_REPLY_ERROR,		/* error reply from Redis, text in error */
	REDLOCK_REPLY_OTHER			/* any other reply type */
} RedlockReplyKind;

typedef struct RedlockNodeOutcome
{
	RedlockReplyKind kind;
	long long	integer;
	double		elapsed_ms;		/* from the start of the call to this outcome */
	char		error[REDLOCK_NODE_ERROR_LEN];	/* failure or error reply text, or "" */
	char	   *text;			/* a string reply's bytes (palloc'd, NUL-added) when the
								 * command asked for them (keep_text), else NULL */
	int			text_len;
	bool		left_out;		/* its reply counts toward no quorum (wire/masterinfo.c):
								 * kind NONE, the reason in error */
	bool		timed_out;		/* kind NONE: its deadline passed on an open connection
								 * (a master that may yet answer), not a failure */
} RedlockNodeOutcome;

/* True when a node failed: no reply at all, or an error reply from Redis. */
static inline bool
redlock_outcome_failed(const RedlockNodeOutcome *outcome)
{
	return outcome->kind == REDLOCK_REPLY_NONE || outcome->kind == REDLOCK_REPLY_ERROR;
}

/*
 * A Lua script run with EVALSHA, and with EVAL on a node that answers NOSCRIPT, with
 * nkeys keys.
 * redeliver: running it again, or late, is harmless (a release conditioned on our
 * token), so a command of it that a closed connection may not have delivered is sent
 * again on the master's next connection.
 */
typedef struct RedlockScript
{
	const char *body;
	int			nkeys;			/* keys first in a command's argv: 1 (or 0), or 2 */
	bool		redeliver;
	bool		acquires;		/* sets keys for an attempt: never sent again once
								 * its call is over (call.c) */
	char		sha1[41];		/* hex SHA-1 of body, or "" (then EVAL is used) */
} RedlockScript;

#define REDLOCK_MAX_ARGS 8

/*
 * One command, sent to every node.  Without a script, argv is the whole command.  With
 * one, argv is the script's keys (script->nkeys) followed by its arguments.
 *
 * need and accept say when to stop waiting: once need nodes gave a reply that accept
 * approves, or once that cannot happen any more and it is also certain whether need
 * nodes answered at all.  Replies that arrive later are read, counted and dropped by
 * the next call on the same connection.  need 0 waits for every node; need -1 only
 * sends.
 *
 * decided: NULL, or, for a command with need 0, whether its outcome is already certain
 * from the replies so far (outcomes of count nodes; awaited[i] true for a node that has
 * neither answered nor failed yet; decided_arg passed along): the call then stops waiting
 * for the others, as for need.  A watch's look: a lock held, or not held, whatever the
 * masters not heard from would say.
 *
 * node_last_arg: NULL, or one text per node that replaces argv[argc - 1] at that node
 * (a SCAN cursor: each master has its own).  keep_text: string replies are kept whole
 * in the outcomes (text), in the caller's memory context, not only as a hash.
 */
typedef struct RedlockCommand
{
	int			need;
	bool		(*accept) (const RedlockNodeOutcome *outcome);
	const RedlockScript *script;
	int			argc;
	const char *argv[REDLOCK_MAX_ARGS];
	size_t		argvlen[REDLOCK_MAX_ARGS];
	const char *const *node_last_arg;
	bool		keep_text;
	bool		facts_only;		/* a question about the master itself (redlock_check):
								 * its replies are not judged by wire/masterinfo.c */
	bool		(*decided) (const RedlockNodeOutcome *outcomes, const bool *awaited,
							int count, const void *arg);
	const void *decided_arg;
} RedlockCommand;

/* The masters of one configuration (servers, credentials, database); opaque. */
typedef struct RedlockNodeSet RedlockNodeSet;


/*
 * The rest of the connection layer's interface is in its modules' headers: call.h
 * (redlock_nodes_run), nodeset.h (node sets), nodeconn.h (a connection apart from any
 * call).
 */

/* ---- counters (stats.c) and per-master stats (nodeset.c) ---- */

typedef enum RedlockCounter
{
	REDLOCK_STAT_ATTEMPTS,		/* acquire attempts */
	REDLOCK_STAT_ACQUIRED,		/* attempts that acquired */
	REDLOCK_STAT_BUSY,			/* attempts that found the lock held elsewhere */
	REDLOCK_STAT_UNAVAILABLE,	/* attempts that fewer than a quorum answered */
	REDLOCK_STAT_RELEASED,		/* locks released on the masters */
	REDLOCK_STAT_RELEASED_EXPIRED,	/* ... after their validity had run out */
	REDLOCK_STAT_EXTENDED,		/* extensions (and re-acquires) that succeeded */
	REDLOCK_STAT_EXTEND_LOST,	/* extensions that found the lock lost */
	REDLOCK_STAT_RENEWED,		/* renewals of auto-extended locks that succeeded */
	REDLOCK_STAT_RENEW_FAILED,	/* ... that fewer than a quorum answered */
	REDLOCK_STAT_LOCKS_LOST,	/* auto-extended locks the worker gave up on */
	REDLOCK_STAT_WAKEUPS,		/* waiters woken by an announced release */
	REDLOCK_STAT_COUNT
} RedlockCounter;

/* What this backend saw of one master. */
typedef struct RedlockNodeStats
{
	char		name[REDLOCK_NODE_NAME_LEN];
	bool		connected;
	char		last_error[REDLOCK_NODE_ERROR_LEN];	/* "" when none yet */
	TimestampTz last_error_at;
	double		last_rtt_ms;	/* < 0 before the first reply */
	int64		requests;
	int64		replies;
	int64		late_replies;	/* read after the call that sent them had decided */
	int64		errors;
} RedlockNodeStats;

/* ---- outcomes of the protocol (quorum.c, fence.c) ---- */

typedef enum RedlockStatus
{
	REDLOCK_OK,					/* acquired, released or extended on a quorum */
	REDLOCK_BUSY,				/* a quorum answered, but not enough said yes */
	REDLOCK_UNAVAILABLE			/* fewer than a quorum of nodes answered at all */
} RedlockStatus;

/*
 * An acquire or a claim refused before anything was sent, by the count of what the
 * role's sessions have on the masters from this cluster (shared/rolequota.c,
 * redlock.max_locks_per_role).
 */
typedef struct RedlockQuotaRefusal
{
	bool		refused;		/* false: not refused so (the rest means nothing) */
	bool		roles_full;		/* too many roles counted at once, rather than this
								 * role at its limit */
	Oid			role;			/* the role charged: the session user */
	int			live;			/* its locks and claims counted then */
	int			limit;			/* redlock.max_locks_per_role in force; roles_full:
								 * the roles counted at most */
	int			asked;			/* what the call asked for: 1, or a set's resources */
} RedlockQuotaRefusal;

/* The outcome of one quorum operation. */
typedef struct RedlockResult
{
	RedlockStatus status;
	int			node_count;		/* nodes configured */
	int			quorum;			/* masters that must accept (redlock_nodeset_quorum) */
	int			accepted;		/* nodes that said yes (set, deleted, extended) */
	int			answered;		/* nodes that replied at all */
	int			failed;			/* nodes that failed (no reply, or an error reply) */
	int			left_out;		/* ... of them, answers that did not count
								 * (wire/masterinfo.c: a restart, eviction) */
	int			out_of_memory;	/* ... of them, Redis' OOM error (maxmemory reached) */
	int			timed_out;		/* ... of them, no reply in time on an open connection */
	int			attempts;		/* acquire attempts made */
	double		elapsed_ms;		/* duration of the attempt that decided */
	double		valid_until_ms; /* monotonic end of validity (after REDLOCK_OK) */
	char	   *node_errors;	/* "node: error" lines for errdetail, or NULL */
	bool		worker_silent;	/* auto-extended: the worker did not answer in time */
	bool		ran_out;		/* an extension: the lock's validity ran out before a
								 * quorum confirmed it (then REDLOCK_BUSY: lost;
								 * lockops.c's invariant) */
	int			beyond_slot;	/* a semaphore's acquire: a slot past its permits that a
								 * quorum holds (another caller gives more permits);
								 * the attempt is then refused; 0: none */
	RedlockQuotaRefusal quota;	/* refused before anything was sent (quota.refused):
								 * no quorum operation at all then */
	char	   *deadlock;		/* an acquire's wait ended by a deadlock across
								 * clusters (protocol/deadlock.c): its DETAIL, one line
								 * per member of the cycle; then REDLOCK_BUSY */
} RedlockResult;

/*
 * One lock to release: its key and token, and the key whose channel its release is
 * announced on (NULL: its own; a semaphore's permit announces its resource's key, on
 * which that semaphore's waiters wait).
 */
typedef struct RedlockKeyToken
{
	const char *key;
	const char *token;
	const char *announce;
} RedlockKeyToken;

/*
 * Releases are announced on a channel of their own key, this prefix followed by the key
 * (the message is the key): a PUBLISH that nobody subscribed to delivers nothing, so a
 * release costs no message unless some cluster waits for that very key.  See Wire format.
 */
#define REDLOCK_RELEASE_CHANNEL_PREFIX "redlock:released:"

/*
 * The holder record of a lock (holder.c) lives beside its key under the key followed by
 * the byte 0xFF and "holder" (no UTF-8 text contains 0xFF; and an ACL key pattern
 * "prefix*" that lets a user write the key lets it write the record too): as C text for
 * the acquire's SET, and as Lua text for the scripts that extend, delete and read it.
 * Its value is the lock's token, a tab, then the record; a record whose token is not the
 * key's is stale and is never shown.  The scripts touch it with redis.pcall, so that a
 * master refusing it (an ACL naming exact keys) changes nothing for the lock itself.
 */
#define REDLOCK_HOLDER_KEY_SUFFIX "\xff" "holder"
#define REDLOCK_HOLDER_KEY_LUA "KEYS[1] .. \"\\255holder\""

/*
 * A forced release (force_release.lua) leaves, beside the key, the token it deleted
 * under the key followed by 0xFF and "forced", for REDLOCK_FORCED_MARK_MS: how a
 * watch (watch_read.lua, worker/notifier.c) tells "forced" from "released".
 */
#define REDLOCK_FORCED_KEY_SUFFIX "\xff" "forced"
#define REDLOCK_FORCED_KEY_LUA "KEYS[1] .. \"\\255forced\""
#define REDLOCK_FORCED_MARK_MS 5000

/*
 * A shared lock (doc/shared.md, quorumshared.h): while shared holders hold a resource,
 * its key holds this marker (never a token), and beside it, as the holder record is,
 * the readers hash (each holder's token and expiry) and a waiting exclusive acquire's
 * intent.
 */
#define REDLOCK_SHARED_MARK "redlock:shared"

#define REDLOCK_READERS_KEY_SUFFIX "\xff" "readers"
#define REDLOCK_INTENT_KEY_SUFFIX "\xff" "intent"
#define REDLOCK_READERS_KEY_LUA "KEYS[1] .. \"\\255readers\""
#define REDLOCK_INTENT_KEY_LUA "KEYS[1] .. \"\\255intent\""

/*
 * The waits hash (doc/deadlock.md §2): on each master, one field per waiter that has
 * waited redlock.deadlock_timeout (its cluster and pid), holding its wait record.  It
 * starts with the byte 0xff, as no key of a resource does (scan.lua skips such keys).
 */
#define REDLOCK_WAITS_KEY "\xff" "redlock-waits"


/*
 * A resource's fencing counter (fence.c) is named by this prefix and the lock's key,
 * and lives this long after the last token taken from it: 30 days.
 */
#define REDLOCK_FENCE_KEY_PREFIX		"\xff" "fence:"
#define REDLOCK_FENCE_COUNTER_TTL_MS	INT64CONST(2592000000)

/* ---- holds and what becomes of a lock (holds.c, locktable.c, lockops.c) ---- */

typedef enum RedlockScope
{
	REDLOCK_SCOPE_SESSION,
	REDLOCK_SCOPE_XACT
} RedlockScope;

/* What happened to a lock when this backend dropped its last hold on it. */
typedef struct RedlockReleaseInfo
{
	const char *resource;
	bool		acquired;		/* false: an attempt cut short, never acquired */
	bool		expired;		/* validity had run out before the release */
	bool		reconfigured;	/* taken under a configuration no longer in force */
	const char *lost_reason;	/* auto-extended and given up on: why; else NULL */
	bool		loss_reported;	/* ... and the cancel's error said so already */
	RedlockResult result;		/* the release on the nodes */
} RedlockReleaseInfo;

typedef void (*RedlockReleaseReport) (const RedlockReleaseInfo *info);

typedef enum RedlockHoldStatus
{
	REDLOCK_NOT_HELD,			/* this backend holds no such lock (in that scope) */
	REDLOCK_HELD,				/* done; the lock is (still) held */
	REDLOCK_RELEASED,			/* the last hold went: released on the nodes */
	REDLOCK_LOST,				/* extend failed: the lock is gone, and forgotten */
	REDLOCK_FAILED				/* acquire failed (busy or unavailable) */
} RedlockHoldStatus;

/* Why redlock_lock_fencing_token found a lock lost. */
typedef enum RedlockLossCause
{
	REDLOCK_LOSS_NONE,
	REDLOCK_LOSS_EXPIRED,		/* validity ran out (or the worker gave up on it) */
	REDLOCK_LOSS_RECONFIGURED,	/* taken under a configuration no longer in force */
	REDLOCK_LOSS_TOKEN_GONE,	/* too few masters hold its token any more */
	REDLOCK_LOSS_WORKER,		/* auto-extended: the worker gave up on it */
	REDLOCK_LOSS_MARGIN			/* less than redlock.commit_margin of validity left */
} RedlockLossCause;

#endif							/* REDLOCK_H */
