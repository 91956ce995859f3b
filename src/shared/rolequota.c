/*-------------------------------------------------------------------------
 *
 * rolequota.c
 *	  Role quotas: what each role's sessions have on the Redis masters from this
 *	  cluster, counted against redlock.max_locks_per_role, so that one role cannot
 *	  fill the masters (with maxmemory-policy noeviction, every other role's acquire
 *	  would then fail for as long as its keys live).
 *
 * Counted per role, the session user of the backend that took it (not the current
 * user: SET ROLE and SECURITY DEFINER functions do not move a session's count to
 * another role, and the limit in force is the one its login's ALTER ROLE ... SET gave):
 *
 * - locks: each entry of a backend's lock table, of every kind (an exclusive lock at
 *	 either scope, a shared hold, a permit, each resource of a set), one each, from
 *	 before its acquire sends anything until the entry is dropped (released, undone,
 *	 lost and forgotten, aborted, at backend exit).  lock/life.c charges and refunds
 *	 them, at the start and the end of a lock's life; nothing else does.
 * - claims (redlock_claim): never released, each counted until its key's TTL runs
 *	 out on the masters, by the monotonic clock (clock.c: one clock for every process
 *	 of the machine).  lock/lockops.c records them.
 *
 * A charge is made before the request goes out, under the table's lock, so that
 * concurrent acquires of one role cannot together pass its limit; it fails when the
 * role has redlock.max_locks_per_role locks and claims counted already (the setting as
 * the charging backend sees it).  The caller then sends nothing.
 *
 * The table: a role -> counts hash table, in shared memory under one LWLock when the
 * library is preloaded, of at most MaxBackends + ROLEQUOTA_CLAIM_ROLES roles (those
 * with nothing counted leave it; when it is full, roles whose claims all ran out are
 * swept out first, and a role still finding no room is refused).  Without
 * shared_preload_libraries there is no shared memory: each backend counts its own, in
 * a table of its own, and the bound is then per backend.
 *
 * A role's claims are kept as ROLEQUOTA_CLAIM_BUCKETS buckets (a count, and a time
 * by which all of them have expired), swept when the role is next charged or claims
 * once the earliest is due: O(buckets), never a scan of other roles.  A claim that
 * finds every bucket taken merges the two closest times into one, keeping the later:
 * claims may then be counted a little longer than they live, never shorter.
 *
 * THE INVARIANT: each claim whose key may still be on the masters is counted by one
 * unit of a bucket whose time is at least its key's expiry; each lock table entry
 * charged and not yet dropped is counted once in its role's locks.  So a role's count
 * is never below what it has on the masters from here.  (The exception: a claim
 * interrupted during its round, by a cancel or the backend's exit, stays counted until
 * its start + TTL + drift, which its key may outlive by as long as the round had run.)
 *
 * The cost on the plain acquire and release: one uncontended LWLock and one hash
 * lookup each; the clock is read only for a role with claims counted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "clock.h"
#include "guc.h"
#include "redlock.h"
#include "shared/rolequota.h"
#include "shared/shmem.h"

/* Roles beyond one per backend that the shared table can count (only claims live). */
#define ROLEQUOTA_CLAIM_ROLES	1000

/* Distinct expiry times kept per role; more are merged (the header). */
#define ROLEQUOTA_CLAIM_BUCKETS	8

/* One role's counts.  A bucket with count 0 is free (its time means nothing). */
typedef struct QuotaRole
{
	Oid			role;			/* hash key: the session user charged */
	int			locks;			/* lock table entries charged and not yet dropped */
	int			claims;			/* the sum of claim_count */
	double		next_expiry_ms; /* the earliest time of a bucket in use (claims > 0) */
	int			claim_count[ROLEQUOTA_CLAIM_BUCKETS];
	double		claim_until_ms[ROLEQUOTA_CLAIM_BUCKETS];	/* redlock_clock_ms() */
} QuotaRole;

