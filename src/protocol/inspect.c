/*-------------------------------------------------------------------------
 *
 * inspect.c
 *	  Locks as the masters show them, whoever took them: one lock's state read in one
 *	  round (redlock_lock_info), every lock under a key prefix (SCAN in batches, then
 *	  the same read; redlock_cluster_locks), and the operator's forced release.
 *
 * What a lock's state says.  Each master that answers reports its value for the key
 * (the holder's token), the key's PTTL and the holder record written with that token
 * (holder.c; a record of another token is stale and dropped on the master).  The
 * token most masters report is the lock's: it is held when a quorum reports it, and
 * its TTL is then the quorum-th largest PTTL among them (the time until fewer than a
 * quorum keep it).  The read changes nothing on the masters and decides nothing for
 * any backend: it is a snapshot, already old when it is shown.  Fewer than a quorum
 * of answers cannot tell whether a quorum holds it: UNAVAILABLE.
 *
 * The forced release deletes the key whatever its token (and its holder record),
 * announces the release to waiters, leaves the deleted token under the forced mark for
 * REDLOCK_FORCED_MARK_MS (a watch's round reads it: "forced", not "released"), and raises the resource's fencing counter (fence.c)
 * to one above the larger of the counter and the master's floor, so that the next
 * holder's token is above any token the evicted holder took or was taking.  The
 * evicted holder learns of it from its next extension or renewal (lost for certain:
 * tally.c), as from any other loss.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"

#include "protocol/holder.h"
#include "protocol/inspect.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "tally.h"
#include "wire/call.h"
#include "wire/node.h"
#include "wire/nodeset.h"

/* Keys asked for per SCAN step, and keys read per round of the listing. */
#define INSPECT_SCAN_COUNT "1000"
#define INSPECT_READ_BATCH 100

/*
 * The read both scripts share: into info, "" when the key is not a string (no lock),
 * else "PTTL LEN VALUE" followed by the holder record of that value (or nothing).
 */
/* One master's report of one key. */
typedef struct MasterInfo
{
	bool		present;
	const char *forced;			/* watch_read.lua: the value a forced release deleted */
	int			forced_len;
	long long	pttl;
	const char *value;
	int			value_len;
	const char *holder;
	int			holder_len;
} MasterInfo;

/* A hash of a token's bytes, never 0 (0 means none). */
static uint64
inspect_token_hash(const char *value, int len)
{
	uint64		h = hash_bytes_extended((const unsigned char *) value, len, 0);

	return h ? h : 1;
}

/* Reads a decimal number ending in a space at *p (advanced past it); false if none. */
static bool
inspect_number(const char **p, const char *end, long long *out)
{
	char	   *tail;

	if (*p >= end)
		return false;
	errno = 0;
	*out = strtoll(*p, &tail, 10);
	if (errno != 0 || tail == *p || tail >= end || *tail != ' ')
		return false;
	*p = tail + 1;
	return true;
}

/* Parses one master's reply to a read into info; false when it is not one. */
static bool
inspect_parse_info(const RedlockNodeOutcome *outcome, MasterInfo *info)
{
	const char *p = outcome->text;
	const char *end;
	long long	len;

	memset(info, 0, sizeof(*info));
	if (outcome->kind != REDLOCK_REPLY_STRING || outcome->text == NULL)
		return false;
	if (outcome->text_len == 0)
		return true;
	end = p + outcome->text_len;
	if (outcome->text_len > 7 && memcmp(p, "forced ", 7) == 0)
	{
		info->forced = p + 7;
		info->forced_len = (int) (end - info->forced);
		return true;
	}
	if (!inspect_number(&p, end, &info->pttl) || !inspect_number(&p, end, &len) ||
		len < 0 || len > end - p)
		return false;
	info->present = true;
	info->value = p;
	info->value_len = (int) len;
	info->holder = p + len;
	info->holder_len = (int) (end - info->holder);
	return true;
}

