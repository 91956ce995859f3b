/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background worker that keeps auto-extended locks alive.
 *
 * One per cluster, registered when the library is preloaded, restarted by the
 * postmaster when it exits with an error.  It reads what to renew from the registry
 * (registry.c) and renews through the protocol code the backends use (quorum.c), with
 * its own connections: one per master per configuration, however many locks and
 * backends.  All the locks due in one wake-up go out in one pipelined round per
 * configuration.
 *
 * When to renew, what a renewal's answer means and when a lock is lost are the
 * lease's rules (lease.c); the worker applies them and reports what it lost only
 * through the lease.  It never re-creates a key: only the check-and-PEXPIRE script runs.
 *
 * Between rounds it sleeps in subscription.c, which also keeps its subscriptions to
 * release announcements and wakes the backends waiting for an announced key.
 *
 * The worker connects to no database; it shows in pg_stat_activity as
 * "redlock auto-extend", waiting on wait event type Extension.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/wait_event.h"

#include "clock.h"
#include "protocol/quorum.h"
#include "redlock.h"
#include "shared/lease.h"
#include "shared/lockconfig.h"
#include "shared/registry.h"
#include "wire/nodeset.h"
#include "worker/configset.h"
#include "worker/subscription.h"
#include "worker/worker.h"

PGDLLEXPORT void redlock_worker_main(Datum main_arg);

/*
 * RedlockWorkerInit
 *		Registers the worker when the library is being preloaded.  Called from
 *		_PG_init.  Raises nothing.
 */
void
RedlockWorkerInit(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress)
		return;
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "redlock", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "redlock_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "redlock auto-extend worker", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "redlock auto-extend", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/*
 * One round: renews every lock that is due, one pipelined request per configuration.
 * Returns when the next lock falls due (a redlock_clock_ms() time); *changes is set to
 * the registry's change count when the round began.
 */
static double
worker_renew_round(uint64 *changes)
{
	double		start_ms = redlock_clock_ms();
	double		next_due_ms;
	RedlockRenewal *renewals;
	RedlockRenewalOutcome *outcomes;
	RedlockKeyToken *batch;
	int		   *ttls;
	int		   *index;
	RedlockResult *results;
	bool	   *done;
	int			n = redlock_registry_due(start_ms, &renewals, &next_due_ms, changes);

	if (n == 0)
		return next_due_ms;

	outcomes = palloc0(sizeof(RedlockRenewalOutcome) * n);
	batch = palloc(sizeof(RedlockKeyToken) * n);
	ttls = palloc(sizeof(int) * n);
	index = palloc(sizeof(int) * n);
	results = palloc0(sizeof(RedlockResult) * n);
	done = palloc0(sizeof(bool) * n);

	for (int first = 0; first < n; first++)
	{
		RedlockNodeSet *set;
		int			m = 0;
		double		now_ms;

		if (done[first])
			continue;
		for (int k = first; k < n; k++)
		{
			if (done[k] || renewals[k].config != renewals[first].config)
				continue;
			batch[m].key = renewals[k].key;
			batch[m].token = renewals[k].token;
			batch[m].announce = NULL;
			ttls[m] = renewals[k].ttl_ms;
			index[m++] = k;
			done[k] = true;
		}
		set = redlock_configset_for_slot(renewals[first].config, renewals[first].config_generation);
		if (set == NULL)
		{
			for (int j = 0; j < m; j++)
				snprintf(outcomes[index[j]].lost_reason, sizeof(outcomes[index[j]].lost_reason),
						 "the configuration it was taken under could not be read");
			continue;
		}
		redlock_quorum_extend_many(set, batch, ttls, m, true, 0, results);
		now_ms = redlock_clock_ms();
		for (int j = 0; j < m; j++)
		{
			int			k = index[j];

			redlock_lease_decide(renewals[k].ttl_ms, renewals[k].valid_until_ms, &results[j],
								 now_ms, &outcomes[k]);
			if (outcomes[k].lost_reason[0] == '\0')
				next_due_ms = Min(next_due_ms, outcomes[k].next_renewal_ms);
		}
	}
	redlock_registry_renewed(renewals, outcomes, n);
	redlock_registry_round_done(redlock_clock_ms() - start_ms, n);
	return next_due_ms;
}

/*
 * At exit, also after an ERROR (which ends a worker): let go of any LWLock first, since
 * this callback runs before PostgreSQL's own cleanup and an error raised while the
 * worker held the registry lock (out of memory) would otherwise deadlock here.
 */
static void
worker_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	LWLockReleaseAll();
	redlock_registry_worker_detach();
	redlock_subscriptions_close();
	redlock_nodes_disconnect();
}

/*
 * redlock_worker_main
 *		The worker's entry point (main_arg unused).  Renews due locks, then sleeps
 *		until the next one falls due or an owner sets its latch, relaying release
 *		announcements to waiting backends meanwhile; exits on SIGTERM or
 *		postmaster death.  An ERROR ends the process, and the postmaster starts it
 *		again after a second.
 */
void
redlock_worker_main(Datum main_arg pg_attribute_unused())
{
	MemoryContext round_context;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	/* Computing the scripts' SHA-1 needs a resource owner. */
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "redlock auto-extend worker");
	round_context = AllocSetContextCreate(TopMemoryContext, "redlock renewal round",
										  ALLOCSET_DEFAULT_SIZES);
	redlock_registry_worker_attach();
	before_shmem_exit(worker_exit, (Datum) 0);
	ereport(LOG, (errmsg("redlock auto-extend worker started")));

	for (;;)
	{
		double		next_due_ms;
		double		wait_ms;
		uint64		changes;
		MemoryContext oldcontext;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		oldcontext = MemoryContextSwitchTo(round_context);
		next_due_ms = worker_renew_round(&changes);
		MemoryContextSwitchTo(oldcontext);
		MemoryContextReset(round_context);

		/* A lock added or a request made during the round: look again at once. */
		wait_ms = next_due_ms - redlock_clock_ms();
		if (wait_ms < 1 || !redlock_registry_may_sleep(changes, next_due_ms))
			continue;
		redlock_subscriptions_wait(wait_ms);
	}
}
