/*-------------------------------------------------------------------------
 *
 * redlock.h
 *	  Shared types and the functions each layer of redlock offers the one above.
 *
 * Layers, top to bottom: SQL functions (sql.c) and transaction hooks (xact.c) -> lock
 * table (locktable.c) -> quorum protocol (quorum.c) -> the connection layer (call.c,
 * one call over every master; below it waitset.c, nodeset.c, node.c, owed.c and
 * conn.c, each with its header) -> configuration (guc.c, servers.c).  Each layer calls
 * only those below it; the clock
 * (clock.c) and the counters (stats.c) are leaves any of them uses.  Beside the lock
 * table, in shared memory, the registry (registry.c) of auto-extended locks and of
 * waiters: backends add to it, and the background worker (worker.c) renews what it
 * holds through quorum.c with its own connections, and relays release announcements
 * from its subscriptions (subscription.c, connected through nodeconn.c) to the waiters.
 * Times are milliseconds on every interface, read with redlock_clock_ms().  The lower
 * layers return outcomes; only the SQL functions and the hooks turn them into errors
 * or warnings (report.c holds their shared words).
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

/* ---- configuration: servers.c (parser) and guc.c ---- */

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

extern RedlockServerList *redlock_servers_parse(const char *value, char *errbuf,
												size_t errlen);
extern void redlock_node_addr_name(const RedlockNodeAddr *addr, char *buf, size_t len);

extern int	redlock_connect_timeout_ms;
extern int	redlock_timeout_ms;
extern int	redlock_retry_delay_ms;
extern int	redlock_retry_jitter_ms;
extern double redlock_clock_drift_factor;
extern char *redlock_key_prefix;
extern char *redlock_username;
extern char *redlock_password;
extern char *redlock_password_file;
extern int	redlock_database;
extern int	redlock_commit_margin_ms;
extern bool redlock_auto_extend;
extern bool redlock_cancel_on_loss;
extern int	redlock_max_auto_extended_locks;
extern int	redlock_max_auto_extended_locks_per_role;
extern int	redlock_quorum;
extern bool redlock_tls;
extern int	redlock_tls_verify;
extern char *redlock_tls_ca_file;
extern char *redlock_tls_cert_file;
extern char *redlock_tls_key_file;
extern const RedlockServerList *redlock_server_list;
extern uint64 redlock_connection_generation;

/* The longest password redlock.password_file may hold, in bytes. */
#define REDLOCK_PASSWORD_LEN 1024

extern void RedlockGucInit(void);
extern const char *redlock_servers_text(void);
extern const char *redlock_effective_password(void);
extern int	redlock_quorum_for(int setting, int count);
extern const char *redlock_quorum_problem(int setting, int count);

/* ---- TLS to the masters: tls.c, used by conn.c; settings in guc.c ---- */

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

/* One step of a handshake. */
typedef enum RedlockTlsStep
{
	REDLOCK_TLS_DONE,
	REDLOCK_TLS_WANT_READ,
	REDLOCK_TLS_WANT_WRITE,
	REDLOCK_TLS_FAILED
} RedlockTlsStep;

/* OpenSSL's SSL_CTX and SSL, opaque outside tls.c. */
typedef struct ssl_ctx_st RedlockTlsContext;
typedef struct ssl_st RedlockTlsSession;
struct redisContext;

extern void redlock_tls_config(RedlockTlsConfig *config);	/* guc.c */
extern bool redlock_tls_config_equal(const RedlockTlsConfig *a, const RedlockTlsConfig *b);
extern bool redlock_tls_supported(char *why, size_t whylen);
extern RedlockTlsContext *redlock_tls_context_new(const RedlockTlsConfig *config,
												  char *why, size_t whylen);
extern void redlock_tls_context_free(RedlockTlsContext *context);
extern RedlockTlsSession *redlock_tls_session_start(RedlockTlsContext *context,
													RedlockTlsVerify verify,
													struct redisContext *conn,
													const char *host, char *why,
													size_t whylen);
