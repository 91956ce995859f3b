/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The shared registry of auto-extended locks: what the background worker keeps
 *	  alive, and what it found lost.
 *
 * Shared memory, present only when the library is preloaded.  An owner (a backend)
 * reserves an entry before its acquire goes out (so a full registry fails the call
 * before any key is set), activates it once the lock is held, and removes it when the
 * lock is released, let go of or forgotten (release, (sub)transaction abort, exit).
 * The worker renews active entries; only it sends their extensions, over its one
 * connection per master, so that the extensions of one lock reach each master in
 * order.  An owner that wants another TTL (redlock_extend, a re-acquire) asks the
 * worker through the entry and waits for its answer.
 *
 * An entry names the configuration its lock was taken under (servers, credentials,
 * database: a slot of lockconfig.c), so that renewals reach the masters the lock is on
 * whatever redlock.servers says now.
 *
 * Each entry carries the lock's lease (lease.c): held, renewal due, lost, and the
 * validity.  The registry stores it and takes the worker's decisions to it; the rules
 * of a lock's life after acquire, and the owner's watchdog and commit check that act
 * on them, are lease.c's alone.  The worker never signals an owner.
 *
 * One LWLock guards everything; nobody holds it across network waits or anything that
 * may raise.  Owners wait for the worker's answers on a condition variable.
 *
 * The waiter board (who waits for which key, and wake-ups) is waiters.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "clock.h"
#include "compat.h"
#include "guc.h"
#include "redlock.h"
#include "shared/lease.h"
#include "shared/lockconfig.h"
#include "shared/registry.h"
#include "shared/shmem.h"

typedef enum EntryState
{
	ENTRY_FREE,
	ENTRY_USED					/* an owner's: its lease says held, lost or pending */
} EntryState;

/* One auto-extended lock.  Beyond state and generation, fields mean nothing when free. */
typedef struct RegistryEntry
{
	EntryState	state;
	uint32		generation;		/* bumped on each reservation: handles go stale */
	int			owner_pid;
	int			owner_procno;
	Oid			owner_role;		/* the owner's session user */
	int			config;			/* its configuration's slot (lockconfig.c) */
	uint32		config_generation;
	bool		renewing;		/* in the worker's round now */
	RedlockLease lease;			/* written by lease.c's functions only */
	uint64		request_seq;	/* owner's requests for a new TTL */
	uint64		done_seq;		/* the last one the worker answered */
	int			requested_ttl_ms;
	RedlockRenewalAnswer answer;	/* the worker's answer to done_seq */
	int			prefix_len;		/* bytes of redlock.key_prefix at the start of key */
	char		token[REDLOCK_TOKEN_LEN + 1];
	char		key[REDLOCK_REGISTRY_KEY_LEN + 1];
} RegistryEntry;

typedef struct RegistryShared
{
	LWLock	   *lock;
	ConditionVariable answered; /* the worker answered an owner's request */
	Latch	   *worker_latch;	/* NULL while no worker runs */
	uint64		changes;		/* bumped by activations and requests it must see */
	double		worker_sleeps_until_ms; /* 0 while the worker is awake */
	int			max_entries;
	int			used;
	int			next_free;		/* where to start looking for a free entry */
	double		round_ms;		/* the worker's last renewal round */
	int			round_locks;
	RegistryEntry entries[FLEXIBLE_ARRAY_MEMBER];
} RegistryShared;

static RegistryShared *registry = NULL;

static Size
registry_size(void)
{
	return add_size(offsetof(RegistryShared, entries),
					mul_size(redlock_max_auto_extended_locks, sizeof(RegistryEntry)));
}

static void
registry_shmem_attach(void *area, LWLock *lock, bool found)
{
	registry = area;
	if (!found)
	{
		/* A fresh start, or a restart after a crash: nothing is extended any more. */
		registry->lock = lock;
		ConditionVariableInit(&registry->answered);
		registry->max_entries = redlock_max_auto_extended_locks;
	}
}

static const RedlockShmemArea registry_area = {
	.name = "redlock registry",
	.size = registry_size,
	.with_lock = true,
	.attach = registry_shmem_attach
};

