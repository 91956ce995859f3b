/*-------------------------------------------------------------------------
 *
 * health.c
 *	  One look at every master of a node set for redlock_check(): INFO, CONFIG GET
 *	  appendfsync and TIME in one round that waits for every master (each within
 *	  redlock.timeout), judged by the rule every round counts by (wire/masterinfo.c),
 *	  and each master's clock against the others' (spec §8: masters whose clocks jump
 *	  or run fast break the validity; the clock drift factor covers rates, not jumps).
 *
 * The look reads; it takes no lock, and its replies are facts about the masters, not
 * votes (RedlockCommand.facts_only).  What a row means for the user (the verdict and
 * hint) is the SQL layer's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/time.h>

#include "clock.h"
#include "protocol/health.h"
#include "wire/call.h"
#include "wire/nodeset.h"

/* The commands of the look, in order. */
enum
{
	HEALTH_INFO,
	HEALTH_FSYNC,
	HEALTH_TIME,
	HEALTH_COMMANDS
};

/* Microseconds since the epoch on this machine's wall clock. */
static double
health_wall_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return tv.tv_sec * 1e6 + tv.tv_usec;
}

/* Any reply is worth reading (RedlockCommand.accept): every master is waited for. */
static bool
health_accept_any(const RedlockNodeOutcome *outcome)
{
	return !redlock_outcome_failed(outcome);
}

/* qsort order of doubles. */
static int
health_cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/*
 * redlock_health_check
 *		Looks at every master of set once (the head of this file) and returns how many
 *		there are, with *masters (palloc'd, one per master, in set's order) saying what
 *		each is: reachable, round trip (ms), its INFO, its clock's offset (ms) from the
 *		median of the masters that answered TIME (each reading placed at the middle of
 *		its round trip on this machine's clock), and whether its replies count toward
 *		a quorum now, and why not.  Raises what an interrupted network wait raises
 *		(57014) and out-of-memory errors.
 */
int
redlock_health_check(RedlockNodeSet *set, RedlockMasterHealth **masters)
{
	int			count = redlock_nodeset_size(set);
	RedlockCommand commands[HEALTH_COMMANDS];
	RedlockNodeOutcome *outcomes = palloc(sizeof(RedlockNodeOutcome) * count * HEALTH_COMMANDS);
	RedlockMasterHealth *rows = palloc0(sizeof(RedlockMasterHealth) * Max(count, 1));
	static const char *const argv[HEALTH_COMMANDS][3] = {
		{"INFO"}, {"CONFIG", "GET", "appendfsync"}, {"TIME"}
	};
	static const int argc[HEALTH_COMMANDS] = {1, 3, 1};
	double		start_wall_us;
	double		start_ms;
	double	   *offsets = palloc(sizeof(double) * Max(count, 1));
	int			noffsets = 0;
	double		median = 0;
	double		now_ms;

	memset(commands, 0, sizeof(commands));
	for (int c = 0; c < HEALTH_COMMANDS; c++)
	{
		commands[c].need = 0;	/* every master */
		commands[c].accept = health_accept_any;
		commands[c].keep_text = true;
		commands[c].facts_only = true;
		commands[c].argc = argc[c];
		for (int k = 0; k < argc[c]; k++)
		{
			commands[c].argv[k] = argv[c][k];
			commands[c].argvlen[k] = strlen(argv[c][k]);
		}
	}
	start_wall_us = health_wall_us();
	start_ms = redlock_clock_ms();
	redlock_nodes_run(set, commands, HEALTH_COMMANDS, false, outcomes);
	now_ms = redlock_clock_ms();	/* every row judged at one moment */

	for (int i = 0; i < count; i++)
	{
		RedlockMasterHealth *row = &rows[i];
		RedlockNodeOutcome *info = &outcomes[HEALTH_INFO * count + i];
		RedlockNodeOutcome *fsync = &outcomes[HEALTH_FSYNC * count + i];
		RedlockNodeOutcome *time = &outcomes[HEALTH_TIME * count + i];
		double		read_ms = start_ms + info->elapsed_ms;

		strlcpy(row->name, redlock_node_name(set, i), sizeof(row->name));
		redlock_masterinfo_reset(&row->info);
		if (info->kind != REDLOCK_REPLY_STRING)
		{
			strlcpy(row->error, info->error[0] ? info->error : "not an INFO reply",
					sizeof(row->error));
			if (info->kind == REDLOCK_REPLY_ERROR)
				redlock_masterinfo_refused(&row->info, info->error);
		}
		else
		{
			row->reachable = true;
			row->rtt_ms = info->elapsed_ms;
			redlock_masterinfo_read(&row->info, info->text, read_ms);
			if (fsync->kind == REDLOCK_REPLY_STRING)
				redlock_masterinfo_read(&row->info, fsync->text, read_ms);
		}
		if (time->kind == REDLOCK_REPLY_STRING)
		{
			long long	sec = 0,
						usec = 0;

			if (sscanf(time->text, "%lld\n%lld", &sec, &usec) == 2)
			{
				/* The master read its clock about halfway through the round trip. */
				double		local_us = start_wall_us + (time->elapsed_ms / 2.0) * 1000.0;

				row->has_clock = true;
				row->clock_offset_ms = ((double) sec * 1e6 + usec - local_us) / 1000.0;
				offsets[noffsets++] = row->clock_offset_ms;
			}
		}
		if (row->reachable || row->info.refused[0])
		{
			row->quarantine_left_ms = redlock_masterinfo_quarantine_left_ms(&row->info, now_ms);
			row->left_out = redlock_masterinfo_left_out(&row->info, now_ms, row->why,
														sizeof(row->why));
		}
	}
	if (noffsets > 0)
	{
		qsort(offsets, noffsets, sizeof(double), health_cmp_double);
		median = offsets[noffsets / 2];
	}
	for (int i = 0; i < count; i++)
		if (rows[i].has_clock)
			rows[i].clock_offset_ms -= median;
	pfree(offsets);
	pfree(outcomes);
	*masters = rows;
	return count;
}
