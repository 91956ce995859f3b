/*-------------------------------------------------------------------------
 *
 * quorumshared.c
 *	  The Redlock protocol for shared holds (doc/shared.md): any number of shared
 *	  holders of a resource at once, none beside an exclusive holder; and the intent
 *	  a waiting exclusive acquire posts so that later shared holders queue behind it.
 *
 * Invariant: see quorumshared.h.  A shared hold is held when a quorum of masters added it
 * within its TTL (spec §3 for a shared hold), so an exclusive hold and a shared one
 * of a resource need two quorums that meet on a master, where the key holds either a
 * token or the marker, never both.  Shared holders never refuse one another.
 * Release and extension are the lock's scripts (quorum.c), which see the marker.
 *
 * The intent is a liveness device only: it keeps new shared holders out while an
 * exclusive acquire waits for the ones there, as PostgreSQL's lock manager queues a
 * waiting exclusive request ahead of later shared ones.  Whatever becomes of it, the
 * invariant alone decides who holds.
 *
 * One room with quorum.c and quorumset.c (doc/internals.md): the retry loop is the
 * set's, with this module's script.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"

#include "guc.h"
#include "protocol/quorum.h"
#include "protocol/quorumshared.h"
#include "redlock.h"
#include "scripts/scripts.h"
#include "tally.h"
#include "wire/call.h"
#include "wire/node.h"

/*
 * redlock_quorum_acquire_shared
 *		Acquires a shared hold of key on a quorum of set's masters (spec §3 for a shared
 *		hold; doc/shared.md), retrying while an exclusive holder holds it or an
 *		exclusive acquire waits for it (spec §4).  No holder record is written.
 *
 * key: the resource's Redis key.  token: a buffer of REDLOCK_TOKEN_LEN + 1 bytes,
 *		each attempt's fresh token written into it before the attempt goes out.
 * ttl_ms, wait_ms, waiter, behind, result: as for redlock_quorum_acquire_all.
 *
 * A failed attempt is undone on every master at once with the lock's release script,
 * which ends a shared hold where it finds the marker (spec §3 step 5).  Raises what
 * an interrupted wait raises (57014), and XX000 if the strong random source fails.
 */
void
redlock_quorum_acquire_shared(RedlockNodeSet *set, const char *key, char *token,
							  int ttl_ms, int wait_ms, struct RedlockWaiter *waiter,
							  bool behind, RedlockResult *result)
{
	char	   *tokens[1] = {token};

	redlock_quorumset_acquire_with(&redlock_script_shared_acquire, set, &key, 1, tokens, ttl_ms,
								   wait_ms, NULL, waiter, behind, result);
}

/*
 * redlock_quorumshared_seen
 *		Whether some master's GET of a key (gets: count outcomes) found the shared
 *		marker: shared holders hold it there.  A string reply carries a hash of its
 *		bytes (conn.c), compared here.  Raises nothing.
 */
bool
redlock_quorumshared_seen(const RedlockNodeOutcome *gets, int count)
{
	long long	mark = (long long)
		hash_bytes_extended((const unsigned char *) REDLOCK_SHARED_MARK,
							(int) strlen(REDLOCK_SHARED_MARK), 0);

	for (int i = 0; i < count; i++)
		if (gets[i].kind == REDLOCK_REPLY_STRING && gets[i].integer == mark)
			return true;
	return false;
}

/*
 * redlock_quorumshared_intent_command
 *		Fills command with a waiting exclusive acquire's intent on intent_key (the
 *		resource's key and REDLOCK_INTENT_KEY_SUFFIX): SET intent_key token PX ms, which
 *		nobody waits for.  Each attempt then puts its token and TTL in it
 *		(redlock_quorumshared_intent_attempt).  ttl_text: a buffer of 16 bytes, kept by
 *		the caller while the command is used.  doc/shared.md §3.  Raises nothing.
 */
void
redlock_quorumshared_intent_command(RedlockCommand *command, const char *intent_key,
									char *ttl_text)
{
	ttl_text[0] = '\0';
	memset(command, 0, sizeof(*command));
	command->need = -1;
	command->accept = redlock_tally_one;
	command->argc = 5;
	command->argv[0] = "SET";
	command->argv[1] = intent_key;
	command->argv[2] = "";
	command->argv[3] = "PX";
	command->argv[4] = ttl_text;
	for (int i = 0; i < command->argc; i++)
		command->argvlen[i] = strlen(command->argv[i]);
}

/*
 * redlock_quorumshared_intent_attempt
 *		Readies command (redlock_quorumshared_intent_command) for the attempt whose
 *		token is token (kept by the caller while the command is used) and whose
 *		masters may each take patience_ms (ms, redlock_retry_timeout_ms) to answer: the
 *		intent then names the attempt, whose undo of it (quorum.c) deletes only its own,
 *		and lives ttl_ms (ms) at most.  doc/shared.md §3.  Raises nothing.
 *
 * The intent needs to outlive only the gap until the acquire's next attempt renews it:
 * a retry delay with its jitter, an attempt's time (this one's patience, or a connect)
 * and a deadlock check's three rounds between them (protocol/deadlock.c), twice over
 * (the sleep after a slow attempt may last as long as the attempt, retry.c; the rest
 * is slack for a master that runs the renewal late); never more than the lock's TTL.
 * So a writer cut short (cancelled, killed) keeps new shared holders out that long at
 * most, and a writer whose masters are slow does not see its intent expire between
 * its attempts.
 */
void
redlock_quorumshared_intent_attempt(RedlockCommand *command, const char *token, int ttl_ms,
									int patience_ms)
{
	int			gap_ms = redlock_retry_delay_ms + redlock_retry_jitter_ms +
		patience_ms + redlock_connect_timeout_ms +
		(redlock_deadlock_timeout_ms > 0 ? 3 * redlock_timeout_ms : 0);
	char	   *ttl_text = unconstify(char *, command->argv[4]);

	command->argv[2] = token;
	command->argvlen[2] = strlen(token);
	snprintf(ttl_text, 16, "%d", Min(ttl_ms, 2 * gap_ms));
	command->argvlen[4] = strlen(ttl_text);
}
