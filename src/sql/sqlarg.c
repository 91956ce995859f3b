/*-------------------------------------------------------------------------
 *
 * sqlarg.c
 *	  What the SQL functions (sql.c, sqlinspect.c) check before they go further: the
 *	  resource argument, the configuration, parallel mode; and resource names read
 *	  back from keys, shown in the database's encoding.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type_d.h"
#include "common/string.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "storage/proc.h"
#include "utils/builtins.h"

#include "compat.h"
#include "guc.h"
#include "redlock.h"
#include "sql/sqlarg.h"
#include "tally.h"
#include "validity.h"

/* A resource name from its text: not empty, at most REDLOCK_MAX_RESOURCE_LEN bytes. */
static char *
sqlarg_name(text *resource)
{
	int			len = VARSIZE_ANY_EXHDR(resource);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resource must not be empty")));
	if (len > REDLOCK_MAX_RESOURCE_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resource name is too long"),
				 errdetail("The name is %d bytes long; the limit is %d bytes.",
						   len, REDLOCK_MAX_RESOURCE_LEN)));
	return text_to_cstring(resource);
}

/*
 * redlock_sqlarg_resource
 *		Returns argument argno of the SQL call as a resource name (palloc'd): not NULL,
 *		not empty, at most REDLOCK_MAX_RESOURCE_LEN bytes.  The bigint overloads (1.4),
 *		for locks keyed as pg_advisory_lock(bigint) keys them, pass a key instead: it
 *		names the resource of its decimal text (key 42 is '42').
 *		Errors: 22004 NULL; 22023 empty or too long.
 */
char *
redlock_sqlarg_resource(FunctionCallInfo fcinfo, int argno)
{
	text	   *resource;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource must not be null")));
	if (get_fn_expr_argtype(fcinfo->flinfo, argno) == INT8OID)
		return psprintf(INT64_FORMAT, PG_GETARG_INT64(argno));
	resource = PG_GETARG_TEXT_PP(argno);
	return sqlarg_name(resource);
}

/*
 * redlock_sqlarg_resources
 *		Returns argument argno of the SQL call, a text[], as the resource names of a set
 *		(palloc'd, *n of them): a one-dimensional array of 1..REDLOCK_MAX_SET names,
 *		each as for redlock_sqlarg_resource, none twice.
 *		Errors: 22004 NULL array or element; 22023 empty array, more than
 *		REDLOCK_MAX_SET names, a name empty, too long or given twice; 2202E more than
 *		one dimension.
 */
char	  **
redlock_sqlarg_resources(FunctionCallInfo fcinfo, int argno, int *n)
{
	ArrayType  *array;
	Datum	   *elems;
	bool	   *nulls;
	char	  **names;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resources must not be null")));
	array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("resources must be a one-dimensional array")));
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resources must not be empty")));
	if (*n > REDLOCK_MAX_SET)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a set may hold at most %d resources", REDLOCK_MAX_SET),
				 errdetail("The set given has %d.", *n),
				 errhint("One script sets a set's keys on each master; acquire a larger set in parts, always in the same order.")));
	names = palloc(sizeof(char *) * *n);
	for (int k = 0; k < *n; k++)
	{
		if (nulls[k])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("resources must not contain nulls")));
		names[k] = sqlarg_name(DatumGetTextPP(elems[k]));
		for (int j = 0; j < k; j++)
			if (strcmp(names[j], names[k]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("resource \"%s\" appears more than once in the set", names[k])));
	}
	return names;
}

/*
 * redlock_sqlarg_require_servers
 *		Refuses to go to the masters while redlock.servers lists none, or while
 *		redlock.quorum does not fit the masters it lists (redlock.servers changed after
 *		it was set).  Errors: 22023 either way.
 */
void
redlock_sqlarg_require_servers(void)
{
	const char *problem;

	if (redlock_server_list == NULL || redlock_server_list->count == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no Redis masters are configured"),
				 errhint("Set redlock.servers to the masters' host:port items, for example in postgresql.conf.")));
	problem = redlock_quorum_problem(redlock_quorum, redlock_server_list->count);
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("redlock.quorum does not fit redlock.servers"),
				 errdetail("%s", problem),
				 errhint("Set redlock.quorum from %d to %d, or to 0 for a majority.",
						 redlock_server_list->count / 2 + 1, redlock_server_list->count)));
}

/*
 * redlock_sqlarg_refuse_parallel
 *		Refuses to run in a parallel operation: locks live in this backend, and a
 *		parallel worker's would vanish with it.  Errors: 25000.
 */
void
redlock_sqlarg_refuse_parallel(void)
{
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot use redlock locks during a parallel operation"),
				 errhint("Mark functions that take or release redlock locks PARALLEL UNSAFE.")));
}

/*
 * redlock_sqlarg_resource_from_utf8
 *		The resource a key names (name: the key after its prefix, in UTF-8, as another
 *		backend or another client wrote it) as text in this database's encoding, into
 *		*out.  Returns false when this database cannot show it (not UTF-8, or
 *		characters this database's encoding lacks).  Raises nothing for the name.
 */
