/*-------------------------------------------------------------------------
 *
 * sqlarg.h
 *	  The SQL functions' shared checks (sqlarg.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_SQLARG_H
#define REDLOCK_SQLARG_H

#include "fmgr.h"

#include "redlock.h"

extern char *redlock_sqlarg_resource(FunctionCallInfo fcinfo, int argno);
extern char **redlock_sqlarg_resources(FunctionCallInfo fcinfo, int argno, int *n);
extern void redlock_sqlarg_require_servers(void);
extern void redlock_sqlarg_refuse_parallel(void);
extern bool redlock_sqlarg_resource_from_utf8(const char *name, Datum *out);
extern int	redlock_sqlarg_ttl(FunctionCallInfo fcinfo, int argno, bool null_allowed, int null_ttl);
extern int	redlock_sqlarg_wait(FunctionCallInfo fcinfo, int argno);
extern int	redlock_sqlarg_permits(FunctionCallInfo fcinfo, int argno);
extern bool redlock_sqlarg_wait_bound(int *wait_ms);

#endif							/* REDLOCK_SQLARG_H */
