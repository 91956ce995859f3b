/*-------------------------------------------------------------------------
 *
 * redlock.c
 *	  Module entry point.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "redlock.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * _PG_init
 *		Defines the redlock.* GUCs when the library is loaded, and asks for shared
 *		memory for cluster-wide counters when it is preloaded.
 */
void
_PG_init(void)
{
	RedlockGucInit();
	RedlockStatsInit();
}