extern RedlockTlsStep redlock_tls_handshake(RedlockTlsSession *session, char *why,
											size_t whylen);
extern void redlock_tls_clear_errors(void);
extern bool redlock_tls_io_error(char *why, size_t whylen);
extern bool redlock_tls_pending(RedlockTlsSession *session);
extern bool redlock_tls_gone_while_idle(RedlockTlsSession *session);

/* ---- the clock: clock.c (a leaf) ---- */

extern double redlock_clock_ms(void);

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
 */
typedef struct RedlockCommand
{
	int			need;
	bool		(*accept) (const RedlockNodeOutcome *outcome);
	const RedlockScript *script;
	int			argc;
	const char *argv[REDLOCK_MAX_ARGS];
	size_t		argvlen[REDLOCK_MAX_ARGS];
} RedlockCommand;

/* The masters of one configuration (servers, credentials, database); opaque. */
typedef struct RedlockNodeSet RedlockNodeSet;

extern void redlock_script_register(RedlockScript *script);	/* node.c */

/*
 * The rest of the connection layer's interface is in its modules' headers: call.h
 * (redlock_nodes_run), nodeset.h (node sets), nodeconn.h (a connection apart from any
 * call).
 */

/* ---- counters: stats.c, fed by quorum.c and locktable.c ---- */

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

typedef struct RedlockStatsSnapshot
{
	bool		cluster_wide;	/* from shared memory (preloaded) or this backend */
	uint64		counters[REDLOCK_STAT_COUNT];
	double		acquire_latency_mean_ms;
	double		acquire_latency_max_ms;
	TimestampTz reset_at;
} RedlockStatsSnapshot;

/* What this backend saw of one master. */
typedef struct RedlockNodeFigures
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
} RedlockNodeFigures;

extern void RedlockStatsInit(void);
extern void redlock_stats_count(RedlockCounter counter);
extern void redlock_stats_acquire_latency(double ms);
extern void redlock_stats_snapshot(RedlockStatsSnapshot *snapshot);
extern void redlock_stats_reset_counters(void);

/* ---- quorum protocol: quorum.c ---- */

typedef enum RedlockStatus
{
	REDLOCK_OK,					/* acquired, released or extended on a quorum */
	REDLOCK_BUSY,				/* a quorum answered, but not enough said yes */
	REDLOCK_UNAVAILABLE			/* fewer than a quorum of nodes answered at all */
} RedlockStatus;

/* The outcome of one quorum operation. */
typedef struct RedlockResult
{
	RedlockStatus status;
	int			node_count;		/* nodes configured */
	int			quorum;			/* masters that must accept (redlock_nodeset_quorum) */
	int			accepted;		/* nodes that said yes (set, deleted, extended) */
	int			answered;		/* nodes that replied at all */
	int			failed;			/* nodes that failed (no reply, or an error reply) */
	int			attempts;		/* acquire attempts made */
	double		elapsed_ms;		/* duration of the attempt that decided */
	double		valid_until_ms; /* monotonic end of validity (after REDLOCK_OK) */
	char	   *node_errors;	/* "node: error" lines for errdetail, or NULL */
	bool		worker_silent;	/* auto-extended: the worker did not answer in time */
} RedlockResult;

/* One lock to release: its key and token. */
typedef struct RedlockKeyToken
{
	const char *key;
	const char *token;
} RedlockKeyToken;

extern void RedlockQuorumInit(void);
extern void redlock_new_token(char *token);
/*
 * Releases are announced on a channel of their own key, this prefix followed by the key
 * (the message is the key): a PUBLISH that nobody subscribed to delivers nothing, so a
 * release costs no message unless some cluster waits for that very key.  See Wire format.
 */
#define REDLOCK_RELEASE_CHANNEL_PREFIX "redlock:released:"

struct RedlockWaiter;			/* waiters.h */

extern void redlock_quorum_acquire(RedlockNodeSet *set, const char *key, char *token,
								   int ttl_ms, int wait_ms, struct RedlockWaiter *waiter,
								   bool behind, RedlockResult *result);
