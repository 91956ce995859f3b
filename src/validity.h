/*-------------------------------------------------------------------------
 *
 * validity.h
 *	  The validity arithmetic (validity.c): the clock drift allowance and what a TTL
 *	  leaves of a lock's validity (spec §3 step 4).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_VALIDITY_H
#define REDLOCK_VALIDITY_H

extern double redlock_clock_drift_ms(int ttl_ms);
extern bool redlock_ttl_leaves_validity(int ttl_ms);
extern double redlock_validity_bound_ms(int ttl_ms);

#endif							/* REDLOCK_VALIDITY_H */
