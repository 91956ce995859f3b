/*-------------------------------------------------------------------------
 *
 * nodeset.c
 *	  Node sets: the masters of one configuration (server list, credentials, database,
 *	  quorum, TLS) with their connections and stats.
 *
 * The set of the configuration in force is "current"; a lock remembers the set it was
 * taken on (it pins it), so that its release or undo still reaches those masters after
 * the configuration changed.  A set nobody pins and that is no longer current is
 * closed and freed.  A reload that changes nothing finds the same configuration and
 * keeps its set, connections and stats.
 *
 * What a backend saw of each master is kept with it (redlock_nodes()), and a master
 * that stops or resumes answering while a quorum answers is said once per change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "guc.h"
#include "servers.h"
#include "tally.h"
#include "wire/node.h"
#include "wire/nodeset.h"
#include "wire/tls.h"

static RedlockNodeSet *current_set = NULL;
static RedlockNodeSet *all_sets = NULL;
static uint64 current_generation = 0;
static uint64 last_set_id = 0;

/*
 * redlock_nodeset_report_changes
 *		After a call on set: says once per change of a master's state that it stopped
 *		or resumed answering (or counting: a master left out, wire/masterinfo.c), while
 *		a quorum of set still answers: then nothing else
 *		shows a dead master (the calls succeed), and without a quorum the caller's 08006
 *		names every failed master.
 *
 * A WARNING when it stops (the session and the server log), a LOG when it answers
 * again.  A master counts as stopped once it failed two such calls in a row, with no
 * reply from it between them (a blip that ended is not counted on): the first call
 * after a master came back can still fail it for what an earlier call left (a connect
 * begun while it was down, replies owed from before a freeze), and the next call reads
 * its answer.  Per backend, as the state it reads (redlock_nodes()).  Raises nothing
 * above WARNING; does nothing in error recursion.
 */
void
redlock_nodeset_report_changes(RedlockNodeSet *set)
{
	int			answering = 0;
	char		name[REDLOCK_NODE_NAME_LEN];

	if (in_error_recursion_trouble())
		return;
	for (int i = 0; i < set->count; i++)
		if (!set->nodes[i].down)
			answering++;
	if (!redlock_quorum_reached(answering, set->quorum))
		return;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		node->down_calls = node->down ? node->down_calls + 1 : 0;
		if (node->reported_down ? node->down : node->down_calls < 2)
			continue;
		node->reported_down = node->down;
		redlock_node_addr_name(&node->addr, name, sizeof(name));
		if (node->down && node->left_out)
			ereport(WARNING,
					(errmsg("Redis master \"%s\" is left out of every quorum", name),
					 errdetail_internal("%s", node->stats.last_error),
					 errhint("Locks are still taken while %d of the %d masters count; "
							 "redlock_check() says what each master lacks.",
							 set->quorum, set->count)));
		else if (node->down)
			ereport(WARNING,
					(errmsg("Redis master \"%s\" is not answering", name),
					 errdetail_internal("%s", node->stats.last_error),
					 errhint("Locks are still taken while %d of the %d masters answer; "
							 "redlock_nodes() shows each master's state.",
							 set->quorum, set->count)));
		else
			ereport(LOG,
					(errmsg("Redis master \"%s\" answers again", name)));
	}
}

/* Closes every connection of set and frees it. */
static void
nodeset_free(RedlockNodeSet *set)
{
	RedlockNodeSet **link;

	for (int i = 0; i < set->count; i++)
		redlock_node_close(set, &set->nodes[i]);
	for (link = &all_sets; *link; link = &(*link)->next)
	{
		if (*link == set)
		{
			*link = set->next;
			break;
		}
	}
	redlock_tls_context_free(set->tls_context);
	MemoryContextDelete(set->context);
}

/* Frees set when no lock pins it and it is no longer the configuration in force. */
static void
nodeset_free_if_unused(RedlockNodeSet *set)
{
	if (set != current_set && set->pins == 0)
		nodeset_free(set);
}

/* A configuration: what a node set is built for. */
typedef struct SetConfig
{
	const RedlockServerList *list;
	const char *username;
	const char *password;
	int			database;
	int			quorum;			/* redlock.quorum: 0 for a majority */
	const RedlockTlsConfig *tls;
} SetConfig;

/* True when set was built for config. */
static bool
nodeset_matches(const RedlockNodeSet *set, const SetConfig *config)
{
	int			count = config->list ? config->list->count : 0;

	if (set->count != count || set->database != config->database ||
		set->quorum != redlock_quorum_for(config->quorum, count) ||
		strcmp(set->username, config->username) != 0 ||
		strcmp(set->password, config->password) != 0 ||
		!redlock_tls_config_equal(&set->tls, config->tls))
		return false;
	for (int i = 0; i < count; i++)
		if (set->nodes[i].addr.port != config->list->nodes[i].port ||
			strcmp(set->nodes[i].addr.host, config->list->nodes[i].host) != 0)
			return false;
	return true;
}

