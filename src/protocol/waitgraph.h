/*-------------------------------------------------------------------------
 *
 * waitgraph.h
 *	  The wait-for graph of a deadlock check (waitgraph.c): the wait records that a
 *	  quorum of masters show, and the cycle, if any, this waiter is on.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_WAITGRAPH_H
#define REDLOCK_WAITGRAPH_H

#include "postgres.h"

/*
 * What a waiter waits for (a record's kind): 'x' an exclusive lock; 'i' an exclusive
 * lock that posts its intent while shared holders hold it (doc/shared.md §3); 's' a
 * shared hold; 'a' every key of a set; 'p' any one slot of a semaphore.  Every kind
 * but 'p' needs all its blockers gone; 'p' needs one.
 */
#define REDLOCK_WAIT_EXCLUSIVE	'x'
#define REDLOCK_WAIT_INTENT		'i'
#define REDLOCK_WAIT_SHARED		's'
#define REDLOCK_WAIT_SET		'a'
#define REDLOCK_WAIT_PERMIT		'p'

/* One waiter's record, as the masters that hold it show it. */
typedef struct RedlockWaitMember
{
	char	   *field;			/* its field in the waits hash: cluster, tab, pid */
	char	   *record;			/* the record's bytes (NUL-added) */
	int			record_len;
	char	   *cluster;
	int			pid;
	char	   *wait_id;
	int64		started_us;		/* when the wait began, on its server's clock */
	char		kind;
	int			nawait;
	char	  **await_keys;
	int		   *intent_votes;	/* per key waited for: masters showing an intent */
	int			nheld;
	char	  **held_keys;
	char	  **held_tokens;
	int		   *live_votes;		/* per hold: masters where it is live */
	int		   *exclusive_votes;	/* ... where it is live and exclusive (the key
									 * holds the token, not the shared marker) */
	int			votes;			/* masters that hold this record */
	int			voted_in;		/* the last reply (1-based) that counted it: a master
								 * votes once however many fields repeat the record */
} RedlockWaitMember;

typedef struct RedlockWaitGraph
{
	int			quorum;
	int			n;
	int			size;
	int			replies;		/* replies counted so far */
	RedlockWaitMember *members;
} RedlockWaitGraph;

/* A deadlock found: the cycle from the waiter back to it, and its victim. */
typedef struct RedlockDeadlock
{
	int			length;			/* members on the cycle */
	int		   *cycle;			/* member indexes, the waiter first; each waits for
								 * the next, the last for the first */
	char	  **via;			/* per cycle member: the key it waits for there */
	int			victim;			/* member index */
	char	   *signature;		/* every deadlocked member the waiter reaches: its
								 * record and the members it waits for, sorted; the
								 * same verdict read twice has the same signature */
} RedlockDeadlock;

extern void redlock_waitgraph_init(RedlockWaitGraph *graph, int quorum);
extern bool redlock_waitgraph_add_reply(RedlockWaitGraph *graph, const char *text, int len);
extern bool redlock_waitgraph_record_parse(const char *record, int len,
										   RedlockWaitMember *member);
extern bool redlock_waitgraph_find(const RedlockWaitGraph *graph, const char *self_record,
								   int self_len, RedlockDeadlock *deadlock);
extern char *redlock_waitgraph_describe(const RedlockWaitGraph *graph,
										const RedlockDeadlock *deadlock);

#endif							/* REDLOCK_WAITGRAPH_H */
