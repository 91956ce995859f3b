/*
 * handoff.c: how long a lock takes to pass from a holder on one cluster to a waiter
 * blocked on another, measured by test/bench/wake.
 *
 *   handoff CONNINFO_A CONNINFO_B N RESOURCE HOLD_MIN_MS HOLD_MAX_MS SAMPLES_FILE
 *
 * One connection to each cluster.  A takes RESOURCE; then, N times:
 *
 *   1. the other connection (the waiter) sends
 *        SELECT bench_wait_acquire(RESOURCE)
 *      without waiting for its answer: redlock_acquire(RESOURCE, 30000, NULL), then
 *      clock_timestamp() in microseconds, once acquired;
 *   2. the driver lets the holder hold for a random HOLD_MIN_MS..HOLD_MAX_MS (so that
 *      a polling waiter is caught at a random point of its retry delay), and checks
 *      that the waiter is still waiting;
 *   3. the holder runs SELECT bench_timed_release(RESOURCE): clock_timestamp() in
 *      microseconds, taken just before redlock_release(RESOURCE);
 *   4. the driver reads the waiter's answer.  The handoff is the waiter's timestamp
 *      minus the holder's: from the start of the release to the acquire returning,
 *      both read from the host's clock (clock_timestamp()) in the two backends.
 *
 * The waiter now holds the lock and is the next round's holder, so the rounds go
 * A -> B, B -> A, ... alternately.  The driver also times each round from sending the
 * release to reading the waiter's answer on its own monotonic clock (drv_*: the same
 * interval plus the client round trips of the two statements), as a cross-check.
 *
 * Prints one line of key=value figures (milliseconds):
 *
 *   n=... p50_ms=... p90_ms=... p99_ms=... max_ms=... mean_ms=... min_ms=...
 *   drv_p50_ms=... drv_p99_ms=...
 *
 * (pN: nearest rank, the ceil(N/100 x n)-th smallest) and writes every handoff, one a
 * line ("sql_ms driver_ms direction"), to SAMPLES_FILE.  Exits non-zero on any error, or
 * when a waiter acquires while the lock is still held.
 *
 * Built by test/bench/wake: gcc -O2 -o handoff handoff.c -I$(pg_config --includedir) -lpq
 */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define MAX_ROUNDS 10000

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
die(const char *what, PGconn *conn)
{
	fprintf(stderr, "handoff: %s: %s\n", what, conn ? PQerrorMessage(conn) : "");
	exit(1);
}

/* Runs a query that returns one value; returns it (static buffer) or dies. */
static const char *
one_value(PGconn *conn, const char *sql)
{
	static char value[64];
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		fprintf(stderr, "handoff: %s: %s", sql, PQresultErrorMessage(res));
		exit(1);
	}
	snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

/* Reads the one-value answer of a query sent with PQsendQuery; dies on an error. */
static const char *
collect(PGconn *conn, const char *what)
{
	static char value[64];
	PGresult   *res;
	int			rows = 0;

	value[0] = '\0';
	while ((res = PQgetResult(conn)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "handoff: %s: %s", what, PQresultErrorMessage(res));
			exit(1);
		}
		if (PQntuples(res) == 1)
		{
			snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
			rows++;
		}
		PQclear(res);
	}
	if (rows != 1)
	{
		fprintf(stderr, "handoff: %s: no answer\n", what);
		exit(1);
	}
	return value;
}

/* Sleeps ms while watching conn: dies if its query finished meanwhile. */
static void
hold(PGconn *conn, double ms)
{
	double		end = now_ms() + ms;

	for (;;)
	{
		double		left = end - now_ms();
		struct pollfd pfd = {PQsocket(conn), POLLIN, 0};

		if (left <= 0)
			return;
		if (poll(&pfd, 1, (int) ceil(left)) > 0)
		{
			if (!PQconsumeInput(conn))
				die("waiter", conn);
			if (!PQisBusy(conn))
			{
				fprintf(stderr, "handoff: the waiter returned while the lock was held: %s\n",
						collect(conn, "waiter"));
				exit(1);
			}
		}
	}
}

