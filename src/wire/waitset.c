/*-------------------------------------------------------------------------
 *
 * waitset.c
 *	  The backend's one wait over the sockets of the node set in use: a WaitEventSet
 *	  over every open socket of the set, the latch and postmaster death, kept for the
 *	  backend's life and rebuilt only when a socket opens or closes (the set's
 *	  sockets_version) or another set is used; otherwise only the event masks that
 *	  changed are modified.  pg_stat_activity shows the wait event of
 *	  REDLOCK_WAIT_MASTERS meanwhile.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "compat.h"
#include "wire/node.h"
#include "wire/waitset.h"

/* The wait set, and the set (by id) and sockets_version it was built for. */
static WaitEventSet *wait_set = NULL;
static uint64 wait_set_for_id = 0;
static uint64 wait_set_for_version = 0;

/* True when the wait set covers set's sockets as they are now. */
static bool
waitset_current_for(const RedlockNodeSet *set)
{
	return wait_set != NULL && wait_set_for_id == set->id &&
		wait_set_for_version == set->sockets_version;
}

/*
 * Makes the backend's wait set cover the latch, postmaster death and every open
 * socket of set with the events each node waits for now: rebuilt when a socket opened
 * or closed or another set is in use, otherwise only the masks that changed are
 * modified.
 */
static void
waitset_refresh(RedlockNodeSet *set)
{
	if (waitset_current_for(set))
	{
		for (int i = 0; i < set->count; i++)
		{
			RedlockNode *node = &set->nodes[i];
			uint32		wanted;

			if (node->conn.ctx == NULL)
				continue;
			wanted = redlock_conn_wanted_events(&node->conn);
			if (wanted != node->event_mask)
			{
				ModifyWaitEvent(wait_set, node->event_pos, wanted, NULL);
				node->event_mask = wanted;
			}
		}
		return;
	}

	if (wait_set)
		FreeWaitEventSet(wait_set);
	wait_set = NULL;
	wait_set_for_id = 0;		/* until built whole: a failed rebuild is never current */
	wait_set = redlock_create_wait_event_set(REDLOCK_MAX_NODES + 2);
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_POSTMASTER_DEATH, PGINVALID_SOCKET, NULL, NULL);
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		if (node->conn.ctx == NULL)
			continue;
		node->event_mask = redlock_conn_wanted_events(&node->conn);
		node->event_pos = AddWaitEventToSet(wait_set, node->event_mask,
											redlock_conn_socket(&node->conn), NULL, node);
	}
	wait_set_for_id = set->id;
	wait_set_for_version = set->sockets_version;
}

/*
 * redlock_waitset_wait
 *		Waits up to timeout_ms (ms, >= 0) for the latch, postmaster death or the socket
 *		events each open node of set waits for now (redlock_conn_wanted_events), and
 *		returns how many events (at most nevents) it put in events; a socket's event
 *		has the RedlockNode as user_data.  Raises only out-of-memory errors (53200).
 */
int
redlock_waitset_wait(RedlockNodeSet *set, long timeout_ms, WaitEvent *events, int nevents)
{
	waitset_refresh(set);
	return WaitEventSetWait(wait_set, timeout_ms, events, nevents,
							redlock_wait_event(REDLOCK_WAIT_MASTERS));
}

/*
 * redlock_waitset_idle_look
 *		One look, without waiting, at every idle connection of set through the wait set
 *		the last call left (one epoll_wait instead of a peek per master).  A node whose
 *		idle socket showed nothing to read is marked looked_quiet, and the call does
 *		not peek it; something to read on an idle connection means the master closed
 *		or reset it or sent what nobody asked for, and is peeked as before.
 *
 * Nothing is marked when the wait set cannot answer for every idle socket (rebuilt
 * since, built for another set, a socket registered for writing, TLS, whose library
 * may hold bytes the socket no longer shows) or did not look at the sockets (a set
 * latch is returned alone).  Raises nothing.
 */
void
redlock_waitset_idle_look(RedlockNodeSet *set)
{
	WaitEvent	events[REDLOCK_MAX_NODES + 2];
	int			nevents;

	for (int i = 0; i < set->count; i++)
		set->nodes[i].looked_quiet = false;
	if (!waitset_current_for(set))
		return;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		if (node->conn.ctx && node->owed.len == 0 && !node->conn.connecting &&
			(node->conn.tls || node->event_mask != WL_SOCKET_READABLE))
			return;
	}
	nevents = WaitEventSetWait(wait_set, 0, events, lengthof(events),
							   redlock_wait_event(REDLOCK_WAIT_MASTERS));
	for (int k = 0; k < nevents; k++)
		if (events[k].events & (WL_LATCH_SET | WL_POSTMASTER_DEATH))
			return;
	for (int i = 0; i < set->count; i++)
	{
		RedlockNode *node = &set->nodes[i];

		node->looked_quiet = node->conn.ctx && node->owed.len == 0 && !node->conn.connecting;
	}
	for (int k = 0; k < nevents; k++)
		((RedlockNode *) events[k].user_data)->looked_quiet = false;
}
