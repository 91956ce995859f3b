/*
 * delayproxy.c: a userspace TCP proxy on loopback that delays every byte by a fixed time
 * in each direction (tc netem is not available here).
 *
 *   delayproxy DELAY_US MAX_SECONDS LISTEN_PORT:TARGET_PORT [...]
 *
 * Listens on 127.0.0.1:LISTEN_PORT and forwards each connection to 127.0.0.1:TARGET_PORT.
 * Whatever is read from either side is written to the other side DELAY_US microseconds
 * later (a round trip through the proxy therefore takes 2 x DELAY_US more than without
 * it), in order, never earlier.  One thread, ppoll() with microsecond timeouts.  Exits by
 * itself after MAX_SECONDS, or on SIGTERM/SIGINT.  Prints "ready" on stdout once every
 * port listens.
 *
 * Built by test/bench/run: gcc -O2 -o delayproxy delayproxy.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define MAX_LISTEN 16
#define MAX_CONN 256
#define CHUNK 65536

typedef struct Chunk
{
	struct Chunk *next;
	double		due_us;
	size_t		len;
	size_t		off;
	char		data[];
} Chunk;

/* One direction of a connection: bytes read from `from`, queued, written to `to`. */
typedef struct
{
	int			from;
	int			to;
	Chunk	   *head;
	Chunk	   *tail;
	int			eof;			/* `from` said EOF: shut `to` down once drained */
	int			shut;			/* done */
} Pipe;

typedef struct
{
	int			used;
	Pipe		dir[2];			/* 0: client -> server, 1: server -> client */
} Conn;

static int	listen_fd[MAX_LISTEN];
static int	target_port[MAX_LISTEN];
static int	listen_count;
static Conn conns[MAX_CONN];
static double delay_us;
static volatile sig_atomic_t stop;

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void
on_signal(int sig)
{
	(void) sig;
	stop = 1;
}

