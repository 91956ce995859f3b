/*-------------------------------------------------------------------------
 *
 * report.h
 *	  Messages shared by the SQL functions and the hooks (report.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_REPORT_H
#define REDLOCK_REPORT_H

#include "redlock.h"

extern void redlock_warn_release(const RedlockReleaseInfo *info);
extern int	redlock_errdetail_nodes(const RedlockResult *result);

#endif							/* REDLOCK_REPORT_H */
