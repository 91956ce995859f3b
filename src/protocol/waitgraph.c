/*-------------------------------------------------------------------------
 *
 * waitgraph.c
 *	  The wait-for graph of a deadlock check across clusters (doc/deadlock.md §3):
 *	  the wait records read from every master, counted, and the cycle of waits this
 *	  waiter is on, if any, with its victim.  No I/O: deadlock.c reads and decides
 *	  when; this module only judges what was read.
 *
 * Invariant: only what a quorum of masters shows counts.  A waiter is a member when a
 * quorum holds its record; a member holds a key when a quorum says the key holds its
 * token (or its live shared hold); a writer's intent counts when a quorum shows it.
 * Whatever is not shown by a quorum is taken to end by itself: a waiter blocked only
 * by non-members can proceed, so a doubt never makes a cycle, only hides one.
 *
 * A member A waits for member B when A waits for a key B holds (a shared hold blocks
 * only an exclusive acquire), or A waits for a shared hold of a key whose intent B
 * (an exclusive acquire of it) posted.  A member
 * can proceed when it is blocked by no member that cannot (a set's, a lock's or a
 * shared hold's wait needs all its blockers gone); a semaphore's waiter when one key
 * it waits for is held by no member, or by one that can proceed.  The members that
 * cannot proceed are deadlocked (the least fixed point, as PostgreSQL's lock
 * manager judges soft and hard edges alike for OR-waits: a knot).  The waiter reports
 * a deadlock only when it is deadlocked and on a cycle (a waiter blocked by somebody
 * else's cycle waits for that cycle to be broken), and the victim is the member of
 * its cycle's component that began waiting last (ties: the greater field): every
 * member of the cycle reading the same records names the same victim.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "protocol/waitgraph.h"

#define WAIT_RECORD_VERSION "1"
#define DESCRIBE_MAX_HELD 4		/* holds named per member in a DETAIL */

/* Reads the netstring at *p (before end) into *out and *outlen; false when malformed. */
static bool
waitgraph_take(const char **p, const char *end, const char **out, int *outlen)
{
	long		n = 0;
	const char *q = *p;

	if (q >= end || *q < '0' || *q > '9')
		return false;
	while (q < end && *q >= '0' && *q <= '9')
	{
		n = n * 10 + (*q - '0');
		if (n > 1024L * 1024 * 1024)
			return false;
		q++;
	}
	if (q >= end || *q != ':' || n > end - q - 1)
		return false;
	*out = q + 1;
	*outlen = (int) n;
	*p = q + 1 + n;
	return true;
}

/* The netstring at *p as a palloc'd NUL-terminated string, or NULL when malformed. */
static char *
waitgraph_take_string(const char **p, const char *end)
{
	const char *s;
	int			len;

	if (!waitgraph_take(p, end, &s, &len))
		return NULL;
	return pnstrdup(s, len);
}

/* The netstring at *p as a non-negative count up to max, or -1. */
static int
waitgraph_take_count(const char **p, const char *end, int max)
{
	char	   *s = waitgraph_take_string(p, end);
	char	   *stop;
	long		v;

	if (s == NULL || s[0] == '\0')
		return -1;
	v = strtol(s, &stop, 10);
	if (*stop != '\0' || v < 0 || v > max)
		return -1;
	return (int) v;
}

/*
 * redlock_waitgraph_record_parse
 *		Parses a wait record (doc/deadlock.md §2; len bytes at record) into member,
 *		palloc'd, votes zeroed.  Returns false when it is not a record of this version.
 *		Raises only out-of-memory errors (53200).  doc/deadlock.md §2.
 */
