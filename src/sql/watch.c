/*-------------------------------------------------------------------------
 *
 * watch.c
 *	  The SQL functions of watches: redlock_watch, redlock_unwatch and
 *	  redlock_unwatch_all (1.8), this session's list of watched resources, and the
 *	  hooks that keep the shared table (shared/watches.c) in step with it.
 *
 * A watch asks the database's notifier (worker/notifier.c) to look at a lock every
 * redlock.watch_interval and to send each change as NOTIFY "redlock"; redlock_watch
 * also LISTENs on "redlock" for the session.  Like LISTEN it takes effect at commit:
 * a watch made in a transaction or savepoint that rolls back is dropped (the hooks
 * below), as its LISTEN is.  redlock_unwatch and redlock_unwatch_all take effect at
 * once; the last watch gone, the session UNLISTENs "redlock" (at commit, as UNLISTEN).
 * A session's watches end with it, and with DISCARD ALL (whose UNLISTEN * stops their
 * notifications).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/async.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "lock/locktable.h"
#include "shared/watches.h"
#include "sql/sqlarg.h"
#include "sql/xact.h"

#define WATCH_CHANNEL "redlock"

/* One resource this session watches. */
typedef struct SessionWatch
{
	char	   *resource;
	char	   *key;
	int			config;			/* the configuration slot watches.c gave */
	SubTransactionId subid;		/* where it was made, until commit; then Invalid */
} SessionWatch;

static List *session_watches = NIL;	/* of SessionWatch *, in TopMemoryContext */
static bool watch_hooks_registered = false;

/* Drops watch w from the shared table and frees it (not from the list). */
static void
watch_drop(SessionWatch *w)
{
	redlock_watches_remove(MyDatabaseId, w->config, w->key);
	pfree(w->resource);
	pfree(w->key);
	pfree(w);
}

/* Drops the watches for which keep says no; returns how many. */
static int
watch_drop_unless(bool (*keep) (const SessionWatch *w, SubTransactionId subid),
				  SubTransactionId subid)
{
	ListCell   *lc;
	int			dropped = 0;

	foreach(lc, session_watches)
	{
		SessionWatch *w = lfirst(lc);

		if (keep(w, subid))
			continue;
		watch_drop(w);
		session_watches = foreach_delete_current(session_watches, lc);
		dropped++;
	}
	return dropped;
}

static bool
watch_keep_committed(const SessionWatch *w, SubTransactionId subid pg_attribute_unused())
{
	return w->subid == InvalidSubTransactionId;
}

static bool
watch_keep_outside(const SessionWatch *w, SubTransactionId subid)
{
	return w->subid != subid;
}

static bool
watch_keep_none(const SessionWatch *w pg_attribute_unused(),
				SubTransactionId subid pg_attribute_unused())
{
	return false;
}

/* Commit keeps this transaction's watches; abort drops them, as LISTEN's. */
static void
watch_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			foreach(lc, session_watches)
				((SessionWatch *) lfirst(lc))->subid = InvalidSubTransactionId;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			(void) watch_drop_unless(watch_keep_committed, InvalidSubTransactionId);
			break;
		default:
			break;
	}
}

/* A savepoint's release hands its watches to its parent; its rollback drops them. */
static void
watch_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, session_watches)
		{
			SessionWatch *w = lfirst(lc);

			if (w->subid == mySubid)
				w->subid = parentSubid;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		(void) watch_drop_unless(watch_keep_outside, mySubid);
}

/* The session's end drops its watches. */
static void
watch_exit_callback(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	(void) watch_drop_unless(watch_keep_none, InvalidSubTransactionId);
}

/* DISCARD ALL (after its UNLISTEN *) drops the session's watches. */
static void
watch_discard_all(void)
{
	(void) watch_drop_unless(watch_keep_none, InvalidSubTransactionId);
}

static void
watch_hooks_register(void)
{
	if (watch_hooks_registered)
		return;
	RegisterXactCallback(watch_xact_callback, NULL);
	RegisterSubXactCallback(watch_subxact_callback, NULL);
	before_shmem_exit(watch_exit_callback, (Datum) 0);
	redlock_hooks_register();	/* DISCARD ALL's hook */
	redlock_hooks_on_discard_all(watch_discard_all);
	watch_hooks_registered = true;
}