/*
 * RedlockRegistryInit
 *		Asks for the registry's shared memory and LWLock when the library is being
 *		preloaded (redlock_shmem_register).  Called from _PG_init after the GUCs are
 *		defined.  Raises nothing.
 */
void
RedlockRegistryInit(void)
{
	redlock_shmem_register(&registry_area);
}

/* The entry of handle, or NULL when it is stale (removed, reused). Lock held. */
static RegistryEntry *
registry_entry_of(const RedlockRegistryHandle *handle)
{
	RegistryEntry *entry;

	if (handle->index < 0 || handle->index >= registry->max_entries)
		return NULL;
	entry = &registry->entries[handle->index];
	if (entry->state == ENTRY_FREE || entry->generation != handle->generation)
		return NULL;
	return entry;
}

/*
 * redlock_registry_wake_worker
 *		Sets the worker's latch, if a worker runs (the library preloaded).  Raises
 *		nothing.
 */
void
redlock_registry_wake_worker(void)
{
	Latch	   *latch = registry ? registry->worker_latch : NULL;

	if (latch)
		SetLatch(latch);
}

/*
 * redlock_registry_reserve
 *		Reserves an entry for a lock about to be acquired with auto-extension, under
 *		the configuration in force, owned by this backend.
 *
 * key: the lock's Redis key; prefix_len: how many of its first bytes are
 *		redlock.key_prefix (the rest names the resource in the worker's log).
 * cancel_on_loss: cancel this backend's statement if the lock is lost.
 * handle: set to the entry.
 *
 * Errors: 55000 when the library is not preloaded; 54000 when the key or the
 * configuration is longer than the registry keeps; 53400 when the registry is full
 * (redlock.max_auto_extended_locks), this backend's session user holds
 * redlock.max_auto_extended_locks_per_role already, or the registry holds too many
 * distinct configurations.
 */
void
redlock_registry_reserve(const char *key, int prefix_len, bool cancel_on_loss,
						 RedlockRegistryHandle *handle)
{
	RegistryEntry *entry = NULL;
	int			config;
	uint32		config_generation = 0;
	Oid			role = GetSessionUserId();
	int			role_holds = 0;

	if (registry == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("redlock.auto_extend requires redlock to be loaded via shared_preload_libraries"),
				 errhint("Add redlock to shared_preload_libraries and restart the server, or turn redlock.auto_extend off and extend the lock with redlock_extend().")));
	if (strlen(key) > REDLOCK_REGISTRY_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("key of an auto-extended lock is too long"),
				 errdetail("The Redis key is %zu bytes long; auto-extended locks allow %d.",
						   strlen(key), REDLOCK_REGISTRY_KEY_LEN)));
	if (!redlock_lockconfig_fits())
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("redlock configuration is too long for auto-extended locks"),
				 errdetail("Auto-extended locks allow %d bytes of redlock.username and of redlock.password.",
						   REDLOCK_LOCKCONFIG_CREDENTIAL_LEN)));

	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	if (redlock_max_auto_extended_locks_per_role > 0)
		for (int i = 0; i < registry->max_entries; i++)
			role_holds += (registry->entries[i].state != ENTRY_FREE &&
						   registry->entries[i].owner_role == role);
	if (redlock_max_auto_extended_locks_per_role > 0 &&
		role_holds >= redlock_max_auto_extended_locks_per_role)
	{
		LWLockRelease(registry->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many auto-extended redlock locks for role \"%s\"",
						GetUserNameFromId(role, false)),
				 errdetail("Its sessions hold %d auto-extended locks; redlock.max_auto_extended_locks_per_role is %d.",
						   role_holds, redlock_max_auto_extended_locks_per_role),
				 errhint("Release some, or have a superuser raise redlock.max_auto_extended_locks_per_role for this role (ALTER ROLE ... SET).")));
	}
	config = redlock_lockconfig_acquire(&config_generation);
	if (config >= 0 && registry->used < registry->max_entries)
	{
		for (int k = 0; k < registry->max_entries; k++)
		{
			int			i = (registry->next_free + k) % registry->max_entries;

			if (registry->entries[i].state == ENTRY_FREE)
			{
				entry = &registry->entries[i];
				handle->index = i;
				registry->next_free = (i + 1) % registry->max_entries;
				break;
			}
		}
	}
	if (entry == NULL)
	{
		int			used = registry->used;

		LWLockRelease(registry->lock);
		if (config >= 0)
			redlock_lockconfig_release(config);
		if (config < 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many redlock configurations in use by auto-extended locks"),
					 errdetail("Auto-extended locks are held under %d distinct redlock.servers, credentials and database settings.",
							   REDLOCK_LOCKCONFIG_SLOTS)));
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many auto-extended redlock locks"),
				 errdetail("%d auto-extended locks are held in this cluster.", used),
				 errhint("Raise redlock.max_auto_extended_locks (a server restart is needed).")));
	}

	entry->generation++;
	handle->generation = entry->generation;
	entry->state = ENTRY_USED;
	entry->owner_pid = MyProcPid;
	entry->owner_procno = redlock_my_proc_number();
	entry->owner_role = role;
	entry->config = config;
	entry->config_generation = config_generation;
	entry->renewing = false;
	redlock_lease_init(&entry->lease, cancel_on_loss);
	entry->request_seq = entry->done_seq = 0;
	entry->prefix_len = prefix_len;
	entry->token[0] = '\0';
	strlcpy(entry->key, key, sizeof(entry->key));
	registry->used++;
	LWLockRelease(registry->lock);
}

