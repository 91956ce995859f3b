/*-------------------------------------------------------------------------
 *
 * configset.c
 *	  The node set a background worker uses for a configuration slot (lockconfig.c):
 *	  built from the servers as the backend that took the slot parsed them, kept
 *	  between rounds while the slot keeps its generation.  The renewal worker
 *	  (worker.c) renews on it; a database's notifier (notifier.c) looks at watched
 *	  locks on it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "shared/lockconfig.h"
#include "wire/nodeset.h"
#include "worker/configset.h"

/* A node set for one configuration slot, kept between rounds. */
typedef struct CachedSet
{
	uint32		generation;
	RedlockNodeSet *set;
} CachedSet;

static CachedSet cached_sets[REDLOCK_LOCKCONFIG_SLOTS];

/*
 * redlock_configset_for_slot
 *		The node set of configuration slot at generation (the slot and generation a
 *		registry entry or a watch names): pinned, cached in this process while the
 *		slot keeps its generation, so that its connections last.  Returns NULL when the
 *		slot was taken for another configuration since (nothing references that one
 *		any more).  Raises out-of-memory errors only.
 */
RedlockNodeSet *
redlock_configset_for_slot(int slot, uint32 generation)
{
	CachedSet  *cached = &cached_sets[slot];
	RedlockLockConfig *config;
	RedlockServerList *list;

	if (cached->set && cached->generation == generation)
		return cached->set;
	if (cached->set)
	{
		redlock_nodeset_unpin(cached->set);
		cached->set = NULL;
	}
	config = palloc(sizeof(RedlockLockConfig));
	if (!redlock_lockconfig_read(slot, generation, config))
		return NULL;
	/* The servers as the owner parsed them when it took the lock. */
	list = palloc(offsetof(RedlockServerList, nodes) + sizeof(RedlockNodeAddr) * config->nservers);
	list->count = config->nservers;
	memcpy(list->nodes, config->servers, sizeof(RedlockNodeAddr) * config->nservers);
	cached->set = redlock_nodeset_for(list, config->username, config->password,
									  config->database, config->quorum, &config->tls);
	cached->generation = generation;
	pfree(list);
	pfree(config);
	return cached->set;
}