/* The shared area: the table's lock and size (the table itself is ShmemInitHash's). */
typedef struct QuotaShared
{
	LWLock	   *lock;
	int			max_roles;
} QuotaShared;

static QuotaShared *quota_shared = NULL;

/* The role table: in shared memory when quota_shared is set, else this backend's. */
static HTAB *quota_roles = NULL;

static int
quota_max_roles(void)
{
	return MaxBackends + ROLEQUOTA_CLAIM_ROLES;
}

static Size
quota_shmem_size(void)
{
	return sizeof(QuotaShared);
}

static Size
quota_table_size(void)
{
	return hash_estimate_size(quota_max_roles(), sizeof(QuotaRole));
}

static void
quota_shmem_attach(void *area, LWLock *lock, bool found)
{
	HASHCTL		ctl;

	quota_shared = area;
	if (!found)
	{
		quota_shared->lock = lock;
		quota_shared->max_roles = quota_max_roles();
	}
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(QuotaRole);
	quota_roles = ShmemInitHash("redlock role quota table", quota_shared->max_roles,
								quota_shared->max_roles, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

static const RedlockShmemArea quota_area = {
	.name = "redlock role quotas",
	.size = quota_shmem_size,
	.with_lock = true,
	.also_size = quota_table_size,
	.attach = quota_shmem_attach
};

/*
 * RedlockRoleQuotaInit
 *		Asks for the role table's shared memory and LWLock when the library is being
 *		preloaded (redlock_shmem_register).  Called from _PG_init.  Raises nothing.
 */
void
RedlockRoleQuotaInit(void)
{
	redlock_shmem_register(&quota_area);
}

/* Makes this backend's own table when there is no shared one.  Raises OOM only. */
static void
quota_ready(void)
{
	HASHCTL		ctl;

	if (quota_roles != NULL)
		return;
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(QuotaRole);
	ctl.hcxt = TopMemoryContext;
	quota_roles = hash_create("redlock role quotas", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static void
quota_lock(void)
{
	if (quota_shared)
		LWLockAcquire(quota_shared->lock, LW_EXCLUSIVE);
}

static void
quota_unlock(void)
{
	if (quota_shared)
		LWLockRelease(quota_shared->lock);
}

/* The earliest time of r's buckets in use (r->claims > 0). */
static double
quota_next_expiry(const QuotaRole *r)
{
	double		next = HUGE_VAL;

	for (int b = 0; b < ROLEQUOTA_CLAIM_BUCKETS; b++)
		if (r->claim_count[b] > 0)
			next = Min(next, r->claim_until_ms[b]);
	return next;
}

/* Forgets r's claims whose time has come (now_ms): their keys are gone. */
static void
quota_sweep(QuotaRole *r, double now_ms)
{
	if (r->claims == 0 || now_ms < r->next_expiry_ms)
		return;
	for (int b = 0; b < ROLEQUOTA_CLAIM_BUCKETS; b++)
	{
		if (r->claim_count[b] > 0 && r->claim_until_ms[b] <= now_ms)
		{
			r->claims -= r->claim_count[b];
			r->claim_count[b] = 0;
		}
	}
	r->next_expiry_ms = quota_next_expiry(r);
}

/* Takes r out of the table when nothing of it is counted any more. */
static void
quota_forget_if_empty(QuotaRole *r)
{
	if (r->locks == 0 && r->claims == 0)
		hash_search(quota_roles, &r->role, HASH_REMOVE, NULL);
}

/* Sweeps every role, taking out those with nothing counted: for a full table. */
static void
quota_sweep_all(double now_ms)
{
	HASH_SEQ_STATUS scan;
	QuotaRole  *r;

	hash_seq_init(&scan, quota_roles);
	while ((r = hash_seq_search(&scan)) != NULL)
	{
		quota_sweep(r, now_ms);
		quota_forget_if_empty(r);
	}
}

/*
 * role's counts, or NULL.  create: enters it (with nothing counted) if absent; NULL
 * then only when the shared table is full even after a sweep.  Lock held.
 */
static QuotaRole *
quota_find(Oid role, bool create)
{
	HASHACTION	action = !create ? HASH_FIND : quota_shared ? HASH_ENTER_NULL : HASH_ENTER;
	bool		found;
	QuotaRole  *r = hash_search(quota_roles, &role, action, &found);

	if (r == NULL && create)
	{
		quota_sweep_all(redlock_clock_ms());
		r = hash_search(quota_roles, &role, action, &found);
	}
	if (r != NULL && !found)
	{
		memset(r, 0, sizeof(*r));
		r->role = role;
	}
	return r;
}

/*
 * Counts one claim more for r, until until_ms: in a free bucket (or one of the same
 * time), else merged with the closest time, the two keeping the later one.
 */
static void
quota_add_claim(QuotaRole *r, double until_ms)
{
	double		times[ROLEQUOTA_CLAIM_BUCKETS + 1];
	double		best_gap = HUGE_VAL;
	int			into = -1;
	int			from = -1;

	for (int b = 0; b < ROLEQUOTA_CLAIM_BUCKETS && into < 0; b++)
		if (r->claim_count[b] == 0 || r->claim_until_ms[b] == until_ms)
			into = b;
	if (into >= 0)
	{
		if (r->claim_count[into] == 0)
			r->claim_until_ms[into] = until_ms;
		r->claim_count[into]++;
	}
	else
	{
		/* Every bucket taken: merge the closest two of them and the new claim. */
		memcpy(times, r->claim_until_ms, sizeof(r->claim_until_ms));
		times[ROLEQUOTA_CLAIM_BUCKETS] = until_ms;
		for (int i = 0; i < ROLEQUOTA_CLAIM_BUCKETS; i++)
			for (int j = i + 1; j <= ROLEQUOTA_CLAIM_BUCKETS; j++)
				if (fabs(times[i] - times[j]) < best_gap)
				{
					best_gap = fabs(times[i] - times[j]);
					into = i;
					from = j;
				}
		if (from == ROLEQUOTA_CLAIM_BUCKETS)
		{
			/* The new claim joins bucket into. */
			r->claim_count[into]++;
			r->claim_until_ms[into] = Max(r->claim_until_ms[into], until_ms);
		}
		else
		{
			/* Bucket into joins bucket from, and the new claim takes its place. */
			r->claim_count[from] += r->claim_count[into];
			r->claim_until_ms[from] = Max(r->claim_until_ms[from], r->claim_until_ms[into]);
			r->claim_count[into] = 1;
			r->claim_until_ms[into] = until_ms;
		}
	}
	r->claims++;
	r->next_expiry_ms = quota_next_expiry(r);
}

/*
 * Fills refusal for role, whose counts are r (NULL: no room for it in the table), and
 * takes r out if it was entered only to be refused.  Lock held.
 */
static void
quota_refuse(RedlockQuotaRefusal *refusal, Oid role, QuotaRole *r)
{
	memset(refusal, 0, sizeof(*refusal));
	refusal->refused = true;
	refusal->role = role;
	refusal->asked = 1;
	refusal->roles_full = (r == NULL);
	if (r == NULL)
	{
		refusal->limit = quota_shared ? quota_shared->max_roles : 0;
		refusal->live = refusal->limit;
		return;
	}
	refusal->live = r->locks + r->claims;
	refusal->limit = redlock_max_locks_per_role;
	quota_forget_if_empty(r);
}

/*
 * redlock_rolequota_charge
 *		Counts one lock table entry more for role (the session user), before anything
 *		of its acquire is sent; undone by redlock_rolequota_refund.  For lock/life.c
 *		only, which charges an entry when its life starts and refunds it when it ends.
 *
 * Returns false, counting nothing and with *refusal filled, when role has
 * redlock.max_locks_per_role locks and claims counted already, or the shared table
 * has no room for one more role.  Raises only out-of-memory errors (this backend's own
 * table, made on first use without shared memory).
 */
bool
redlock_rolequota_charge(Oid role, RedlockQuotaRefusal *refusal)
{
	QuotaRole  *r;
	bool		charged;

	quota_ready();
	quota_lock();
	r = quota_find(role, true);
	if (r != NULL && r->claims > 0)
		quota_sweep(r, redlock_clock_ms());
	charged = r != NULL && r->locks + r->claims < redlock_max_locks_per_role;
	if (charged)
		r->locks++;
	else
		quota_refuse(refusal, role, r);
	quota_unlock();
	return charged;
}

/*
 * redlock_rolequota_refund
 *		Counts one lock table entry less for role, charged by redlock_rolequota_charge:
 *		the entry was dropped.  For cleanup paths too: raises nothing.
 */
void
redlock_rolequota_refund(Oid role)
{
	QuotaRole  *r;

	if (quota_roles == NULL)
		return;
	quota_lock();
	r = quota_find(role, false);
	Assert(r != NULL && r->locks > 0);
	if (r != NULL && r->locks > 0)
	{
		r->locks--;
		if (r->claims > 0)
			quota_sweep(r, redlock_clock_ms());
		quota_forget_if_empty(r);
	}
	quota_unlock();
}

/*
 * redlock_rolequota_claim
 *		Counts one claim more for role (the session user) until until_ms (a
 *		redlock_clock_ms() time no earlier than its key can expire if it is set by a
 *		request sent from now: now + TTL + drift), before anything of it is sent.  Pair
 *		with redlock_rolequota_claim_end once its round is over.  For lock/lockops.c's
 *		claim.
 *
 * Returns false, counting nothing and with *refusal filled, as
 * redlock_rolequota_charge does.  Raises only out-of-memory errors (as there).
 */
bool
redlock_rolequota_claim(Oid role, double until_ms, RedlockQuotaRefusal *refusal)
{
	QuotaRole  *r;
	bool		counted;

	quota_ready();
	quota_lock();
	r = quota_find(role, true);
	if (r != NULL)
		quota_sweep(r, redlock_clock_ms());
	counted = r != NULL && r->locks + r->claims < redlock_max_locks_per_role;
	if (counted)
		quota_add_claim(r, until_ms);
	else
		quota_refuse(refusal, role, r);
	quota_unlock();
	return counted;
}

/*
 * redlock_rolequota_claim_end
 *		Settles a claim that redlock_rolequota_claim counted until until_ms (ms, as
 *		given there), once its round is over: held_until_ms > 0, the claim was taken
 *		and is counted until then instead (a redlock_clock_ms() time: the end of its
 *		round + TTL + drift); 0, it was not (its attempt was undone on the masters) and
 *		is no longer counted.  Raises nothing.
 *
 * The unit taken back is the one of the earliest bucket at or after until_ms: the
 * claim's own, or one whose claims all expire no earlier than a claim of that bucket
 * does, so every other claim stays counted long enough (the header's invariant).
 */
void
redlock_rolequota_claim_end(Oid role, double until_ms, double held_until_ms)
{
	QuotaRole  *r;
	int			own = -1;

	if (quota_roles == NULL)
		return;
	quota_lock();
	r = quota_find(role, held_until_ms > 0);
	if (r != NULL)
	{
		for (int b = 0; b < ROLEQUOTA_CLAIM_BUCKETS; b++)
			if (r->claim_count[b] > 0 && r->claim_until_ms[b] >= until_ms &&
				(own < 0 || r->claim_until_ms[b] < r->claim_until_ms[own]))
				own = b;
		if (own >= 0)
		{
			r->claim_count[own]--;
			r->claims--;
		}
		if (held_until_ms > 0)
			quota_add_claim(r, held_until_ms);
		r->next_expiry_ms = quota_next_expiry(r);
		quota_forget_if_empty(r);
	}
	quota_unlock();
}