/*
 * redlock_registry_activate
 *		Marks a reserved entry held: key and token as acquired (a permit's key is its
 *		slot's, known only now; no longer than the key reserved), ttl_ms milliseconds,
 *		valid until valid_until_ms (a redlock_clock_ms() time).  The worker renews it
 *		first a third of the TTL after the acquire started.  Raises nothing.
 */
void
redlock_registry_activate(const RedlockRegistryHandle *handle, const char *key,
						  const char *token, int ttl_ms, double valid_until_ms)
{
	RegistryEntry *entry;
	bool		wake = false;

	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	entry = registry_entry_of(handle);
	if (entry && entry->lease.state == LEASE_PENDING)
	{
		strlcpy(entry->key, key, sizeof(entry->key));
		strlcpy(entry->token, token, sizeof(entry->token));
		redlock_lease_hold(&entry->lease, ttl_ms, valid_until_ms);
		/* Only a lock due before the worker's planned wake-up needs it now. */
		wake = registry->worker_sleeps_until_ms == 0 ||
			entry->lease.next_renewal_ms < registry->worker_sleeps_until_ms;
		if (wake)
			registry->changes++;
	}
	LWLockRelease(registry->lock);
	if (wake)
		redlock_registry_wake_worker();
}

/*
 * redlock_registry_remove
 *		Removes the entry of handle, if it is still there, and marks handle empty: the
 *		worker no longer renews the lock and can no longer cancel for it.  For release
 *		and cleanup paths: raises nothing.
 */
void
redlock_registry_remove(RedlockRegistryHandle *handle)
{
	RegistryEntry *entry;

	if (handle->index < 0 || registry == NULL)
		return;
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	entry = registry_entry_of(handle);
	if (entry)
	{
		redlock_lockconfig_release(entry->config);
		entry->state = ENTRY_FREE;
		registry->used--;
	}
	LWLockRelease(registry->lock);
	handle->index = -1;
}

/*
 * redlock_registry_view
 *		Copies the lease of handle's lock into *lease.  Returns false when the entry is
 *		gone (never, while its owner has not removed it).  Raises nothing.
 */
bool
redlock_registry_view(const RedlockRegistryHandle *handle, RedlockLease *lease)
{
	RegistryEntry *entry;

	memset(lease, 0, sizeof(*lease));
	if (handle->index < 0 || registry == NULL)
		return false;
	LWLockAcquire(registry->lock, LW_SHARED);
	entry = registry_entry_of(handle);
	if (entry)
		*lease = entry->lease;
	LWLockRelease(registry->lock);
	return entry != NULL;
}

