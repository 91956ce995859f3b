/*
 * set.pml: a set of resources held all or nothing (issue 27, doc/sets.md), for Spin.
 * test/model/README.md ("The set model") says what is modelled, what is not, and which
 * -D options make each configuration; test/model/run runs them.
 *
 * The design: R resources (two) over N independent masters with a quorum of Q (default
 * a majority).  A client wants a set of them (want[c], a mask: both, or one, which is a
 * lock).  An attempt sends one script to every master in one round; a master runs it
 * atomically, one request at a time, interleaved with other clients' as it likes: when
 * no key of the set exists it sets every one to the attempt's token and answers OK,
 * else it sets nothing and refuses.  The client decides at any moment (every reply came,
 * or its timeout fired) from the replies so far: it holds the whole set when a quorum of
 * masters answered OK; otherwise it undoes (deletes each key of the set that still holds
 * its token) on every master that set it or may still set it (a script in flight), and
 * fails.  Release deletes likewise, everywhere.
 *
 * Time is not modelled (no TTL, expiry, validity, clock) and masters do not crash: that
 * the validity bounds a hold of one key under expiry, crashes and restarts is what
 * redlock.pml checks, and each key of a held set is such a key.  What is checked here is
 * what the set adds: one script for several keys, and one quorum for all of them.
 *
 * Options (-D):
 *   N, C, ATT     masters (3 to 5), clients (1 to 3), attempts per client (defaults 3, 3,
 *                 1); C ATT <= 8
 *   Q             the quorum (default N / 2 + 1)
 *   W0, W1, W2    the clients' sets, masks (defaults 3, 3, 2: two sets of both
 *                 resources and a lock on the second)
 *   PARTIAL       negative control (a planted bug): the script sets the keys of the set
 *                 that are free and answers OK when it set any (not all or nothing)
 *   LOWQ          negative control (a planted bug): the set is held on Q - 1 masters
 *   NOB           leave out property (b)
 *   WAIT          the client decides only once every reply came (a smaller state space)
 *
 * Properties:
 *   (a) no resource is held by two clients at once (checked where a hold starts);
 *   (b) all or nothing on each master: after every step of a master, each attempt holds
 *       every key of its set there or none.
 */

#ifndef N
#define N 3
#endif
#ifndef Q
#define Q (N / 2 + 1)
#endif
#ifndef C
#define C 3
#endif
#ifndef ATT
#define ATT 1
#endif
#ifdef LOWQ
#define NEED (Q - 1)
#else
#define NEED Q
#endif
#define R 2
#define RQ(c, m) ((c) * N + (m))

/* A request: client c's script on master m. */
#define NONE 0			/* none, or its reply read and forgotten */
#define SETP 1			/* the script in flight */
#define OK 2			/* it set the set's keys */
#define DELP 3			/* the undo's delete in flight */
#define SDP 4			/* the script in flight, and the undo's delete after it */
#define RELP 5			/* the release's delete in flight */
#define SRP 6			/* the script in flight, and the release's delete after it */
#define pending(r) (rq[r] != NONE && rq[r] != OK)
#define SETTING(r) (rq[r] == SETP || rq[r] == SDP || rq[r] == SRP)

byte rq[C * N];
byte want[C];			/* client c's set: bit i for resource i */
byte hid[C];			/* client c's hold: c * ATT + its attempt, 1 .. C ATT */
byte sets[C];			/* client c's scripts in flight */
byte key[N * R];		/* the hold whose token is in master m's key of resource i, 0 = none */
byte heldby[R];			/* client + 1 holding resource i, 0 = none */

#define BIT(x, i) (((x) >> (i)) & 1)
#define CLIENT(r) ((r) / N)
#define MASTER(r) ((r) % N)

inline after(r, reply)
{
	if
	:: rq[r] == SETP -> rq[r] = reply
	:: rq[r] == SDP -> rq[r] = DELP
	:: rq[r] == SRP -> rq[r] = RELP
	fi
}

/* (b): on master mm, every hold has all of its set's keys or none. */
inline all_or_nothing(mm)
{
#ifndef NOB
	i = 0;
	do
	:: i < C ->
		assert(hid[i] == 0 || !(BIT(want[i], 0) && BIT(want[i], 1)) ||
			   (key[(mm) * R] == hid[i]) == (key[(mm) * R + 1] == hid[i]));
		i++
	:: else -> break
	od;
	i = 0
#else
	skip
#endif
}

