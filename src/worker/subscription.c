/*-------------------------------------------------------------------------
 *
 * subscription.c
 *	  The background worker's subscriptions to release announcements: one connection
 *	  per master of redlock.servers, subscribed to the release channel of each key that
 *	  a backend of this cluster waits for, and only while one does.  A message (the
 *	  released key) wakes the backend that waits longest for it.
 *
 * The release script publishes the key it deleted on the key's own channel
 * (REDLOCK_RELEASE_CHANNEL_PREFIX followed by the key), on each master that deleted it.
 * A PUBLISH that nobody subscribed to delivers nothing, so a release costs no message
 * to a cluster where nobody waits for that key, whatever the number of clusters.  A
 * waiter writes its key on the waiter board and sets our latch (waiters.c); we
 * subscribe on every master, keep the subscription while anyone waits for the key and
 * CHANNEL_LINGER_MS after, then unsubscribe.  A release made after a waiter's last
 * attempt but before the subscription took effect is announced to nobody: when a
 * quorum of masters has confirmed a subscription, the oldest waiter is woken to try
 * once more (redlock_waiters_catch_up).  Each master that deleted the key announces
 * the release: the waiter is woken once a quorum of them has (sooner, the key could
 * still be on a majority), and the rest are ignored.
 *
 * The connections are opened by conn.c, the code every connection to a master goes
 * through (here by way of redlock_nodeconn_open): TLS as redlock.tls says (in a build
 * without TLS, with redlock.tls on, they fail before anything is sent in clear), then
 * AUTH and SELECT, then the subscriptions.  A connect (and TLS handshake) gets
 * redlock.connect_timeout, each subscription's confirmation redlock.timeout.
 *
 * Nothing here is needed for safety: a lost message, a dropped connection or a master
 * that restarts only make a waiter wait its ordinary retry delay.  A connection that
 * fails is opened again a second later and subscribes again; a change of the worker's
 * configuration (redlock.servers, credentials, database, TLS: a reload) re-subscribes
 * with the new one.  Only the worker's own configuration is covered: a waiter whose
 * session set other servers polls.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "clock.h"
#include "compat.h"
#include "guc.h"
#include "redlock.h"
#include "shared/registry.h"
#include "shared/waiters.h"
#include "tally.h"
#include "wire/conn.h"
#include "wire/nodeconn.h"
#include "wire/nodeset.h"
#include "worker/subscription.h"

#define RESUBSCRIBE_DELAY_MS 1000
#define CHANNEL_LINGER_MS 1000	/* keep a channel this long after its last waiter left */
#define CHANNEL_PREFIX_LEN (sizeof(REDLOCK_RELEASE_CHANNEL_PREFIX) - 1)

/*
 * A subscription to master node of subs_set.  When conn is NULL it is closed and only
 * node and retry_at_ms mean something.
 */
typedef struct Subscriber
{
	int			node;
	RedlockNodeConn *conn;
	int			owed;			/* subscriptions sent but not yet confirmed */
	double		deadline_ms;	/* connecting, or owed > 0: when to give up on it */
	uint32		event_mask;		/* socket events registered in wait_set */
	double		retry_at_ms;	/* when closed: when to open it again */
} Subscriber;

/*
 * The release channel of a key that a backend waits for (or did, less than
 * CHANNEL_LINGER_MS ago), by the key's hash.  sent and confirmed are masks of masters
 * (by node number) since their connection opened.
 */
typedef struct Channel
{
	uint64		hash;			/* the hash table's key */
	char		name[CHANNEL_PREFIX_LEN + REDLOCK_REGISTRY_KEY_LEN + 1];
	double		wanted_at_ms;	/* when a backend was last seen waiting for it */
	uint64		sent;			/* masters sent SUBSCRIBE */
	uint64		confirmed;		/* masters that confirmed it */
	bool		caught_up;		/* the quorum's confirmation woke a waiter */
} Channel;

#define CHANNEL_KEY(ch) ((ch)->name + CHANNEL_PREFIX_LEN)

