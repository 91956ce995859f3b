/*-------------------------------------------------------------------------
 *
 * notifier.c
 *	  A database's watch notifier: the dynamic background worker that looks at the
 *	  watched locks of its database (shared/watches.c) every redlock.watch_interval
 *	  and sends each change as NOTIFY "redlock", so that every session of the database
 *	  listening on "redlock" (redlock_watch LISTENs) hears it, whichever cluster caused
 *	  it.  Launched by the database's first watch; exits once the database has had no
 *	  watch for NOTIFIER_IDLE_MS.
 *
 * A look is one round of watch_read.lua on every watched key, one pipelined call per
 * configuration (protocol/inspect.c decides each lock's state from what the masters
 * report, and ends each key's look once the masters heard from settle it, so that a hung
 * master delays nothing they settle).  A key that the masters not heard from could tip
 * decides nothing, and nothing is sent for it: one held on a quorum that counts a hung
 * master, or, with five masters, any key of a look that two or fewer answered.  Per lock
 * the notifier keeps what the last decided round showed: held or not, a hash of the
 * token a quorum held, the holder record's cluster and pid, and when that quorum's keys
 * run out.  The first round after a lock is watched sets this baseline
 * and sends nothing.  Then, from one decided round to the next:
 *
 *   held by token A -> held by token A      nothing (a renewal moves the expiry)
 *   not held        -> held by token A      "acquired" (A's holder)
 *   held by A       -> not held, or held by B: A's end, then "acquired" for B:
 *       "forced"   a master shows the forced release's mark of A (force_release.lua)
 *       "expired"  the round began at or after A's keys ran out on a quorum
 *       "released" otherwise
 *
 * Invariant (the checker's): "acquired" is sent only for a token that a quorum of
 * masters held in one round (RedlockLockState.held), never for an attempt in flight
 * that holds fewer.  A release within one interval of the expiry may read as
 * "expired"; a lock acquired and released between two looks sends nothing.
 *
 * The payload is JSON: {"resource": ..., "event": ..., "at": ..., "cluster": ...,
 * "pid": ...}: at is when the look that saw the change began (seconds since the Unix
 * epoch, to the microsecond); cluster and pid when a holder record of the token was
 * found.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "guc.h"
#include "protocol/inspect.h"
#include "shared/watches.h"
#include "wire/nodeset.h"
#include "worker/configset.h"

PGDLLEXPORT void redlock_notifier_main(Datum main_arg);

/*
 * How long a notifier stays without a watch in its database before it exits: short, so
 * that DROP DATABASE, which waits 5 s for other sessions to leave, finds it gone.
 */
#define NOTIFIER_IDLE_MS	1000

/* The channel every event goes out on. */
#define NOTIFIER_CHANNEL	"redlock"

typedef struct StateKey
{
	int			config;
	char		key[REDLOCK_WATCH_KEY_LEN + 1];
} StateKey;

/* What the last decided round showed of one watched lock. */
typedef struct WatchState
{
	StateKey	k;				/* the hash key: first */
	bool		seen;			/* still watched (this round's list) */
	bool		known;			/* a round decided its state */
	bool		held;
	uint64		token_hash;
	double		expires_ms;		/* redlock_clock_ms() when held keys run out (0: none) */
	bool		has_holder;
	int			pid;
	char		cluster[NAMEDATALEN * 2];
} WatchState;

static HTAB *states = NULL;
static Oid	notifier_database = InvalidOid;

/* Appends one event's payload for row to events (a list of palloc'd strings). */
static List *
notifier_event(List *events, const RedlockWatchRow *row, const char *event,
			   TimestampTz at, const WatchState *holder_of)
{
	StringInfoData buf;
	const char *name = row->key + row->prefix_len;
	char	   *resource = pg_any_to_server(name, strlen(name), PG_UTF8);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"resource\": ");
	escape_json(&buf, resource);
	appendStringInfo(&buf, ", \"event\": \"%s\", \"at\": %.6f", event,
					 (double) (at - SetEpochTimestamp()) / USECS_PER_SEC);
	if (holder_of && holder_of->has_holder)
	{
		appendStringInfoString(&buf, ", \"cluster\": ");
		escape_json(&buf, holder_of->cluster);
		appendStringInfo(&buf, ", \"pid\": %d", holder_of->pid);
	}
	appendStringInfoChar(&buf, '}');
	return lappend(events, buf.data);
}