/* The watch of resource in this session, or NULL. */
static SessionWatch *
watch_find(const char *resource)
{
	ListCell   *lc;

	foreach(lc, session_watches)
	{
		SessionWatch *w = lfirst(lc);

		if (strcmp(w->resource, resource) == 0)
			return w;
	}
	return NULL;
}

/*
 * redlock_watch(resource text) RETURNS void (1.8)
 *
 * Watches resource (under redlock.servers and redlock.key_prefix as they are now):
 * from this transaction's commit on, every change of its lock that a quorum of masters
 * shows (acquired, released, expired, forced; by any cluster) is sent as NOTIFY
 * "redlock" within about redlock.watch_interval (ms), with a JSON payload naming the
 * resource, the event and, when known, the holder's cluster and pid; this session
 * LISTENs on "redlock".  Watching a resource watched already does nothing.
 * Errors: 22004 NULL resource; 22023 empty or too long resource, no servers
 * configured; 25006 on a standby (NOTIFY needs a primary); 55000 the library not
 * preloaded; 54000 key or credentials too long; 53400 too many watches, watched
 * databases or configurations, or no room for the database's notifier
 * (max_worker_processes).  No distlock section: it reads locks as §3 decides them.
 */
PG_FUNCTION_INFO_V1(redlock_watch);
Datum
redlock_watch(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	char	   *key;
	int			prefix_len;
	int			config;
	uint32		generation;
	SessionWatch *w;
	MemoryContext oldcontext;

	redlock_sqlarg_refuse_parallel();
	redlock_sqlarg_require_servers();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot watch a lock during recovery"),
				 errdetail("A watch's events are sent with NOTIFY, which a standby cannot send.")));
	if (watch_find(resource))
		PG_RETURN_VOID();
	watch_hooks_register();
	key = redlock_locktable_make_key(resource, &prefix_len);
	redlock_watches_add(MyDatabaseId, key, prefix_len, &config, &generation);

	oldcontext = MemoryContextSwitchTo(TopMemoryContext);
	w = palloc(sizeof(SessionWatch));
	w->resource = pstrdup(resource);
	w->key = pstrdup(key);
	w->config = config;
	w->subid = GetCurrentSubTransactionId();
	session_watches = lappend(session_watches, w);
	MemoryContextSwitchTo(oldcontext);
	pfree(key);

	Async_Listen(WATCH_CHANNEL);
	PG_RETURN_VOID();
}

/*
 * redlock_unwatch(resource text) RETURNS boolean (1.8)
 *
 * Stops watching resource, at once: true when this session watched it, false (and
 * nothing done) when not.  The last watch gone, the session UNLISTENs "redlock" (at
 * commit).  Errors: 22004 NULL resource; 22023 empty or too long resource.
 */
PG_FUNCTION_INFO_V1(redlock_unwatch);
Datum
redlock_unwatch(PG_FUNCTION_ARGS)
{
	char	   *resource = redlock_sqlarg_resource(fcinfo, 0);
	SessionWatch *w = watch_find(resource);

	if (w == NULL)
		PG_RETURN_BOOL(false);
	session_watches = list_delete_ptr(session_watches, w);
	watch_drop(w);
	if (session_watches == NIL)
		Async_Unlisten(WATCH_CHANNEL);
	PG_RETURN_BOOL(true);
}

/*
 * redlock_unwatch_all() RETURNS integer (1.8)
 *
 * Stops every watch of this session, at once, and UNLISTENs "redlock" (at commit).
 * Returns how many resources were watched.  Raises nothing of its own.
 */
PG_FUNCTION_INFO_V1(redlock_unwatch_all);
Datum
redlock_unwatch_all(PG_FUNCTION_ARGS)
{
	int			n = watch_drop_unless(watch_keep_none, InvalidSubTransactionId);

	Async_Unlisten(WATCH_CHANNEL);
	PG_RETURN_INT32(n);
}
