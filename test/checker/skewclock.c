/*
 * skewclock.c: an LD_PRELOAD shim that sets a process's wall clock off by a fixed amount,
 * for the tests of fencing tokens under skewed clocks (test/t/007_fencing.pl,
 * test/checker scenarios fence-skew-*).
 *
 *   cc -shared -fPIC -O2 -o skewclock.so skewclock.c -ldl
 *   RL_SKEW_MS=-3000 LD_PRELOAD=$PWD/skewclock.so postgres ...
 *
 * RL_SKEW_MS (signed milliseconds) is added to gettimeofday(), time() and
 * clock_gettime() of CLOCK_REALTIME and CLOCK_REALTIME_COARSE; the monotonic clocks are
 * left alone (so are durations: only the wall clock's reading moves).  With
 * RL_SKEW_PIDS=odd only processes with an odd process id are skewed (the parity is
 * looked up at each call, so the forked backends of one PostgreSQL cluster split into
 * skewed and not); otherwise every process that loads the shim is.  The environment is
 * read once per process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long skew_us;
static int	odd_only;
static int	loaded;
static pid_t loaded_pid;

static int	(*real_clock_gettime) (clockid_t, struct timespec *);
static int	(*real_gettimeofday) (struct timeval *, void *);

/* Reads the environment and the real functions once per process. */
static void
load(void)
{
	const char *ms;
	const char *pids;

	if (loaded && loaded_pid == getpid())
		return;
	ms = getenv("RL_SKEW_MS");
	pids = getenv("RL_SKEW_PIDS");
	skew_us = ms ? atoll(ms) * 1000 : 0;
	odd_only = pids && strcmp(pids, "odd") == 0;
	real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
	real_gettimeofday = dlsym(RTLD_NEXT, "gettimeofday");
	loaded_pid = getpid();
	loaded = 1;
}

/* The skew for this process now, in microseconds. */
static long long
skew(void)
{
	load();
	if (odd_only && getpid() % 2 == 0)
		return 0;
	return skew_us;
}

int
clock_gettime(clockid_t clk, struct timespec *ts)
{
	long long	s;
	int			rc;

	load();
	rc = real_clock_gettime(clk, ts);
	if (rc != 0 || (clk != CLOCK_REALTIME && clk != CLOCK_REALTIME_COARSE))
		return rc;
	s = skew();
	{
		long long	ns = (long long) ts->tv_sec * 1000000000LL + ts->tv_nsec + s * 1000;

		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
	}
	return rc;
}

int
gettimeofday(struct timeval *tv, void *tz)
{
	long long	s;
	int			rc;

	load();
	rc = real_gettimeofday(tv, tz);
	if (rc != 0)
		return rc;
	s = skew();
	{
		long long	us = (long long) tv->tv_sec * 1000000LL + tv->tv_usec + s;

		tv->tv_sec = us / 1000000LL;
		tv->tv_usec = us % 1000000LL;
	}
	return rc;
}

time_t
time(time_t *t)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	if (t)
		*t = tv.tv_sec;
	return tv.tv_sec;
}