static void
set_nonblock(int fd)
{
	int			one = 1;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void
conn_close(Conn *c)
{
	for (int d = 0; d < 2; d++)
	{
		Chunk	   *ch = c->dir[d].head;

		while (ch)
		{
			Chunk	   *next = ch->next;

			free(ch);
			ch = next;
		}
	}
	close(c->dir[0].from);
	close(c->dir[0].to);
	memset(c, 0, sizeof(*c));
}

static void
accept_one(int li)
{
	int			cfd,
				sfd;
	struct sockaddr_in sa = {0};
	Conn	   *c = NULL;

	cfd = accept(listen_fd[li], NULL, NULL);
	if (cfd < 0)
		return;
	for (int i = 0; i < MAX_CONN; i++)
		if (!conns[i].used)
		{
			c = &conns[i];
			break;
		}
	sfd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(target_port[li]);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (c == NULL || sfd < 0 || connect(sfd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
	{
		close(cfd);
		if (sfd >= 0)
			close(sfd);
		return;
	}
	set_nonblock(cfd);
	set_nonblock(sfd);
	c->used = 1;
	c->dir[0].from = cfd;
	c->dir[0].to = sfd;
	c->dir[1].from = sfd;
	c->dir[1].to = cfd;
}

/* Reads what is there on p->from into a new chunk due in delay_us; -1 on error. */
static int
pipe_read(Pipe *p)
{
	char		buf[CHUNK];
	ssize_t		n = read(p->from, buf, sizeof(buf));
	Chunk	   *ch;

	if (n < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
	if (n == 0)
	{
		p->eof = 1;
		return 0;
	}
	ch = malloc(sizeof(Chunk) + n);
	if (ch == NULL)
		return -1;
	ch->next = NULL;
	ch->due_us = now_us() + delay_us;
	ch->len = n;
	ch->off = 0;
	memcpy(ch->data, buf, n);
	if (p->tail)
		p->tail->next = ch;
	else
		p->head = ch;
	p->tail = ch;
	return 0;
}

/* Writes the chunks that are due; -1 on error. */
static int
pipe_write(Pipe *p, double now)
{
	while (p->head && p->head->due_us <= now)
	{
		Chunk	   *ch = p->head;
		ssize_t		n = write(p->to, ch->data + ch->off, ch->len - ch->off);

		if (n < 0)
			return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
		ch->off += n;
		if (ch->off < ch->len)
			return 0;
		p->head = ch->next;
		if (p->head == NULL)
			p->tail = NULL;
		free(ch);
	}
	if (p->head == NULL && p->eof && !p->shut)
	{
		shutdown(p->to, SHUT_WR);
		p->shut = 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	double		deadline;
	struct pollfd pfd[MAX_LISTEN + 4 * MAX_CONN];
	int			owner[MAX_LISTEN + 4 * MAX_CONN];	/* conn index*4 + role, or -1 - listener */

	if (argc < 4)
	{
		fprintf(stderr, "usage: %s DELAY_US MAX_SECONDS LISTEN_PORT:TARGET_PORT [...]\n", argv[0]);
		return 2;
	}
	delay_us = atof(argv[1]);
	deadline = now_us() + atof(argv[2]) * 1e6;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 3; i < argc && listen_count < MAX_LISTEN; i++)
	{
		int			lport,
					tport,
					fd,
					one = 1;
		struct sockaddr_in sa = {0};

		if (sscanf(argv[i], "%d:%d", &lport, &tport) != 2)
		{
			fprintf(stderr, "delayproxy: bad item \"%s\"\n", argv[i]);
			return 2;
		}
		fd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		sa.sin_family = AF_INET;
		sa.sin_port = htons(lport);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 128) < 0)
		{
			fprintf(stderr, "delayproxy: cannot listen on 127.0.0.1:%d: %s\n", lport, strerror(errno));
			return 1;
		}
		set_nonblock(fd);
		listen_fd[listen_count] = fd;
		target_port[listen_count++] = tport;
	}
	printf("ready\n");
	fflush(stdout);

	while (!stop)
	{
		int			n = 0;
		double		now = now_us(),
					next = deadline;
		struct timespec ts;

		if (now >= deadline)
			break;
		for (int i = 0; i < listen_count; i++)
		{
			pfd[n].fd = listen_fd[i];
			pfd[n].events = POLLIN;
			owner[n++] = -1 - i;
		}
		for (int i = 0; i < MAX_CONN; i++)
		{
			if (!conns[i].used)
				continue;
			for (int d = 0; d < 2; d++)
			{
				Pipe	   *p = &conns[i].dir[d];

				if (!p->eof)
				{
					pfd[n].fd = p->from;
					pfd[n].events = POLLIN;
					owner[n++] = i * 4 + d;
				}
				if (p->head && p->head->due_us <= now)
				{
					/* due but not fully written: wait for room */
					pfd[n].fd = p->to;
					pfd[n].events = POLLOUT;
					owner[n++] = i * 4 + 2 + d;
				}
				else if (p->head && p->head->due_us < next)
					next = p->head->due_us;
			}
		}
		ts.tv_sec = (time_t) ((next - now) / 1e6);
		ts.tv_nsec = (long) (next - now - ts.tv_sec * 1e6) * 1000;
		if (ts.tv_nsec < 0)
			ts.tv_nsec = 0;
		if (ppoll(pfd, n, &ts, NULL) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < n; k++)
		{
			Conn	   *c;
			Pipe	   *p;

			if (!pfd[k].revents)
				continue;
			if (owner[k] < 0)
			{
				accept_one(-1 - owner[k]);
				continue;
			}
			c = &conns[owner[k] / 4];
			if (!c->used)
				continue;
			p = &c->dir[owner[k] % 2];
			if ((owner[k] % 4) < 2 && pipe_read(p) < 0)
				conn_close(c);
		}
		now = now_us();
		for (int i = 0; i < MAX_CONN; i++)
		{
			Conn	   *c = &conns[i];

			if (!c->used)
				continue;
			if (pipe_write(&c->dir[0], now) < 0 || pipe_write(&c->dir[1], now) < 0 ||
				(c->dir[0].shut && c->dir[1].shut))
				conn_close(c);
		}
	}
	for (int i = 0; i < MAX_CONN; i++)
		if (conns[i].used)
			conn_close(&conns[i]);
	return 0;
}
