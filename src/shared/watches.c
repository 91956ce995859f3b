/*-------------------------------------------------------------------------
 *
 * watches.c
 *	  The watched locks of every database (redlock_watch), and for each database with
 *	  watches, its notifier: a dynamic background worker connected to that database
 *	  (worker/notifier.c) that looks at the watched locks every redlock.watch_interval
 *	  and sends what changed as NOTIFY "redlock".
 *
 * A watched lock is (database, configuration slot, key): the sessions of one database
 * watching one resource under one configuration share an entry, counted by watchers.
 * Each watcher holds one reference to the configuration's slot (lockconfig.c), so the
 * notifier reads (slot, generation) as one configuration for as long as the entry
 * lives (lockconfig.c's invariant).
 *
 * A database's notifier slot is taken by the first watch of that database, which
 * launches the worker; the worker records its pid when it begins, and gives the slot
 * back only under this file's lock after seeing no entry of its database
 * (redlock_watches_notifier_may_stop).  Invariant: while a database has an entry, its
 * notifier slot is taken, so that every watch added has a notifier running or about
 * to run.  A launch that never began (the postmaster could not start it) is retried by
 * the next watch after REDLOCK_NOTIFIER_LAUNCH_MS.
 *
 * Present only when the library is preloaded.  One LWLock guards the table and the
 * slots; lockconfig.c's lock is taken only after it is released.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "clock.h"
#include "shared/lockconfig.h"
#include "shared/shmem.h"
#include "shared/watches.h"

/* How long a launched notifier may take to begin before a new watch launches again. */
#define REDLOCK_NOTIFIER_LAUNCH_MS	10000

typedef struct WatchKey
{
	Oid			database;
	int			config;
	char		key[REDLOCK_WATCH_KEY_LEN + 1];
} WatchKey;

typedef struct WatchEntry
{
	WatchKey	k;				/* the hash key: first */
	uint32		generation;
	int			prefix_len;
	int			watchers;		/* sessions watching it; the entry goes at 0 */
} WatchEntry;

/* A database's notifier. */
typedef struct NotifierSlot
{
	Oid			database;		/* InvalidOid: free */
	int			pid;			/* 0: launched, not begun */
	double		launched_ms;	/* redlock_clock_ms() of the last launch */
} NotifierSlot;

typedef struct WatchesShared
{
	LWLock	   *lock;
	NotifierSlot notifiers[REDLOCK_WATCH_NOTIFIERS];
} WatchesShared;

static WatchesShared *watches = NULL;
static HTAB *watch_table = NULL;

static Size
watches_shmem_size(void)
{
	return sizeof(WatchesShared);
}

static Size
watches_table_size(void)
{
	return hash_estimate_size(REDLOCK_MAX_WATCHES, sizeof(WatchEntry));
}

