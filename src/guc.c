/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  redlock's configuration parameters (GUCs).
 *
 * Settings that decide where backends connect, with which credentials, under which key
 * names and with what safety margin are superuser-only (PGC_SUSET): a plain user must
 * not point locks at another Redis or weaken them.  Timeouts and retry pacing only
 * steer the caller's own waits, so anyone may set them.
 *
 * Changing the servers, credentials, database, quorum or TLS settings bumps
 * redlock_connection_generation;
 * nodeset.c compares it on its next use and switches to the node set of the new
 * configuration.  Assign hooks run on every reload (SIGHUP) whether or not the value
 * changed, so they bump it only when the value really differs from the one in force;
 * they do nothing else, since they also run while transactions are being rolled back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>
#include <sys/stat.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/guc.h"

#include "build.h"
#include "compat.h"
#include "guc.h"
#include "redlock.h"
#include "servers.h"
#include "tally.h"

/*---- GUC variables ----*/

int			redlock_connect_timeout_ms = 200;
int			redlock_timeout_ms = 50;
int			redlock_quorum_timeout_ms = 2000;
int			redlock_retry_delay_ms = 200;
int			redlock_retry_jitter_ms = 200;
double		redlock_clock_drift_factor = 0.01;
char	   *redlock_key_prefix = NULL;
char	   *redlock_username = NULL;
char	   *redlock_password = NULL;
char	   *redlock_password_file = NULL;
int			redlock_database = 0;
int			redlock_commit_margin_ms = 100;
bool		redlock_auto_extend = false;
bool		redlock_record_holder = true;
bool		redlock_cancel_on_loss = true;
int			redlock_max_locks_per_role = 10000;
bool		redlock_test_commit_guard_first = true;	/* a setting in test builds only */
int			redlock_max_auto_extended_locks = 1000;
int			redlock_max_auto_extended_locks_per_role = 100;
int			redlock_quorum = 0;
int			redlock_max_ttl_ms = REDLOCK_MAX_TTL_MS;
int			redlock_restart_quarantine_ms = 600000;
int			redlock_watch_interval_ms = 20;
int			redlock_deadlock_timeout_ms = 1000;
bool		redlock_tls = false;
int			redlock_tls_verify = REDLOCK_TLS_VERIFY_FULL;
char	   *redlock_tls_ca_file = NULL;
char	   *redlock_tls_cert_file = NULL;
char	   *redlock_tls_key_file = NULL;

static const struct config_enum_entry tls_verify_options[] = {
	{"full", REDLOCK_TLS_VERIFY_FULL, false},
	{"ca", REDLOCK_TLS_VERIFY_CA, false},
	{"none", REDLOCK_TLS_VERIFY_NONE, false},
	{NULL, 0, false}
};

static char *servers_setting = NULL;

/* The parsed redlock.servers value: the check hook's "extra", owned by the GUC code. */
const RedlockServerList *redlock_server_list = NULL;

/* The password read from redlock.password_file: its check hook's "extra"; NULL: none. */
static const char *password_from_file = NULL;

/* Bumped whenever the connections must be re-opened. */
uint64		redlock_connection_generation = 0;

/* A check hook's failure for want of memory for its "extra". */
static bool
guc_extra_out_of_memory(void)
{
	GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
	GUC_check_errdetail("Out of memory.");
	return false;
}

/*
 * Validates redlock.servers, leaving the parsed list as extra.  The parser mallocs (it
 * also runs in the fuzz target); the GUC code frees extra its own way, so the list is
 * copied into a redlock_guc_malloc block.
 */
static bool
guc_check_servers(char **newval, void **extra, GucSource source pg_attribute_unused())
{
	char		errbuf[320];
	RedlockServerList *list = redlock_servers_parse(*newval, errbuf, sizeof(errbuf));
	RedlockServerList *copy;
	size_t		size;

	if (list == NULL)
	{
		GUC_check_errdetail("%s", errbuf);
		GUC_check_errhint("List the Redis masters separated by commas, each as host:port, host (port 6379), "
						  "[ipv6]:port or a unix socket path, for example \"10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379\".");
		return false;
	}
	size = offsetof(RedlockServerList, nodes) + list->count * sizeof(RedlockNodeAddr);
	copy = redlock_guc_malloc(size);
	if (copy != NULL)
		memcpy(copy, list, size);
	free(list);
	if (copy == NULL)
		return guc_extra_out_of_memory();
	*extra = copy;
	return true;
}