/*
 * Announcements of recent releases, counted by key: one release is announced by each
 * master that deleted the key, at slightly different moments, and a waiter woken by the
 * first could find the key still on a majority.  Waiters are woken once a quorum of the
 * masters announced it; later announcements of the same release are ignored.  A master
 * announces a release once, so its k-th announcement within the window is of the k-th
 * release (a semaphore's slot freed again at once: an attempt giving back a slot it took
 * twice): the k-th release wakes a waiter once a quorum of masters announced k times.
 */
typedef struct Announced
{
	uint64		key_hash;
	uint8		announced[REDLOCK_MAX_NODES];	/* per master, within the window */
	uint8		woken;			/* releases that woke a waiter */
	double		first_ms;
} Announced;

#define ANNOUNCED_SLOTS 256
#define ANNOUNCED_WINDOW_MS 100	/* announcements of one release come within it */

static Announced announced[ANNOUNCED_SLOTS];
static Subscriber subs[REDLOCK_MAX_NODES];
static int	nsubs = 0;
static RedlockNodeSet *subs_set = NULL; /* the configuration subscribed to, pinned */
static HTAB *channels = NULL;
static WaitEventSet *wait_set = NULL;
static bool wait_set_stale = true;

static uint64
sub_channel_hash(const char *key, size_t len)
{
	return hash_bytes_extended((const unsigned char *) key, (int) len, 0);
}

/* How many masters must confirm a subscription, or announce a release. */
static int
subs_quorum(void)
{
	return Min(redlock_quorum_for(redlock_quorum, nsubs), nsubs);
}

static void
sub_close(Subscriber *sub, double retry_after_ms)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;
	uint64		bit = UINT64CONST(1) << sub->node;

	if (sub->conn)
	{
		redlock_nodeconn_close(sub->conn);
		sub->conn = NULL;
		wait_set_stale = true;
	}
	sub->owed = 0;
	sub->retry_at_ms = redlock_clock_ms() + retry_after_ms;
	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
	{
		ch->sent &= ~bit;
		ch->confirmed &= ~bit;
		if (!redlock_quorum_reached(pg_popcount64(ch->confirmed), subs_quorum()))
			ch->caught_up = false;	/* releases may go unannounced: catch up again */
	}
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
 * Queues one SUBSCRIBE on sub for every channel that it was not sent yet (behind the
 * connection's handshake when it is still connecting).
 */
static void
sub_subscribe(Subscriber *sub)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;
	uint64		bit = UINT64CONST(1) << sub->node;
	const char **argv;
	int			argc = 1;

	argv = palloc(sizeof(char *) * (hash_get_num_entries(channels) + 1));
	argv[0] = "SUBSCRIBE";
	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
		if (!(ch->sent & bit))
		{
			argv[argc++] = ch->name;
			ch->sent |= bit;
		}
	if (argc > 1)
	{
		if (sub->owed == 0)
			sub->deadline_ms = redlock_clock_ms() + redlock_timeout_ms;
		sub->owed += argc - 1;
		if (!redlock_nodeconn_append(sub->conn, argc, argv))
			sub_fail(sub, "out of memory");
	}
	pfree(argv);
}

/* Opens sub's connection (redlock_nodeconn_open), then subscribes. */
static void
sub_open(Subscriber *sub)
{
	char		why[REDLOCK_NODE_ERROR_LEN];

	sub->conn = redlock_nodeconn_open(subs_set, sub->node, why, sizeof(why));
	if (sub->conn == NULL)
	{
		sub_fail(sub, why);
		return;
	}
	wait_set_stale = true;
	sub->owed = 0;
	sub->deadline_ms = redlock_clock_ms() + redlock_connect_timeout_ms;
	sub_subscribe(sub);
}

/* redlock_waiters_keys' callback: key is waited for now. */
static void
sub_channel_want(const char *key, size_t len, void *arg)
{
	double		now = *(double *) arg;
	uint64		h = sub_channel_hash(key, len);
	bool		found;
	Channel    *ch = hash_search(channels, &h, HASH_ENTER, &found);

	if (!found)
	{
		memcpy(ch->name, REDLOCK_RELEASE_CHANNEL_PREFIX, CHANNEL_PREFIX_LEN);
		memcpy(CHANNEL_KEY(ch), key, len + 1);
		ch->sent = ch->confirmed = 0;
		ch->caught_up = false;
	}
	ch->wanted_at_ms = now;
}

