/*-------------------------------------------------------------------------
 *
 * watches.h
 *	  The watched locks of every database, and the database's notifier, in shared
 *	  memory (watches.c): what redlock_watch registers and worker/notifier.c reads.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_WATCHES_H
#define REDLOCK_WATCHES_H

#include "shared/registry.h"

#define REDLOCK_MAX_WATCHES			1024	/* watched (database, configuration, key)s */
#define REDLOCK_WATCH_KEY_LEN		REDLOCK_REGISTRY_KEY_LEN
#define REDLOCK_WATCH_NOTIFIERS		16	/* databases with watches at once */

/* One watched lock as a notifier reads it. */
typedef struct RedlockWatchRow
{
	int			config;			/* lockconfig.c slot of the watchers' configuration */
	uint32		generation;		/* that slot's generation */
	int			prefix_len;		/* bytes of key that are redlock.key_prefix */
	char		key[REDLOCK_WATCH_KEY_LEN + 1];
} RedlockWatchRow;

extern void RedlockWatchesInit(void);
extern void redlock_watches_add(Oid database, const char *key, int prefix_len,
								int *config, uint32 *generation);
extern void redlock_watches_remove(Oid database, int config, const char *key);
extern bool redlock_watches_notifier_begin(Oid database);
extern void redlock_watches_notifier_end(Oid database);
extern int	redlock_watches_list(Oid database, RedlockWatchRow **rows);
extern bool redlock_watches_notifier_may_stop(Oid database);

#endif							/* REDLOCK_WATCHES_H */
