/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  The shared registry of auto-extended locks (registry.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_REGISTRY_H
#define REDLOCK_REGISTRY_H

#include "redlock.h"
#include "shared/lease.h"

#define REDLOCK_REGISTRY_KEY_LEN	(2 * REDLOCK_MAX_RESOURCE_LEN + 64)

/* An owner's reference to its registry entry; index -1 when none. */
typedef struct RedlockRegistryHandle
{
	int			index;
	uint32		generation;
} RedlockRegistryHandle;

/* One lock in the worker's round (copied out of the registry). */
typedef struct RedlockRenewal
{
	int			index;
	uint32		generation;
	int			config;
	uint32		config_generation;
	int			ttl_ms;
	uint64		request_seq;
	double		valid_until_ms; /* after the cut for this request */
	char		token[REDLOCK_TOKEN_LEN + 1];
	char	   *key;
} RedlockRenewal;

extern void RedlockRegistryInit(void);
extern void redlock_registry_reserve(const char *key, int prefix_len, bool cancel_on_loss,
									 RedlockRegistryHandle *handle);
extern void redlock_registry_activate(const RedlockRegistryHandle *handle, const char *key,
									  const char *token, int ttl_ms, double valid_until_ms);
extern void redlock_registry_remove(RedlockRegistryHandle *handle);
/* The lease (lease.h) of an auto-extended lock, with and without the lock. */
extern bool redlock_registry_view(const RedlockRegistryHandle *handle,
								  RedlockLease *lease);
extern bool redlock_registry_peek(const RedlockRegistryHandle *handle,
								  RedlockLease *lease);
extern void redlock_registry_extend(const RedlockRegistryHandle *handle, int ttl_ms,
									RedlockResult *result);
extern void redlock_registry_worker_attach(void);
extern void redlock_registry_worker_detach(void);
extern int	redlock_registry_due(double now_ms, RedlockRenewal **renewals,
								 double *next_due_ms, uint64 *changes);
extern bool redlock_registry_may_sleep(uint64 changes, double until_ms);
extern void redlock_registry_renewed(const RedlockRenewal *renewals,
									 const RedlockRenewalOutcome *outcomes, int n);
extern void redlock_registry_round_done(double round_ms, int locks);
extern bool redlock_registry_stats(int *locks, double *round_ms, int *round_locks);
extern void redlock_registry_wake_worker(void);

#endif							/* REDLOCK_REGISTRY_H */
