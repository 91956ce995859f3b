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
 * Changing the servers, credentials or database bumps redlock_connection_generation;
 * node.c compares it on its next use and re-opens its connections.  Assign hooks do
 * nothing else, since they also run while transactions are being rolled back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>

#include "utils/guc.h"

#include "redlock.h"

/*---- GUC variables ----*/

int			redlock_connect_timeout_ms = 200;
int			redlock_timeout_ms = 50;
int			redlock_retry_delay_ms = 200;
int			redlock_retry_jitter_ms = 200;
double		redlock_clock_drift_factor = 0.01;
char	   *redlock_key_prefix = NULL;
char	   *redlock_username = NULL;
char	   *redlock_password = NULL;
int			redlock_database = 0;

static char *servers_setting = NULL;

/* The parsed redlock.servers value: the check hook's "extra", owned by the GUC code. */
const RedlockServerList *redlock_server_list = NULL;

/* Bumped whenever the connections must be re-opened. */
uint64		redlock_connection_generation = 0;

/* Validates redlock.servers, leaving the parsed list as extra (malloc'd, as GUC needs). */
static bool
check_servers(char **newval, void **extra, GucSource source pg_attribute_unused())
{
	char		errbuf[320];
	RedlockServerList *list = redlock_servers_parse(*newval, errbuf, sizeof(errbuf));

	if (list == NULL)
	{
		GUC_check_errdetail("%s", errbuf);
		GUC_check_errhint("List the Redis masters as host:port items separated by commas, "
						  "for example \"10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379\".");
		return false;
	}
	*extra = list;
	return true;
}

static void
assign_servers(const char *newval pg_attribute_unused(), void *extra)
{
	redlock_server_list = (const RedlockServerList *) extra;
	redlock_connection_generation++;
}

/* Credentials and the database number are sent when a connection opens: re-open. */
static void
assign_reconnect_string(const char *newval pg_attribute_unused(),
						void *extra pg_attribute_unused())
{
	redlock_connection_generation++;
}

static void
assign_reconnect_int(int newval pg_attribute_unused(), void *extra pg_attribute_unused())
{
	redlock_connection_generation++;
}

/*
 * RedlockGucInit
 *		Defines the redlock.* parameters and reserves the prefix.  Called once from
 *		_PG_init.  Raises nothing beyond what DefineCustom*Variable raises.
 */
void
RedlockGucInit(void)
{
	DefineCustomStringVariable("redlock.servers",
							   "Redis masters that hold the locks, as host:port items separated by commas.",
							   "A lock is held when a majority of them accepted it. "
							   "Unix socket paths are accepted too.",
							   &servers_setting,
							   "",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   check_servers, assign_servers, NULL);

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
							   NULL, assign_reconnect_string, NULL);

	DefineCustomStringVariable("redlock.password",
							   "Password sent with AUTH to each Redis master.",
							   NULL,
							   &redlock_password,
							   "",
							   PGC_SUSET,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, assign_reconnect_string, NULL);

	DefineCustomIntVariable("redlock.database",
							"Redis database number selected on each master.",
							NULL,
							&redlock_database,
							0, 0, 1000000,
							PGC_SUSET,
							0,
							NULL, assign_reconnect_int, NULL);

	MarkGUCPrefixReserved("redlock");
}
