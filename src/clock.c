/*-------------------------------------------------------------------------
 *
 * clock.c
 *	  The clock every validity time is measured on (spec §3 step 1).
 *
 * A leaf: validity.c, quorum.c, the connection layer, the lock table and the lease
 * read it.
 * Validity must keep running while the host is suspended (a laptop lid, a paused
 * VM), because the keys' TTLs keep running on the masters meanwhile; CLOCK_MONOTONIC
 * stops then, CLOCK_BOOTTIME does not, and neither jumps with the wall clock.  Where CLOCK_BOOTTIME is missing,
 * PostgreSQL's instr_time (monotonic) is used.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "portability/instr_time.h"

#include "clock.h"
#include "redlock.h"

/*
 * redlock_clock_ms
 *		Returns the time in milliseconds since an arbitrary origin, on a clock that
 *		never goes back and counts time the host spent suspended.  Raises nothing.
 */
double
redlock_clock_ms(void)
{
#ifdef CLOCK_BOOTTIME
	struct timespec ts;

	if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
		return ts.tv_sec * 1000.0 + ts.tv_nsec / 1000000.0;
#endif
	{
		instr_time	now;

		INSTR_TIME_SET_CURRENT(now);
		return INSTR_TIME_GET_MILLISEC(now);
	}
}
