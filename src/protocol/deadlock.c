/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *	  Deadlock detection across clusters (doc/deadlock.md), for an acquire that waits:
 *	  once it has waited redlock.deadlock_timeout, and once per deadlock_timeout after,
 *	  it posts its wait record on the masters (what it waits for, what it holds there)
 *	  and reads every waiter's; when it is on a cycle of waits and is the cycle's victim,
 *	  its wait ends with the cycle described, which the SQL layer raises as 40P01.
 *	  The graph and its judgement are waitgraph.c's; the loop that calls in is retry.c's.
 *
 * Invariant: never a false report.  The victim reports only a cycle it read twice,
 * the second read begun after the first ended, with the same records (each names its
 * wait by a random id) and the same holds live on a quorum: every wait and hold of it
 * then lasted from the end of the first read to the start of the second, so at that
 * moment the cycle was whole.  A waiter takes its record back before its wait ends
 * (a wait run out: before it returns; an error: at the (sub)transaction's abort), so
 * a record outlives its wait only when the backend dies, until the record's TTL.
 *
 * Only the victim reports (the member of the cycle that began waiting last), so the
 * others proceed; a member that sees the same cycle at two checks in a row reports it
 * itself, in case the victim does not check (its deadlock_timeout 0, or longer).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "guc.h"
#include "protocol/deadlock.h"
#include "protocol/holder.h"
#include "protocol/waitgraph.h"
#include "scripts/scripts.h"
#include "tally.h"
#include "wire/call.h"
#include "wire/nodeset.h"

#define WAIT_ID_BYTES 8

struct RedlockDeadlockWait
{
	MemoryContext context;		/* the acquire's, where all of it lives */
	RedlockNodeSet *set;
	const char *const *keys;	/* the keys waited for (the acquire's) */
	int			nkeys;
	char		kind;			/* REDLOCK_WAIT_* (waitgraph.h) */
	double		next_check_ms;	/* redlock_clock_ms() time of the next check */
	int64		started_us;		/* when the wait began, on this server's clock */
	char		wait_id[WAIT_ID_BYTES * 2 + 1];
	char	   *record;			/* built at the first check; again once it
								 * turns writer (redlock_deadlock_intends) */
	int			record_len;
	char	   *seen_signature; /* a cycle whose victim is another member, seen at the
								 * last check; NULL: none */
};

static RedlockHeldSource held_source = NULL;

/*
 * The posted record not yet taken back (one wait at a time per backend): taken back
 * by redlock_deadlock_end, or at an abort by redlock_deadlock_withdraw_pending.
 */
static RedlockNodeSet *posted_set = NULL;
static char posted_field[NAMEDATALEN + 64];
static char posted_wait_id[WAIT_ID_BYTES * 2 + 1];

/*
 * redlock_deadlock_set_held_source
 *		Sets what tells a wait record this backend's holds (the lock layer's list of
 *		locks held on a set of masters).  Called once from _PG_init.  Raises nothing.
 *		Not a distlock section: doc/deadlock.md §2.
 */
void
redlock_deadlock_set_held_source(RedlockHeldSource source)
{
	held_source = source;
}

/*
 * redlock_deadlock_begin
 *		Starts watching an acquire's wait for deadlocks (doc/deadlock.md §1): set, the
 *		masters; keys (nkeys), what it waits for; kind, REDLOCK_WAIT_* (waitgraph.h).
 *		Returns NULL when redlock.deadlock_timeout is 0 (no checks).  Allocates in the
 *		current memory context, and keeps keys: both must outlive the wait.  Raises
 *		only out-of-memory errors (53200).  Not a distlock section: doc/deadlock.md §1
 *		(the wait is spec §4's retry loop).
 */
RedlockDeadlockWait *
redlock_deadlock_begin(RedlockNodeSet *set, const char *const *keys, int nkeys, char kind)
{
	RedlockDeadlockWait *wait;

	if (redlock_deadlock_timeout_ms <= 0 || held_source == NULL)
		return NULL;
	wait = palloc0(sizeof(RedlockDeadlockWait));
	wait->context = CurrentMemoryContext;
	wait->set = set;
	wait->nkeys = nkeys;
	wait->keys = keys;
	wait->kind = kind;
	wait->next_check_ms = redlock_clock_ms() + redlock_deadlock_timeout_ms;
	wait->started_us = redlock_holder_now_us();
	return wait;
}

/* Appends s (len bytes) to buf as a netstring. */
static void
deadlock_append(StringInfo buf, const char *s, int len)
{
	appendStringInfo(buf, "%d:", len);
	appendBinaryStringInfo(buf, s, len);
}

static void
deadlock_append_string(StringInfo buf, const char *s)
{
	deadlock_append(buf, s, (int) strlen(s));
}

/*
 * Builds wait's record (doc/deadlock.md §2) and id, in the wait's context; returns how
 * many holds it names.
 */
static int
deadlock_build_record(RedlockDeadlockWait *wait)
{
	uint8		id[WAIT_ID_BYTES];
	char	  **held_keys = NULL;
	char	  **held_tokens = NULL;
	int			nheld = held_source(wait->set, &held_keys, &held_tokens);
	StringInfoData buf;
	char		number[32];
	MemoryContext old;

	/* One id for the whole wait, also when the record is rebuilt (an intent posted). */
	if (wait->wait_id[0] == '\0')
	{
		if (!pg_strong_random(id, sizeof(id)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random wait id")));
		hex_encode((const char *) id, WAIT_ID_BYTES, wait->wait_id);
		wait->wait_id[WAIT_ID_BYTES * 2] = '\0';
	}

	old = MemoryContextSwitchTo(wait->context);
	initStringInfo(&buf);
	deadlock_append_string(&buf, "1");
	deadlock_append_string(&buf, redlock_holder_cluster());
	snprintf(number, sizeof(number), "%d", MyProcPid);
	deadlock_append_string(&buf, number);
	deadlock_append_string(&buf, wait->wait_id);
	snprintf(number, sizeof(number), INT64_FORMAT, wait->started_us);
	deadlock_append_string(&buf, number);
	deadlock_append(&buf, &wait->kind, 1);
	snprintf(number, sizeof(number), "%d", wait->nkeys);
	deadlock_append_string(&buf, number);
	for (int k = 0; k < wait->nkeys; k++)
		deadlock_append_string(&buf, wait->keys[k]);
	snprintf(number, sizeof(number), "%d", nheld);
	deadlock_append_string(&buf, number);
	for (int h = 0; h < nheld; h++)
	{
		deadlock_append_string(&buf, held_keys[h]);
		deadlock_append_string(&buf, held_tokens[h]);
	}
	MemoryContextSwitchTo(old);
	wait->record = buf.data;
	wait->record_len = buf.len;
	return nheld;
}

/*
 * This backend's field in the waits hash: its cluster, its pid and its start time
 * (microseconds), tab-separated: cluster names repeat across hosts (Debian's
 * "15/main"), cloned clusters share a system identifier, and pids are reused.
 */
static void
deadlock_field(char *field, size_t size)
{
	snprintf(field, size, "%s\t%d\t" INT64_FORMAT, redlock_holder_cluster(), MyProcPid,
			 (int64) MyStartTimestamp);
}

/*
 * How long a record lives (ms): two checks apart, each a retry delay and its jitter
 * late, and a round's time; it is posted again at every check.
 */
static int
deadlock_record_ttl_ms(void)
{
	double		ttl = 2.0 * ((double) redlock_deadlock_timeout_ms + redlock_retry_delay_ms +
							 redlock_retry_jitter_ms) +
		redlock_timeout_ms + redlock_connect_timeout_ms;

	return (int) Min(ttl, (double) REDLOCK_MAX_TTL_MS);
}

/* Posts (or renews) wait's record; true when a quorum of masters holds it. */
static bool
deadlock_publish(RedlockDeadlockWait *wait)
{
	int			count = redlock_nodeset_size(wait->set);
	int			quorum = redlock_nodeset_quorum(wait->set);
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(count, 1));
	RedlockCommand command;
	char		field[NAMEDATALEN + 64];
	char		ttl[16];
	int			accepted = 0;

	deadlock_field(field, sizeof(field));
	snprintf(ttl, sizeof(ttl), "%d", deadlock_record_ttl_ms());
	memset(&command, 0, sizeof(command));
	command.need = quorum;
	command.accept = redlock_tally_one;
	command.script = &redlock_script_deadlock_publish;
	command.argv[0] = REDLOCK_WAITS_KEY;
	command.argv[1] = field;
	command.argv[2] = wait->record;
	command.argv[3] = ttl;
	command.argc = 4;
	for (int i = 0; i < command.argc; i++)
		command.argvlen[i] = strlen(command.argv[i]);
	command.argvlen[2] = wait->record_len;

	/* From now on an abort takes it back, whatever this round's outcome. */
	posted_set = wait->set;
	strlcpy(posted_field, field, sizeof(posted_field));
	strlcpy(posted_wait_id, wait->wait_id, sizeof(posted_wait_id));

	redlock_nodes_run(wait->set, &command, 1, false, outcomes);
	for (int i = 0; i < count; i++)
		accepted += redlock_tally_one(&outcomes[i]);
	return redlock_quorum_reached(accepted, quorum);
}

/* Reads every master's wait records into graph; false when fewer than a quorum did. */
static bool
deadlock_read(RedlockDeadlockWait *wait, RedlockWaitGraph *graph)
{
	int			count = redlock_nodeset_size(wait->set);
	int			quorum = redlock_nodeset_quorum(wait->set);
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(count, 1));
	RedlockCommand command;
	int			read = 0;

	memset(&command, 0, sizeof(command));
	command.need = 0;			/* every master's records count */
	command.accept = redlock_tally_string;	/* a master's wait records */
	command.script = &redlock_script_deadlock_read;
	command.keep_text = true;
	command.argv[0] = REDLOCK_WAITS_KEY;
	command.argvlen[0] = strlen(REDLOCK_WAITS_KEY);
	command.argc = 1;
	redlock_nodes_run(wait->set, &command, 1, false, outcomes);

	redlock_waitgraph_init(graph, quorum);
	for (int i = 0; i < count; i++)
		if (outcomes[i].kind == REDLOCK_REPLY_STRING &&
			redlock_waitgraph_add_reply(graph, outcomes[i].text ? outcomes[i].text : "",
										outcomes[i].text_len))
			read++;
	return redlock_quorum_reached(read, quorum);
}

/* Takes back the posted record on set; cleanup: on an abort path (raises nothing). */
static void
deadlock_withdraw(RedlockNodeSet *set, bool cleanup)
{
	int			count = redlock_nodeset_size(set);
	RedlockNodeOutcome *outcomes;
	RedlockCommand command;

	outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(count, 1));
	memset(&command, 0, sizeof(command));
	command.need = redlock_nodeset_quorum(set);
	command.accept = redlock_tally_integer;	/* the master ran the script */
	command.script = &redlock_script_deadlock_withdraw;
	command.argv[0] = REDLOCK_WAITS_KEY;
	command.argv[1] = posted_field;
	command.argv[2] = posted_wait_id;
	command.argc = 3;
	for (int i = 0; i < command.argc; i++)
		command.argvlen[i] = strlen(command.argv[i]);
	redlock_nodes_run(set, &command, 1, cleanup, outcomes);
	posted_set = NULL;			/* not before: a cancel meanwhile leaves it to the abort */
	pfree(outcomes);
}