static int
compare_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Nearest rank: the ceil(p x n)-th smallest of the sorted v. */
static double
rank(const double *v, int n, double p)
{
	int			k = (int) ceil(p * n);

	return v[(k < 1 ? 1 : k > n ? n : k) - 1];
}

int
main(int argc, char **argv)
{
	PGconn	   *conns[2];
	static double sql_ms[MAX_ROUNDS],
				drv_ms[MAX_ROUNDS];
	char		query[512];
	int			n;
	double		hold_min,
				hold_max,
				sum = 0;
	const char *resource;
	FILE	   *samples;

	if (argc != 8)
	{
		fprintf(stderr, "usage: handoff CONNINFO_A CONNINFO_B N RESOURCE HOLD_MIN_MS HOLD_MAX_MS SAMPLES_FILE\n");
		return 2;
	}
	n = atoi(argv[3]);
	resource = argv[4];
	hold_min = atof(argv[5]);
	hold_max = atof(argv[6]);
	if (n < 1 || n > MAX_ROUNDS || hold_min < 0 || hold_max < hold_min ||
		strspn(resource, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(resource))
	{
		fprintf(stderr, "handoff: bad arguments\n");
		return 2;
	}
	samples = fopen(argv[7], "w");
	if (samples == NULL)
	{
		perror(argv[7]);
		return 1;
	}
	srand48((long) getpid() ^ (long) now_ms());
	for (int i = 0; i < 2; i++)
	{
		conns[i] = PQconnectdb(argv[1 + i]);
		if (PQstatus(conns[i]) != CONNECTION_OK)
			die("connect", conns[i]);
	}

	snprintf(query, sizeof(query), "SELECT redlock_acquire('%s', 30000)", resource);
	if (strcmp(one_value(conns[0], query), "t") != 0)
	{
		fprintf(stderr, "handoff: A could not take %s\n", resource);
		return 1;
	}
	for (int r = 0; r < n; r++)
	{
		PGconn	   *holder = conns[r % 2];
		PGconn	   *waiter = conns[(r + 1) % 2];
		long long	t_release,
					t_acquired;
		double		d0;

		snprintf(query, sizeof(query), "SELECT bench_wait_acquire('%s')", resource);
		if (!PQsendQuery(waiter, query))
			die("send the waiter's acquire", waiter);
		hold(waiter, hold_min + drand48() * (hold_max - hold_min));
		d0 = now_ms();
		snprintf(query, sizeof(query), "SELECT bench_timed_release('%s')", resource);
		t_release = atoll(one_value(holder, query));
		t_acquired = atoll(collect(waiter, "the waiter's acquire"));
		drv_ms[r] = now_ms() - d0;
		sql_ms[r] = (t_acquired - t_release) / 1000.0;
		sum += sql_ms[r];
		fprintf(samples, "%.3f %.3f %s\n", sql_ms[r], drv_ms[r], r % 2 ? "B->A" : "A->B");
	}
	snprintf(query, sizeof(query), "SELECT redlock_release('%s')", resource);
	(void) one_value(conns[n % 2], query);
	fclose(samples);
	for (int i = 0; i < 2; i++)
		PQfinish(conns[i]);

	qsort(sql_ms, n, sizeof(double), compare_double);
	qsort(drv_ms, n, sizeof(double), compare_double);
	printf("n=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f mean_ms=%.3f min_ms=%.3f "
		   "drv_p50_ms=%.3f drv_p99_ms=%.3f\n",
		   n, rank(sql_ms, n, 0.5), rank(sql_ms, n, 0.9), rank(sql_ms, n, 0.99),
		   sql_ms[n - 1], sum / n, sql_ms[0], rank(drv_ms, n, 0.5), rank(drv_ms, n, 0.99));
	return 0;
}