/*
 * Follows the waiter board: adds the channels of keys waited for now and unsubscribes
 * from those nobody waited for in CHANNEL_LINGER_MS.  Returns when the next of those
 * falls due (a redlock_clock_ms() time), or INFINITY.
 */
static double
sub_channels_sync(double now)
{
	HASH_SEQ_STATUS seq;
	Channel    *ch;
	double		next = INFINITY;

	redlock_waiters_keys(sub_channel_want, &now);
	hash_seq_init(&seq, channels);
	while ((ch = hash_seq_search(&seq)) != NULL)
	{
		if (now - ch->wanted_at_ms < CHANNEL_LINGER_MS)
		{
			if (ch->wanted_at_ms < now)
				next = Min(next, ch->wanted_at_ms + CHANNEL_LINGER_MS);
			continue;
		}
		for (int i = 0; i < nsubs; i++)
		{
			const char *argv[2] = {"UNSUBSCRIBE", ch->name};

			if (subs[i].conn && (ch->sent & (UINT64CONST(1) << i)) &&
				!redlock_nodeconn_append(subs[i].conn, 2, argv))
				sub_fail(&subs[i], "out of memory");
		}
		hash_search(channels, &ch->hash, HASH_REMOVE, NULL);
	}
	return next;
}

/*
 * Counts one master's announcement, on key's channel, of the release of the key
 * released (key itself, or a semaphore's slot); wakes one of key's waiters for each
 * release a quorum announced.
 */
static void
sub_announce(const Subscriber *sub, const char *key, size_t len, const char *released,
			 size_t released_len)
{
	uint64		h = hash_bytes_extended((const unsigned char *) released, (int) released_len, 0);
	Announced  *a = &announced[h % ANNOUNCED_SLOTS];
	double		now = redlock_clock_ms();
	int			reached;

	if (a->key_hash != h || now - a->first_ms > ANNOUNCED_WINDOW_MS)
	{
		memset(a, 0, sizeof(*a));
		a->key_hash = h;
		a->first_ms = now;
	}
	if (a->announced[sub->node] == PG_UINT8_MAX)
		return;
	a->announced[sub->node]++;
	/* Masters that announced the release after the last one that woke. */
	reached = 0;
	for (int i = 0; i < nsubs; i++)
		reached += a->announced[subs[i].node] > a->woken;
	if (redlock_quorum_reached(reached, subs_quorum()))
	{
		if (a->woken++ == 0)
			(void) redlock_waiters_wake(key, len, released, released_len, false);
		else
			(void) redlock_waiters_wake_again(key, len, released, released_len);
	}
}

/* A master confirmed sub's subscription to channel name: catch up at the quorum's. */
static void
sub_confirmed(Subscriber *sub, const char *name, size_t len)
{
	uint64		h;
	Channel    *ch;

	if (sub->owed > 0)
		sub->owed--;
	if (len <= CHANNEL_PREFIX_LEN ||
		strncmp(name, REDLOCK_RELEASE_CHANNEL_PREFIX, CHANNEL_PREFIX_LEN) != 0)
		return;
	h = sub_channel_hash(name + CHANNEL_PREFIX_LEN, len - CHANNEL_PREFIX_LEN);
	ch = hash_search(channels, &h, HASH_FIND, NULL);
	if (ch == NULL || !(ch->sent & (UINT64CONST(1) << sub->node)))
		return;					/* unsubscribed since */
	ch->confirmed |= UINT64CONST(1) << sub->node;
	if (!ch->caught_up && redlock_quorum_reached(pg_popcount64(ch->confirmed), subs_quorum()))
	{
		ch->caught_up = true;
		redlock_waiters_catch_up(CHANNEL_KEY(ch), len - CHANNEL_PREFIX_LEN);
	}
}