/* The existing set of config, or a new, unconnected one. */
static RedlockNodeSet *
nodeset_find_or_build(const SetConfig *config)
{
	MemoryContext context;
	RedlockNodeSet *set;

	for (set = all_sets; set; set = set->next)
		if (nodeset_matches(set, config))
			return set;

	context = AllocSetContextCreate(TopMemoryContext, "redlock node set",
									ALLOCSET_SMALL_SIZES);
	set = MemoryContextAllocZero(context, sizeof(RedlockNodeSet));
	set->context = context;
	set->id = ++last_set_id;
	set->count = config->list ? config->list->count : 0;
	set->nodes = MemoryContextAllocZero(context, Max(set->count, 1) * sizeof(RedlockNode));
	set->username = MemoryContextStrdup(context, config->username);
	set->password = MemoryContextStrdup(context, config->password);
	set->database = config->database;
	set->quorum = redlock_quorum_for(config->quorum, set->count);
	set->tls = *config->tls;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		node->addr = config->list->nodes[i];
		redlock_node_addr_name(&node->addr, node->stats.name, sizeof(node->stats.name));
		node->stats.last_rtt_ms = -1;
	}
	set->next = all_sets;
	all_sets = set;
	return set;
}

/*
 * redlock_nodeset_current
 *		Returns the node set of the configuration in force (redlock.servers, username,
 *		password, database, quorum, TLS), building it when the configuration changed
 *		and no set of it exists yet.  The previous current set is freed unless a lock
 *		pins it.  Raises only out-of-memory errors.
 */
RedlockNodeSet *
redlock_nodeset_current(void)
{
	RedlockNodeSet *previous = current_set;
	SetConfig	config;
	RedlockTlsConfig tls;

	if (current_set && current_generation == redlock_connection_generation)
		return current_set;

	config.list = redlock_server_list;
	config.username = redlock_username ? redlock_username : "";
	config.password = redlock_effective_password();
	config.database = redlock_database;
	config.quorum = redlock_quorum;
	redlock_tls_config(&tls);
	config.tls = &tls;
	current_set = nodeset_find_or_build(&config);
	current_generation = redlock_connection_generation;
	if (previous && previous != current_set)
		nodeset_free_if_unused(previous);
	return current_set;
}

/*
 * redlock_nodeset_for
 *		Returns a node set for an explicit configuration (the background worker renews
 *		locks under the configuration each was taken with), pinned: the caller unpins it
 *		when done.  list: the masters (may be NULL: none); username, password: "" for
 *		none; database: the Redis database number; quorum: the redlock.quorum setting
 *		(0 for a majority); tls: the TLS settings.  Raises only out-of-memory errors.
 */
RedlockNodeSet *
redlock_nodeset_for(const RedlockServerList *list, const char *username,
					const char *password, int database, int quorum,
					const RedlockTlsConfig *tls)
{
	SetConfig	config = {list, username, password, database, quorum, tls};
	RedlockNodeSet *set = nodeset_find_or_build(&config);

	redlock_nodeset_pin(set);
	return set;
}

/*
 * redlock_nodeset_pin, redlock_nodeset_unpin
 *		A lock taken on set pins it, so that it stays (with its connections) until the
 *		lock is released, even after the configuration changed.  Unpinning the last pin
 *		of a set that is no longer current frees it.  Raise nothing.
 */
void
redlock_nodeset_pin(RedlockNodeSet *set)
{
	set->pins++;
}

void
redlock_nodeset_unpin(RedlockNodeSet *set)
{
	Assert(set->pins > 0);
	set->pins--;
	nodeset_free_if_unused(set);
}

/*
 * redlock_nodeset_size
 *		Returns the number of masters in set.
 */
int
redlock_nodeset_size(const RedlockNodeSet *set)
{
	return set->count;
}

/*
 * redlock_nodeset_quorum
 *		Returns how many masters of set must accept for a lock to be held: a majority,
 *		or what redlock.quorum said when the set was built.  Raises nothing.
 */
int
redlock_nodeset_quorum(const RedlockNodeSet *set)
{
	return set->quorum;
}

/*
 * redlock_node_name
 *		Returns the "host:port" (or socket path) of node, 0 <= node < set's size.
 */
const char *
redlock_node_name(const RedlockNodeSet *set, int node)
{
	Assert(node >= 0 && node < set->count);
	return set->nodes[node].stats.name;
}

/*
 * redlock_nodes_stats
 *		Returns a palloc'd copy of what this backend saw of each master of the current
 *		set (*stats), and how many there are.  Raises only out-of-memory errors.
 */
int
redlock_nodes_stats(RedlockNodeStats **stats)
{
	RedlockNodeSet *set = redlock_nodeset_current();

	*stats = palloc(Max(set->count, 1) * sizeof(RedlockNodeStats));
	for (int i = 0; i < set->count; i++)
		(*stats)[i] = set->nodes[i].stats;
	return set->count;
}

/*
 * redlock_nodes_disconnect
 *		Closes every connection of every set, and forgets their TLS contexts so that
 *		the next connections read the TLS files again.  Raises nothing.
 */
void
redlock_nodes_disconnect(void)
{
	for (RedlockNodeSet *set = all_sets; set; set = set->next)
	{
		for (int i = 0; i < set->count; i++)
			redlock_node_close(set, &set->nodes[i]);
		redlock_tls_context_free(set->tls_context);
		set->tls_context = NULL;
	}
}

/*
 * redlock_node_errors
 *		Returns "node: error" lines (palloc'd) for the nodes of set whose outcome (of n)
 *		failed, for an errdetail, or NULL when all answered.  Raises nothing but
 *		out-of-memory errors.
 */
char *
redlock_node_errors(RedlockNodeSet *set, const RedlockNodeOutcome *outcomes, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		if (!redlock_outcome_failed(&outcomes[i]))
			continue;
		appendStringInfo(&buf, "%s%s: %s", buf.len > 0 ? "\n" : "",
						 redlock_node_name(set, i), outcomes[i].error);
	}
	if (buf.len == 0)
	{
		pfree(buf.data);
		return NULL;
	}
	return buf.data;
}