static void
watches_shmem_attach(void *area, LWLock *lock, bool found)
{
	HASHCTL		ctl;

	watches = area;
	if (!found)
		watches->lock = lock;
	ctl.keysize = sizeof(WatchKey);
	ctl.entrysize = sizeof(WatchEntry);
	watch_table = ShmemInitHash("redlock watch table", REDLOCK_MAX_WATCHES, REDLOCK_MAX_WATCHES,
								&ctl, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

static const RedlockShmemArea watches_area = {
	.name = "redlock watches",
	.size = watches_shmem_size,
	.with_lock = true,
	.also_size = watches_table_size,
	.attach = watches_shmem_attach
};

/*
 * RedlockWatchesInit
 *		Asks for the watch table's shared memory and LWLock when the library is being
 *		preloaded (redlock_shmem_register).  Called from _PG_init.  Raises nothing.
 */
void
RedlockWatchesInit(void)
{
	redlock_shmem_register(&watches_area);
}

static void
watches_fill_key(WatchKey *wk, Oid database, int config, const char *key)
{
	memset(wk, 0, sizeof(*wk));
	wk->database = database;
	wk->config = config;
	strlcpy(wk->key, key, sizeof(wk->key));
}

/* The slot of database's notifier, or NULL.  Caller holds the lock. */
static NotifierSlot *
watches_notifier_of(Oid database)
{
	for (int i = 0; i < REDLOCK_WATCH_NOTIFIERS; i++)
		if (watches->notifiers[i].database == database)
			return &watches->notifiers[i];
	return NULL;
}

/*
 * Takes database's notifier slot if it has none.  Returns 1 when the caller must
 * launch the notifier (a slot taken, or a launch that never began), 0 when one runs or
 * is starting, -1 when every slot is taken by other databases.  Caller holds the lock
 * exclusively.
 */
static int
watches_claim_notifier(Oid database)
{
	NotifierSlot *slot = watches_notifier_of(database);
	double		now = redlock_clock_ms();

	if (slot == NULL)
	{
		slot = watches_notifier_of(InvalidOid);
		if (slot == NULL)
			return -1;
		slot->database = database;
		slot->pid = 0;
		slot->launched_ms = now;
		return 1;
	}
	if (slot->pid == 0 && now - slot->launched_ms > REDLOCK_NOTIFIER_LAUNCH_MS)
	{
		slot->launched_ms = now;
		return 1;
	}
	return 0;
}

/* Registers database's notifier with the postmaster; false when it has no room. */
static bool
watches_launch(Oid database)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "redlock", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "redlock_notifier_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "redlock notifier for database %u", database);
	strlcpy(worker.bgw_type, "redlock notifier", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(database);
	worker.bgw_notify_pid = 0;
	return RegisterDynamicBackgroundWorker(&worker, NULL);
}

/* Drops one watcher of the entry; frees the entry at none.  Caller holds the lock. */
static void
watches_drop(const WatchKey *wk)
{
	WatchEntry *e = hash_search(watch_table, wk, HASH_FIND, NULL);

	if (e == NULL)
		return;
	if (--e->watchers <= 0)
		hash_search(watch_table, wk, HASH_REMOVE, NULL);
}

/*
 * redlock_watches_add
 *		Adds this session as a watcher of key (under the configuration in force) in
 *		database, and launches the database's notifier when none runs.
 *
 * key: the lock's Redis key; prefix_len: how many of its first bytes are
 *		redlock.key_prefix.  *config, *generation: set to the configuration's slot,
 *		which the caller gives back with redlock_watches_remove.
 *
 * Errors: 55000 when the library is not preloaded; 54000 when the key or the
 * credentials are longer than the table keeps; 53400 when the table is full
 * (REDLOCK_MAX_WATCHES), too many configurations or databases have watches, or the
 * postmaster has no room for the notifier (max_worker_processes).
 */
void
redlock_watches_add(Oid database, const char *key, int prefix_len, int *config,
					uint32 *generation)
{
	WatchKey	wk;
	WatchEntry *e;
	bool		found;
	int			slot;
	int			launch;

	if (watches == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("redlock_watch requires redlock to be loaded via shared_preload_libraries"),
				 errhint("Add redlock to shared_preload_libraries and restart the server, or poll redlock_lock_info().")));
	if (strlen(key) > REDLOCK_WATCH_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("key of a watched lock is too long"),
				 errdetail("The Redis key is %zu bytes long; watches allow %d.",
						   strlen(key), REDLOCK_WATCH_KEY_LEN)));
	if (!redlock_lockconfig_fits())
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("redlock.username or the password is too long for a watch"),
				 errdetail("Watches keep at most %d bytes of each.",
						   REDLOCK_LOCKCONFIG_CREDENTIAL_LEN)));
	slot = redlock_lockconfig_acquire(generation);
	if (slot < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many distinct redlock configurations in use"),
				 errdetail("Auto-extended locks and watches share %d configurations (servers, credentials, database, quorum, TLS).",
						   REDLOCK_LOCKCONFIG_SLOTS)));

	watches_fill_key(&wk, database, slot, key);
	LWLockAcquire(watches->lock, LW_EXCLUSIVE);
	e = hash_search(watch_table, &wk, HASH_ENTER_NULL, &found);
	if (e == NULL)
	{
		LWLockRelease(watches->lock);
		redlock_lockconfig_release(slot);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many watched locks"),
				 errdetail("The server watches at most %d locks at once.", REDLOCK_MAX_WATCHES)));
	}
	if (!found)
	{
		e->generation = *generation;
		e->prefix_len = prefix_len;
		e->watchers = 0;
	}
	e->watchers++;
	launch = watches_claim_notifier(database);
	if (launch < 0)
		watches_drop(&wk);
	LWLockRelease(watches->lock);

	if (launch < 0)
	{
		redlock_lockconfig_release(slot);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many databases with watched locks"),
				 errdetail("At most %d databases have watches at once.", REDLOCK_WATCH_NOTIFIERS)));
	}
	if (launch > 0 && !watches_launch(database))
	{
		LWLockAcquire(watches->lock, LW_EXCLUSIVE);
		watches_drop(&wk);
		LWLockRelease(watches->lock);
		redlock_lockconfig_release(slot);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start redlock's notifier for this database"),
				 errhint("Raise max_worker_processes: each database with watched locks needs one background worker.")));
	}
	*config = slot;
}

