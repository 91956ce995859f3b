/*-------------------------------------------------------------------------
 *
 * nodeset.h
 *	  Node sets (nodeset.c): the masters of one configuration, the one in force and
 *	  those locks pin.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_NODESET_H
#define REDLOCK_NODESET_H

#include "redlock.h"

extern RedlockNodeSet *redlock_nodeset_current(void);
extern RedlockNodeSet *redlock_nodeset_for(const RedlockServerList *list,
										   const char *username, const char *password,
										   int database, int quorum,
										   const RedlockTlsConfig *tls);
extern void redlock_nodeset_pin(RedlockNodeSet *set);
extern void redlock_nodeset_unpin(RedlockNodeSet *set);
extern int	redlock_nodeset_size(const RedlockNodeSet *set);
extern int	redlock_nodeset_quorum(const RedlockNodeSet *set);
extern const char *redlock_node_name(const RedlockNodeSet *set, int node);
extern int	redlock_nodes_stats(RedlockNodeStats **stats);
extern void redlock_nodes_disconnect(void);
extern void redlock_nodeset_report_changes(RedlockNodeSet *set);
extern char *redlock_node_errors(RedlockNodeSet *set, const RedlockNodeOutcome *outcomes,
								int n);

#endif							/* REDLOCK_NODESET_H */