static int
inspect_pttl_desc(const void *a, const void *b)
{
	long long	x = *(const long long *) a;
	long long	y = *(const long long *) b;

	return (x < y) - (x > y);
}

/*
 * How many masters of those heard from (heard: count entries) report master i's value
 * (0 when i reports no lock).
 */
static int
inspect_same(const MasterInfo *infos, const bool *heard, int count, int i)
{
	int			same = 0;

	if (!heard[i] || !infos[i].present)
		return 0;
	for (int j = 0; j < count; j++)
		if (heard[j] && infos[j].present &&
			infos[j].value_len == infos[i].value_len &&
			memcmp(infos[j].value, infos[i].value, infos[i].value_len) == 0)
			same++;
	return same;
}

/*
 * Decides a lock's state from the masters' reports (infos, count entries; answered
 * says which are reports at all): see the head of this file.
 */
static void
inspect_decide(const MasterInfo *infos, const bool *answered, int count, int quorum,
			   RedlockLockState *state)
{
	int			best = -1;
	long long  *pttls;
	int			n = 0;

	memset(state, 0, sizeof(*state));
	state->ttl_ms = -1;
	for (int i = 0; i < count; i++)
		if (answered[i] && infos[i].forced && state->forced_hash == 0)
			state->forced_hash = inspect_token_hash(infos[i].forced, infos[i].forced_len);
	for (int i = 0; i < count; i++)
	{
		int			same = inspect_same(infos, answered, count, i);

		if (same > state->masters)
		{
			state->masters = same;
			best = i;
		}
	}
	if (best < 0)
		return;
	state->token_hash = inspect_token_hash(infos[best].value, infos[best].value_len);

	pttls = palloc(sizeof(long long) * count);
	for (int j = 0; j < count; j++)
	{
		const MasterInfo *m = &infos[j];

		if (!answered[j] || !m->present || m->value_len != infos[best].value_len ||
			memcmp(m->value, infos[best].value, m->value_len) != 0)
			continue;
		pttls[n++] = m->pttl;
		if (!state->has_holder && m->holder_len > 0)
			state->has_holder = redlock_holder_parse(m->holder, m->holder_len, &state->holder);
	}
	state->held = redlock_quorum_reached(state->masters, quorum);
	if (state->held)
	{
		qsort(pttls, n, sizeof(long long), inspect_pttl_desc);
		state->ttl_ms = pttls[quorum - 1];
	}
	pfree(pttls);
}

/* Fills command with a call of script on key (one more argument, or none). */
static void
inspect_key_command(RedlockCommand *command, const RedlockScript *script, const char *key,
					const char *arg)
{
	memset(command, 0, sizeof(*command));
	command->need = 0;			/* every master's word counts */
	command->accept = NULL;
	command->script = script;
	command->keep_text = true;
	command->argv[command->argc++] = key;
	if (arg)
		command->argv[command->argc++] = arg;
	for (int i = 0; i < command->argc; i++)
		command->argvlen[i] = strlen(command->argv[i]);
}

/*
 * Parses every master's reply to one read (outcomes: count entries) and decides the
 * lock's state; returns how many masters gave a report.
 */
static int
inspect_reports(RedlockNodeSet *set, const RedlockNodeOutcome *outcomes,
				RedlockLockState *state, int *present)
{
	int			count = redlock_nodeset_size(set);
	MasterInfo *infos = palloc(sizeof(MasterInfo) * count);
	bool	   *answered = palloc(sizeof(bool) * count);
	int			n = 0;

	*present = 0;
	for (int i = 0; i < count; i++)
	{
		answered[i] = inspect_parse_info(&outcomes[i], &infos[i]);
		if (answered[i])
			n++;
		if (answered[i] && infos[i].present)
			(*present)++;
	}
	inspect_decide(infos, answered, count, redlock_nodeset_quorum(set), state);
	pfree(infos);
	pfree(answered);
	return n;
}