/*
 * redlock_watches_remove
 *		Drops this session as a watcher of key in database under config (the slot
 *		redlock_watches_add gave), and the session's reference to that slot.  Raises
 *		nothing.
 */
void
redlock_watches_remove(Oid database, int config, const char *key)
{
	WatchKey	wk;

	if (watches == NULL)
		return;
	watches_fill_key(&wk, database, config, key);
	LWLockAcquire(watches->lock, LW_EXCLUSIVE);
	watches_drop(&wk);
	LWLockRelease(watches->lock);
	redlock_lockconfig_release(config);
}

/*
 * redlock_watches_notifier_begin
 *		Records this process as database's notifier.  Returns false when another
 *		notifier of database runs already, or no slot is free (the caller exits).
 *		Raises nothing.
 */
bool
redlock_watches_notifier_begin(Oid database)
{
	NotifierSlot *slot;
	bool		ok = true;

	LWLockAcquire(watches->lock, LW_EXCLUSIVE);
	slot = watches_notifier_of(database);
	if (slot == NULL)
	{
		slot = watches_notifier_of(InvalidOid);
		if (slot)
			slot->database = database;
	}
	if (slot == NULL || (slot->pid != 0 && slot->pid != MyProcPid))
		ok = false;
	else
		slot->pid = MyProcPid;
	LWLockRelease(watches->lock);
	return ok;
}

/*
 * redlock_watches_notifier_end
 *		Gives database's notifier slot back if this process holds it (the notifier's
 *		exit).  Raises nothing.
 */
void
redlock_watches_notifier_end(Oid database)
{
	NotifierSlot *slot;

	if (watches == NULL)
		return;
	LWLockAcquire(watches->lock, LW_EXCLUSIVE);
	slot = watches_notifier_of(database);
	if (slot && slot->pid == MyProcPid)
	{
		slot->database = InvalidOid;
		slot->pid = 0;
	}
	LWLockRelease(watches->lock);
}

/*
 * redlock_watches_list
 *		The watched locks of database: *rows set to a palloc'd array (NULL for none).
 *		Returns how many.  Raises out-of-memory errors only.
 */
int
redlock_watches_list(Oid database, RedlockWatchRow **rows)
{
	HASH_SEQ_STATUS seq;
	WatchEntry *e;
	int			n = 0;
	int			cap;

	*rows = NULL;
	LWLockAcquire(watches->lock, LW_SHARED);
	cap = (int) hash_get_num_entries(watch_table);
	if (cap > 0)
	{
		*rows = palloc_extended(sizeof(RedlockWatchRow) * cap, MCXT_ALLOC_NO_OOM);
		if (*rows == NULL)
		{
			LWLockRelease(watches->lock);
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		}
		hash_seq_init(&seq, watch_table);
		while ((e = hash_seq_search(&seq)) != NULL)
		{
			if (e->k.database != database || n >= cap)
				continue;
			(*rows)[n].config = e->k.config;
			(*rows)[n].generation = e->generation;
			(*rows)[n].prefix_len = e->prefix_len;
			strlcpy((*rows)[n].key, e->k.key, sizeof((*rows)[n].key));
			n++;
		}
	}
	LWLockRelease(watches->lock);
	return n;
}

/*
 * redlock_watches_notifier_may_stop
 *		True when database has no watched lock, its notifier slot then given back
 *		under the lock (so that the next watch launches a new notifier); false while
 *		it has some.  For the notifier, which exits on true.  Raises nothing.
 */
bool
redlock_watches_notifier_may_stop(Oid database)
{
	HASH_SEQ_STATUS seq;
	WatchEntry *e;
	bool		none = true;

	LWLockAcquire(watches->lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, watch_table);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->k.database == database)
		{
			none = false;
			hash_seq_term(&seq);
			break;
		}
	if (none)
	{
		NotifierSlot *slot = watches_notifier_of(database);

		if (slot && slot->pid == MyProcPid)
		{
			slot->database = InvalidOid;
			slot->pid = 0;
		}
	}
	LWLockRelease(watches->lock);
	return none;
}
