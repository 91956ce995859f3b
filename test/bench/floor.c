/*
 * floor.c: the floor for one Redlock acquire + release pair, measured with hiredis.
 *
 *   floor MODE HOST PORT[,PORT...] SECONDS [TTL_MS]
 *
 * MODE
 *   par   for each lock, write SET key token NX PX ttl to every master, then read
 *         every reply (five blocking contexts: all written, then all read, so the
 *         masters work at the same time); then the release script (EVALSHA) the same
 *         way.  This is what a Redlock client cannot beat on this machine.
 *   quorum  the same commands over non-blocking contexts and poll(), decided as soon as
 *         a majority answered (the acquire: a majority granted, or a majority became
 *         impossible; the release: a majority answered), as redlock 1.1 decides; replies
 *         that come later are read and dropped while later commands wait.  The floor for
 *         a client that does not wait for the slowest master.
 *   seq   the same commands, one master after another (write, read, next master).
 *   ping  one PING to the first master: one plain round trip (used to measure the
 *         delay proxy).
 *
 * Runs for SECONDS (after 0.3 s of warm-up), at most 2,000,000 pairs, one client, and
 * prints one line of key=value figures:
 *
 *   mode=par pairs=... seconds=... pairs_per_s=... avg_us=... mid_us=... p50_us=...
 *   p99_us=... failed=...
 *
 * mid_us is the median, over batches of 500 consecutive pairs, of each batch's average:
 * an average that a few stalls of a noisy machine do not move much.
 *
 * Keys are "floor:<pid>:<n>", distinct per lock, with a fresh 40-hex-character token
 * each; every lock is released, so nothing is left behind.  Exits non-zero if a master
 * cannot be reached or answers with an error.
 *
 * Built by test/bench/run: gcc -O2 -o floor floor.c -lhiredis
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#define MAX_NODES 16
#define MAX_PAIRS 2000000
#define WARMUP_S 0.3
#define BATCH 500				/* pairs per batch for mid_us */

static const char *release_body =
"if redis.call(\"get\", KEYS[1]) == ARGV[1] then "
"return redis.call(\"del\", KEYS[1]) else return 0 end";

static redisContext *nodes[MAX_NODES];
static int	node_count;
static char release_sha[64];

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void
die(const char *what, redisContext *c)
{
	fprintf(stderr, "floor: %s: %s\n", what, c && c->err ? c->errstr : "unexpected reply");
	exit(1);
}

/* xorshift64*: tokens need only be unique here, not unguessable */
static unsigned long long rng_state;

static void
new_token(char *token)
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 0; i < 40; i += 16)
	{
		unsigned long long x;

		rng_state ^= rng_state >> 12;
		rng_state ^= rng_state << 25;
		rng_state ^= rng_state >> 27;
		x = rng_state * 2685821657736338717ULL;
		for (int j = 0; j < 16 && i + j < 40; j++, x >>= 4)
			token[i + j] = hex[x & 15];
	}
	token[40] = '\0';
}

/* Writes everything appended to c. */
static void
flush(redisContext *c)
{
	int			done = 0;

	while (!done)
		if (redisBufferWrite(c, &done) != REDIS_OK)
			die("write", c);
}