/* Keeps what state st (read in a round begun at start_ms) says of the lock in ws. */
static void
notifier_keep(WatchState *ws, const RedlockLockState *st, double start_ms)
{
	ws->known = true;
	ws->held = st->held;
	ws->token_hash = st->held ? st->token_hash : 0;
	ws->expires_ms = st->held && st->ttl_ms >= 0 ? start_ms + st->ttl_ms : 0;
	ws->has_holder = st->held && st->has_holder;
	ws->pid = ws->has_holder ? st->holder.pid : 0;
	strlcpy(ws->cluster, ws->has_holder && st->holder.cluster ? st->holder.cluster : "",
			sizeof(ws->cluster));
}

/*
 * The events of one decided round for row (see the head of this file), appended to
 * events; ws then holds the new state.
 */
static List *
notifier_decide(List *events, const RedlockWatchRow *row, WatchState *ws,
				const RedlockLockState *st, double start_ms, TimestampTz at)
{
	WatchState	was = *ws;

	notifier_keep(ws, st, start_ms);
	if (!was.known)
		return events;			/* the baseline */
	if (was.held && (!st->held || st->token_hash != was.token_hash))
	{
		const char *end;

		if (st->forced_hash != 0 && st->forced_hash == was.token_hash)
			end = "forced";
		else if (was.expires_ms > 0 && start_ms >= was.expires_ms)
			end = "expired";
		else
			end = "released";
		events = notifier_event(events, row, end, at, &was);
	}
	if (st->held && (!was.held || st->token_hash != was.token_hash))
		events = notifier_event(events, row, "acquired", at, ws);
	return events;
}

/* The state kept for row, entered (unknown) when new. */
static WatchState *
notifier_state(const RedlockWatchRow *row)
{
	StateKey	k;
	WatchState *ws;
	bool		found;

	memset(&k, 0, sizeof(k));
	k.config = row->config;
	strlcpy(k.key, row->key, sizeof(k.key));
	ws = hash_search(states, &k, HASH_ENTER, &found);
	if (!found)
	{
		memset(((char *) ws) + sizeof(StateKey), 0, sizeof(WatchState) - sizeof(StateKey));
	}
	ws->seen = true;
	return ws;
}

/*
 * One look at every watched lock of the database; returns the events to send (a list
 * of payloads) and sets *watched to how many locks are watched.
 */
static List *
notifier_round(int *watched)
{
	RedlockWatchRow *rows;
	int			n = redlock_watches_list(notifier_database, &rows);
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));
	List	   *events = NIL;
	HASH_SEQ_STATUS seq;
	WatchState *ws;

	*watched = n;
	hash_seq_init(&seq, states);
	while ((ws = hash_seq_search(&seq)) != NULL)
		ws->seen = false;

	for (int first = 0; first < n; first++)
	{
		RedlockNodeSet *set;
		const char **keys;
		int		   *index;
		int			m = 0;
		RedlockLockState *st;
		RedlockResult result;
		double		start_ms;
		TimestampTz at;

		if (done[first])
			continue;
		keys = palloc(sizeof(char *) * n);
		index = palloc(sizeof(int) * n);
		for (int k = first; k < n; k++)
			if (!done[k] && rows[k].config == rows[first].config &&
				rows[k].generation == rows[first].generation)
			{
				done[k] = true;
				index[m] = k;
				keys[m++] = rows[k].key;
				(void) notifier_state(&rows[k]);
			}
		set = redlock_configset_for_slot(rows[first].config, rows[first].generation);
		if (set == NULL)
			continue;
		st = palloc(sizeof(RedlockLockState) * m);
		start_ms = redlock_clock_ms();
		at = GetCurrentTimestamp();
		redlock_inspect_watch(set, keys, m, st, &result);
		for (int j = 0; j < m; j++)
			if (st[j].certain)	/* else: masters not heard from could tip it */
				events = notifier_decide(events, &rows[index[j]], notifier_state(&rows[index[j]]),
										 &st[j], start_ms, at);
	}

	/* Locks no longer watched are forgotten: a new watch starts from a new baseline. */
	hash_seq_init(&seq, states);
	while ((ws = hash_seq_search(&seq)) != NULL)
		if (!ws->seen)
			hash_search(states, &ws->k, HASH_REMOVE, NULL);
	return events;
}

