/*-------------------------------------------------------------------------
 *
 * rolequota.h
 *	  What each role's sessions have on the Redis masters from this cluster, counted
 *	  against redlock.max_locks_per_role (rolequota.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_ROLEQUOTA_H
#define REDLOCK_ROLEQUOTA_H

#include "redlock.h"

extern void RedlockRoleQuotaInit(void);
extern bool redlock_rolequota_charge(Oid role, RedlockQuotaRefusal *refusal);
extern void redlock_rolequota_refund(Oid role);
extern bool redlock_rolequota_claim(Oid role, double until_ms, RedlockQuotaRefusal *refusal);
extern void redlock_rolequota_claim_end(Oid role, double until_ms, double held_until_ms);

#endif							/* REDLOCK_ROLEQUOTA_H */
