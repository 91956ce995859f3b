/*-------------------------------------------------------------------------
 *
 * lockconfig.c
 *	  The configurations auto-extended locks were taken under: servers (parsed),
 *	  credentials, database, quorum and TLS, in a few reference-counted slots of
 *	  shared memory.
 *
 * An auto-extended lock's registry entry (registry.c) names its slot, so that the
 * worker renews it on the masters it was taken on, whatever redlock.servers says now.
 * Entries taken under the same configuration share a slot.  The servers are stored
 * parsed, as the owner's redlock.servers check parsed them: the worker builds its node
 * set from them without parsing again.
 *
 * Invariant: a slot's generation changes only when the slot is taken for another
 * configuration, which happens only once no entry references it; so (slot, generation)
 * read from a live entry names one configuration for as long as the entry lives.
 *
 * Present only when the library is preloaded.  One LWLock guards the slots.  It is the
 * innermost of our locks: taken at times with the registry's held, and nothing is
 * taken while it is held.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/lwlock.h"

#include "guc.h"
#include "shared/lockconfig.h"
#include "shared/shmem.h"

/* One configuration locks were taken under. */
typedef struct ConfigSlot
{
	int			refs;			/* registry entries using it; 0: free */
	uint32		generation;		/* bumped when the slot is taken anew */
	RedlockLockConfig c;
} ConfigSlot;

typedef struct LockConfigShared
{
	LWLock	   *lock;
	ConfigSlot	slots[REDLOCK_LOCKCONFIG_SLOTS];
} LockConfigShared;

static LockConfigShared *lockconfig = NULL;

static Size
lockconfig_shmem_size(void)
{
	return sizeof(LockConfigShared);
}

static void
lockconfig_shmem_attach(void *area, LWLock *lock, bool found)
{
	lockconfig = area;
	if (!found)
		lockconfig->lock = lock;
}

static const RedlockShmemArea lockconfig_area = {
	.name = "redlock lock configurations",
	.size = lockconfig_shmem_size,
	.with_lock = true,
	.attach = lockconfig_shmem_attach
};

/*
 * RedlockLockConfigInit
 *		Asks for the slots' shared memory and LWLock when the library is being
 *		preloaded (redlock_shmem_register).  Called from _PG_init after the GUCs are
 *		defined.  Raises nothing.
 */
void
RedlockLockConfigInit(void)
{
	redlock_shmem_register(&lockconfig_area);
}

/* The configuration in force, as a slot stores it. */
static void
lockconfig_current(RedlockLockConfig *c)
{
	const RedlockServerList *list = redlock_server_list;

	memset(c, 0, sizeof(*c));
	c->database = redlock_database;
	c->quorum = redlock_quorum;
	c->nservers = list ? list->count : 0;
	for (int i = 0; i < c->nservers; i++)
		c->servers[i] = list->nodes[i];
	strlcpy(c->username, redlock_username ? redlock_username : "", sizeof(c->username));
	strlcpy(c->password, redlock_effective_password(), sizeof(c->password));
	redlock_tls_config(&c->tls);
}

/* True when a and b are the same configuration. */
static bool
lockconfig_equal(const RedlockLockConfig *a, const RedlockLockConfig *b)
{
	if (a->database != b->database || a->quorum != b->quorum ||
		a->nservers != b->nservers || strcmp(a->username, b->username) != 0 ||
		strcmp(a->password, b->password) != 0 || !redlock_tls_config_equal(&a->tls, &b->tls))
		return false;
	for (int i = 0; i < a->nservers; i++)
		if (a->servers[i].port != b->servers[i].port ||
			strcmp(a->servers[i].host, b->servers[i].host) != 0)
			return false;
	return true;
}

/*
 * redlock_lockconfig_fits
 *		True when the configuration in force fits in a slot: redlock.username and the
 *		password at most REDLOCK_LOCKCONFIG_CREDENTIAL_LEN bytes each (the servers
 *		always fit).  Raises nothing.
 */
bool
redlock_lockconfig_fits(void)
{
	return (redlock_username == NULL ||
			strlen(redlock_username) <= REDLOCK_LOCKCONFIG_CREDENTIAL_LEN) &&
		strlen(redlock_effective_password()) <= REDLOCK_LOCKCONFIG_CREDENTIAL_LEN;
}

/*
 * redlock_lockconfig_acquire
 *		The slot of the configuration in force, referenced once more (taken when no slot
 *		holds it); *generation is set to the slot's generation.  Returns -1 when every
 *		slot holds another configuration.  The caller checked redlock_lockconfig_fits.
 *		Requires the library preloaded.  Raises nothing.
 */
int
redlock_lockconfig_acquire(uint32 *generation)
{
	RedlockLockConfig current;
	int			slot = -1;

	lockconfig_current(&current);
	LWLockAcquire(lockconfig->lock, LW_EXCLUSIVE);
	for (int i = 0; i < REDLOCK_LOCKCONFIG_SLOTS && slot < 0; i++)
		if (lockconfig->slots[i].refs > 0 && lockconfig_equal(&lockconfig->slots[i].c, &current))
			slot = i;
	for (int i = 0; i < REDLOCK_LOCKCONFIG_SLOTS && slot < 0; i++)
	{
		if (lockconfig->slots[i].refs == 0)
		{
			slot = i;
			lockconfig->slots[i].generation++;
			lockconfig->slots[i].c = current;
		}
	}
	if (slot >= 0)
	{
		lockconfig->slots[slot].refs++;
		*generation = lockconfig->slots[slot].generation;
	}
	LWLockRelease(lockconfig->lock);
	return slot;
}

/*
 * redlock_lockconfig_release
 *		Drops one reference to slot (from redlock_lockconfig_acquire).  Raises nothing.
 */
void
redlock_lockconfig_release(int slot)
{
	LWLockAcquire(lockconfig->lock, LW_EXCLUSIVE);
	Assert(lockconfig->slots[slot].refs > 0);
	lockconfig->slots[slot].refs--;
	LWLockRelease(lockconfig->lock);
}

/*
 * redlock_lockconfig_read
 *		Copies slot's configuration into *out.  Returns false when the slot was taken
 *		for another configuration since generation.  Raises nothing.
 */
bool
redlock_lockconfig_read(int slot, uint32 generation, RedlockLockConfig *out)
{
	ConfigSlot *s = &lockconfig->slots[slot];
	bool		same;

	LWLockAcquire(lockconfig->lock, LW_SHARED);
	same = s->refs > 0 && s->generation == generation;
	if (same)
		*out = s->c;
	LWLockRelease(lockconfig->lock);
	return same;
}
