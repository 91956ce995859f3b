/*-------------------------------------------------------------------------
 *
 * subscription.c
 *	  The background worker's subscriptions to release announcements: one connection
 *	  per master of redlock.servers, subscribed to the release channel, whose messages
 *	  (the released keys) wake the backends waiting for those keys.
 *
 * The release script publishes the key it deleted on REDLOCK_RELEASE_CHANNEL, on each
 * master that deleted it.  So that a waiter does not need a subscribed connection of
 * its own to every master, the worker holds one per master for the whole cluster and
 * wakes the backend that waits longest for the key (registry.c).  Each master that
 * deleted the key announces the release: the waiter is woken once a quorum of them has
 * (sooner, the key could still be on a majority), and the rest are ignored.
 *
 * The connections are opened by node.c's connection code, the one every connection to
 * a master goes through (redlock_conn_open): TLS as redlock.tls says (in a build
 * without TLS, with redlock.tls on, they fail before anything is sent in clear), then
 * AUTH and SELECT, then SUBSCRIBE.  A connect (and TLS handshake) gets
 * redlock.connect_timeout, the subscription's confirmation redlock.timeout after it.
 *
 * Nothing here is needed for safety: a lost message, a dropped connection or a master
 * that restarts only make a waiter wait its ordinary retry delay.  A connection that
 * fails is opened again a second later; a change of the worker's configuration
 * (redlock.servers, credentials, database, TLS: a reload) re-subscribes with the new
 * one.  Idle subscriptions cost nothing but TCP keep-alives.  Only the worker's own
 * configuration is covered: a waiter whose session set other servers polls.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include <hiredis/hiredis.h>

#include "compat.h"
#include "redlock.h"

#define RESUBSCRIBE_DELAY_MS 1000

/*
 * A subscription to master node of subs_set.  When conn is NULL it is closed and only
 * node and retry_at_ms mean something.
 */
typedef struct Subscriber
{
	int			node;
	RedlockConn *conn;
	bool		subscribed;		/* the master confirmed the subscription */
	double		deadline_ms;	/* until subscribed: when to give up on this connection */
	uint32		event_mask;		/* socket events registered in wait_set */
	double		retry_at_ms;	/* when closed: when to open it again */
} Subscriber;

/*
 * Announcements of recent releases, counted by key: one release is announced by each
 * master that deleted the key, at slightly different moments, and a waiter woken by the
 * first could find the key still on a majority.  Waiters are woken once a quorum of the
 * masters announced it; later announcements of the same release are ignored.
 */
typedef struct Announced
{
	uint64		key_hash;
	int			count;
	double		first_ms;
} Announced;

#define ANNOUNCED_SLOTS 256
#define ANNOUNCED_WINDOW_MS 100	/* announcements of one release come within it */

static Announced announced[ANNOUNCED_SLOTS];
static Subscriber subs[REDLOCK_MAX_NODES];
static int	nsubs = 0;
static RedlockNodeSet *subs_set = NULL; /* the configuration subscribed to, pinned */
static WaitEventSet *wait_set = NULL;
static bool wait_set_stale = true;

static void
sub_close(Subscriber *sub, double retry_after_ms)
{
	if (sub->conn)
	{
		redlock_conn_close(sub->conn);
		sub->conn = NULL;
		wait_set_stale = true;
	}
	sub->subscribed = false;
	sub->retry_at_ms = redlock_clock_ms() + retry_after_ms;
}

static void
sub_fail(Subscriber *sub, const char *why)
{
	ereport(DEBUG1,
			(errmsg_internal("redlock: subscription to %s closed: %s",
							 redlock_node_name(subs_set, sub->node), why)));
	sub_close(sub, RESUBSCRIBE_DELAY_MS);
}

/*
 * Opens sub's connection through node.c's connection code (TLS, AUTH and SELECT as
 * the worker's configuration says) and queues SUBSCRIBE behind its handshake.
 */
static void
sub_open(Subscriber *sub)
{
	const char *argv[2] = {"SUBSCRIBE", REDLOCK_RELEASE_CHANNEL};
	char		why[REDLOCK_NODE_ERROR_LEN];

	sub->conn = redlock_conn_open(subs_set, sub->node, why, sizeof(why));
	if (sub->conn == NULL)
	{
		sub_fail(sub, why);
		return;
	}
	wait_set_stale = true;
	sub->subscribed = false;
	sub->deadline_ms = redlock_clock_ms() + redlock_connect_timeout_ms;
	if (!redlock_conn_append(sub->conn, 2, argv))
		sub_fail(sub, "out of memory");
}

/* Counts one master's announcement of key; wakes its waiters at the quorum-th. */
static void
announce(const char *key, size_t len)
{
	uint64		h = hash_bytes_extended((const unsigned char *) key, (int) len, 0);
	Announced  *a = &announced[h % ANNOUNCED_SLOTS];
	double		now = redlock_clock_ms();

	if (a->key_hash != h || now - a->first_ms > ANNOUNCED_WINDOW_MS)
	{
		a->key_hash = h;
		a->count = 0;
		a->first_ms = now;
	}
	if (++a->count == Min(redlock_quorum_for(redlock_quorum, nsubs), nsubs))
		(void) redlock_registry_wake(key, len, false);
}