/* Starts result for a look at set's masters. */
static void
inspect_result_init(RedlockNodeSet *set, RedlockResult *result)
{
	memset(result, 0, sizeof(*result));
	result->node_count = redlock_nodeset_size(set);
	result->quorum = redlock_nodeset_quorum(set);
	result->attempts = 1;
}

/*
 * A watch's look at one key (RedlockCommand.decided, arg: the quorum) is certain once the
 * masters heard from settle it whatever the others would say: a quorum of them report
 * the same token (held), or the most reported token with every master not heard from
 * (awaited, or failed: it may hold anything) added still falls short of a quorum (not
 * held).  So a hung master costs a look nothing while the others settle it; a lock held
 * on a quorum that counts the hung master stays undecided until its deadline, and the
 * look then decides nothing.
 */
static bool
inspect_certain(const RedlockNodeOutcome *outcomes, const bool *awaited, int count,
				const void *arg)
{
	int			quorum = *(const int *) arg;
	MasterInfo	infos[REDLOCK_MAX_NODES];
	bool		heard[REDLOCK_MAX_NODES];
	int			unknown = 0;
	int			most = 0;

	for (int i = 0; i < count; i++)
	{
		heard[i] = !awaited[i] && inspect_parse_info(&outcomes[i], &infos[i]);
		if (!heard[i])
			unknown++;
	}
	for (int i = 0; i < count; i++)
		most = Max(most, inspect_same(infos, heard, count, i));
	return most >= quorum || most + unknown < quorum;
}

/*
 * One round of script on n keys: redlock_inspect_locks and redlock_inspect_watch (early:
 * each key's look ends once inspect_certain says so).
 */
static void
inspect_round(RedlockNodeSet *set, const RedlockScript *script, bool early,
			  const char *const *keys, int n, RedlockLockState *states, RedlockResult *result)
{
	int			count = redlock_nodeset_size(set);
	RedlockCommand *commands = palloc(sizeof(RedlockCommand) * n);
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * Max(n * count, 1));

	int			quorum = redlock_nodeset_quorum(set);

	inspect_result_init(set, result);
	for (int k = 0; k < n; k++)
	{
		inspect_key_command(&commands[k], script, keys[k], NULL);
		commands[k].accept = redlock_tally_string;
		if (early)
		{
			commands[k].decided = inspect_certain;
			commands[k].decided_arg = &quorum;
		}
	}
	redlock_nodes_run(set, commands, n, false, outcomes);
	result->answered = count;
	for (int k = 0; k < n; k++)
	{
		int			present;
		int			answered = inspect_reports(set, &outcomes[k * count], &states[k], &present);
		bool		none_awaited[REDLOCK_MAX_NODES] = {0};

		if (early)
			states[k].certain = inspect_certain(&outcomes[k * count], none_awaited, count,
												&quorum);

		if (answered < result->answered)
		{
			result->answered = answered;
			if (result->node_errors)
				pfree(result->node_errors);
			result->node_errors = redlock_node_errors(set, &outcomes[k * count], count);
		}
	}
	result->status = redlock_quorum_reached(result->answered, result->quorum) ? REDLOCK_OK : REDLOCK_UNAVAILABLE;
	pfree(outcomes);
	pfree(commands);
}

/*
 * redlock_inspect_locks
 *		Reads n locks' states from every master of set, one script call per key and
 *		master, all in one round (each master waited for within redlock.timeout).
 *
 * keys, n: the Redis keys (n >= 1).  states: n entries, filled (see RedlockLockState).
 * result: REDLOCK_OK when a quorum of masters reported on every key, else
 *		REDLOCK_UNAVAILABLE with node_errors (the states then cannot tell whether a
 *		quorum holds the lock); answered is the fewest reports any key got.
 *
 * Raises what an interrupted wait raises (57014).
 */
