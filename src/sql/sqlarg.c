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
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "compat.h"
#include "guc.h"
#include "redlock.h"
#include "sql/sqlarg.h"
#include "tally.h"

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