bool
redlock_sqlarg_resource_from_utf8(const char *name, Datum *out)
{
	int			len = strlen(name);
	int			encoding = GetDatabaseEncoding();
	Oid			proc;
	char	   *buf;

	if (!pg_verify_mbstr(PG_UTF8, name, len, true))
		return false;
	if (encoding == PG_UTF8 || encoding == PG_SQL_ASCII || pg_is_ascii(name))
	{
		*out = CStringGetTextDatum(name);
		return true;
	}
	proc = FindDefaultConversionProc(PG_UTF8, encoding);
	if (!OidIsValid(proc))
		return false;
	buf = palloc((Size) len * MAX_CONVERSION_GROWTH + 1);
	if (pg_do_encoding_conversion_buf(proc, PG_UTF8, encoding, (unsigned char *) name, len,
									  (unsigned char *) buf, len * MAX_CONVERSION_GROWTH + 1,
									  true) < len)
		return false;
	*out = CStringGetTextDatum(buf);
	return true;
}

/*
 * redlock_sqlarg_ttl
 *		Returns argument argno of fcinfo as a TTL in milliseconds: 1 to the session's
 *		limit (redlock_ttl_limit: redlock.max_ttl, and redlock.restart_quarantine
 *		while it is on), and long enough to leave some validity after the clock drift
 *		allowance (spec §3 step 4).  A NULL gives null_ttl when null_allowed.  Raises
 *		22004 for a NULL otherwise, 22023 for a TTL out of range or too short.
 */
int
redlock_sqlarg_ttl(FunctionCallInfo fcinfo, int argno, bool null_allowed, int null_ttl)
{
	int			ttl_ms;
	const char *setting;
	int			limit = redlock_ttl_limit(&setting);

	if (PG_ARGISNULL(argno))
	{
		if (null_allowed)
			return null_ttl;
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ttl_ms must not be null")));
	}
	ttl_ms = PG_GETARG_INT32(argno);
	if (ttl_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms must be greater than zero"),
				 errdetail("The TTL given was %d ms.", ttl_ms)));
	if (ttl_ms > limit)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms must be at most %d for role \"%s\"", limit,
						GetUserNameFromId(GetUserId(), false)),
				 errdetail("The TTL given was %d ms; %s is %d ms.", ttl_ms, setting, limit),
				 strcmp(setting, "redlock.max_ttl") == 0
				 ? errhint("Take a shorter TTL and extend the lock with redlock_extend() while the work runs, or ask a superuser for a longer redlock.max_ttl (ALTER ROLE ... SET).")
				 : errhint("Take a shorter TTL and extend the lock with redlock_extend() while the work runs: redlock.restart_quarantine bounds every TTL, since a master restarted without its data is left out for that long.")));
	/* Spec §3 step 4: a TTL that the drift allowance eats whole can never be valid. */
	if (!redlock_ttl_leaves_validity(ttl_ms))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl_ms is too short to leave any validity time"),
				 errdetail("A TTL of %d ms leaves nothing after the clock drift allowance (TTL * redlock.clock_drift_factor + 2 ms).",
						   ttl_ms)));
	return ttl_ms;
}

/*
 * redlock_sqlarg_wait
 *		Returns argument argno of fcinfo as a wait in milliseconds: >= 0, or -1 for a
 *		NULL (wait without limit; spec §4's retries until acquired).  Raises 22023 for a
 *		negative wait.
 */
int
redlock_sqlarg_wait(FunctionCallInfo fcinfo, int argno)
{
	int			wait_ms;

	if (PG_ARGISNULL(argno))
		return -1;
	wait_ms = PG_GETARG_INT32(argno);
	if (wait_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait_ms must not be negative"),
				 errdetail("The wait given was %d ms.", wait_ms),
				 errhint("Pass 0 for a single attempt, or NULL to wait without limit.")));
	return wait_ms;
}

/*
 * redlock_sqlarg_permits
 *		Returns argument argno of fcinfo as a semaphore's number of permits: 1 to
 *		REDLOCK_MAX_PERMITS.  Raises 22004 for a NULL, 22023 out of range.  Not a
 *		distlock section: permits are a semaphore of locks (doc/permits.md).
 */
int
redlock_sqlarg_permits(FunctionCallInfo fcinfo, int argno)
{
	int			permits;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("permits must not be null")));
	permits = PG_GETARG_INT32(argno);
	if (permits < 1 || permits > REDLOCK_MAX_PERMITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("permits must be between 1 and %d", REDLOCK_MAX_PERMITS),
				 errdetail("The number of permits given was %d.", permits),
				 errhint("Each permit is a lock of its own on the masters, all tried in one round trip.")));
	return permits;
}

/*
 * redlock_sqlarg_wait_bound
 *		An unlimited wait (*wait_ms < 0, milliseconds) still honours lock_timeout, as
 *		PostgreSQL's lock waits do: sets *wait_ms to it (ms) and returns true when it
 *		bounds the wait, else returns false and leaves *wait_ms.  Raises nothing.
 *		Spec §4 (the retry loop's end).
 */
bool
redlock_sqlarg_wait_bound(int *wait_ms)
{
	if (*wait_ms >= 0 || LockTimeout <= 0)
		return false;
	*wait_ms = LockTimeout;
	return true;
}