/* Master MASTER(r) applies request r, atomically. */
inline apply(r)
{
	x = MASTER(r);
	y = CLIENT(r);
	if
	:: SETTING(r) ->
		sets[y]--;
#ifdef PARTIAL
		/* Planted bug: set what is free, OK when anything was. */
		i = 0; cnt = 0;
		do
		:: i < R ->
			if
			:: BIT(want[y], i) && key[x * R + i] == 0 -> key[x * R + i] = hid[y]; cnt++
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		if
		:: cnt > 0 -> after(r, OK)
		:: else -> after(r, NONE)
		fi;
		i = 0; cnt = 0
#else
		if
		:: (!BIT(want[y], 0) || key[x * R] == 0) && (!BIT(want[y], 1) || key[x * R + 1] == 0) ->
			if :: BIT(want[y], 0) -> key[x * R] = hid[y] :: else -> skip fi;
			if :: BIT(want[y], 1) -> key[x * R + 1] = hid[y] :: else -> skip fi;
			printf("master %d: set %d for hold %d\n", x, want[y], hid[y]);
			after(r, OK)
		:: else -> after(r, NONE)
		fi
#endif
	:: rq[r] == DELP || rq[r] == RELP ->
		i = 0;
		do
		:: i < R ->
			if :: key[x * R + i] == hid[y] -> key[x * R + i] = 0 :: else -> skip fi;
			i++
		:: else -> break
		od;
		i = 0;
		rq[r] = NONE
	fi;
	all_or_nothing(x);
	x = 0; y = 0
}

/* Client c deletes on request r, for the undo or (rel) the release, after its script. */
inline del(r, rel)
{
	if
	:: rq[r] == SETP && !rel -> rq[r] = SDP
	:: rq[r] == SETP && rel -> rq[r] = SRP
	:: rq[r] != SETP && !rel -> rq[r] = DELP
	:: rq[r] != SETP && rel -> rq[r] = RELP
	fi
}

/* Client c deletes on every master where its script set the keys or may still. */
inline undo(rel)
{
	m = 0;
	do
	:: m < N ->
		r = RQ(c, m);
		if
		:: rq[r] == OK || rq[r] == SETP -> del(r, rel)
		:: else -> skip
		fi;
		m++
	:: else -> break
	od;
	m = 0; r = 0
}

#ifdef WAIT
#define DECIDES (sets[c] == 0)
#else
#define DECIDES 1
#endif

inline decide()
{
	cnt = 0; m = 0;
	do
	:: m < N -> if :: rq[RQ(c, m)] == OK -> cnt++ :: else -> skip fi; m++
	:: else -> break
	od;
	m = 0;
	if
	:: cnt >= NEED ->
		printf("client %d hold %d: holds set %d\n", c, hid[c], want[c]);
		i = 0;
		do
		:: i < R ->
			if
			:: BIT(want[c], i) ->
				assert(heldby[i] == 0);		/* (a) */
				heldby[i] = c + 1
			:: else -> skip
			fi;
			i++
		:: else -> break
		od;
		i = 0;
		held = 1
	:: else ->
		printf("client %d hold %d: fails\n", c, hid[c]);
		undo(0);
		k++
	fi;
	cnt = 0
}

proctype client(byte c)
{
	byte k = 1, m, r, i, x, y, cnt, held;

	do
	:: k > ATT -> break
	:: d_step {
			/* The script to every master, in one round. */
			k <= ATT ->
			m = 0;
			do
			:: m < N ->
				r = RQ(c, m);
				do
				:: pending(r) -> apply(r)	/* the last attempt's deletes first */
				:: else -> break
				od;
				rq[r] = SETP;
				m++
			:: else -> break
			od;
			m = 0; r = 0;
			sets[c] = N;
			hid[c] = c * ATT + k
		};
		d_step { DECIDES -> decide() };
		if
		:: held == 0
		:: d_step {
			held != 0 ->
			printf("client %d hold %d: releases\n", c, hid[c]);
			i = 0;
			do
			:: i < R -> if :: BIT(want[c], i) -> heldby[i] = 0 :: else -> skip fi; i++
			:: else -> break
			od;
			i = 0;
			undo(1);
			held = 0;
			k++
		}
		fi
	od
}

/* Master m0 applies the request in flight on client cc's connection, if one is. */
#define AP(cc) :: d_step { pending(RQ(cc, m0)) -> apply(RQ(cc, m0)) }

proctype master(byte m0)
{
	byte x, y, i, cnt;

end:
	do
	AP(0)
#if C > 1
	AP(1)
#endif
#if C > 2
	AP(2)
#endif
	od
}

#ifndef W0
#define W0 3
#endif
#ifndef W1
#define W1 3
#endif
#ifndef W2
#define W2 2
#endif

init
{
	byte j;

	atomic {
		want[0] = W0;
#if C > 1
		want[1] = W1;
#endif
#if C > 2
		want[2] = W2;
#endif
		j = 0;
		do
		:: j < N -> run master(j); j++
		:: else -> break
		od;
		j = 0;
		do
		:: j < C -> run client(j); j++
		:: else -> break
		od;
		j = 0
	}
}
