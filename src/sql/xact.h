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

extern void redlock_hooks_register(void);

#endif							/* REDLOCK_XACT_H */