/*
 * redlock_registry_peek
 *		As redlock_registry_view, without the lock: for the owner's watchdog (a timer
 *		handler) and its error-report hook, which must not wait on an LWLock.  A torn
 *		read of the validity can only delay the watchdog by one tick; a lost lease's
 *		reason is written before its state.  Raises nothing.
 */
bool
redlock_registry_peek(const RedlockRegistryHandle *handle, RedlockLease *lease)
{
	volatile RegistryEntry *entry;

	if (handle->index < 0 || registry == NULL || handle->index >= registry->max_entries)
		return false;
	entry = &registry->entries[handle->index];
	if (entry->state == ENTRY_FREE || entry->generation != handle->generation)
		return false;
	lease->state = entry->lease.state;
	pg_read_barrier();
	lease->cancel_on_loss = entry->lease.cancel_on_loss;
	lease->ttl_ms = entry->lease.ttl_ms;
	lease->valid_until_ms = entry->lease.valid_until_ms;
	if (lease->state == LEASE_LOST)
		strlcpy(lease->lost_reason, (const char *) entry->lease.lost_reason,
				sizeof(lease->lost_reason));
	else
		lease->lost_reason[0] = '\0';
	return true;
}

/*
 * redlock_registry_extend
 *		Asks the worker to set a TTL of ttl_ms milliseconds on handle's lock (spec §6) in
 *		its next round, and waits for its answer: the owner of an auto-extended lock
 *		never sends extensions itself, so that they reach each master in order.
 *
 * result: REDLOCK_OK (extended; valid_until_ms set), REDLOCK_BUSY (lost: the entry
 *		is marked lost), or REDLOCK_UNAVAILABLE (fewer than a quorum answered, or the
 *		worker did not answer within two of its rounds' timeouts and a second:
 *		worker_silent), with the stats the worker saw.
 *
 * Raises what an interrupted wait raises (57014); the worker still answers the
 * request later.
 */
void
redlock_registry_extend(const RedlockRegistryHandle *handle, int ttl_ms,
						RedlockResult *result)
{
	RegistryEntry *entry;
	uint64		seq = 0;
	double		deadline_ms;

	memset(result, 0, sizeof(*result));
	result->status = REDLOCK_UNAVAILABLE;
	result->attempts = 1;

	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	entry = registry_entry_of(handle);
	if (entry && entry->lease.state == LEASE_HELD)
	{
		seq = ++entry->request_seq;
		entry->requested_ttl_ms = ttl_ms;
		registry->changes++;
	}
	else if (entry && entry->lease.state == LEASE_LOST)
		result->status = REDLOCK_BUSY;
	LWLockRelease(registry->lock);
	if (seq == 0)
		return;
	redlock_registry_wake_worker();

	/* The worker's round is bounded by its timeouts; allow for two and a margin. */
	deadline_ms = redlock_clock_ms() + 2.0 * (redlock_connect_timeout_ms + redlock_timeout_ms) + 1000;
	ConditionVariablePrepareToSleep(&registry->answered);
	for (;;)
	{
		bool		done = false;
		double		now;

		LWLockAcquire(registry->lock, LW_SHARED);
		entry = registry_entry_of(handle);
		if (entry == NULL)
			done = true;
		else if (entry->done_seq >= seq)
		{
			done = true;
			result->status = entry->answer.status;
			result->node_count = entry->answer.node_count;
			result->quorum = entry->answer.quorum;
			result->accepted = entry->answer.accepted;
			result->answered = entry->answer.answered;
			result->failed = entry->answer.failed;
			result->valid_until_ms = entry->lease.valid_until_ms;
		}
		else if (entry->lease.state == LEASE_LOST)
		{
			done = true;
			result->status = REDLOCK_BUSY;
		}
		LWLockRelease(registry->lock);
		now = redlock_clock_ms();
		if (done)
			break;
		if (now >= deadline_ms)
		{
			result->worker_silent = true;
			break;
		}
		(void) ConditionVariableTimedSleep(&registry->answered, (long) (deadline_ms - now) + 1,
										   redlock_wait_event(REDLOCK_WAIT_WORKER));
	}
	ConditionVariableCancelSleep();
}

/*---- the worker's side ----*/