bool
redlock_waitgraph_record_parse(const char *record, int len, RedlockWaitMember *member)
{
	const char *p = record;
	const char *end = record + len;
	char	   *version;
	char	   *pid;
	char	   *started;
	char	   *kind;

	memset(member, 0, sizeof(*member));
	member->record = palloc(len + 1);	/* not pnstrdup: a NUL inside must not cut it */
	memcpy(member->record, record, len);
	member->record[len] = '\0';
	member->record_len = len;
	version = waitgraph_take_string(&p, end);
	if (version == NULL || strcmp(version, WAIT_RECORD_VERSION) != 0)
		return false;
	member->cluster = waitgraph_take_string(&p, end);
	pid = waitgraph_take_string(&p, end);
	member->wait_id = waitgraph_take_string(&p, end);
	started = waitgraph_take_string(&p, end);
	kind = waitgraph_take_string(&p, end);
	if (!member->cluster || !pid || !member->wait_id || !started || !kind || strlen(kind) != 1)
		return false;
	member->pid = atoi(pid);
	member->started_us = strtoi64(started, NULL, 10);
	member->kind = kind[0];
	/* Each key takes 2 bytes at least ("0:"), each hold 4: no count past the bytes left. */
	member->nawait = waitgraph_take_count(&p, end, 4096);
	if (member->nawait < 0 || member->nawait > (end - p) / 2)
		return false;
	member->await_keys = palloc0(sizeof(char *) * Max(member->nawait, 1));
	member->intent_votes = palloc0(sizeof(int) * Max(member->nawait, 1));
	for (int k = 0; k < member->nawait; k++)
		if ((member->await_keys[k] = waitgraph_take_string(&p, end)) == NULL)
			return false;
	member->nheld = waitgraph_take_count(&p, end, 1024 * 1024);
	if (member->nheld < 0 || member->nheld > (end - p) / 4)
		return false;
	member->held_keys = palloc0(sizeof(char *) * Max(member->nheld, 1));
	member->held_tokens = palloc0(sizeof(char *) * Max(member->nheld, 1));
	member->live_votes = palloc0(sizeof(int) * Max(member->nheld, 1));
	member->exclusive_votes = palloc0(sizeof(int) * Max(member->nheld, 1));
	for (int h = 0; h < member->nheld; h++)
		if ((member->held_keys[h] = waitgraph_take_string(&p, end)) == NULL ||
			(member->held_tokens[h] = waitgraph_take_string(&p, end)) == NULL)
			return false;
	return p == end;
}

/*
 * redlock_waitgraph_init
 *		Starts an empty graph whose facts need quorum masters each (spec §3 step 3's
 *		majority, counted as every round counts it).  Raises nothing.
 */
void
redlock_waitgraph_init(RedlockWaitGraph *graph, int quorum)
{
	graph->quorum = quorum;
	graph->n = 0;
	graph->size = 0;
	graph->replies = 0;
	graph->members = NULL;
}

/* The member whose record is record (len bytes), added when new; NULL if unparsable. */
static RedlockWaitMember *
waitgraph_member(RedlockWaitGraph *graph, const char *field, int field_len,
				 const char *record, int len)
{
	RedlockWaitMember member;

	for (int m = 0; m < graph->n; m++)
		if (graph->members[m].record_len == len &&
			memcmp(graph->members[m].record, record, len) == 0)
			return &graph->members[m];
	if (!redlock_waitgraph_record_parse(record, len, &member))
		return NULL;
	member.field = pnstrdup(field, field_len);
	if (graph->n == graph->size)
	{
		graph->size = Max(8, graph->size * 2);
		graph->members = graph->members ?
			repalloc(graph->members, sizeof(RedlockWaitMember) * graph->size) :
			palloc(sizeof(RedlockWaitMember) * graph->size);
	}
	graph->members[graph->n] = member;
	return &graph->members[graph->n++];
}

/*
 * redlock_waitgraph_add_reply
 *		Counts one master's reply to deadlock_read.lua (len bytes at text): each record
 *		it holds gets the master's vote, and so does each intent and live hold it
 *		reports.  Returns false when the reply is malformed (nothing of it counted
 *		after the first bad record).  text, len: the reply's bytes.  Raises only
 *		out-of-memory errors (53200).  doc/deadlock.md §3 step 2.
 */