/* True when two string settings differ (NULL is taken as empty). */
static bool
guc_setting_changed(const char *old, const char *new)
{
	return strcmp(old ? old : "", new ? new : "") != 0;
}

/* Called before servers_setting is updated, so it still holds the value in force. */
static void
guc_assign_servers(const char *newval, void *extra)
{
	redlock_server_list = (const RedlockServerList *) extra;
	if (guc_setting_changed(servers_setting, newval))
		redlock_connection_generation++;
}

/* Credentials are sent when a connection opens: a new value needs new connections. */
static void
guc_assign_username(const char *newval, void *extra pg_attribute_unused())
{
	if (guc_setting_changed(redlock_username, newval))
		redlock_connection_generation++;
}

static void
guc_assign_password(const char *newval, void *extra pg_attribute_unused())
{
	if (guc_setting_changed(redlock_password, newval))
		redlock_connection_generation++;
}

/*
 * Reads redlock.password_file when it is set (as libpq reads its passfile): a regular
 * file without group or world access, whose first line is the password.  Read here,
 * when the setting takes effect (server start, reload, SET), so that errors are the
 * setting's own and no later call, a release at abort say, has a file to fail on.
 */
static bool
guc_check_password_file(char **newval, void **extra, GucSource source pg_attribute_unused())
{
	struct stat st;
	FILE	   *file;
	char		line[REDLOCK_PASSWORD_LEN + 2];
	char	   *password;
	size_t		len;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (stat(*newval, &st) != 0)
	{
		GUC_check_errdetail("Could not stat file \"%s\": %m.", *newval);
		return false;
	}
	if (!S_ISREG(st.st_mode))
	{
		GUC_check_errdetail("File \"%s\" is not a regular file.", *newval);
		return false;
	}
	if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
	{
		GUC_check_errdetail("File \"%s\" has group or world access.", *newval);
		GUC_check_errhint("Make it readable only by the server's operating system user (chmod 0600).");
		return false;
	}
	file = AllocateFile(*newval, "r");
	if (file == NULL)
	{
		GUC_check_errdetail("Could not open file \"%s\": %m.", *newval);
		return false;
	}
	if (fgets(line, sizeof(line), file) == NULL)
		line[0] = '\0';
	FreeFile(file);
	len = strcspn(line, "\r\n");
	if (len > REDLOCK_PASSWORD_LEN)
	{
		explicit_bzero(line, sizeof(line));
		GUC_check_errdetail("The password in file \"%s\" is longer than %d bytes.",
							*newval, REDLOCK_PASSWORD_LEN);
		return false;
	}
	line[len] = '\0';
	password = redlock_guc_malloc(len + 1);
	if (password == NULL)
	{
		explicit_bzero(line, sizeof(line));
		return guc_extra_out_of_memory();
	}
	memcpy(password, line, len + 1);
	explicit_bzero(line, sizeof(line));
	*extra = password;
	return true;
}

static void
guc_assign_password_file(const char *newval pg_attribute_unused(), void *extra)
{
	if (guc_setting_changed(password_from_file, extra))
		redlock_connection_generation++;
	password_from_file = extra;
}

/*
 * redlock_effective_password
 *		Returns the password to send with AUTH: the one read from redlock.password_file
 *		when that is set, else redlock.password; "" for none.  Never NULL.  Raises
 *		nothing (the file was read when the setting took effect).
 */
const char *
redlock_effective_password(void)
{
	if (password_from_file != NULL)
		return password_from_file;
	return redlock_password ? redlock_password : "";
}

/*
 * Validates redlock.quorum against the masters redlock.servers lists now: 0 (a
 * majority), or more than half of them and at most all.  A later change of
 * redlock.servers is checked where locks are taken (redlock_quorum_problem).
 */