extern void redlock_quorum_release_many(RedlockNodeSet *set, const RedlockKeyToken *locks,
										int n, bool wait_all, bool cleanup,
										RedlockResult *results);
extern void redlock_quorum_extend(RedlockNodeSet *set, const char *key, const char *token,
								  int ttl_ms, RedlockResult *result);
extern void redlock_quorum_extend_many(RedlockNodeSet *set, const RedlockKeyToken *locks,
									   const int *ttls_ms, int n, bool renewal,
									   RedlockResult *results);

/* ---- fencing tokens: fence.c, beside quorum.c ---- */

/* How long a fencing counter lives after the last token taken from it: 30 days. */
#define REDLOCK_FENCE_COUNTER_TTL_MS	INT64CONST(2592000000)

extern void RedlockFenceInit(void);
extern void redlock_quorum_fence(RedlockNodeSet *set, const char *key, const char *token,
								 double valid_until_ms, int64 *fence, RedlockResult *result);

/* ---- shared registry of auto-extended locks: registry.c ---- */

#define REDLOCK_REGISTRY_KEY_LEN	(2 * REDLOCK_MAX_RESOURCE_LEN + 64)

/* An owner's reference to its registry entry; index -1 when none. */
typedef struct RedlockRegistryHandle
{
	int			index;
	uint32		generation;
} RedlockRegistryHandle;

/* The worker's answer to an owner's request for a new TTL. */
typedef struct RedlockRenewalAnswer
{
	RedlockStatus status;
	int			node_count;
	int			quorum;
	int			accepted;
	int			answered;
	int			failed;
} RedlockRenewalAnswer;

/* One lock in the worker's round (copied out of the registry). */
typedef struct RedlockRenewal
{
	int			index;
	uint32		generation;
	int			config;
	uint32		config_generation;
	int			ttl_ms;
	uint64		request_seq;
	double		valid_until_ms; /* after the cut for this request */
	char		token[REDLOCK_TOKEN_LEN + 1];
	char	   *key;
} RedlockRenewal;

/* The worker's decision on one renewal. */
typedef struct RedlockRenewalOutcome
{
	RedlockRenewalAnswer answer;
	double		valid_until_ms; /* when renewed */
	double		next_renewal_ms;	/* when not lost */
	char		lost_reason[REDLOCK_NODE_ERROR_LEN];	/* "" unless lost */
} RedlockRenewalOutcome;

/* A configuration locks were taken under, as the worker reads it. */
typedef struct RedlockRegistryConfig
{
	int			database;
	int			quorum;			/* redlock.quorum: 0 for a majority */
	char		servers[8192];
	char		username[256];
	char		password[256];
	RedlockTlsConfig tls;
} RedlockRegistryConfig;

extern void RedlockRegistryInit(void);
extern void redlock_registry_reserve(const char *key, int prefix_len, bool cancel_on_loss,
									 RedlockRegistryHandle *handle);
extern void redlock_registry_activate(const RedlockRegistryHandle *handle, const char *token,
									  int ttl_ms, double valid_until_ms);
extern void redlock_registry_remove(RedlockRegistryHandle *handle);
/* The lease (lease.h) of an auto-extended lock, with and without the lock. */
struct RedlockLease;
extern bool redlock_registry_view(const RedlockRegistryHandle *handle,
								  struct RedlockLease *lease);
extern bool redlock_registry_peek(const RedlockRegistryHandle *handle,
								  struct RedlockLease *lease);
extern void redlock_registry_extend(const RedlockRegistryHandle *handle, int ttl_ms,
									RedlockResult *result);
extern void redlock_registry_worker_attach(void);
extern void redlock_registry_worker_detach(void);
extern int	redlock_registry_due(double now_ms, RedlockRenewal **renewals,
								 double *next_due_ms, uint64 *changes);
