/*-------------------------------------------------------------------------
 *
 * xact.h
 *	  Transaction, subtransaction and exit hooks (xact.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_XACT_H
#define REDLOCK_XACT_H

#include "redlock.h"

/* What else DISCARD ALL drops: a callback of another SQL module (watches). */
typedef void (*RedlockDiscardCallback) (void);

extern void redlock_hooks_register(void);
extern void redlock_hooks_on_discard_all(RedlockDiscardCallback callback);

#endif							/* REDLOCK_XACT_H */