/* Reads one reply from c; returns 1 for "OK" or integer 1, 0 otherwise. */
static int
read_one(redisContext *c)
{
	redisReply *r;
	int			ok;

	if (redisGetReply(c, (void **) &r) != REDIS_OK || r == NULL)
		die("read", c);
	if (r->type == REDIS_REPLY_ERROR)
	{
		fprintf(stderr, "floor: master answered: %s\n", r->str);
		exit(1);
	}
	ok = (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) ||
		(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
	freeReplyObject(r);
	return ok;
}

static void
append_set(redisContext *c, const char *key, const char *token, const char *ttl)
{
	redisAppendCommand(c, "SET %s %s NX PX %s", key, token, ttl);
}

static void
append_release(redisContext *c, const char *key, const char *token)
{
	redisAppendCommand(c, "EVALSHA %s 1 %s %s", release_sha, key, token);
}

/*
 * quorum mode: per node, the operation ids of the replies still owed, in order (hiredis
 * answers in order on one connection).
 */
#define OWED_MAX 4096
static long owed[MAX_NODES][OWED_MAX];
static int	owed_head[MAX_NODES],
			owed_count[MAX_NODES];
static long op_seq;

/* Sends one command (already appended) on node i, counting the reply owed for op. */
static void
send_nb(int i, long op)
{
	int			done = 0;

	if (owed_count[i] == OWED_MAX)
	{
		fprintf(stderr, "floor: master %d owes %d replies\n", i, OWED_MAX);
		exit(1);
	}
	owed[i][(owed_head[i] + owed_count[i]) % OWED_MAX] = op;
	owed_count[i]++;
	while (!done)
	{
		if (redisBufferWrite(nodes[i], &done) != REDIS_OK)
			die("write", nodes[i]);
		if (!done)
		{
			struct pollfd pfd = {nodes[i]->fd, POLLOUT, 0};

			poll(&pfd, 1, 1000);
		}
	}
}

/*
 * Waits until op has `need` replies, or (when ok_need > 0) until ok_need of them were
 * positive or so many were negative that ok_need cannot be reached; returns the
 * positive ones.
 */
static int
wait_quorum(long op, int ok_need, int need)
{
	int			answered = 0,
				ok = 0;

	while (answered < need &&
		   !(ok_need > 0 && (ok >= ok_need || answered - ok > node_count - ok_need)))
	{
		struct pollfd pfd[MAX_NODES];
		int			idx[MAX_NODES],
					n = 0;

		for (int i = 0; i < node_count; i++)
			if (owed_count[i] > 0)
			{
				pfd[n].fd = nodes[i]->fd;
				pfd[n].events = POLLIN;
				pfd[n].revents = 0;
				idx[n++] = i;
			}
		if (n == 0 || poll(pfd, n, 2000) <= 0)
		{
			fprintf(stderr, "floor: no reply within 2 s\n");
			exit(1);
		}
		for (int k = 0; k < n; k++)
		{
			int			i = idx[k];
			redisReply *r;

			if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (redisBufferRead(nodes[i]) != REDIS_OK)
				die("read", nodes[i]);
			for (;;)
			{
				long		for_op;
				int			positive;

				if (redisGetReply(nodes[i], (void **) &r) != REDIS_OK)
					die("read", nodes[i]);
				if (r == NULL)
					break;
				if (r->type == REDIS_REPLY_ERROR)
				{
					fprintf(stderr, "floor: master answered: %s\n", r->str);
					exit(1);
				}
				positive = (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0) ||
					(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
				freeReplyObject(r);
				for_op = owed[i][owed_head[i]];
				owed_head[i] = (owed_head[i] + 1) % OWED_MAX;
				owed_count[i]--;
				if (for_op == op)
				{
					answered++;
					ok += positive;
				}
			}
		}
	}
	return ok;
}

/* One acquire + release, each decided once a majority answered. */
static int
pair_quorum(const char *key, const char *token, const char *ttl)
{
	int			quorum = node_count / 2 + 1;
	long		op = ++op_seq;
	int			got;

	for (int i = 0; i < node_count; i++)
	{
		append_set(nodes[i], key, token, ttl);
		send_nb(i, op);
	}
	got = wait_quorum(op, quorum, node_count);
	op = ++op_seq;
	for (int i = 0; i < node_count; i++)
	{
		append_release(nodes[i], key, token);
		send_nb(i, op);
	}
	/* the release: decided once a majority answered, whatever they said */
	wait_quorum(op, 0, quorum);
	return got >= quorum;
}

/* One acquire + release on all nodes at once; returns 1 when a majority took it. */
static int
pair_par(const char *key, const char *token, const char *ttl)
{
	int			got = 0;

	for (int i = 0; i < node_count; i++)
	{
		append_set(nodes[i], key, token, ttl);
		flush(nodes[i]);
	}
	for (int i = 0; i < node_count; i++)
		got += read_one(nodes[i]);
	for (int i = 0; i < node_count; i++)
	{
		append_release(nodes[i], key, token);
		flush(nodes[i]);
	}
	for (int i = 0; i < node_count; i++)
		read_one(nodes[i]);
	return got >= node_count / 2 + 1;
}

/* The same, one node after another. */
static int
pair_seq(const char *key, const char *token, const char *ttl)
{
	int			got = 0;

	for (int i = 0; i < node_count; i++)
	{
		append_set(nodes[i], key, token, ttl);
		flush(nodes[i]);
		got += read_one(nodes[i]);
	}
	for (int i = 0; i < node_count; i++)
	{
		append_release(nodes[i], key, token);
		flush(nodes[i]);
		read_one(nodes[i]);
	}
	return got >= node_count / 2 + 1;
}

/* One PING round trip to the first node. */
static int
pair_ping(const char *key, const char *token, const char *ttl)
{
	(void) key;
	(void) token;
	(void) ttl;
	redisAppendCommand(nodes[0], "PING");
	flush(nodes[0]);
	read_one(nodes[0]);
	return 1;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* Median of the averages of consecutive batches of BATCH latencies (all, if fewer). */
static double
batch_median(const double *lat, long n)
{
	long		batches = n / BATCH;
	double	   *means;
	double		result = 0;

	if (n == 0)
		return 0;
	if (batches == 0)
	{
		for (long i = 0; i < n; i++)
			result += lat[i];
		return result / n;
	}
	means = malloc(sizeof(double) * batches);
	if (means == NULL)
		exit(1);
	for (long b = 0; b < batches; b++)
	{
		double		s = 0;

		for (long i = 0; i < BATCH; i++)
			s += lat[b * BATCH + i];
		means[b] = s / BATCH;
	}
	qsort(means, batches, sizeof(double), cmp_double);
	result = means[batches / 2];
	free(means);
	return result;
}

int
main(int argc, char **argv)
{
	const char *mode,
			   *host;
	char	   *ports,
			   *p;
	double		seconds;
	const char *ttl;
	int			(*pair) (const char *, const char *, const char *);
	double	   *lat;
	long		n = 0,
				failed = 0,
				seq = 0;
	double		start,
				end,
				sum = 0,
				mid;
	char		key[64],
				token[41];

	if (argc < 5)
	{
		fprintf(stderr, "usage: %s par|quorum|seq|ping HOST PORT[,PORT...] SECONDS [TTL_MS]\n", argv[0]);
		return 2;
	}
	mode = argv[1];
	host = argv[2];
	ports = strdup(argv[3]);
	seconds = atof(argv[4]);
	ttl = argc > 5 ? argv[5] : "10000";
	if (strcmp(mode, "par") == 0)
		pair = pair_par;
	else if (strcmp(mode, "quorum") == 0)
		pair = pair_quorum;
	else if (strcmp(mode, "seq") == 0)
		pair = pair_seq;
	else if (strcmp(mode, "ping") == 0)
		pair = pair_ping;
	else
	{
		fprintf(stderr, "floor: unknown mode \"%s\"\n", mode);
		return 2;
	}

	for (p = strtok(ports, ","); p != NULL && node_count < MAX_NODES; p = strtok(NULL, ","))
	{
		struct timeval tv = {2, 0};
		redisContext *c = redisConnectWithTimeout(host, atoi(p), tv);

		if (c == NULL || c->err)
			die("connect", c);
		redisSetTimeout(c, tv);
		nodes[node_count++] = c;
	}
	for (int i = 0; i < node_count; i++)
	{
		redisReply *r = redisCommand(nodes[i], "SCRIPT LOAD %s", release_body);

		if (r == NULL || r->type != REDIS_REPLY_STRING)
			die("SCRIPT LOAD", nodes[i]);
		snprintf(release_sha, sizeof(release_sha), "%s", r->str);
		freeReplyObject(r);
	}
	if (pair == pair_quorum)
		for (int i = 0; i < node_count; i++)
			nodes[i]->flags &= ~REDIS_BLOCK;	/* hiredis then never blocks in read/write */
	rng_state = ((unsigned long long) getpid() << 32) ^ (unsigned long long) now_us() ^ 0x9e3779b97f4a7c15ULL;

	lat = malloc(sizeof(double) * MAX_PAIRS);
	if (lat == NULL)
		return 1;

	/* warm-up, not counted */
	start = now_us();
	while (now_us() - start < WARMUP_S * 1e6)
	{
		snprintf(key, sizeof(key), "floor:%d:%ld", (int) getpid(), seq++);
		new_token(token);
		pair(key, token, ttl);
	}

	start = now_us();
	end = start + seconds * 1e6;
	while (n < MAX_PAIRS)
	{
		double		t0 = now_us(),
					t1;

		if (t0 >= end)
			break;
		snprintf(key, sizeof(key), "floor:%d:%ld", (int) getpid(), seq++);
		new_token(token);
		if (!pair(key, token, ttl))
			failed++;
		t1 = now_us();
		lat[n++] = t1 - t0;
		sum += t1 - t0;
	}
	end = now_us();
	mid = batch_median(lat, n);
	qsort(lat, n, sizeof(double), cmp_double);
	printf("mode=%s nodes=%d pairs=%ld seconds=%.3f pairs_per_s=%.1f avg_us=%.1f "
		   "mid_us=%.1f p50_us=%.1f p99_us=%.1f failed=%ld\n",
		   mode, node_count, n, (end - start) / 1e6, n / ((end - start) / 1e6),
		   n ? sum / n : 0, mid, n ? lat[n / 2] : 0, n ? lat[(long) (n * 0.99)] : 0, failed);
	for (int i = 0; i < node_count; i++)
		redisFree(nodes[i]);
	free(lat);
	free(ports);
	return 0;
}
