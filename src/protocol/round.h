/*-------------------------------------------------------------------------
 *
 * round.h
 *	  What every quorum round shares (round.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_ROUND_H
#define REDLOCK_ROUND_H

#include "lib/stringinfo.h"

#include "redlock.h"


extern void redlock_new_token(char *token);
extern void redlock_round_result_init(RedlockNodeSet *set, RedlockResult *result);
extern void redlock_round_script_command(RedlockCommand *command, RedlockScript *script,
										 const char *key, const char *token,
										 const char *arg, int need);
extern void redlock_round_look_commands(RedlockCommand *two, const char *key, int quorum);
extern void redlock_round_record_value(StringInfo buf, const char *token,
									   const char *holder);
extern void redlock_round_release_command(RedlockCommand *command, bool quiet,
										  const char *key, const char *token,
										  const char *announce, int need);
extern bool redlock_round_won(const RedlockResult *result, int accepted, int ttl_ms,
							  double drift_ms);
extern void redlock_round_count_attempt(RedlockResult *result, bool won, double start_ms,
										int ttl_ms, double drift_ms);

#endif							/* REDLOCK_ROUND_H */
