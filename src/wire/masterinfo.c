/*-------------------------------------------------------------------------
 *
 * masterinfo.c
 *	  What a master says of itself, and whether its replies count toward a quorum.
 *
 * Redlock's safety rests on what the masters do, beyond any client's code (spec §8):
 * a master that restarted without its data must not vote before every key it lost
 * has expired, and a master must never drop a key before its TTL.  Every call
 * connection's handshake asks INFO (run_id, uptime, version, AOF, maxmemory and its
 * policy, clients) and CONFIG GET appendfsync (node.c); callnode.c hands their replies
 * here, then asks redlock_masterinfo_left_out of every reply it reads.
 *
 * Invariant: a reply counts toward a quorum (acquire, set, shared, permit, extend,
 * release, fencing, inspection: every round, through call.c) only from a master that
 *   (a) told what it is (INFO answered on this very connection: a restart closes the
 *       connection, so the INFO read at its handshake is the running server's);
 *   (b) keeps its data (AOF with appendfsync always), or has been up at least
 *       redlock.restart_quarantine plus its clock drift allowance since the latest
 *       moment it can have started, or the quarantine is off (0, the operator's
 *       declaration).  Every TTL is bounded by that setting (redlock_ttl_limit), so
 *       every key the master may have lost has expired everywhere by then;
 *   (c) cannot evict keys: no maxmemory, or maxmemory-policy noeviction.
 * A master left out still gets every command (its keys are there when it counts
 * again); its replies are counted as failures, with the reason as their error text, and
 * its "key gone" answers as nothing (tally.c), so a lock is never judged lost on its
 * word either.
 *
 * A leaf of the wire layer: it calls only the leaves (settings, clock drift).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "guc.h"
#include "validity.h"
#include "wire/masterinfo.h"

/*
 * redlock_masterinfo_reset
 *		Forgets what info said: a new connection asks again.  Raises nothing.
 */
void
redlock_masterinfo_reset(RedlockMasterInfo *info)
{
	memset(info, 0, sizeof(*info));
}

/* Copies the value of INFO line "name:value" in text into out (outlen bytes); false if none. */
static bool
masterinfo_field(const char *text, const char *name, char *out, size_t outlen)
{
	size_t		namelen = strlen(name);

	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
	{
		size_t		len;

		if (strncmp(line, name, namelen) != 0 || line[namelen] != ':')
			continue;
		line += namelen + 1;
		len = strcspn(line, "\r\n");
		if (len >= outlen)
			len = outlen - 1;
		memcpy(out, line, len);
		out[len] = '\0';
		return true;
	}
	return false;
}

/* The integer of INFO line "name:value" in text, or fallback. */
static int64
masterinfo_integer(const char *text, const char *name, int64 fallback)
{
	char		value[32];

	if (!masterinfo_field(text, name, value, sizeof(value)))
		return fallback;
	return strtoll(value, NULL, 10);
}

/*
 * redlock_masterinfo_read
 *		Takes in a probe's reply text, read at received_ms (redlock_clock_ms()): INFO's
 *		(its sections as "name:value" lines) or CONFIG GET appendfsync's (the pair as
 *		"appendfsync\nvalue").  The master started at the latest received_ms less its
 *		uptime in whole seconds (INFO rounds it down; it was measured before the reply
 *		came).  Raises nothing.
 */
void
redlock_masterinfo_read(RedlockMasterInfo *info, const char *text, double received_ms)
{
	char		version[24];

	if (strncmp(text, "appendfsync\n", 12) == 0)
	{
		info->fsync = strcmp(text + 12, "always") == 0 ? REDLOCK_FSYNC_ALWAYS : REDLOCK_FSYNC_OTHER;
		return;
	}
	info->known = true;
	info->refused[0] = '\0';
	masterinfo_field(text, "run_id", info->run_id, sizeof(info->run_id));
	if (masterinfo_field(text, "valkey_version", version, sizeof(version)))
		snprintf(info->server, sizeof(info->server), "valkey %s", version);
	else if (masterinfo_field(text, "redis_version", version, sizeof(version)))
		snprintf(info->server, sizeof(info->server), "redis %s", version);
	info->uptime_s = masterinfo_integer(text, "uptime_in_seconds", 0);
	info->up_since_ms = received_ms - info->uptime_s * 1000.0;
	info->aof = masterinfo_integer(text, "aof_enabled", 0) == 1;
	info->maxmemory = masterinfo_integer(text, "maxmemory", 0);
	if (!masterinfo_field(text, "maxmemory_policy", info->policy, sizeof(info->policy)))
		strlcpy(info->policy, "noeviction", sizeof(info->policy));
	info->clients = masterinfo_integer(text, "connected_clients", 0);
}