/* Handles one reply on sub: a confirmation, an error, or an announced release. */
static void
sub_reply(Subscriber *sub, redisReply *reply)
{
	if (reply->type == REDIS_REPLY_ERROR)
	{
		ereport(LOG,
				(errmsg("redlock could not subscribe to release announcements on %s: %s",
						redlock_node_name(subs_set, sub->node), reply->str),
				 errdetail("Waiters retry after redlock.retry_delay instead of being woken.")));
		sub_close(sub, RESUBSCRIBE_DELAY_MS * 10);
		return;
	}
	if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
		reply->element[0]->type != REDIS_REPLY_STRING)
		return;
	if (strcmp(reply->element[0]->str, "subscribe") == 0)
		sub->subscribed = true;
	else if (strcmp(reply->element[0]->str, "message") == 0 &&
			 reply->element[2]->type == REDIS_REPLY_STRING)
		announce(reply->element[2]->str, reply->element[2]->len);
}

/*
 * Services socket events on sub: its connect and TLS handshake, what it has to send,
 * then every reply that arrived.
 */
static void
sub_service(Subscriber *sub, uint32 events)
{
	char		why[REDLOCK_NODE_ERROR_LEN];
	bool		was_ready = redlock_conn_ready(sub->conn);

	if (!redlock_conn_service(sub->conn, events, why, sizeof(why)))
	{
		sub_fail(sub, why);
		return;
	}
	if (!redlock_conn_ready(sub->conn))
		return;
	if (!was_ready)				/* connected: the confirmation is owed from now */
		sub->deadline_ms = redlock_clock_ms() + redlock_timeout_ms;
	for (;;)
	{
		void	   *reply;

		if (!redlock_conn_next_reply(sub->conn, &reply, why, sizeof(why)))
		{
			sub_fail(sub, why);
			return;
		}
		if (reply == NULL)
			break;
		sub_reply(sub, reply);
		freeReplyObject(reply);
		if (sub->conn == NULL)
			return;
	}
}

/*
 * Follows the worker's configuration (redlock.servers, credentials, database, TLS):
 * re-subscribes after a change, with the node set of the new one.
 */
static void
subs_sync(void)
{
	RedlockNodeSet *set = redlock_nodeset_current();

	if (set == subs_set)
		return;
	for (int i = 0; i < nsubs; i++)
		sub_close(&subs[i], 0);
	if (subs_set)
		redlock_nodeset_unpin(subs_set);
	redlock_nodeset_pin(set);
	subs_set = set;
	nsubs = redlock_nodeset_size(set);
	for (int i = 0; i < nsubs; i++)
	{
		memset(&subs[i], 0, sizeof(Subscriber));
		subs[i].node = i;
	}
	wait_set_stale = true;
}

static void
wait_set_rebuild(void)
{
	if (wait_set)
		FreeWaitEventSet(wait_set);
	wait_set = redlock_create_wait_event_set(nsubs + 2);
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < nsubs; i++)
	{
		Subscriber *sub = &subs[i];

		if (sub->conn == NULL)
			continue;
		sub->event_mask = redlock_conn_events(sub->conn);
		AddWaitEventToSet(wait_set, sub->event_mask, redlock_conn_socket(sub->conn), NULL, sub);
	}
	wait_set_stale = false;
}

/*
 * redlock_subscriptions_wait
 *		The worker's sleep: waits up to timeout_ms milliseconds for its latch, while
 *		keeping a subscription to release announcements open on each master of
 *		redlock.servers and waking the backends that wait for each key announced.
 *		Returns early when the latch is set (it is not reset here).  Exits on
 *		postmaster death; raises only out-of-memory errors.
 */
void
redlock_subscriptions_wait(double timeout_ms)
{
	WaitEvent	events[REDLOCK_MAX_NODES + 2];
	double		now = redlock_clock_ms();
	double		end = now + timeout_ms;
	int			n;

	subs_sync();
	for (int i = 0; i < nsubs; i++)
	{
		Subscriber *sub = &subs[i];

		if (sub->conn && !sub->subscribed && sub->deadline_ms <= now)
			sub_fail(sub, redlock_conn_ready(sub->conn)
					 ? "no subscription confirmed within redlock.timeout"
					 : "timed out connecting (redlock.connect_timeout)");
		if (sub->conn == NULL && sub->retry_at_ms <= now)
			sub_open(sub);
		if (sub->conn == NULL)
			end = Min(end, sub->retry_at_ms);
		else if (!sub->subscribed)
			end = Min(end, sub->deadline_ms);
		if (sub->conn && redlock_conn_events(sub->conn) != sub->event_mask)
			wait_set_stale = true;
	}
	if (wait_set_stale || wait_set == NULL)
		wait_set_rebuild();

	n = WaitEventSetWait(wait_set, (long) Max(end - now, 0), events, lengthof(events),
						 redlock_wait_event(REDLOCK_WAIT_WORKER_MAIN));
	for (int k = 0; k < n; k++)
	{
		Subscriber *sub = events[k].user_data;

		if (sub && sub->conn && (events[k].events & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE)))
			sub_service(sub, events[k].events);
	}
}

/*
 * redlock_subscriptions_close
 *		Closes every subscription (worker exit).  Raises nothing.
 */
void
redlock_subscriptions_close(void)
{
	for (int i = 0; i < nsubs; i++)
		if (subs[i].conn)
		{
			redlock_conn_close(subs[i].conn);
			subs[i].conn = NULL;
		}
	nsubs = 0;
	if (subs_set)
		redlock_nodeset_unpin(subs_set);
	subs_set = NULL;
}