/* Whether this waiter reports deadlock, a cycle it is on (the header comment). */
static bool
deadlock_mine(const RedlockDeadlockWait *wait, const RedlockDeadlock *deadlock)
{
	return deadlock->victim == deadlock->cycle[0] ||
		(wait->seen_signature != NULL &&
		 strcmp(wait->seen_signature, deadlock->signature) == 0);
}

/*
 * redlock_deadlock_check
 *		Checks wait for a deadlock when a check is due (every redlock.deadlock_timeout
 *		ms of the wait; doc/deadlock.md §3): posts its record, reads every waiter's,
 *		and, when this waiter reports the cycle it is on, reads them all again (the
 *		invariant above).
 *
 * wait: from redlock_deadlock_begin; NULL does nothing.
 *
 * Returns NULL (go on waiting), or the DETAIL of the deadlock that ends this wait
 * (palloc'd, one line per member of the cycle), its record taken back.  Raises what
 * an interrupted network wait raises (57014); XX000 if the strong random source fails
 * (the wait's id); out-of-memory errors (53200).  Not a distlock section:
 * doc/deadlock.md §3.
 */
char *
redlock_deadlock_check(RedlockDeadlockWait *wait)
{
	MemoryContext check_context;
	MemoryContext old;
	RedlockWaitGraph first,
				second;
	RedlockDeadlock seen,
				again;
	char	   *detail = NULL;
	char	   *signature = NULL;
	double		now = redlock_clock_ms();

	if (wait == NULL || now < wait->next_check_ms)
		return NULL;
	wait->next_check_ms = now + redlock_deadlock_timeout_ms;

	/*
	 * A waiter that holds nothing here blocks nobody (unless it posts a writer's
	 * intent): no cycle goes through it, and nobody needs its record.  It neither posts
	 * nor reads, so that a queue of such waiters costs the masters nothing, until it
	 * turns writer (redlock_deadlock_intends checks again).
	 */
	if (wait->record == NULL &&
		deadlock_build_record(wait) == 0 && wait->kind != REDLOCK_WAIT_INTENT)
	{
		wait->next_check_ms = INFINITY;
		return NULL;
	}

	check_context = AllocSetContextCreate(CurrentMemoryContext, "redlock deadlock check",
										  ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(check_context);
	if (deadlock_publish(wait) && deadlock_read(wait, &first) &&
		redlock_waitgraph_find(&first, wait->record, wait->record_len, &seen))
	{
		signature = seen.signature;
		if (deadlock_mine(wait, &seen) && deadlock_read(wait, &second) &&
			redlock_waitgraph_find(&second, wait->record, wait->record_len, &again) &&
			strcmp(seen.signature, again.signature) == 0)
		{
			MemoryContextSwitchTo(old);
			detail = redlock_waitgraph_describe(&second, &again);
		}
	}
	MemoryContextSwitchTo(old);

	/* A cycle not reported now is remembered for the next check. */
	if (wait->seen_signature)
		pfree(wait->seen_signature);
	wait->seen_signature = (detail == NULL && signature != NULL) ?
		MemoryContextStrdup(wait->context, signature) : NULL;
	MemoryContextDelete(check_context);

	if (detail)
		deadlock_withdraw(wait->set, false);
	return detail;
}

/*
 * redlock_deadlock_intends
 *		wait's acquire saw shared holders and posts a writer's intent from its next
 *		attempt on (doc/shared.md §3), which keeps shared acquires out: shared waiters
 *		then wait for it, so its record says so (kind REDLOCK_WAIT_INTENT, rebuilt at
 *		the next check under the same wait id) and a wait that held nothing, exempted
 *		at its first check, checks again from its next sleep on.  wait: from
 *		redlock_deadlock_begin; NULL (no checks) does nothing.  Raises nothing.  Not a
 *		distlock section: doc/deadlock.md §1.
 */
void
redlock_deadlock_intends(RedlockDeadlockWait *wait)
{
	if (wait == NULL || wait->kind == REDLOCK_WAIT_INTENT)
		return;
	wait->kind = REDLOCK_WAIT_INTENT;
	if (wait->record != NULL)	/* rebuilt, as kind i, at the next check */
	{
		pfree(wait->record);
		wait->record = NULL;
	}
	if (isinf(wait->next_check_ms))
		wait->next_check_ms = redlock_clock_ms();
}

/*
 * redlock_deadlock_next_check_ms
 *		When wait's next check is due, a redlock_clock_ms() time (ms); < 0 for wait
 *		NULL (none).  Raises nothing.  doc/deadlock.md §1.
 */
double
redlock_deadlock_next_check_ms(const RedlockDeadlockWait *wait)
{
	return wait ? wait->next_check_ms : -1;
}

/*
 * redlock_deadlock_end
 *		Ends watching wait (NULL does nothing): takes its record back from the masters
 *		when it posted one, before the acquire returns (the invariant above).  Raises
 *		what an interrupted network wait raises (57014).  doc/deadlock.md §2.
 */
void
redlock_deadlock_end(RedlockDeadlockWait *wait)
{
	if (wait == NULL)
		return;
	if (posted_set == wait->set)
		deadlock_withdraw(wait->set, false);
	if (wait->record)
		pfree(wait->record);
	if (wait->seen_signature)
		pfree(wait->seen_signature);
	wait->record = wait->seen_signature = NULL;
}

/*
 * redlock_deadlock_withdraw_pending
 *		At a (sub)transaction's abort or the backend's exit: takes back a wait record
 *		that an acquire cut short (an error, a cancel) left posted.  Cleanup mode
 *		(each master waited for at most 10 s in all): raises nothing but out-of-memory
 *		errors (53200).  doc/deadlock.md §2.
 */
void
redlock_deadlock_withdraw_pending(void)
{
	if (posted_set != NULL)
		deadlock_withdraw(posted_set, true);
}