/*
 * redlock_masterinfo_refused
 *		Records a probe's error reply (error: Redis' text): INFO's leaves the master
 *		unknown, so left out (the invariant's (a)); CONFIG's leaves appendfsync unknown,
 *		so the master is not known to keep its data.  Raises nothing.
 */
void
redlock_masterinfo_refused(RedlockMasterInfo *info, const char *error)
{
	if (info->known)
	{
		info->fsync = REDLOCK_FSYNC_UNKNOWN;
		return;
	}
	strlcpy(info->refused, error, sizeof(info->refused));
}

/*
 * redlock_masterinfo_keeps_data
 *		True when info's master survives a restart with every acknowledged write: AOF
 *		on, with appendfsync always.  Raises nothing.
 */
bool
redlock_masterinfo_keeps_data(const RedlockMasterInfo *info)
{
	return info->aof && info->fsync == REDLOCK_FSYNC_ALWAYS;
}

/*
 * redlock_masterinfo_evicts
 *		True when info's master may drop keys before their TTL: a maxmemory with any
 *		policy but noeviction.  Raises nothing.
 */
bool
redlock_masterinfo_evicts(const RedlockMasterInfo *info)
{
	return info->maxmemory > 0 && strcmp(info->policy, "noeviction") != 0;
}

/*
 * redlock_masterinfo_quarantine_left_ms
 *		How long (ms) info's master stays out after its restart, at now_ms: until it has
 *		been up redlock.restart_quarantine plus that span's drift allowance (spec §3
 *		step 4) since the latest it can have started; 0 when it keeps its data, the
 *		quarantine is off or over.  Raises nothing.
 */
double
redlock_masterinfo_quarantine_left_ms(const RedlockMasterInfo *info, double now_ms)
{
	double		left;

	if (redlock_restart_quarantine_ms == 0 || redlock_masterinfo_keeps_data(info))
		return 0;
	left = info->up_since_ms + redlock_restart_quarantine_ms +
		redlock_clock_drift_ms(redlock_restart_quarantine_ms) - now_ms;
	return left > 0 ? left : 0;
}

/*
 * redlock_masterinfo_left_out
 *		True when a reply from info's master to a command sent at now_ms (the callers
 *		judge at the sending, not the reading) must not count toward any quorum (the invariant above), with why (whylen bytes) saying which rule and
 *		what to do.  Raises nothing.
 */
bool
redlock_masterinfo_left_out(const RedlockMasterInfo *info, double now_ms, char *why,
							size_t whylen)
{
	double		left;

	if (!info->known)
	{
		snprintf(why, whylen, "left out: INFO %s%s, so its restarts and eviction cannot be checked",
				 info->refused[0] ? "was refused: " : "did not answer",
				 info->refused);
		return true;
	}
	if (redlock_masterinfo_evicts(info))
	{
		snprintf(why, whylen, "left out: it may evict keys (maxmemory %lld bytes, maxmemory-policy %s)",
				 (long long) info->maxmemory, info->policy);
		return true;
	}
	left = redlock_masterinfo_quarantine_left_ms(info, now_ms);
	if (left > 0)
	{
		snprintf(why, whylen, "left out for %.0f s more: restarted %lld s ago without its data (no AOF with appendfsync always)",
				 ceil(left / 1000.0), (long long) ((now_ms - info->up_since_ms) / 1000.0));
		return true;
	}
	return false;
}
