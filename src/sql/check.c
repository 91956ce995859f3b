/*-------------------------------------------------------------------------
 *
 * check.c
 *	  redlock_check() (1.8): what Redlock's safety assumes of each master, against
 *	  what the master does, with a verdict and a hint per master.  The look is
 *	  protocol/health.c's; the words are here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "guc.h"
#include "protocol/health.h"
#include "redlock.h"
#include "sql/sqlarg.h"
#include "wire/nodeset.h"

#define CHECK_COLS 13

/* A clock further than this (ms) from the median master's is reported. */
#define CHECK_CLOCK_OFFSET_MS 500

/* The persistence column's words for info. */
static const char *
check_persistence(const RedlockMasterInfo *info)
{
	if (!info->aof)
		return "none: no AOF";
	if (info->fsync == REDLOCK_FSYNC_ALWAYS)
		return "aof, appendfsync always";
	if (info->fsync == REDLOCK_FSYNC_OTHER)
		return "aof, appendfsync not always";
	return "aof, appendfsync unknown (CONFIG GET refused)";
}

/* Appends one sentence to a hint. */
static void
check_hint(StringInfo hint, const char *sentence)
{
	appendStringInfo(hint, "%s%s", hint->len > 0 ? " " : "", sentence);
}

/* The verdict of row m ("ok", "warning", "left out", "unreachable"), its hint in hint. */
static const char *
check_verdict(const RedlockMasterHealth *m, StringInfo hint)
{
	const RedlockMasterInfo *info = &m->info;
	bool		keeps = redlock_masterinfo_keeps_data(info);

	if (!m->reachable && !info->refused[0])
	{
		appendStringInfo(hint, "Start or reach it (%s): while it is down, one master fewer may fail.",
						 m->error);
		return "unreachable";
	}
	if (m->left_out)
	{
		if (!info->known)
			check_hint(hint, "Grant the Redis user redlock connects as the INFO command (+info): without it, restarts and eviction cannot be checked, so the master is left out.");
		else if (redlock_masterinfo_evicts(info))
			check_hint(hint, "Set maxmemory-policy noeviction (CONFIG SET and redis.conf): a master that may evict keys can drop a held lock, so it is left out.");
		else
			appendStringInfo(hint, "It restarted without its data and counts again in %.0f s (redlock.restart_quarantine). Run masters with appendonly yes and appendfsync always to skip the quarantine.",
							 ceil(m->quarantine_left_ms / 1000.0));
		return "left out";
	}
	if (!keeps && redlock_restart_quarantine_ms == 0)
		check_hint(hint, "redlock.restart_quarantine is 0 and this master does not keep its data: a restart while a lock is held lets a second holder in, unless restarts wait longer than the longest TTL.");
	else if (!keeps)
		appendStringInfo(hint, "A restart will leave it out for %d s (redlock.restart_quarantine): appendonly yes and appendfsync always avoid that.",
						 redlock_restart_quarantine_ms / 1000);
	if (info->maxmemory == 0)
		check_hint(hint, "No maxmemory: other data can fill the machine; give the masters to redlock alone, or a prefix and a memory bound (noeviction).");
	if (m->has_clock && fabs(m->clock_offset_ms) > CHECK_CLOCK_OFFSET_MS)
		appendStringInfo(hint, "%sIts clock is %.0f ms off the other masters': check NTP; a clock that jumps shortens or lengthens every TTL there.",
						 hint->len > 0 ? " " : "", m->clock_offset_ms);
	return hint->len > 0 ? "warning" : "ok";
}

/*
 * redlock_check() RETURNS TABLE(master text, reachable boolean, rtt_ms float8,
 *		server text, persistence text, maxmemory bigint, maxmemory_policy text,
 *		uptime_ms bigint, quarantine_left_ms bigint, clock_offset_ms float8,
 *		clients bigint, verdict text, hint text) (1.8)
 *
 * One row per configured master: what Redlock's safety assumes (spec §8 and
 * doc/safety.md: a master keeps its data across restarts or stays out longer than the
 * longest TTL; it never evicts keys; its clock does not jump) and what this master
 * does, from one round of INFO, CONFIG GET appendfsync and TIME (each master waited
 * for within redlock.timeout): reachable; round trip (ms); server and version;
 * persistence; maxmemory (bytes, 0: none) and its policy; uptime (ms, to the second);
 * quarantine left (ms; 0 when it counts); its clock less the median master's (ms);
 * connected clients; verdict 'ok', 'warning' (it counts, but something safety leans
 * on is missing), 'left out' (its replies count toward no quorum now) or
 * 'unreachable'; and a hint saying what to do (NULL when ok).  Columns a master did
 * not answer are NULL.  Errors: 22023 no servers configured; 57014 when canceled.
 */
PG_FUNCTION_INFO_V1(redlock_check);
Datum
redlock_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RedlockMasterHealth *masters;
	int			n;

	redlock_sqlarg_require_servers();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != CHECK_COLS)
		elog(ERROR, "incorrect number of output arguments");
	n = redlock_health_check(redlock_nodeset_current(), &masters);
	for (int i = 0; i < n; i++)
	{
		const RedlockMasterHealth *m = &masters[i];
		Datum		values[CHECK_COLS];
		bool		nulls[CHECK_COLS] = {0};
		StringInfoData hint;
		const char *verdict;

		initStringInfo(&hint);
		verdict = check_verdict(m, &hint);
		values[0] = CStringGetTextDatum(m->name);
		values[1] = BoolGetDatum(m->reachable);
		values[2] = Float8GetDatum(m->rtt_ms);
		values[3] = CStringGetTextDatum(m->info.server);
		values[4] = CStringGetTextDatum(check_persistence(&m->info));
		values[5] = Int64GetDatum(m->info.maxmemory);
		values[6] = CStringGetTextDatum(m->info.policy);
		values[7] = Int64GetDatum(m->info.uptime_s * 1000);
		values[8] = Int64GetDatum((int64) ceil(m->quarantine_left_ms));
		for (int c = 2; c <= 8 && !m->reachable; c++)
			nulls[c] = true;
		values[9] = Float8GetDatum(m->clock_offset_ms);
		nulls[9] = !m->has_clock;
		values[10] = Int64GetDatum(m->info.clients);
		nulls[10] = !m->reachable;
		values[11] = CStringGetTextDatum(verdict);
		values[12] = CStringGetTextDatum(hint.data);
		nulls[12] = hint.len == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
