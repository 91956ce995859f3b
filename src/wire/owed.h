/*-------------------------------------------------------------------------
 *
 * owed.h
 *	  What a master's connection still owes (owed.c): its owed replies, oldest first,
 *	  and the commands held for its next handshake.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_OWED_H
#define REDLOCK_OWED_H

#include "redlock.h"

/*
 * A reply a connection still owes, or a command held to be sent.  call_id 0 is the
 * handshake (AUTH, SELECT, the probes, SCRIPT EXISTS and LOAD).  For a script command the arguments are kept
 * (args, in the node set's memory context), so that it can be sent again with EVAL if
 * the master answers NOSCRIPT, or again on the next connection.
 */
typedef struct RedlockOwed
{
	uint64		call_id;
	const RedlockScript *script;
	bool		eval;			/* sent with EVAL already */
	int			argc;
	const char *argv[REDLOCK_MAX_ARGS];
	size_t		argvlen[REDLOCK_MAX_ARGS];
	char	   *args;			/* the block argv points into */
} RedlockOwed;

/* Owed replies in the order Redis will answer them: a ring, oldest at head. */
typedef struct RedlockOwedRing
{
	RedlockOwed *entries;
	int			head;
	int			len;
	int			cap;
} RedlockOwedRing;

/* Commands held until a handshake is done, in the order they go out. */
typedef struct RedlockOwedQueue
{
	RedlockOwed *entries;
	int			len;
	int			cap;
} RedlockOwedQueue;

extern void redlock_owed_fill(MemoryContext context, RedlockOwed *entry, uint64 call_id,
							  const RedlockScript *script, bool eval, int argc,
							  const char *const *argv, const size_t *argvlen);
extern void redlock_owed_push(MemoryContext context, RedlockOwedRing *ring, uint64 call_id,
							  const RedlockScript *script, bool eval, int argc,
							  const char *const *argv, const size_t *argvlen);
extern void redlock_owed_pop(RedlockOwedRing *ring, RedlockOwed *entry);
extern void redlock_owed_drop_newest(RedlockOwedRing *ring);
extern void redlock_owed_free(RedlockOwed *entry);
extern void redlock_owed_queue_push(MemoryContext context, RedlockOwedQueue *queue,
									const RedlockOwed *entry);
extern void redlock_owed_keep_redeliveries(MemoryContext context, RedlockOwedRing *ring,
										   RedlockOwedQueue *queue);
extern bool redlock_owed_newer_for_same_lock(const RedlockOwedRing *ring,
											 const RedlockOwed *entry);

#endif							/* REDLOCK_OWED_H */
