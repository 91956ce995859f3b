/*-------------------------------------------------------------------------
 *
 * owed.c
 *	  What a master's connection still owes.  Redis answers in order, so a ring of owed
 *	  replies, oldest first, tells what each reply read is for: the handshake, or which
 *	  call's which command, with a script command's arguments kept so that it can be
 *	  sent again whole with EVAL (NOSCRIPT) or on the next connection (a release).
 *	  Beside it, a queue of commands held until a new connection's handshake is done.
 *
 * Memory comes from the node set's context (the caller passes it), so that a set's
 * rings go with it.  Raises only out-of-memory errors (53200).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "wire/owed.h"

/* Most release commands kept for a master's next connection. */
#define REDLOCK_MAX_REDELIVER 1024

/*
 * redlock_owed_fill
 *		Fills entry with a command for call_id (script, eval: as sent) and a copy of its
 *		argc arguments (argv, argvlen bytes each) in context.  Raises only
 *		out-of-memory errors (53200).
 */
void
redlock_owed_fill(MemoryContext context, RedlockOwed *entry, uint64 call_id,
				  const RedlockScript *script, bool eval, int argc,
				  const char *const *argv, const size_t *argvlen)
{
	size_t		total = 0;
	char	   *p;

	memset(entry, 0, sizeof(*entry));
	entry->call_id = call_id;
	entry->script = script;
	entry->eval = eval;
	for (int k = 0; k < argc; k++)
		total += argvlen[k] + 1;
	entry->args = p = MemoryContextAlloc(context, Max(total, 1));
	for (int k = 0; k < argc; k++)
	{
		memcpy(p, argv[k], argvlen[k]);
		p[argvlen[k]] = '\0';
		entry->argv[k] = p;
		entry->argvlen[k] = argvlen[k];
		p += argvlen[k] + 1;
	}
	entry->argc = argc;
}

/*
 * redlock_owed_push
 *		Logs, at the tail of ring, the reply that a command about to be appended will
 *		owe: call_id's, and for a script command its arguments (as redlock_owed_fill).
 *		Done before the append, since it may raise (out of memory) and hiredis must
 *		never hold a command whose reply nobody expects.  Raises only out-of-memory
 *		errors (53200).
 */
void
redlock_owed_push(MemoryContext context, RedlockOwedRing *ring, uint64 call_id,
				  const RedlockScript *script, bool eval, int argc,
				  const char *const *argv, const size_t *argvlen)
{
	RedlockOwed *entry;

	if (ring->len == ring->cap)
	{
		int			newcap = Max(8, ring->cap * 2);
		RedlockOwed *entries = MemoryContextAlloc(context, newcap * sizeof(RedlockOwed));

		for (int k = 0; k < ring->len; k++)
			entries[k] = ring->entries[(ring->head + k) % ring->cap];
		if (ring->entries)
			pfree(ring->entries);
		ring->entries = entries;
		ring->cap = newcap;
		ring->head = 0;
	}
	entry = &ring->entries[(ring->head + ring->len) % ring->cap];
	if (script)
		redlock_owed_fill(context, entry, call_id, script, eval, argc, argv, argvlen);
	else
	{
		memset(entry, 0, sizeof(*entry));
		entry->call_id = call_id;
	}
	ring->len++;
}

/*
 * redlock_owed_pop
 *		Takes the oldest owed reply off ring (which owes one) into *entry; free its
 *		arguments with redlock_owed_free.  Raises nothing.
 */
void
redlock_owed_pop(RedlockOwedRing *ring, RedlockOwed *entry)
{
	Assert(ring->len > 0);
	*entry = ring->entries[ring->head];
	ring->head = (ring->head + 1) % ring->cap;
	ring->len--;
}

/*
 * redlock_owed_drop_newest
 *		Forgets the newest owed reply of ring (its command could not be appended).
 *		Raises nothing.
 */
void
redlock_owed_drop_newest(RedlockOwedRing *ring)
{
	RedlockOwed *entry = &ring->entries[(ring->head + ring->len - 1) % ring->cap];

	if (entry->args)
		pfree(entry->args);
	ring->len--;
}

/*
 * redlock_owed_free
 *		Frees entry's copy of its arguments.  Raises nothing.
 */
void
redlock_owed_free(RedlockOwed *entry)
{
	if (entry->args)
		pfree(entry->args);
	entry->args = NULL;
}

/*
 * redlock_owed_queue_push
 *		Appends entry (taking over its arguments) to queue, growing it in context.
 *		Raises only out-of-memory errors (53200).
 */
void
redlock_owed_queue_push(MemoryContext context, RedlockOwedQueue *queue,
						const RedlockOwed *entry)
{
	if (queue->len == queue->cap)
	{
		int			newcap = Max(4, queue->cap * 2);

		queue->entries = queue->entries
			? repalloc(queue->entries, newcap * sizeof(RedlockOwed))
			: MemoryContextAlloc(context, newcap * sizeof(RedlockOwed));
		queue->cap = newcap;
	}
	queue->entries[queue->len++] = *entry;
}

/*
 * redlock_owed_keep_redeliveries
 *		When a connection closes: keeps, in queue, the commands of scripts marked
 *		redeliver (releases) that the master may not have received, those held in
 *		queue and then those owed on ring, in order, at most REDLOCK_MAX_REDELIVER;
 *		frees every other entry and empties ring.  An undo lost with a hung connection
 *		would otherwise leave a key with an old token until its TTL.  Raises only
 *		out-of-memory errors (53200).
 */
void
redlock_owed_keep_redeliveries(MemoryContext context, RedlockOwedRing *ring,
							   RedlockOwedQueue *queue)
{
	int			kept = 0;

	for (int k = 0; k < queue->len; k++)
	{
		if (queue->entries[k].script && queue->entries[k].script->redeliver &&
			kept < REDLOCK_MAX_REDELIVER)
			queue->entries[kept++] = queue->entries[k];
		else
			redlock_owed_free(&queue->entries[k]);
	}
	queue->len = kept;
	while (ring->len > 0)
	{
		RedlockOwed entry;

		redlock_owed_pop(ring, &entry);
		if (entry.script && entry.script->redeliver && queue->len < REDLOCK_MAX_REDELIVER)
			redlock_owed_queue_push(context, queue, &entry);
		else
			redlock_owed_free(&entry);
	}
}

/*
 * redlock_owed_newer_for_same_lock
 *		True when ring owes a reply to a later script command on the same key with the
 *		same token as entry (just taken off it): that command will run after a re-send
 *		of entry, so re-sending entry could undo its effect (an older TTL over a newer
 *		one).  Raises nothing.
 */
bool
redlock_owed_newer_for_same_lock(const RedlockOwedRing *ring, const RedlockOwed *entry)
{
	for (int k = 0; k < ring->len; k++)
	{
		const RedlockOwed *later = &ring->entries[(ring->head + k) % ring->cap];

		if (later->script && later->argc >= 2 && entry->argc >= 2 &&
			later->argvlen[0] == entry->argvlen[0] &&
			memcmp(later->argv[0], entry->argv[0], entry->argvlen[0]) == 0 &&
			later->argvlen[1] == entry->argvlen[1] &&
			memcmp(later->argv[1], entry->argv[1], entry->argvlen[1]) == 0)
			return true;
	}
	return false;
}
