/*-------------------------------------------------------------------------
 *
 * holder.h
 *	  The holder record (holder.c): who took a lock, written beside its key.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_HOLDER_H
#define REDLOCK_HOLDER_H

#include "redlock.h"

/* A holder record, parsed. */
typedef struct RedlockHolder
{
	char	   *cluster;		/* cluster_name, or the system identifier */
	int			pid;
	char	   *application_name;
	char	   *database;
	char	   *role;			/* the session user */
	TimestampTz acquired_at;
	char	   *scope;			/* "session", "transaction" or "claim" */
} RedlockHolder;

extern char *redlock_holder_record(const char *scope);
extern bool redlock_holder_parse(const char *text, int len, RedlockHolder *holder);
extern int64 redlock_holder_now_us(void);
extern const char *redlock_holder_cluster(void);

#endif							/* REDLOCK_HOLDER_H */
