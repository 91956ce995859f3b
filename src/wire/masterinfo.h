/*-------------------------------------------------------------------------
 *
 * masterinfo.h
 *	  What a master says of itself (INFO, CONFIG GET appendfsync) and the one rule
 *	  that follows from it: whether its replies count toward a quorum (masterinfo.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_MASTERINFO_H
#define REDLOCK_MASTERINFO_H

#include "redlock.h"

/* What a master's appendfsync is, as CONFIG GET told (or could not). */
typedef enum RedlockFsync
{
	REDLOCK_FSYNC_UNKNOWN = 0,	/* not asked yet, or CONFIG refused */
	REDLOCK_FSYNC_ALWAYS,		/* every write on disk before its reply */
	REDLOCK_FSYNC_OTHER			/* everysec or no: a crash loses the last writes */
} RedlockFsync;

#define REDLOCK_RUN_ID_LEN	40		/* hex characters of Redis' run_id */

/* One master as its INFO (and CONFIG GET appendfsync) described it. */
typedef struct RedlockMasterInfo
{
	bool		known;			/* INFO answered on this connection */
	char		refused[REDLOCK_NODE_ERROR_LEN];	/* INFO's error reply, or "" */
	char		run_id[REDLOCK_RUN_ID_LEN + 1];
	char		server[48];		/* "redis 7.0.15", "valkey 8.1.1" */
	int64		uptime_s;		/* uptime_in_seconds when INFO was read */
	double		up_since_ms;	/* the latest it can have started (redlock_clock_ms) */
	bool		aof;			/* aof_enabled:1 */
	RedlockFsync fsync;
	int64		maxmemory;		/* bytes; 0: no limit */
	char		policy[32];		/* maxmemory_policy */
	int64		clients;		/* connected_clients */
} RedlockMasterInfo;

extern void redlock_masterinfo_reset(RedlockMasterInfo *info);
extern void redlock_masterinfo_read(RedlockMasterInfo *info, const char *text,
									double received_ms);
extern void redlock_masterinfo_refused(RedlockMasterInfo *info, const char *error);
extern bool redlock_masterinfo_keeps_data(const RedlockMasterInfo *info);
extern bool redlock_masterinfo_evicts(const RedlockMasterInfo *info);
extern double redlock_masterinfo_quarantine_left_ms(const RedlockMasterInfo *info,
													double now_ms);
extern bool redlock_masterinfo_left_out(const RedlockMasterInfo *info, double now_ms,
										char *why, size_t whylen);

#endif							/* REDLOCK_MASTERINFO_H */