bool
redlock_waitgraph_add_reply(RedlockWaitGraph *graph, const char *text, int len)
{
	const char *p = text;
	const char *end = text + len;

	graph->replies++;
	while (p < end)
	{
		const char *field,
				   *record,
				   *intents,
				   *live;
		int			field_len,
					record_len,
					intents_len,
					live_len;
		RedlockWaitMember *member;

		if (!waitgraph_take(&p, end, &field, &field_len) ||
			!waitgraph_take(&p, end, &record, &record_len) ||
			!waitgraph_take(&p, end, &intents, &intents_len) ||
			!waitgraph_take(&p, end, &live, &live_len))
			return false;
		member = waitgraph_member(graph, field, field_len, record, record_len);
		if (member == NULL)
			continue;			/* another version's record: not ours to judge */
		if (intents_len != member->nawait || live_len != member->nheld)
			return false;
		if (member->voted_in == graph->replies)
			continue;			/* this master counted it already, under another field */
		member->voted_in = graph->replies;
		member->votes++;
		for (int k = 0; k < member->nawait; k++)
			member->intent_votes[k] += intents[k] == '1';
		for (int h = 0; h < member->nheld; h++)
		{
			member->live_votes[h] += live[h] == '1' || live[h] == '2';
			member->exclusive_votes[h] += live[h] == '1';
		}
	}
	return true;
}

/* True when member m counts: a quorum holds its record. */
static bool
waitgraph_present(const RedlockWaitGraph *graph, int m)
{
	return graph->members[m].votes >= graph->quorum;
}

/* True when member b blocks member a on a's key k (the invariant above). */
static bool
waitgraph_blocks(const RedlockWaitGraph *graph, int a, int k, int b)
{
	const RedlockWaitMember *wa = &graph->members[a];
	const RedlockWaitMember *wb = &graph->members[b];
	const char *key = wa->await_keys[k];

	if (a == b || !waitgraph_present(graph, b))
		return false;
	for (int h = 0; h < wb->nheld; h++)
		if ((wa->kind == REDLOCK_WAIT_SHARED ? wb->exclusive_votes[h] : wb->live_votes[h]) >=
			graph->quorum && strcmp(wb->held_keys[h], key) == 0)
			return true;
	if (wa->kind == REDLOCK_WAIT_SHARED && wb->kind == REDLOCK_WAIT_INTENT)
		for (int j = 0; j < wb->nawait; j++)
			if (wb->intent_votes[j] >= graph->quorum && strcmp(wb->await_keys[j], key) == 0)
				return true;
	return false;
}

/* True when member a waits for member b on some key (b blocks a). */
static bool
waitgraph_edge(const RedlockWaitGraph *graph, int a, int b, int *via)
{
	for (int k = 0; k < graph->members[a].nawait; k++)
		if (waitgraph_blocks(graph, a, k, b))
		{
			if (via)
				*via = k;
			return true;
		}
	return false;
}

/* Whether member a can proceed, given which members can (the invariant above). */
static bool
waitgraph_can_proceed(const RedlockWaitGraph *graph, int a, const bool *proceeds)
{
	const RedlockWaitMember *wa = &graph->members[a];

	if (wa->kind == REDLOCK_WAIT_PERMIT)
	{
		for (int k = 0; k < wa->nawait; k++)
		{
			bool		blocked = false;

			for (int b = 0; b < graph->n && !blocked; b++)
				blocked = waitgraph_blocks(graph, a, k, b) && !proceeds[b];
			if (!blocked)
				return true;
		}
		return false;
	}
	for (int b = 0; b < graph->n; b++)
		if (!proceeds[b] && waitgraph_edge(graph, a, b, NULL))
			return false;
	return true;
}