/*
 * redlock_registry_worker_attach
 *		Called by the worker when it starts: publishes its latch (owners set it when
 *		they add a lock or ask for an extension) and takes over entries a previous
 *		worker left in a round.  Raises nothing.
 */
void
redlock_registry_worker_attach(void)
{
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	registry->worker_latch = MyLatch;
	for (int i = 0; i < registry->max_entries; i++)
		registry->entries[i].renewing = false;
	LWLockRelease(registry->lock);
}

/*
 * redlock_registry_worker_detach
 *		Called at worker exit: owners stop setting its latch.  Raises nothing.
 */
void
redlock_registry_worker_detach(void)
{
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	registry->worker_latch = NULL;
	LWLockRelease(registry->lock);
}

/* True while entry's owner is still the backend that reserved it. Lock held. */
static bool
registry_owner_alive(const RegistryEntry *entry)
{
	return entry->owner_procno >= 0 &&
		entry->owner_procno < (int) ProcGlobal->allProcCount &&
		ProcGlobal->allProcs[entry->owner_procno].pid == entry->owner_pid;
}

/* Says in the log that entry's lease was just lost, and why.  Lock held. */
static void
registry_entry_log_loss(const RegistryEntry *entry)
{
	ereport(LOG,
			(errmsg("redlock lock on resource \"%s\" was lost: %s",
					entry->key + entry->prefix_len, entry->lease.lost_reason),
			 errdetail("Owner PID %d; %s.", entry->owner_pid,
					   entry->lease.cancel_on_loss
					   ? "its running statement is cancelled and its transaction cannot commit"
					   : "redlock.cancel_on_loss was off")));
}

/* Loses entry's lease for reason (lease.c) and says so in the log.  Lock held. */
static void
registry_entry_lose(RegistryEntry *entry, const char *reason, double now_ms)
{
	redlock_lease_lose(&entry->lease, reason, now_ms);
	entry->renewing = false;
	registry_entry_log_loss(entry);
}

/*
 * redlock_registry_due
 *		Collects the locks to renew now into a palloc'd array (*renewals) and marks
 *		them in the worker's round; returns how many.
 *
 * now_ms: a redlock_clock_ms() time.  Which locks are due, and which ran out before
 * they could be renewed (lost), is the lease's rule (redlock_lease_due); before its
 * request goes out, a lock's validity is cut to what the TTL sent allows
 * (redlock_lease_cut).  Entries whose owner is gone are removed.
 * next_due_ms: set to the earliest renewal time among the others (or now + 1 s).
 * changes: set to the registry's change count as read (see redlock_registry_may_sleep).
 * Raises only out-of-memory errors.
 */
int
redlock_registry_due(double now_ms, RedlockRenewal **renewals, double *next_due_ms,
					 uint64 *changes)
{
	int			n = 0;
	int			cap = 64;
	RedlockRenewal *out = palloc(sizeof(RedlockRenewal) * cap);

	*next_due_ms = now_ms + 1000;
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	*changes = registry->changes;
	registry->worker_sleeps_until_ms = 0;	/* awake */
	for (int i = 0; i < registry->max_entries; i++)
	{
		RegistryEntry *entry = &registry->entries[i];
		bool		requested;
		RedlockRenewal *r;

		if (entry->state == ENTRY_FREE || entry->renewing)
			continue;
		if (!registry_owner_alive(entry))
		{
			ereport(LOG,
					(errmsg("redlock stops renewing lock on resource \"%s\": its owner (PID %d) is gone",
							entry->key + entry->prefix_len, entry->owner_pid)));
			redlock_lockconfig_release(entry->config);
			entry->state = ENTRY_FREE;
			registry->used--;
			continue;
		}
		requested = entry->request_seq != entry->done_seq;
		switch (redlock_lease_due(&entry->lease, now_ms, requested))
		{
			case LEASE_RAN_OUT:
				registry_entry_lose(entry, "its validity time ran out before it could be renewed",
						   now_ms);
				continue;
			case LEASE_NOT_DUE:
				if (entry->lease.state == LEASE_HELD)
					*next_due_ms = Min(*next_due_ms, entry->lease.next_renewal_ms);
				continue;
			case LEASE_DUE:
				break;
		}
		redlock_lease_cut(&entry->lease,
						  requested ? entry->requested_ttl_ms : entry->lease.ttl_ms);
		entry->renewing = true;

		if (n == cap)
		{
			cap *= 2;
			out = repalloc(out, sizeof(RedlockRenewal) * cap);
		}
		r = &out[n++];
		r->index = i;
		r->generation = entry->generation;
		r->config = entry->config;
		r->config_generation = entry->config_generation;
		r->ttl_ms = entry->lease.ttl_ms;
		r->request_seq = entry->request_seq;
		r->valid_until_ms = entry->lease.valid_until_ms;
		strlcpy(r->token, entry->token, sizeof(r->token));
		r->key = pstrdup(entry->key);
	}
	LWLockRelease(registry->lock);
	*renewals = out;
	return n;
}

