/*-------------------------------------------------------------------------
 *
 * messages.c
 *	  Messages shared by the SQL functions and the transaction hooks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redlock.h"
#include "sql/messages.h"
#include "tally.h"

/*
 * redlock_errdetail_nodes
 *		errdetail for an ereport: the masters that did not answer, one per line, with
 *		what went wrong.  Returns 0, as errdetail does.
 */
int
redlock_errdetail_nodes(const RedlockResult *result)
{
	if (result->node_count == 0)
		return errdetail("No Redis master is configured in redlock.servers.");
	if (result->node_errors == NULL)
		return 0;
	return errdetail_internal("%s", result->node_errors);
}

/*
 * redlock_warn_release
 *		Raises a WARNING (01000) when a release found something wrong: the validity had
 *		run out before it (the lock may have protected nothing), a quorum could not be
 *		reached (the keys live until their TTL), or a majority no longer held the lock.
 *		Silent otherwise, and while error recovery is itself in trouble.
 */
void
redlock_warn_release(const RedlockReleaseInfo *info)
{
	const RedlockResult *result = &info->result;

	/*
	 * An attempt cut short (query cancel) was only being undone, and a loss the
	 * cancel's error already named needs no second word (a job runner may take a
	 * WARNING after the error for the run's last word): nothing to say.
	 */
	if (!info->acquired || info->loss_reported || in_error_recursion_trouble())
		return;

	if (info->lost_reason)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" had been lost before it was released", info->resource),
				 errdetail("The redlock background worker could not keep it alive: %s.",
						   info->lost_reason)));
	else if (info->reconfigured)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" was lost when the Redis masters, credentials or key prefix changed",
						info->resource),
				 errdetail("It was taken under an earlier redlock.servers, redlock.database, credentials "
						   "or redlock.key_prefix, so clients of the new ones may have held it meanwhile; "
						   "its keys were released on the masters it was taken on.")));
	else if (info->expired)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" had expired before it was released",
						info->resource),
				 errdetail("Its validity time ran out, so another client may have held the lock meanwhile."),
				 errhint("Use a longer TTL, or extend the lock with redlock_extend() while the work runs.")));
	else if (result->status == REDLOCK_UNAVAILABLE)
		ereport(WARNING,
				(errmsg("could not release lock on resource \"%s\": %d of %d Redis masters answered",
						info->resource, result->answered, result->node_count),
				 redlock_errdetail_nodes(result),
				 errhint("The keys on the other masters expire when the TTL runs out.")));
	else if (!redlock_quorum_reached(result->accepted, result->quorum) && result->failed > 0)
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" was no longer held by a majority of Redis masters when released",
						info->resource),
				 errdetail("%d of %d masters still held it; %d did not answer (any key there expires with its TTL):\n%s",
						   result->accepted, result->node_count, result->failed,
						   result->node_errors ? result->node_errors : "")));
	else if (!redlock_quorum_reached(result->accepted, result->quorum))
		ereport(WARNING,
				(errmsg("lock on resource \"%s\" was no longer held by a majority of Redis masters when released",
						info->resource),
				 errdetail("%d of %d masters still held it.",
						   result->accepted, result->node_count)));
}
