/*
 * skewclock.c: an LD_PRELOAD shim that sets a process's wall clock off by a fixed amount,
 * for the tests of fencing tokens under skewed clocks (test/t/007_fencing_tokens.pl,
 * test/checker scenarios fence-skew-*).
 *
 *   cc -shared -fPIC -O2 -o skewclock.so skewclock.c -ldl
 *   RL_SKEW_MS=-3000 LD_PRELOAD=$PWD/skewclock.so postgres ...
 *
 * RL_SKEW_MS (signed milliseconds) is added to gettimeofday(), time() and
 * clock_gettime() of CLOCK_REALTIME and CLOCK_REALTIME_COARSE; the monotonic clocks are
 * left alone (so are durations: only the wall clock's reading moves).  With
 * RL_SKEW_PIDS=odd only forked children with an odd process id are skewed, never the
 * process that was started with the shim (a postmaster: pg_ctl compares the start time
 * it writes with its own clock), so the backends of one PostgreSQL cluster split into
 * skewed and not; otherwise every process that loads the shim is.  The environment and
 * the real functions are looked up once, when the shim is loaded (a constructor, before
 * any thread exists: a lookup later, from a thread of a forked process, can deadlock
 * in the dynamic loader, as a daemonized redis-server showed).
 *
 * RL_SKEW_FILE names a file holding the skew in milliseconds instead, read again at
 * every call (no file: no skew), so that a test can step the wall clock of running
 * processes (test/t/043_lost_lock_stops_job.pl: a step back during a transaction).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long skew_us;
static int	odd_only;
static const char *skew_file;	/* a copy: PostgreSQL overwrites its environment's
								 * strings with its process title */
static char skew_file_path[4096];
static pid_t exec_pid;			/* the process started with the shim */

static int	(*real_clock_gettime) (clockid_t, struct timespec *);
static int	(*real_gettimeofday) (struct timeval *, void *);

/* Reads the environment and looks up the real functions, once, at load time. */
__attribute__((constructor))
static void
skewclock_init(void)
{
	const char *ms = getenv("RL_SKEW_MS");
	const char *pids = getenv("RL_SKEW_PIDS");

	skew_us = ms ? atoll(ms) * 1000 : 0;
	if (getenv("RL_SKEW_FILE") && strlen(getenv("RL_SKEW_FILE")) < sizeof(skew_file_path))
		skew_file = strcpy(skew_file_path, getenv("RL_SKEW_FILE"));
	odd_only = pids && strcmp(pids, "odd") == 0;
	exec_pid = getpid();
	real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
	real_gettimeofday = dlsym(RTLD_NEXT, "gettimeofday");
}

/* The skew RL_SKEW_FILE holds now, in microseconds (0 without the file). */
static long long
file_skew(void)
{
	char		buf[32];
	long		n;
	int			fd = (int) syscall(SYS_openat, (long) AT_FDCWD, skew_file, (long) O_RDONLY);

	if (fd < 0)
		return 0;
	n = (long) syscall(SYS_read, (long) fd, buf, (long) (sizeof(buf) - 1));
	syscall(SYS_close, (long) fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return atoll(buf) * 1000;
}

/* The skew for this process now, in microseconds. */
static long long
skew(void)
{
	if (skew_file)
		return file_skew();
	if (odd_only)
	{
		pid_t		pid = getpid();

		if (pid % 2 == 0 || pid == exec_pid)
			return 0;
	}
	return skew_us;
}

/* clock_gettime(3) with CLOCK_REALTIME and CLOCK_REALTIME_COARSE set off by the skew. */
int
clock_gettime(clockid_t clk, struct timespec *ts)
{
	int			rc = real_clock_gettime ? real_clock_gettime(clk, ts)
		: (int) syscall(SYS_clock_gettime, clk, ts);
	long long	ns;

	if (rc != 0 || (clk != CLOCK_REALTIME && clk != CLOCK_REALTIME_COARSE) ||
		(skew_us == 0 && !skew_file))
		return rc;
	ns = (long long) ts->tv_sec * 1000000000LL + ts->tv_nsec + skew() * 1000;
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
	return rc;
}

/* gettimeofday(2) set off by the skew (PostgreSQL's GetCurrentTimestamp, Redis' TIME). */
int
gettimeofday(struct timeval *tv, void *tz)
{
	int			rc = real_gettimeofday ? real_gettimeofday(tv, tz)
		: (int) syscall(SYS_gettimeofday, tv, tz);
	long long	us;

	if (rc != 0 || (skew_us == 0 && !skew_file))
		return rc;
	us = (long long) tv->tv_sec * 1000000LL + tv->tv_usec + skew();
	tv->tv_sec = us / 1000000LL;
	tv->tv_usec = us % 1000000LL;
	return rc;
}

/* time(2) through gettimeofday above. */
time_t
time(time_t *t)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	if (t)
		*t = tv.tv_sec;
	return tv.tv_sec;
}