/*
 * redlock_registry_may_sleep
 *		The worker is about to sleep until until_ms (a redlock_clock_ms() time).  False
 *		when a lock was activated or an owner asked for a new TTL since
 *		redlock_registry_due read changes: it must look again first (its latch may have
 *		been reset by a network wait meanwhile).  True otherwise, and owners then wake
 *		it only for locks due before until_ms.  Raises nothing.
 */
bool
redlock_registry_may_sleep(uint64 changes, double until_ms)
{
	bool		may;

	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	may = (registry->changes == changes);
	if (may)
		registry->worker_sleeps_until_ms = until_ms;
	LWLockRelease(registry->lock);
	return may;
}

/*
 * redlock_registry_renewed
 *		Records the outcome of the worker's round for renewals[0..n-1]: each renewal's
 *		decision (outcome) says renewed (with the new validity), retry at a time, or lost
 *		with a reason; the answers to owners' requests are published and the owners
 *		woken.  Entries removed meanwhile are skipped.  Raises nothing.
 */
void
redlock_registry_renewed(const RedlockRenewal *renewals, const RedlockRenewalOutcome *outcomes,
						 int n)
{
	bool		answered_any = false;
	double		now_ms = redlock_clock_ms();

	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	for (int k = 0; k < n; k++)
	{
		const RedlockRenewal *r = &renewals[k];
		const RedlockRenewalOutcome *o = &outcomes[k];
		RegistryEntry *entry = &registry->entries[r->index];
		bool		answers_owner = (r->request_seq != entry->done_seq);

		if (entry->state == ENTRY_FREE || entry->generation != r->generation)
			continue;
		entry->renewing = false;
		if (answers_owner)
		{
			entry->done_seq = r->request_seq;
			entry->answer = o->answer;
			answered_any = true;
		}
		if (entry->lease.state != LEASE_HELD)
			continue;
		/* The worker's decision is the lease's to apply, a loss included. */
		redlock_lease_apply(&entry->lease, o, now_ms);
		if (entry->lease.state == LEASE_LOST)
			registry_entry_log_loss(entry);
	}
	LWLockRelease(registry->lock);
	if (answered_any)
		ConditionVariableBroadcast(&registry->answered);
}

/*
 * redlock_registry_round_done
 *		Records the duration (ms) and size of the worker's last renewal round, for
 *		redlock_stats().  Raises nothing.
 */
void
redlock_registry_round_done(double round_ms, int locks)
{
	LWLockAcquire(registry->lock, LW_EXCLUSIVE);
	registry->round_ms = round_ms;
	registry->round_locks = locks;
	LWLockRelease(registry->lock);
}

/*
 * redlock_registry_stats
 *		Sets *locks to the number of auto-extended locks registered in the cluster and
 *		*round_ms, *round_locks to the worker's last renewal round (ms, locks).
 *		Returns false (all zero) when the library is not preloaded.  Raises nothing.
 */
bool
redlock_registry_stats(int *locks, double *round_ms, int *round_locks)
{
	*locks = 0;
	*round_ms = 0;
	*round_locks = 0;
	if (registry == NULL)
		return false;
	LWLockAcquire(registry->lock, LW_SHARED);
	*locks = registry->used;
	*round_ms = registry->round_ms;
	*round_locks = registry->round_locks;
	LWLockRelease(registry->lock);
	return true;
}
