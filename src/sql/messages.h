/*-------------------------------------------------------------------------
 *
 * messages.h
 *	  Messages shared by the SQL functions and the hooks (messages.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_MESSAGES_H
#define REDLOCK_MESSAGES_H

#include "redlock.h"

extern void redlock_warn_release(const RedlockReleaseInfo *info);
extern int	redlock_errdetail_nodes(const RedlockResult *result);

#endif							/* REDLOCK_MESSAGES_H */
