/*-------------------------------------------------------------------------
 *
 * validity.c
 *	  The validity arithmetic, written once (spec §3 step 4): a lock taken with a TTL
 *	  is valid until the start of the attempt that won + TTL - drift, where the drift
 *	  allowance is TTL * redlock.clock_drift_factor + 2 ms.  The quorum protocol, the
 *	  lock table and the lease take their validity times from here.  A leaf beside the
 *	  clock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "clock.h"
#include "guc.h"
#include "redlock.h"
#include "validity.h"

/*
 * redlock_clock_drift_ms
 *		The drift allowance, in milliseconds, for a TTL of ttl_ms milliseconds: TTL *
 *		redlock.clock_drift_factor + 2 ms (spec §3 step 4).  Raises nothing.
 */
double
redlock_clock_drift_ms(int ttl_ms)
{
	return ttl_ms * redlock_clock_drift_factor + 2.0;
}

/*
 * redlock_ttl_leaves_validity
 *		True when a lock of ttl_ms milliseconds can be valid at all: TTL - drift > 0
 *		(spec §3 step 4), even before any time has elapsed.  Raises nothing.
 */
bool
redlock_ttl_leaves_validity(int ttl_ms)
{
	return ttl_ms - redlock_clock_drift_ms(ttl_ms) > 0;
}

/*
 * redlock_validity_bound_ms
 *		The latest a lock can be valid (a redlock_clock_ms() time) once a request that
 *		sets a TTL of ttl_ms milliseconds starts now: now + TTL - drift (spec §3 step
 *		4).  Any master may apply such a request, whatever its caller learns of it, so a
 *		lock's validity never exceeds this after an extend or re-acquire was sent.
 *		Raises nothing.
 */
double
redlock_validity_bound_ms(int ttl_ms)
{
	return redlock_clock_ms() + ttl_ms - redlock_clock_drift_ms(ttl_ms);
}
