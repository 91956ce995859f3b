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
 * Nothing here is needed for safety: a lost message, a dropped connection or a master
 * that restarts only make a waiter wait its ordinary retry delay.  A connection that
 * fails is opened again a second later; a change of redlock.servers (a reload)
 * re-subscribes on the new masters.  Idle subscriptions cost nothing but TCP
 * keep-alives.  Only the worker's own configuration is covered: a waiter whose session
 * set other servers polls.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include <hiredis/hiredis.h>

#include "compat.h"
#include "redlock.h"

#define RESUBSCRIBE_DELAY_MS 1000

/* A subscription to one master.  When ctx is NULL it is closed. */
typedef struct Subscriber
{
	RedlockNodeAddr addr;
	redisContext *ctx;
	bool		writing;		/* commands not all sent yet (or connect pending) */
	bool		subscribed;		/* the master confirmed the subscription */
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
static bool configured = false;
static uint64 configured_generation = 0;
static WaitEventSet *wait_set = NULL;
static bool wait_set_stale = true;

static void
sub_close(Subscriber *sub, double retry_after_ms)
{
	if (sub->ctx)
	{
		redisFree(sub->ctx);
		ReleaseExternalFD();
		sub->ctx = NULL;
		wait_set_stale = true;
	}
	sub->writing = false;
	sub->subscribed = false;
	sub->retry_at_ms = redlock_clock_ms() + retry_after_ms;
}

static void
sub_fail(Subscriber *sub, const char *why)
{
	char		name[REDLOCK_NODE_NAME_LEN];

	redlock_node_addr_name(&sub->addr, name, sizeof(name));
	ereport(DEBUG1,
			(errmsg_internal("redlock: subscription to %s closed: %s", name, why)));
	sub_close(sub, RESUBSCRIBE_DELAY_MS);
}

/* Opens sub's connection and queues AUTH (when configured) and SUBSCRIBE. */
static void
sub_open(Subscriber *sub)
{
	const char *argv[3];
	int			argc = 0;

	if (!AcquireExternalFD())
	{
		sub->retry_at_ms = redlock_clock_ms() + RESUBSCRIBE_DELAY_MS;
		return;
	}
	sub->ctx = sub->addr.port == 0
		? redisConnectUnixNonBlock(sub->addr.host)
		: redisConnectNonBlock(sub->addr.host, sub->addr.port);
	if (sub->ctx == NULL || sub->ctx->err)
	{
		if (sub->ctx)
			redisFree(sub->ctx);
		sub->ctx = NULL;
		ReleaseExternalFD();
		sub->retry_at_ms = redlock_clock_ms() + RESUBSCRIBE_DELAY_MS;
		return;
	}
	if (sub->addr.port != 0)
		(void) redisEnableKeepAlive(sub->ctx);
	wait_set_stale = true;
	sub->writing = true;
	if (redlock_effective_password()[0] != '\0')
	{
		argv[argc++] = "AUTH";
		if (redlock_username && redlock_username[0] != '\0')
			argv[argc++] = redlock_username;
		argv[argc++] = redlock_effective_password();
		if (redisAppendCommandArgv(sub->ctx, argc, argv, NULL) != REDIS_OK)
		{
			sub_fail(sub, "out of memory");
			return;
		}
	}
	argv[0] = "SUBSCRIBE";
	argv[1] = REDLOCK_RELEASE_CHANNEL;
	if (redisAppendCommandArgv(sub->ctx, 2, argv, NULL) != REDIS_OK)
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
		char		name[REDLOCK_NODE_NAME_LEN];

		redlock_node_addr_name(&sub->addr, name, sizeof(name));
		ereport(LOG,
				(errmsg("redlock could not subscribe to release announcements on %s: %s",
						name, reply->str),
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

/* Services socket events on sub. */
static void
sub_service(Subscriber *sub, uint32 events)
{
	if ((events & WL_SOCKET_WRITEABLE) && sub->writing)
	{
		int			done = 0;

		if (redisBufferWrite(sub->ctx, &done) != REDIS_OK)
		{
			sub_fail(sub, sub->ctx->errstr);
			return;
		}
		if (done)
		{
			sub->writing = false;
			wait_set_stale = true;
		}
	}
	if (events & WL_SOCKET_READABLE)
	{
		void	   *reply;

		if (redisBufferRead(sub->ctx) != REDIS_OK)
		{
			sub_fail(sub, sub->ctx->errstr[0] ? sub->ctx->errstr : "connection closed");
			return;
		}
		for (;;)
		{
			if (redisGetReplyFromReader(sub->ctx, &reply) != REDIS_OK)
			{
				sub_fail(sub, "protocol error");
				return;
			}
			if (reply == NULL)
				break;
			sub_reply(sub, reply);
			freeReplyObject(reply);
			if (sub->ctx == NULL)
				return;
		}
	}
}

/* Follows redlock.servers (and the credentials): re-subscribes after a change. */
static void
subs_sync(void)
{
	const RedlockServerList *list = redlock_server_list;

	if (configured && configured_generation == redlock_connection_generation)
		return;
	for (int i = 0; i < nsubs; i++)
		sub_close(&subs[i], 0);
	nsubs = list ? list->count : 0;
	for (int i = 0; i < nsubs; i++)
	{
		memset(&subs[i], 0, sizeof(Subscriber));
		subs[i].addr = list->nodes[i];
	}
	configured = true;
	configured_generation = redlock_connection_generation;
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

		if (sub->ctx == NULL)
			continue;
		AddWaitEventToSet(wait_set,
						  WL_SOCKET_READABLE | (sub->writing ? WL_SOCKET_WRITEABLE : 0),
						  sub->ctx->fd, NULL, sub);
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
		if (subs[i].ctx == NULL && subs[i].retry_at_ms <= now)
			sub_open(&subs[i]);
		if (subs[i].ctx == NULL)
			end = Min(end, subs[i].retry_at_ms);
	}
	if (wait_set_stale || wait_set == NULL)
		wait_set_rebuild();

	n = WaitEventSetWait(wait_set, (long) Max(end - now, 0), events, lengthof(events),
						 redlock_wait_event(REDLOCK_WAIT_WORKER_MAIN));
	for (int k = 0; k < n; k++)
	{
		Subscriber *sub = events[k].user_data;

		if (sub && sub->ctx && (events[k].events & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE)))
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
		if (subs[i].ctx)
		{
			redisFree(subs[i].ctx);
			ReleaseExternalFD();
			subs[i].ctx = NULL;
		}
	nsubs = 0;
	configured = false;
}
