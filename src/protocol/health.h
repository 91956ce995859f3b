/*-------------------------------------------------------------------------
 *
 * health.h
 *	  One look at what each master is, against what Redlock's safety assumes of it
 *	  (health.c, for redlock_check()).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_HEALTH_H
#define REDLOCK_HEALTH_H

#include "redlock.h"
#include "wire/masterinfo.h"

/* One master as the look saw it. */
typedef struct RedlockMasterHealth
{
	char		name[REDLOCK_NODE_NAME_LEN];
	bool		reachable;		/* INFO answered */
	char		error[REDLOCK_NODE_ERROR_LEN];	/* why not, or "" */
	double		rtt_ms;			/* INFO's round trip */
	RedlockMasterInfo info;		/* what INFO and CONFIG GET said */
	bool		has_clock;		/* TIME answered */
	double		clock_offset_ms;	/* its clock less the median master's */
	double		quarantine_left_ms; /* wire/masterinfo.c's rule, now */
	bool		left_out;		/* its replies count toward no quorum now */
	char		why[REDLOCK_NODE_ERROR_LEN];	/* ... why, or "" */
} RedlockMasterHealth;

extern int	redlock_health_check(RedlockNodeSet *set, RedlockMasterHealth **masters);

#endif							/* REDLOCK_HEALTH_H */
