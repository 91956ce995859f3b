/*-------------------------------------------------------------------------
 *
 * lockconfig.h
 *	  The configurations auto-extended locks were taken under, in shared memory
 *	  (lockconfig.c): what the worker renews each lock on.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LOCKCONFIG_H
#define REDLOCK_LOCKCONFIG_H

#include "redlock.h"

#define REDLOCK_LOCKCONFIG_SLOTS			16
#define REDLOCK_LOCKCONFIG_CREDENTIAL_LEN	255	/* bytes of a username or password */

/* A configuration locks were taken under: the masters parsed, as the worker reads it. */
typedef struct RedlockLockConfig
{
	int			database;
	int			quorum;			/* redlock.quorum: 0 for a majority */
	int			nservers;
	RedlockNodeAddr servers[REDLOCK_MAX_NODES];
	char		username[REDLOCK_LOCKCONFIG_CREDENTIAL_LEN + 1];
	char		password[REDLOCK_LOCKCONFIG_CREDENTIAL_LEN + 1];
	RedlockTlsConfig tls;
} RedlockLockConfig;

extern void RedlockLockConfigInit(void);
extern bool redlock_lockconfig_fits(void);
extern int	redlock_lockconfig_acquire(uint32 *generation);
extern void redlock_lockconfig_release(int slot);
extern bool redlock_lockconfig_read(int slot, uint32 generation, RedlockLockConfig *out);

#endif							/* REDLOCK_LOCKCONFIG_H */
