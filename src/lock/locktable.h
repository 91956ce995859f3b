/*-------------------------------------------------------------------------
 *
 * locktable.h
 *	  The backend's lock table (locktable.c): one entry per lock, and the verbs that
 *	  change what the backend believes about a lock, for lockops.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LOCKTABLE_H
#define REDLOCK_LOCKTABLE_H

#include "datatype/timestamp.h"
#include "utils/hsearch.h"

#include "lock/holds.h"
#include "lock/leasewatch.h"
#include "lock/life.h"
#include "redlock.h"
#include "shared/registry.h"
#include "wire/nodeset.h"

/*
 * One lock.  key, token and set are always valid (set pinned).  Until its life is
 * HELD (life.c), an acquire attempt is in flight or was cut short, and only the
 * fields up to "life" and the holds mean anything.
 */
typedef struct RedlockHeldLock
{
	char		resource[REDLOCK_MAX_RESOURCE_LEN + 1];	/* hash key */
	char	   *key;			/* the Redis key, at acquisition (a permit: its slot's
								 * key once acquired, the semaphore's key before) */
	int			prefix_len;		/* bytes of redlock.key_prefix at its start */
	int			permits;		/* a semaphore's permit: its permits; 0: a lock */
	char	   *semaphore_key;	/* a permit: the semaphore's key (its waiters wait on
								 * it; its slots' releases announce it); else NULL */
	int64		set_id;			/* acquired in a set (doc/sets.md): the set's number
								 * in this backend, shared by its locks; 0: alone */
	bool		shared;			/* a shared hold (doc/shared.md), else exclusive */
	char		token[REDLOCK_TOKEN_LEN + 1];	/* of the latest acquire attempt */
	RedlockNodeSet *set;		/* the masters it was taken on */
	RedlockLife life;			/* where it stands (life.c; changed only there) */
	Oid			charged_role;	/* the role its place on the masters is charged to
								 * (life.c, shared/rolequota.c); InvalidOid: none */
	int			ttl_ms;			/* TTL last set on the masters */
	int			nodes;			/* masters that accepted it last */
	TimestampTz acquired_at;
	double		valid_until_ms; /* redlock_clock_ms() time */
	RedlockHolds holds;			/* its holds (holds.c) */
	RedlockRegistryHandle reg;	/* auto-extended: its registry entry; index -1: not */
	RedlockLeaseWatch *watch;	/* ... and its lease, watched (leasewatch.c) */
	int64		fence;			/* its fencing token (fence.c), 0 before one is taken */
} RedlockHeldLock;

/*
 * What this backend holds of a resource (redlock_locktable_kind), and the kind asked
 * for: an exclusive lock, a shared hold, or (> 0) a permit of a semaphore of that many
 * permits.
 */
#define REDLOCK_KIND_NONE	(-1)
#define REDLOCK_KIND_LOCK	0
#define REDLOCK_KIND_SHARED	(-2)

extern RedlockHeldLock *redlock_locktable_find(const char *resource);
extern RedlockHeldLock *redlock_locktable_create(const char *resource, int kind,
												 RedlockNodeSet *set,
												 RedlockQuotaRefusal *refusal);
extern char **redlock_locktable_slot_keys(const RedlockHeldLock *lock);
extern void redlock_locktable_take_slot(RedlockHeldLock *lock, char **slot_keys, int slot);
extern void redlock_locktable_acquired(RedlockHeldLock *lock, int ttl_ms,
									   const RedlockResult *result);
extern int	redlock_locktable_kind(const char *resource);
extern void redlock_locktable_rebase(RedlockHeldLock *lock, RedlockNodeSet *set);
extern void redlock_locktable_add_hold(RedlockHeldLock *lock, RedlockScope scope);
extern void redlock_locktable_register(RedlockHeldLock *lock);
extern char *redlock_locktable_make_key(const char *resource, int *prefix_len);
extern RedlockReleaseInfo *redlock_locktable_release(RedlockHeldLock **held, int n,
													 bool cleanup, bool wait_all,
													 RedlockReleaseReport report);
extern void redlock_locktable_lose(RedlockHeldLock *lock);
extern void redlock_locktable_drop(RedlockHeldLock *lock);
extern int	redlock_locktable_collect(RedlockHeldLock ***held,
									  void (*prepare) (RedlockHeldLock *lock, void *arg),
									  bool (*keep) (RedlockHeldLock *lock, void *arg),
									  void *arg);
extern void redlock_locktable_scan(HASH_SEQ_STATUS *scan);
extern long redlock_locktable_size(void);
extern int	redlock_locktable_registered(void);
extern int	redlock_locktable_held_on(RedlockNodeSet *set, char ***keys, char ***tokens);

#endif							/* REDLOCK_LOCKTABLE_H */