/* Sends events (payloads) as NOTIFY "redlock" in one transaction of the database. */
static void
notifier_send(List *events)
{
	ListCell   *lc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, "NOTIFY redlock");
	foreach(lc, events)
		Async_Notify(NOTIFIER_CHANNEL, (const char *) lfirst(lc));
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* The notifier's exit: its connections closed, its slot given back. */
static void
notifier_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	LWLockReleaseAll();
	redlock_watches_notifier_end(notifier_database);
	redlock_nodes_disconnect();
}

/*
 * redlock_notifier_main
 *		A database's notifier (main_arg: the database's OID): connects to it, then
 *		looks at its watched locks every redlock.watch_interval (ms) and sends each
 *		change as NOTIFY "redlock" (see the head of this file).  Exits with status 0
 *		when the database has no watch at its start, when another notifier of the
 *		database runs, after NOTIFIER_IDLE_MS without a watch in the database, or when
 *		the postmaster dies; an ERROR or SIGTERM ends the process with status 1, and
 *		the postmaster starts it again after a second.
 *		No distlock section of its own: it reads locks as §3's quorum decides them.
 */
void
redlock_notifier_main(Datum main_arg)
{
	MemoryContext round_context;
	HASHCTL		ctl;
	double		idle_since_ms = 0;

	notifier_database = DatumGetObjectId(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * Restarted after an error with no watch left (DROP DATABASE ... WITH (FORCE) ended
	 * the watchers and this process): leave for good rather than connect, since the
	 * database may be gone, and a connection's FATAL would restart us every second.
	 */
	{
		RedlockWatchRow *rows;

		if (redlock_watches_list(notifier_database, &rows) == 0)
			proc_exit(0);
	}
	BackgroundWorkerInitializeConnectionByOid(notifier_database, InvalidOid, 0);
	if (!redlock_watches_notifier_begin(notifier_database))
		proc_exit(0);
	before_shmem_exit(notifier_exit, (Datum) 0);
	pgstat_report_appname("redlock notifier");

	/* Computing the scripts' SHA-1 needs a resource owner. */
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "redlock notifier");
	round_context = AllocSetContextCreate(TopMemoryContext, "redlock notifier round",
										  ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(StateKey);
	ctl.entrysize = sizeof(WatchState);
	ctl.hcxt = TopMemoryContext;
	states = hash_create("redlock watched lock states", 64, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	for (;;)
	{
		MemoryContext oldcontext;
		List	   *events;
		int			watched;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		oldcontext = MemoryContextSwitchTo(round_context);
		events = notifier_round(&watched);
		if (events != NIL)
			notifier_send(events);
		MemoryContextSwitchTo(oldcontext);
		MemoryContextReset(round_context);

		if (watched > 0)
			idle_since_ms = 0;
		else if (idle_since_ms == 0)
			idle_since_ms = redlock_clock_ms();
		else if (redlock_clock_ms() - idle_since_ms >= NOTIFIER_IDLE_MS &&
				 redlock_watches_notifier_may_stop(notifier_database))
			proc_exit(0);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 redlock_watch_interval_ms,
						 redlock_wait_event(REDLOCK_WAIT_NOTIFIER_MAIN));
	}
}