/* qsort comparator for C strings. */
static int
waitgraph_compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * redlock_waitgraph_find
 *		Whether the waiter whose record is self_record (self_len bytes) is deadlocked on
 *		a cycle of graph's members (the invariant above); when it is, fills deadlock
 *		(palloc'd): the cycle from the waiter back to it, the key each member waits for
 *		on it, the victim and the signature.  False when the waiter's own record is not
 *		on a quorum.  Raises only out-of-memory errors (53200).  doc/deadlock.md §3
 *		step 3.
 */
bool
redlock_waitgraph_find(const RedlockWaitGraph *graph, const char *self_record, int self_len,
					   RedlockDeadlock *deadlock)
{
	int			n = graph->n;
	int			self = -1;
	bool	   *proceeds;
	bool	   *from_self;
	bool	   *to_self;
	int		   *queue;
	int		   *parent;
	bool		changed = true;
	int			head,
				tail;
	char	  **records;
	int			nrecords = 0;
	StringInfoData signature;

	for (int m = 0; m < n; m++)
		if (graph->members[m].record_len == self_len &&
			memcmp(graph->members[m].record, self_record, self_len) == 0)
			self = m;
	if (self < 0 || !waitgraph_present(graph, self))
		return false;

	/* Who can proceed: the least fixed point, from nobody up. */
	proceeds = palloc0(sizeof(bool) * n);
	for (int m = 0; m < n; m++)
		proceeds[m] = !waitgraph_present(graph, m);
	while (changed)
	{
		changed = false;
		for (int m = 0; m < n; m++)
			if (!proceeds[m] && waitgraph_can_proceed(graph, m, proceeds))
				proceeds[m] = changed = true;
	}
	if (proceeds[self])
		return false;

	/* The waiter's component among the deadlocked: reached from it, and reaching it. */
	from_self = palloc0(sizeof(bool) * n);
	to_self = palloc0(sizeof(bool) * n);
	queue = palloc(sizeof(int) * n);
	parent = palloc(sizeof(int) * n);
	from_self[self] = true;
	to_self[self] = true;
	queue[0] = self;
	parent[self] = -1;
	for (head = 0, tail = 1; head < tail; head++)
		for (int b = 0; b < n; b++)
			if (!proceeds[b] && !from_self[b] && waitgraph_edge(graph, queue[head], b, NULL))
			{
				from_self[b] = true;
				parent[b] = queue[head];
				queue[tail++] = b;
			}
	queue[0] = self;
	for (head = 0, tail = 1; head < tail; head++)
		for (int a = 0; a < n; a++)
			if (!proceeds[a] && !to_self[a] && waitgraph_edge(graph, a, queue[head], NULL))
			{
				to_self[a] = true;
				queue[tail++] = a;
			}

	/* On a cycle: some member the waiter reaches waits for it. */
	deadlock->length = 0;
	for (int a = 0; a < n && deadlock->length == 0; a++)
		if (from_self[a] && waitgraph_edge(graph, a, self, NULL))
		{
			int			length = 0;

			for (int m = a; m >= 0; m = parent[m])
				length++;
			deadlock->length = length;
			deadlock->cycle = palloc(sizeof(int) * length);
			deadlock->via = palloc(sizeof(char *) * length);
			for (int m = a, i = length - 1; m >= 0; m = parent[m], i--)
				deadlock->cycle[i] = m;
		}
	if (deadlock->length == 0)
		return false;
	for (int i = 0; i < deadlock->length; i++)
	{
		int			a = deadlock->cycle[i];
		int			b = deadlock->cycle[(i + 1) % deadlock->length];
		int			k = 0;

		(void) waitgraph_edge(graph, a, b, &k);
		deadlock->via[i] = graph->members[a].await_keys[k];
	}

	/* The victim: the component's member that began waiting last. */
	deadlock->victim = self;
	for (int m = 0; m < n; m++)
	{
		const RedlockWaitMember *wm = &graph->members[m];
		const RedlockWaitMember *wv = &graph->members[deadlock->victim];

		if (!from_self[m] || !to_self[m])
			continue;
		if (wm->started_us > wv->started_us ||
			(wm->started_us == wv->started_us && strcmp(wm->field, wv->field) > 0))
			deadlock->victim = m;
	}

	/*
	 * The signature: everything the verdict rests on, every deadlocked member the
	 * waiter reaches (a semaphore's waiter is stuck through holders off its cycle too),
	 * each as its record and the records of the members it waits for.  A second read
	 * with the same signature saw the same members blocked by the same members.
	 */
	records = palloc(sizeof(char *) * n);
	for (int m = 0; m < n; m++)
	{
		StringInfoData entry;
		char	  **blockers;
		int			nblockers = 0;

		if (!from_self[m])
			continue;
		blockers = palloc(sizeof(char *) * n);
		for (int b = 0; b < n; b++)
			if (!proceeds[b] && waitgraph_edge(graph, m, b, NULL))
				blockers[nblockers++] = graph->members[b].record;
		qsort(blockers, nblockers, sizeof(char *), waitgraph_compare_strings);
		initStringInfo(&entry);
		appendStringInfo(&entry, "%d:", graph->members[m].record_len);
		appendBinaryStringInfo(&entry, graph->members[m].record, graph->members[m].record_len);
		for (int b = 0; b < nblockers; b++)
			appendStringInfo(&entry, ">%d:%s", (int) strlen(blockers[b]), blockers[b]);
		records[nrecords++] = entry.data;
	}
	qsort(records, nrecords, sizeof(char *), waitgraph_compare_strings);
	initStringInfo(&signature);
	for (int r = 0; r < nrecords; r++)
	{
		appendStringInfoString(&signature, records[r]);
		appendStringInfoChar(&signature, '\n');
	}
	deadlock->signature = signature.data;
	return true;
}

/*
 * Appends a key to buf for a message, quoted: control bytes escaped (\xNN), and every
 * byte past 0x7f too unless the key is valid in this server's encoding (another
 * cluster's keys may be in another, which the client's conversion would refuse).
 */
static void
waitgraph_append_key(StringInfo buf, const char *key)
{
	bool		valid = pg_verifymbstr(key, (int) strlen(key), true);

	appendStringInfoChar(buf, '"');
	for (const char *p = key; *p; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (c < 0x20 || c == 0x7f || (c > 0x7f && !valid))
			appendStringInfo(buf, "\\x%02x", c);
		else
			appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '"');
}

/*
 * redlock_waitgraph_describe
 *		The DETAIL of a deadlock found in graph, palloc'd, as PostgreSQL's: one line
 *		per member of the cycle, "Process PID of cluster "C" waits for KEY, holding
 *		KEYS; blocked by process PID of cluster "C"."  Raises only out-of-memory errors
 *		(53200).  doc/deadlock.md §3 step 4.
 */
char *
redlock_waitgraph_describe(const RedlockWaitGraph *graph, const RedlockDeadlock *deadlock)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < deadlock->length; i++)
	{
		const RedlockWaitMember *a = &graph->members[deadlock->cycle[i]];
		const RedlockWaitMember *b = &graph->members[deadlock->cycle[(i + 1) % deadlock->length]];
		int			named = 0;

		if (i > 0)
			appendStringInfoChar(&buf, '\n');
		appendStringInfo(&buf, "Process %d of cluster \"%s\" waits for ", a->pid, a->cluster);
		waitgraph_append_key(&buf, deadlock->via[i]);
		appendStringInfoString(&buf, ", holding ");
		for (int h = 0; h < a->nheld; h++)
		{
			if (a->live_votes[h] < graph->quorum)
				continue;
			if (named == DESCRIBE_MAX_HELD)
			{
				appendStringInfoString(&buf, ", ...");
				break;
			}
			if (named++ > 0)
				appendStringInfoString(&buf, ", ");
			waitgraph_append_key(&buf, a->held_keys[h]);
		}
		if (named == 0)
			appendStringInfoString(&buf, "nothing");
		appendStringInfo(&buf, "; blocked by process %d of cluster \"%s\".", b->pid, b->cluster);
	}
	return buf.data;
}