void
redlock_inspect_locks(RedlockNodeSet *set, const char *const *keys, int n,
					  RedlockLockState *states, RedlockResult *result)
{
	inspect_round(set, &redlock_script_lock_info, false, keys, n, states, result);
}

/*
 * redlock_inspect_watch
 *		redlock_inspect_locks for a watch's round (worker/notifier.c): the same states,
 *		and where a key holds no lock on a master, the forced release's mark
 *		(forced_hash), so that the watch can tell a forced release from a release.
 *		Each key's look ends as soon as it is certain (inspect_certain), not when every
 *		master answered: states[k].masters counts the masters heard from, and
 *		states[k].certain says whether they settle held or not (a key held on a quorum
 *		that counts a master not heard from is not: nothing may be concluded of it).
 *		Arguments, result and errors as redlock_inspect_locks'.
 */
void
redlock_inspect_watch(RedlockNodeSet *set, const char *const *keys, int n,
					  RedlockLockState *states, RedlockResult *result)
{
	inspect_round(set, &redlock_script_watch_read, true, keys, n, states, result);
}

static int
inspect_key_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Sorts keys[0..n) and drops repeats; returns how many are left. */
static int
inspect_sort_unique(char **keys, int n)
{
	int			m = 0;

	if (n == 0)
		return 0;
	qsort(keys, n, sizeof(char *), inspect_key_cmp);
	for (int i = 1; i < n; i++)
		if (strcmp(keys[i], keys[m]) != 0)
			keys[++m] = keys[i];
	return m + 1;
}

/*
 * Appends the keys of one scan step's reply (text, len bytes) to *keys and sets
 * cursor; false when the reply is not a scan step's.
 */
static bool
inspect_parse_scan(const char *text, int len, char **cursor, char ***keys, int *n, int *cap)
{
	const char *p = text;
	const char *end = text + len;
	const char *space = memchr(text, ' ', len);
	const char *cursor_end = space ? space : end;

	if (cursor_end == p)
		return false;
	*cursor = pnstrdup(p, cursor_end - p);
	p = cursor_end;
	while (p < end)
	{
		long long	klen;

		if (*p != ' ')
			return false;
		p++;
		if (!inspect_number(&p, end, &klen) || klen <= 0 || klen > end - p)
			return false;
		if (memchr(p, '\0', klen) == NULL)	/* a key with a NUL names no resource */
		{
			if (*n == *cap)
			{
				*cap *= 2;
				*keys = repalloc(*keys, sizeof(char *) * *cap);
			}
			(*keys)[(*n)++] = pnstrdup(p, klen);
		}
		p += klen;
	}
	return true;
}

/*
 * redlock_inspect_scan
 *		Lists the keys under prefix on every master of set: SCAN steps of about
 *		INSPECT_SCAN_COUNT keys, one per master per round, each master with its own
 *		cursor, until every master's scan has ended or limit distinct keys were found.
 *		Fencing counters and holder records are left out.
 *
 * prefix: redlock.key_prefix (matched literally).  limit: at most this many keys (>= 1).
 * keys: set to a palloc'd array of the distinct keys found, sorted by bytes.
 * more: set true when the listing stopped at limit with scans unfinished.
 * result: REDLOCK_OK when at most node_count - quorum masters failed (every lock held
 *		on a quorum is then on a master that was scanned), else REDLOCK_UNAVAILABLE
 *		with node_errors.
 *
 * Returns the number of keys.  Raises what an interrupted wait raises (57014).
 */