extern bool redlock_registry_may_sleep(uint64 changes, double until_ms);
extern bool redlock_registry_config(int slot, uint32 generation, RedlockRegistryConfig *out);
extern void redlock_registry_renewed(const RedlockRenewal *renewals,
									 const RedlockRenewalOutcome *outcomes, int n);
extern void redlock_registry_round_done(double round_ms, int locks);
extern bool redlock_registry_figures(int *locks, double *round_ms, int *round_locks);
extern void redlock_registry_wake_worker(void);

/* ---- the background worker: worker.c, and its subscriptions: subscription.c ---- */

extern void RedlockWorkerInit(void);
extern void redlock_subscriptions_wait(double timeout_ms);
extern void redlock_subscriptions_close(void);

/* ---- lock table: locktable.c ---- */

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

/* A copy of one held lock, for redlock_locks(). */
typedef struct RedlockLockInfo
{
	char	   *resource;
	char	   *key;
	int			session_holds;
	int			xact_holds;
	int			ttl_ms;
	int			nodes;
	TimestampTz acquired_at;
	TimestampTz valid_until;
	double		validity_ms;	/* remaining, <= 0 once run out */
	bool		auto_extended;	/* renewed by the background worker */
	bool		lost;			/* ... which gave up on it */
	TimestampTz last_renewal;	/* 0 before the first */
	int64		renewals;
} RedlockLockInfo;

typedef enum RedlockHoldStatus
{
	REDLOCK_NOT_HELD,			/* this backend holds no such lock (in that scope) */
	REDLOCK_HELD,				/* done; the lock is (still) held */
	REDLOCK_RELEASED,			/* the last hold went: released on the nodes */
	REDLOCK_LOST,				/* extend failed: the lock is gone, and forgotten */
	REDLOCK_FAILED				/* acquire failed (busy or unavailable) */
} RedlockHoldStatus;

extern RedlockHoldStatus redlock_lock_acquire(const char *resource, RedlockScope scope,
											  int ttl_ms, int wait_ms, bool *was_lost,
											  RedlockResult *result);
extern RedlockHoldStatus redlock_lock_release(const char *resource,
											  RedlockReleaseInfo *info);
extern RedlockHoldStatus redlock_lock_extend(const char *resource, int ttl_ms,
											 RedlockResult *result);
/* Why redlock_lock_fencing_token found a lock lost. */
typedef enum RedlockLossCause
{
	REDLOCK_LOSS_NONE,
	REDLOCK_LOSS_EXPIRED,		/* validity ran out (or the worker gave up on it) */
	REDLOCK_LOSS_RECONFIGURED,	/* taken under a configuration no longer in force */
	REDLOCK_LOSS_TOKEN_GONE		/* too few masters hold its token any more */
} RedlockLossCause;

extern RedlockHoldStatus redlock_lock_fencing_token(const char *resource, int64 *fence,
													RedlockLossCause *cause,
													RedlockResult *result);
extern int	redlock_lock_release_session(RedlockReleaseReport report);
extern int	redlock_lock_list(RedlockLockInfo **locks);
extern bool redlock_lock_xact_pending(void);
extern bool redlock_lock_xact_acquired(void);
extern const char *redlock_lock_first_expired_xact(void);
extern const char *redlock_lock_first_lost_in_xact(const char **reason);
extern bool redlock_lock_claim(const char *resource, int ttl_ms, RedlockResult *result);
extern void redlock_lock_xact_end(bool commit, RedlockReleaseReport report);
extern void redlock_lock_subxact_end(bool commit, SubTransactionId subid,
									 SubTransactionId parent,
									 RedlockReleaseReport report);
extern void redlock_lock_release_everything(RedlockReleaseReport report);

/* ---- messages shared by the SQL functions and the hooks: report.c ---- */

extern void redlock_warn_release(const RedlockReleaseInfo *info);
extern int	redlock_errdetail_nodes(const RedlockResult *result);

/* ---- transaction and exit hooks: xact.c ---- */

extern void redlock_hooks_register(void);

#endif							/* REDLOCK_H */
