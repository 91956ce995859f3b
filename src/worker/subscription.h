/*-------------------------------------------------------------------------
 *
 * subscription.h
 *	  The worker's subscriptions to release announcements (subscription.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_SUBSCRIPTION_H
#define REDLOCK_SUBSCRIPTION_H

#include "redlock.h"

extern void redlock_subscriptions_wait(double timeout_ms);
extern void redlock_subscriptions_close(void);

#endif							/* REDLOCK_SUBSCRIPTION_H */
