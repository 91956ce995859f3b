/*-------------------------------------------------------------------------
 *
 * holder.c
 *	  The holder record: who took a lock (cluster, backend pid, application_name,
 *	  database, role, when, scope), written beside the lock's key by the acquire that
 *	  took it, so that any cluster can say who holds a resource (redlock_lock_info).
 *
 * The record is text: a version ("1"), then the fields, each after a tab; tabs,
 * newlines and backslashes inside a field are written \t, \n and \\.  The last
 * field, when the lock was taken, is the time of the attempt that wrote it, on this
 * server's clock (microseconds since the Unix epoch).  On the masters
 * it follows the lock's token and a tab (REDLOCK_HOLDER_KEY_LUA): the scripts that
 * read it drop a record whose token is not the key's, so a record is only ever shown
 * beside the lock it was written for.  It is informative only: nothing in the lock's
 * safety reads it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "commands/dbcommands.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "protocol/holder.h"
#include "redlock.h"

#define HOLDER_VERSION "1"
#define HOLDER_FIELDS 7			/* after the version, the time included */

/* Appends field to buf after a tab, escaped. */
static void
holder_append_field(StringInfo buf, const char *field)
{
	appendStringInfoChar(buf, '\t');
	for (const char *p = field ? field : ""; *p; p++)
	{
		if (*p == '\t')
			appendStringInfoString(buf, "\\t");
		else if (*p == '\n')
			appendStringInfoString(buf, "\\n");
		else if (*p == '\\')
			appendStringInfoString(buf, "\\\\");
		else
			appendStringInfoChar(buf, *p);
	}
}

/*
 * This backend's record up to its scope, kept while application_name and the session
 * user (SET SESSION AUTHORIZATION) stay the same.
 */
static char *cached_record = NULL;
static char *cached_application_name = NULL;
static Oid	cached_user = InvalidOid;

/* Builds this backend's record up to its scope into TopMemoryContext. */
static void
holder_build_cached(void)
{
	StringInfoData buf;
	char		number[32];
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	if (cached_record)
		pfree(cached_record);
	if (cached_application_name)
		pfree(cached_application_name);
	initStringInfo(&buf);
	appendStringInfoString(&buf, HOLDER_VERSION);
	holder_append_field(&buf, redlock_holder_cluster());
	snprintf(number, sizeof(number), "%d", MyProcPid);
	holder_append_field(&buf, number);
	holder_append_field(&buf, application_name);
	holder_append_field(&buf, get_database_name(MyDatabaseId));
	holder_append_field(&buf, GetUserNameFromId(GetSessionUserId(), true));
	cached_record = buf.data;
	cached_application_name = pstrdup(application_name ? application_name : "");
	cached_user = GetSessionUserId();
	MemoryContextSwitchTo(old);
}

/*
 * redlock_holder_cluster
 *		The name this cluster goes by in holder and wait records: cluster_name, or,
 *		when it is empty, the system identifier.  Returns a static buffer.  Raises
 *		nothing.  Not a distlock section (the holder record, doc/deadlock.md §2).
 */
const char *
redlock_holder_cluster(void)
{
	static char number[32];

	if (cluster_name && cluster_name[0])
		return cluster_name;
	snprintf(number, sizeof(number), UINT64_FORMAT, GetSystemIdentifier());
	return number;
}

/*
 * redlock_holder_record
 *		Returns the holder record of this backend for a lock it takes now, palloc'd:
 *		cluster_name (or, when it is empty, the system identifier), MyProcPid,
 *		application_name, the database, the session user and scope ("session",
 *		"transaction" or "claim"); each attempt adds its time
 *		(redlock_holder_now_us) after the token.  All but
 *		application_name, the session user and scope are fixed for the session: the
 *		record is built again only when one of those two changed.  Runs catalog lookups
 *		then, so only inside a transaction.  Raises nothing of its own.
 */
char *
redlock_holder_record(const char *scope)
{
	StringInfoData buf;

	if (cached_record == NULL || cached_user != GetSessionUserId() ||
		strcmp(cached_application_name, application_name ? application_name : "") != 0)
		holder_build_cached();
	initStringInfo(&buf);
	appendStringInfoString(&buf, cached_record);
	holder_append_field(&buf, scope);
	return buf.data;
}

/*
 * redlock_holder_now_us
 *		The time for a holder record: now, in microseconds since the Unix epoch.
 *		Raises nothing.
 */
int64
redlock_holder_now_us(void)
{
	return (int64) GetCurrentTimestamp() +
		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC);
}

/* Copies one escaped field of len bytes at p, unescaped. */
static char *
holder_unescape(const char *p, int len)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < len; i++)
	{
		if (p[i] == '\\' && i + 1 < len)
		{
			i++;
			appendStringInfoChar(&buf, p[i] == 't' ? '\t' : p[i] == 'n' ? '\n' : p[i]);
		}
		else
			appendStringInfoChar(&buf, p[i]);
	}
	return buf.data;
}

/*
 * redlock_holder_parse
 *		Parses a holder record (text, len bytes: the record without the token) into
 *		holder, its strings palloc'd.  Returns false, holder untouched, for a record
 *		that is not of this version's form (written by a later release, or not by us).
 *		Raises nothing of its own.
 */
bool
redlock_holder_parse(const char *text, int len, RedlockHolder *holder)
{
	const char *fields[HOLDER_FIELDS];
	int			lens[HOLDER_FIELDS];
	int			n = 0;
	const char *p = text;
	const char *end = text + len;
	char	   *number;
	char	   *tail;
	int64		acquired;
	long		pid;

	if (len < 1 || strncmp(text, HOLDER_VERSION "\t", strlen(HOLDER_VERSION) + 1) != 0)
		return false;
	p += strlen(HOLDER_VERSION);
	while (p < end && *p == '\t')
	{
		const char *start = ++p;

		while (p < end && *p != '\t')
			p++;
		if (n == HOLDER_FIELDS)
			return false;
		fields[n] = start;
		lens[n++] = (int) (p - start);
	}
	if (n != HOLDER_FIELDS || p != end)
		return false;

	number = holder_unescape(fields[1], lens[1]);
	errno = 0;
	pid = strtol(number, &tail, 10);
	if (errno != 0 || *tail != '\0' || pid <= 0 || pid > INT_MAX)
		return false;
	number = holder_unescape(fields[6], lens[6]);
	errno = 0;
	acquired = strtoi64(number, &tail, 10);
	if (errno != 0 || *tail != '\0' || acquired < 0)
		return false;

	holder->cluster = holder_unescape(fields[0], lens[0]);
	holder->pid = (int) pid;
	holder->application_name = holder_unescape(fields[2], lens[2]);
	holder->database = holder_unescape(fields[3], lens[3]);
	holder->role = holder_unescape(fields[4], lens[4]);
	holder->scope = holder_unescape(fields[5], lens[5]);
	holder->acquired_at = (TimestampTz) acquired -
		((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC);
	return true;
}
