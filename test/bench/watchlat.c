/*
 * watchlat.c: how long after a lock changes a watching session hears it (redlock_watch).
 *
 *   watchlat CONNINFO ROUNDS
 *
 * Two sessions on CONNINFO's cluster: the watcher runs redlock_watch('bench-watch') and
 * then only waits on its socket for notifications; the actor, ROUNDS times, after a random
 * pause of 0-25 ms (so that changes fall anywhere in the notifier's interval), acquires
 * the resource (10 s TTL) and, after another pause, releases it; every tenth round it
 * instead acquires for 100 ms and lets the lock expire.  Latency of each event:
 *
 *   acquired   from the actor's redlock_acquire returning (a quorum held it by then)
 *   released   from the actor's redlock_release returning
 *   expired    from the moment the actor sent the acquire + 100 ms (the keys run out no
 *              earlier than that on every master)
 *
 * to the watcher's receipt of the notification (its socket readable, PQnotifies).
 * Prints one line of key=value figures (milliseconds):
 *
 *   rounds=... acquired_n=... acquired_p50_ms=... acquired_p99_ms=... released_...
 *   expired_... missed=...
 *
 * missed counts events not heard within 2 s.  Exits non-zero when a session fails.
 *
 * Built by test/bench/watch: gcc -O2 -o watchlat watchlat.c -lpq
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define MAX_SAMPLES 100000

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
run(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "watchlat: %s: %s", sql, PQerrorMessage(conn));
		exit(1);
	}
	PQclear(res);
}

/* Waits up to 2 s for a notification whose payload names EVENT; its receipt time, or -1. */
static double
wait_event(PGconn *w, const char *event)
{
	char		want[64];
	double		deadline = now_ms() + 2000;

	snprintf(want, sizeof(want), "\"event\": \"%s\"", event);
	for (;;)
	{
		PGnotify   *n;
		struct pollfd pfd;
		double		left;

		if (!PQconsumeInput(w))
		{
			fprintf(stderr, "watchlat: watcher: %s", PQerrorMessage(w));
			exit(1);
		}
		while ((n = PQnotifies(w)) != NULL)
		{
			int			match = strstr(n->extra, want) != NULL &&
				strstr(n->extra, "\"bench-watch\"") != NULL;

			PQfreemem(n);
			if (match)
				return now_ms();
		}
		left = deadline - now_ms();
		if (left <= 0)
			return -1;
		pfd.fd = PQsocket(w);
		pfd.events = POLLIN;
		(void) poll(&pfd, 1, (int) left + 1);
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static void
print_figures(const char *name, double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	printf(" %s_n=%d %s_p50_ms=%.1f %s_p99_ms=%.1f %s_max_ms=%.1f", name, n, name,
		   n ? v[n / 2] : 0, name, n ? v[(int) (n * 0.99)] : 0, name, n ? v[n - 1] : 0);
}

static void
pause_random(void)
{
	usleep((useconds_t) (rand() % 25000));
}

int
main(int argc, char **argv)
{
	PGconn	   *w;
	PGconn	   *a;
	int			rounds;
	static double acq[MAX_SAMPLES], rel[MAX_SAMPLES], exp_[MAX_SAMPLES];
	int			nacq = 0,
				nrel = 0,
				nexp = 0,
				missed = 0;

	if (argc != 3)
	{
		fprintf(stderr, "usage: watchlat CONNINFO ROUNDS\n");
		return 2;
	}
	rounds = atoi(argv[2]);
	if (rounds < 1 || rounds > MAX_SAMPLES)
		rounds = 100;
	srand((unsigned) getpid());
	w = PQconnectdb(argv[1]);
	a = PQconnectdb(argv[1]);
	if (PQstatus(w) != CONNECTION_OK || PQstatus(a) != CONNECTION_OK)
	{
		fprintf(stderr, "watchlat: cannot connect: %s%s", PQerrorMessage(w), PQerrorMessage(a));
		return 1;
	}
	run(a, "SET client_min_messages = error");
	run(w, "SELECT redlock_watch('bench-watch')");
	usleep(300000);				/* the notifier's first look, its baseline */

	for (int r = 0; r < rounds; r++)
	{
		double		t0,
					t1,
					heard;

		pause_random();
		if (r % 10 == 9)
		{
			t0 = now_ms();
			run(a, "SELECT redlock_acquire('bench-watch', 100)");
			if (wait_event(w, "acquired") < 0)
				missed++;
			heard = wait_event(w, "expired");
			if (heard < 0)
				missed++;
			else
				exp_[nexp++] = heard - (t0 + 100);
			run(a, "SELECT redlock_release_all()");
			continue;
		}
		run(a, "SELECT redlock_acquire('bench-watch', 10000)");
		t1 = now_ms();
		heard = wait_event(w, "acquired");
		if (heard < 0)
			missed++;
		else
			acq[nacq++] = heard - t1;
		pause_random();
		run(a, "SELECT redlock_release('bench-watch')");
		t1 = now_ms();
		heard = wait_event(w, "released");
		if (heard < 0)
			missed++;
		else
			rel[nrel++] = heard - t1;
	}
	printf("rounds=%d", rounds);
	print_figures("acquired", acq, nacq);
	print_figures("released", rel, nrel);
	print_figures("expired", exp_, nexp);
	printf(" missed=%d\n", missed);
	PQfinish(a);
	PQfinish(w);
	return 0;
}
