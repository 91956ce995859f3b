/*-------------------------------------------------------------------------
 *
 * lease.h
 *	  The loss protocol of an auto-extended lock (lease.c): its life after acquire.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_LEASE_H
#define REDLOCK_LEASE_H

#include "redlock.h"

/*
 * Bytes kept of why a lease was lost: room for the masters that did not answer,
 * named by host:port, after the counts.
 */
#define REDLOCK_LOST_REASON_LEN		384

typedef enum RedlockLeaseState
{
	LEASE_PENDING,				/* the owner's acquire is under way */
	LEASE_HELD,					/* the worker renews it */
	LEASE_LOST					/* given up: never held again */
} RedlockLeaseState;

/*
 * An auto-extended lock's lease, kept in its registry entry under the registry's
 * lock and changed only by the lease functions below.
 */
typedef struct RedlockLease
{
	RedlockLeaseState state;
	bool		cancel_on_loss; /* the owner asked to be stopped when it is lost */
	bool		retrying;		/* its last renewal got no quorum's answer */
	int			ttl_ms;			/* TTL last sent */
	double		valid_until_ms; /* redlock_clock_ms() time; the loss's time once lost */
	double		next_renewal_ms;
	double		gap_end_ms;		/* when a renewal last restored a validity that had
								 * run out (a stalled worker); 0: never */
	TimestampTz last_renewal;	/* 0 before the first */
	TimestampTz lost_at;
	int64		renewals;
	char		lost_reason[REDLOCK_LOST_REASON_LEN];
} RedlockLease;

/* What the worker should do with a lease now (redlock_lease_due). */
typedef enum RedlockLeaseDue
{
	LEASE_NOT_DUE,
	LEASE_DUE,
	LEASE_RAN_OUT				/* its validity ran out before it could be renewed */
} RedlockLeaseDue;

/* The worker's answer to an owner's request for a new TTL. */
typedef struct RedlockRenewalAnswer
{
	RedlockStatus status;
	int			node_count;
	int			quorum;
	int			accepted;
	int			answered;
	int			failed;
} RedlockRenewalAnswer;

/* The worker's decision on one renewal. */
typedef struct RedlockRenewalOutcome
{
	RedlockRenewalAnswer answer;
	double		valid_until_ms; /* when renewed */
	double		next_renewal_ms;	/* when not lost */
	char		lost_reason[REDLOCK_LOST_REASON_LEN];	/* "" unless lost */
} RedlockRenewalOutcome;

/* The worker's side, under the registry's lock. */
extern void redlock_lease_init(RedlockLease *lease, bool cancel_on_loss);
extern void redlock_lease_hold(RedlockLease *lease, int ttl_ms, double valid_until_ms);
extern RedlockLeaseDue redlock_lease_due(const RedlockLease *lease, double now_ms,
										 bool requested);
extern void redlock_lease_cut(RedlockLease *lease, int ttl_ms);
extern void redlock_lease_decide(int ttl_ms, double valid_until_ms, const RedlockResult *result,
								 double now_ms, RedlockRenewalOutcome *outcome);
extern void redlock_lease_apply(RedlockLease *lease, const RedlockRenewalOutcome *outcome,
								double now_ms);
extern void redlock_lease_lose(RedlockLease *lease, const char *reason, double now_ms);

#endif							/* REDLOCK_LEASE_H */