int
redlock_inspect_scan(RedlockNodeSet *set, const char *prefix, int limit, char ***keys,
					 bool *more, RedlockResult *result)
{
	int			count = redlock_nodeset_size(set);
	const char **cursors = palloc(sizeof(char *) * count);
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * count);
	RedlockNodeOutcome *failures = palloc0(sizeof(RedlockNodeOutcome) * count);
	RedlockCommand command;
	int			n = 0;
	int			cap = 64;
	int			running = count;

	inspect_result_init(set, result);
	*keys = palloc(sizeof(char *) * cap);
	*more = false;
	for (int i = 0; i < count; i++)
	{
		cursors[i] = "0";
		failures[i].kind = REDLOCK_REPLY_OK;
	}
	inspect_key_command(&command, &redlock_script_scan, prefix, INSPECT_SCAN_COUNT);
	command.accept = redlock_tally_string;
	command.argv[command.argc] = "0";
	command.argvlen[command.argc++] = 1;
	command.node_last_arg = cursors;

	while (running > 0)
	{
		redlock_nodes_run(set, &command, 1, false, outcomes);
		result->attempts++;
		for (int i = 0; i < count; i++)
		{
			char	   *next;

			if (strcmp(cursors[i], "done") == 0)
				continue;
			if (!redlock_tally_string(&outcomes[i]) ||
				!inspect_parse_scan(outcomes[i].text, outcomes[i].text_len, &next,
									keys, &n, &cap))
			{
				failures[i] = outcomes[i];
				if (failures[i].kind == REDLOCK_REPLY_STRING)
				{
					failures[i].kind = REDLOCK_REPLY_ERROR;
					strlcpy(failures[i].error, "not a reply to a scan step", sizeof(failures[i].error));
				}
				result->failed++;
				cursors[i] = "done";
				running--;
				continue;
			}
			cursors[i] = strcmp(next, "0") == 0 ? "done" : next;
			if (strcmp(next, "0") == 0)
				running--;
		}
		n = inspect_sort_unique(*keys, n);
		if (n >= limit)
		{
			*more = running > 0 || n > limit;
			n = limit;
			break;
		}
	}

	result->answered = count - result->failed;
	result->status = redlock_quorum_reached(result->answered, result->quorum) ? REDLOCK_OK : REDLOCK_UNAVAILABLE;
	if (result->failed > 0)
		result->node_errors = redlock_node_errors(set, failures, count);
	pfree(outcomes);
	pfree(failures);
	return n;
}

/*
 * redlock_inspect_force_release
 *		Deletes key and its holder record on every master of set whatever the token,
 *		announces the release, and raises the resource's fencing counter (see the head
 *		of this file), in one round that waits for every master (within
 *		redlock.timeout).
 *
 * before: the lock's state as the masters reported it just before the deletion.
 * result: accepted = masters where a key was deleted; REDLOCK_OK when a quorum of
 *		masters answered, else REDLOCK_UNAVAILABLE with node_errors (the masters that
 *		did not answer keep the key until its TTL runs out).
 *
 * Raises what an interrupted wait raises (57014).
 */
void
redlock_inspect_force_release(RedlockNodeSet *set, const char *key, RedlockLockState *before,
							  RedlockResult *result)
{
	int			count = redlock_nodeset_size(set);
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * count);
	RedlockCommand command;
	char		ttl_text[32];
	char		mark_text[32];

	inspect_result_init(set, result);
	snprintf(ttl_text, sizeof(ttl_text), INT64_FORMAT, REDLOCK_FENCE_COUNTER_TTL_MS);
	snprintf(mark_text, sizeof(mark_text), "%d", REDLOCK_FORCED_MARK_MS);
	inspect_key_command(&command, &redlock_script_force_release, key, ttl_text);
	command.argv[command.argc] = mark_text;
	command.argvlen[command.argc++] = strlen(mark_text);
	command.accept = redlock_tally_string;
	redlock_nodes_run(set, &command, 1, false, outcomes);
	result->answered = inspect_reports(set, outcomes, before, &result->accepted);
	result->failed = count - result->answered;
	result->status = redlock_quorum_reached(result->answered, result->quorum) ? REDLOCK_OK : REDLOCK_UNAVAILABLE;
	if (result->failed > 0)
		result->node_errors = redlock_node_errors(set, outcomes, count);
	pfree(outcomes);
}