static bool
guc_check_quorum(int *newval, void **extra pg_attribute_unused(),
			 GucSource source pg_attribute_unused())
{
	int			count = redlock_server_list ? redlock_server_list->count : 0;
	const char *problem = count > 0 ? redlock_quorum_problem(*newval, count) : NULL;

	if (problem == NULL)
		return true;
	GUC_check_errdetail("%s", problem);
	GUC_check_errhint("Set it from %d to %d, or to 0 for a majority.", count / 2 + 1, count);
	return false;
}

/* The quorum is part of a lock's configuration: locks taken under another are lost. */
static void
guc_assign_quorum(int newval, void *extra pg_attribute_unused())
{
	if (newval != redlock_quorum)
		redlock_connection_generation++;
}

static void
guc_assign_database(int newval, void *extra pg_attribute_unused())
{
	if (newval != redlock_database)
		redlock_connection_generation++;
}

/* True while RedlockGucInit runs: values then were set before the library loaded. */
static bool defining_gucs = false;

/*
 * redlock.tls can be SET on only in a build with TLS (hiredis_ssl): elsewhere that is
 * refused with 0A000.  A value that comes from the configuration (postgresql.conf,
 * ALTER SYSTEM, a database's or role's setting) or was set before the library loaded
 * is kept instead: refusing it would leave TLS off and the password would go out in
 * clear.  Every TCP connection then fails before anything is sent (08006, naming the
 * build).
 */
static bool
guc_check_tls(bool *newval, void **extra pg_attribute_unused(), GucSource source)
{
	char		why[200];

	if (!*newval || redlock_tls_supported(why, sizeof(why)))
		return true;
	if (source < PGC_S_INTERACTIVE || defining_gucs)
		return true;
	GUC_check_errcode(ERRCODE_FEATURE_NOT_SUPPORTED);
	GUC_check_errmsg("TLS is not supported by this build of redlock");
	GUC_check_errdetail("%s", why);
	GUC_check_errhint("Build redlock against hiredis 1.0 or later with its TLS library and OpenSSL's headers (Debian 13: libhiredis-dev and libssl-dev).");
	return false;
}

/* The TLS settings take effect on new connections: a change needs new ones. */
static void
guc_assign_tls(bool newval, void *extra pg_attribute_unused())
{
	if (newval != redlock_tls)
		redlock_connection_generation++;
}

static void
guc_assign_tls_verify(int newval, void *extra pg_attribute_unused())
{
	if (newval != redlock_tls_verify)
		redlock_connection_generation++;
}

/* A TLS file's path must fit a RedlockTlsConfig (and the registry's copy of it). */
static bool
guc_check_tls_file(char **newval, void **extra pg_attribute_unused(),
			   GucSource source pg_attribute_unused())
{
	if (*newval == NULL || strlen(*newval) < MAXPGPATH)
		return true;
	GUC_check_errdetail("The path is longer than %d bytes.", MAXPGPATH - 1);
	return false;
}

static void
guc_assign_tls_ca_file(const char *newval, void *extra pg_attribute_unused())
{
	if (guc_setting_changed(redlock_tls_ca_file, newval))
		redlock_connection_generation++;
}

static void
guc_assign_tls_cert_file(const char *newval, void *extra pg_attribute_unused())
{
	if (guc_setting_changed(redlock_tls_cert_file, newval))
		redlock_connection_generation++;
}

static void
guc_assign_tls_key_file(const char *newval, void *extra pg_attribute_unused())
{
	if (guc_setting_changed(redlock_tls_key_file, newval))
		redlock_connection_generation++;
}

/*
 * redlock_tls_config
 *		Fills config with the TLS settings in force (redlock.tls, redlock.tls_verify and
 *		the three files).  Raises nothing.
 */
