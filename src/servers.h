/*-------------------------------------------------------------------------
 *
 * servers.h
 *	  The redlock.servers parser (servers.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_SERVERS_H
#define REDLOCK_SERVERS_H

#include "redlock.h"

extern RedlockServerList *redlock_servers_parse(const char *value, char *errbuf,
												size_t errlen);
extern void redlock_node_addr_name(const RedlockNodeAddr *addr, char *buf, size_t len);

#endif							/* REDLOCK_SERVERS_H */