/* Handles one reply on sub: a confirmation, an error, or an announced release. */
static void
sub_reply(Subscriber *sub, void *reply)
{
	RedlockBytes channel = {NULL, 0};
	RedlockBytes message = {NULL, 0};

	switch (redlock_conn_reply_pubsub(reply, &channel, &message))
	{
		case REDLOCK_PUBSUB_ERROR:
			ereport(LOG,
					(errmsg("redlock could not subscribe to release announcements on %s: %.*s",
							redlock_node_name(subs_set, sub->node), (int) message.len,
							message.data),
					 errdetail("Waiters retry after redlock.retry_delay instead of being woken.")));
			sub_close(sub, RESUBSCRIBE_DELAY_MS * 10);
			break;
		case REDLOCK_PUBSUB_SUBSCRIBED:
			sub_confirmed(sub, channel.data, channel.len);
			break;
		case REDLOCK_PUBSUB_MESSAGE:
			if (channel.len > CHANNEL_PREFIX_LEN &&
				strncmp(channel.data, REDLOCK_RELEASE_CHANNEL_PREFIX, CHANNEL_PREFIX_LEN) == 0)
				sub_announce(sub, channel.data + CHANNEL_PREFIX_LEN,
							 channel.len - CHANNEL_PREFIX_LEN, message.data, message.len);
			break;
		case REDLOCK_PUBSUB_OTHER:
			break;
	}
}

/*
 * Services socket events on sub: its connect and TLS handshake, what it has to send,
 * then every reply that arrived.
 */
static void
sub_service(Subscriber *sub, uint32 events)
{
	char		why[REDLOCK_NODE_ERROR_LEN];
	bool		was_ready = redlock_nodeconn_ready(sub->conn);

	if (!redlock_nodeconn_service(sub->conn, events, why, sizeof(why)))
	{
		sub_fail(sub, why);
		return;
	}
	if (!redlock_nodeconn_ready(sub->conn))
		return;
	if (!was_ready)				/* connected: confirmations are owed from now */
		sub->deadline_ms = redlock_clock_ms() + redlock_timeout_ms;
	for (;;)
	{
		void	   *reply;

		if (!redlock_nodeconn_next_reply(sub->conn, &reply, why, sizeof(why)))
		{
			sub_fail(sub, why);
			return;
		}
		if (reply == NULL)
			break;
		sub_reply(sub, reply);
		redlock_conn_reply_free(reply);
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

	if (channels == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(Channel);
		channels = hash_create("redlock release channels", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}
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
sub_wait_set_rebuild(void)
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
		sub->event_mask = redlock_nodeconn_events(sub->conn);
		AddWaitEventToSet(wait_set, sub->event_mask, redlock_nodeconn_socket(sub->conn), NULL, sub);
	}
	wait_set_stale = false;
}

/*
 * redlock_subscriptions_wait
 *		The worker's sleep: waits up to timeout_ms milliseconds for its latch, while
 *		keeping a connection open to each master of redlock.servers, subscribed to the
 *		release channel of each key that a backend of this cluster waits for, and
 *		waking the backends that wait for each key announced.  Returns early when the
 *		latch is set (it is not reset here); a backend that starts waiting sets it.
 *		Exits on postmaster death; raises only out-of-memory errors.
 */
void
redlock_subscriptions_wait(double timeout_ms)
{
	WaitEvent	events[REDLOCK_MAX_NODES + 2];
	double		now = redlock_clock_ms();
	double		end = now + timeout_ms;
	int			n;

	subs_sync();
	end = Min(end, sub_channels_sync(now));
	for (int i = 0; i < nsubs; i++)
	{
		Subscriber *sub = &subs[i];
		bool		ready = sub->conn && redlock_nodeconn_ready(sub->conn);

		if (sub->conn && (!ready || sub->owed > 0) && sub->deadline_ms <= now)
			sub_fail(sub, ready
					 ? "no subscription confirmed within redlock.timeout"
					 : "timed out connecting (redlock.connect_timeout)");
		if (sub->conn == NULL && sub->retry_at_ms <= now)
			sub_open(sub);
		else if (sub->conn)
			sub_subscribe(sub);
		if (sub->conn == NULL)
			end = Min(end, sub->retry_at_ms);
		else if (!redlock_nodeconn_ready(sub->conn) || sub->owed > 0)
			end = Min(end, sub->deadline_ms);
		if (sub->conn && redlock_nodeconn_events(sub->conn) != sub->event_mask)
			wait_set_stale = true;
	}
	if (wait_set_stale || wait_set == NULL)
		sub_wait_set_rebuild();

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
			redlock_nodeconn_close(subs[i].conn);
			subs[i].conn = NULL;
		}
	nsubs = 0;
	if (subs_set)
		redlock_nodeset_unpin(subs_set);
	subs_set = NULL;
}