void
redlock_tls_config(RedlockTlsConfig *config)
{
	memset(config, 0, sizeof(*config));
	config->enabled = redlock_tls;
	config->verify = (RedlockTlsVerify) redlock_tls_verify;
	strlcpy(config->ca_file, redlock_tls_ca_file ? redlock_tls_ca_file : "",
			sizeof(config->ca_file));
	strlcpy(config->cert_file, redlock_tls_cert_file ? redlock_tls_cert_file : "",
			sizeof(config->cert_file));
	strlcpy(config->key_file, redlock_tls_key_file ? redlock_tls_key_file : "",
			sizeof(config->key_file));
}

/*
 * redlock_tls_config_equal
 *		Returns true when a and b configure TLS alike (all of it ignored when both have
 *		it off).  Raises nothing.
 */
bool
redlock_tls_config_equal(const RedlockTlsConfig *a, const RedlockTlsConfig *b)
{
	if (!a->enabled || !b->enabled)
		return a->enabled == b->enabled;
	return a->verify == b->verify &&
		strcmp(a->ca_file, b->ca_file) == 0 &&
		strcmp(a->cert_file, b->cert_file) == 0 &&
		strcmp(a->key_file, b->key_file) == 0;
}

/*
 * RedlockGucInit
 *		Defines the redlock.* parameters and reserves the prefix.  Called once from
 *		_PG_init.  Raises nothing beyond what DefineCustom*Variable raises.
 */
void
RedlockGucInit(void)
{
	defining_gucs = true;
	DefineCustomStringVariable("redlock.servers",
							   "Redis masters that hold the locks, as host:port items separated by commas.",
							   "A lock is held when a majority of them accepted it. "
							   "Unix socket paths are accepted too.",
							   &servers_setting,
							   "",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   guc_check_servers, guc_assign_servers, NULL);

	DefineCustomIntVariable("redlock.connect_timeout",
							"Time allowed to open a connection to one Redis master.",
							NULL,
							&redlock_connect_timeout_ms,
							200, 1, 60000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("redlock.timeout",
							"Time allowed for one Redis master to answer one request.",
							"Keep it small compared with lock TTLs so that a dead master costs little.",
							&redlock_timeout_ms,
							50, 1, 60000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("redlock.quorum_timeout",
							"Time an acquire keeps retrying while masters are too slow to make a quorum.",
							"Whatever its wait, an attempt that fewer than a quorum answered, but that the masters that timed out would have made one, is retried after the retry delay with doubled patience until this long after the acquire began. 0: raise at once.",
							&redlock_quorum_timeout_ms,
							2000, 0, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("redlock.watch_interval",
							"Time between two looks at the watched locks of a database (redlock_watch).",
							"A watch reports a change within about this long after a quorum of masters shows it.",
							&redlock_watch_interval_ms,
							20, 5, 60000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("redlock.deadlock_timeout",
							"Time an acquire waits before it checks for a deadlock across clusters.",
							"Then once per this long while it waits: it posts what it waits for and holds on the masters and reads the other waiters', and the session of a cycle of waits that began waiting last gets ERROR 40P01. 0: no checks, and this session's waits are not posted, so no cycle through it is found.",
							&redlock_deadlock_timeout_ms,
							1000, 0, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("redlock.retry_delay",
							"Base delay before another attempt to acquire a busy lock.",
							NULL,
							&redlock_retry_delay_ms,
							200, 0, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("redlock.retry_jitter",
							"Largest random time added to the retry delay.",
							"Spreads out clients that collided so that they do not collide again.",
							&redlock_retry_jitter_ms,
							200, 0, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomRealVariable("redlock.clock_drift_factor",
							 "Share of the TTL subtracted from the validity time for clock drift.",
							 "The validity time is TTL - elapsed - (TTL * factor + 2 ms).",
							 &redlock_clock_drift_factor,
							 0.01, 0.0, 0.5,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("redlock.key_prefix",
							   "Text put before each resource name to form its Redis key.",
							   "Leave it empty to share locks with other Redlock clients.",
							   &redlock_key_prefix,
							   "",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("redlock.username",
							   "User name sent with AUTH to each Redis master (Redis ACL).",
							   NULL,
							   &redlock_username,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   NULL, guc_assign_username, NULL);

	DefineCustomStringVariable("redlock.password",
							   "Password sent with AUTH to each Redis master.",
							   NULL,
							   &redlock_password,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, guc_assign_password, NULL);

	DefineCustomStringVariable("redlock.password_file",
							   "File holding the password sent with AUTH to each Redis master.",
							   "Its first line; the file must not be readable by group or others. "
							   "When set, it replaces redlock.password.",
							   &redlock_password_file,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY,
							   guc_check_password_file, guc_assign_password_file, NULL);

	DefineCustomIntVariable("redlock.database",
							"Redis database number selected on each master.",
							NULL,
							&redlock_database,
							0, 0, 1000000,
							PGC_SUSET,
							0,
							NULL, guc_assign_database, NULL);

	DefineCustomBoolVariable("redlock.tls",
							 "Connects to the Redis masters with TLS.",
							 "Needs a build with TLS support (hiredis 1.0 or later). "
							 "Unix-socket masters stay in clear.",
							 &redlock_tls,
							 false,
							 PGC_SUSET,
							 0,
							 guc_check_tls, guc_assign_tls, NULL);

	DefineCustomEnumVariable("redlock.tls_verify",
							 "How much of a Redis master's TLS certificate is verified.",
							 "full: a trusted chain naming the host in redlock.servers; "
							 "ca: a chain to redlock.tls_ca_file; none: nothing.",
							 &redlock_tls_verify,
							 REDLOCK_TLS_VERIFY_FULL,
							 tls_verify_options,
							 PGC_SUSET,
							 0,
							 NULL, guc_assign_tls_verify, NULL);

	DefineCustomStringVariable("redlock.tls_ca_file",
							   "File of the CA certificates trusted to sign the Redis masters' certificates.",
							   "Empty: the system's trusted CAs.",
							   &redlock_tls_ca_file,
							   "",
							   PGC_SUSET,
							   0,
							   guc_check_tls_file, guc_assign_tls_ca_file, NULL);

	DefineCustomStringVariable("redlock.tls_cert_file",
							   "File of the client certificate (chain) presented to the Redis masters.",
							   "Redis asks for one unless tls-auth-clients is off.",
							   &redlock_tls_cert_file,
							   "",
							   PGC_SUSET,
							   0,
							   guc_check_tls_file, guc_assign_tls_cert_file, NULL);

	DefineCustomStringVariable("redlock.tls_key_file",
							   "File of the private key of redlock.tls_cert_file.",
							   "It must not be readable by group or others.",
							   &redlock_tls_key_file,
							   "",
							   PGC_SUSET,
							   0,
							   guc_check_tls_file, guc_assign_tls_key_file, NULL);

	/* After redlock.servers, so that its check sees the masters at server start. */
	DefineCustomIntVariable("redlock.quorum",
							"Redis masters that must accept a lock, an extension or a fencing token.",
							"0 means a majority. More than a majority tolerates masters with bad "
							"clocks, but fewer masters down.",
							&redlock_quorum,
							0, 0, REDLOCK_MAX_NODES,
							PGC_SUSET,
							0,
							guc_check_quorum, guc_assign_quorum, NULL);

	DefineCustomIntVariable("redlock.commit_margin",
							"Validity time a transaction-scoped lock must have left when its transaction commits.",
							"Covers the time between the check and the commit becoming visible "
							"(WAL flush, synchronous standbys).",
							&redlock_commit_margin_ms,
							100, 0, 3600000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("redlock.auto_extend",
							 "Keeps locks acquired while it is on alive until they are released.",
							 "A background worker renews them every TTL/3. "
							 "Requires redlock in shared_preload_libraries.",
							 &redlock_auto_extend,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("redlock.cancel_on_loss",
							 "Cancels the owner's statement when an auto-extended lock is lost.",
							 "Read when the lock is acquired.",
							 &redlock_cancel_on_loss,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("redlock.record_holder",
							 "Writes who takes a lock beside its key, for redlock_lock_info.",
							 "Costs one more key per lock on each master, written with SET NX "
							 "right behind the lock's SET, in the same round trip.",
							 &redlock_record_holder,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * So that one role cannot fill the masters (with noeviction, every other role's
	 * acquire would then fail until its keys expire): its locks of every kind and its
	 * claims, counted by shared/rolequota.c.  Superuser-only, settable per role (ALTER
	 * ROLE ... SET).  A count, no unit.
	 */
	DefineCustomIntVariable("redlock.max_locks_per_role",
							"Locks and claims the sessions of one role (by session user) can have on the Redis masters at once.",
							"Every lock counts (each resource of a set, each permit) from its acquire "
							"until it is released, and every claim until its TTL runs out. Counted "
							"for the whole cluster when redlock is preloaded, else per backend.",
							&redlock_max_locks_per_role,
							10000, 1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	/* Sizes shared memory: only when preloaded (later, PostgreSQL refuses it). */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("redlock.max_auto_extended_locks",
								"Auto-extended locks the cluster can hold at once.",
								"Each takes about 2.6 kB of shared memory.",
								&redlock_max_auto_extended_locks,
								1000, 1, 100000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

	/*
	 * So that one role cannot take every entry and deny auto_extend to all others;
	 * superuser-only, and settable per role (ALTER ROLE ... SET).
	 */
	DefineCustomIntVariable("redlock.max_auto_extended_locks_per_role",
							"Auto-extended locks the backends of one role (by session user) can hold at once.",
							"0 means no limit but redlock.max_auto_extended_locks.",
							&redlock_max_auto_extended_locks_per_role,
							100, 0, 100000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	/*
	 * The longest TTL of this session's locks: superuser-only, so that a role given a
	 * lower one by ALTER ROLE ... SET cannot raise it.  Every TTL is also bounded by
	 * redlock.restart_quarantine while that is on (redlock_ttl_limit).
	 */
	DefineCustomIntVariable("redlock.max_ttl",
							"Longest TTL a lock, claim, permit or extension of this session may have.",
							"Settable per role with ALTER ROLE ... SET. TTLs are also bounded by "
							"redlock.restart_quarantine while it is on.",
							&redlock_max_ttl_ms,
							REDLOCK_MAX_TTL_MS, 1, REDLOCK_MAX_TTL_MS,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * The same for every backend of the cluster (and it must be for every cluster
	 * sharing the masters): it is the longest TTL any key of ours can have, so a master
	 * up that long holds no key from before its restart (wire/masterinfo.c).
	 */
	DefineCustomIntVariable("redlock.restart_quarantine",
							"How long a Redis master restarted without its data is left out of every quorum.",
							"Also the longest TTL any lock may have. 0 turns the quarantine off: "
							"declare so only when the masters keep their data or are restarted "
							"later than the longest TTL.",
							&redlock_restart_quarantine_ms,
							600000, 0, REDLOCK_MAX_TTL_MS,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

#ifdef USE_ASSERT_CHECKING

	/*
	 * Test builds only (test/run's and test/mutate/run's, with assertions): off
	 * leaves the commit guard where it was first registered, behind the transaction
	 * callbacks of extensions first used later, as before issue 38, so that the
	 * checker's negative control can watch what the guard's place prevents.
	 */
	DefineCustomBoolVariable("redlock.test_commit_guard_first",
							 "Test builds only: keeps the commit guard ahead of other extensions' commit work.",
							 NULL,
							 &redlock_test_commit_guard_first,
							 true,
							 PGC_SUSET,
							 GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
#endif

	MarkGUCPrefixReserved("redlock");
	defining_gucs = false;
}

/*
 * redlock_ttl_limit
 *		The longest TTL (ms) a lock of this session may have: redlock.max_ttl, and
 *		redlock.restart_quarantine when that is on and lower (the quarantine is finite
 *		only because no key outlives it).  *setting: the name of the bounding one.
 *		Raises nothing.
 */
int
redlock_ttl_limit(const char **setting)
{
	if (redlock_restart_quarantine_ms > 0 && redlock_restart_quarantine_ms < redlock_max_ttl_ms)
	{
		*setting = "redlock.restart_quarantine";
		return redlock_restart_quarantine_ms;
	}
	*setting = "redlock.max_ttl";
	return redlock_max_ttl_ms;
}
