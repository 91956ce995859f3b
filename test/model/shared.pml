/*
 * shared.pml: shared and exclusive holds of one resource (issue 27, doc/shared.md), for
 * Spin.  test/model/README.md ("The shared model") says what is modelled, what is not,
 * and which -D options make each configuration; test/model/run runs them.
 *
 * The design: one resource over N independent masters with a quorum of Q (a majority).
 * Each client takes it exclusively (SET NX) or shared (the shared script), with its own
 * TTL, in attempts that send one request to every master in one round; a master runs a
 * request atomically, at its own moment, interleaved with others as it likes.  Time is
 * discrete and kept as what is left, as in redlock.pml: the key's ticks left, each
 * reader's on each master, each client's validity; a tick takes one from all of them
 * (the clocks agree: redlock.pml checks drift and jumps), and a key goes when its time
 * does.  The clock may tick for ever, yet the state space stays finite.
 *
 * On a master: val is 0 (no key), MARK (shared holders), or an exclusive hold's number.
 * A shared acquire is refused where val is an exclusive hold; where val is 0 it starts
 * afresh (MARK, no readers); it records the reader's time left (its TTL) and pushes
 * the key's out to it if longer.  A shared release removes the reader; when no reader
 * is left it deletes the key, else when its time was the key's it sets the key's time
 * to the longest left (readers whose time ran out are gone already), else it leaves the
 * key as it is.  An exclusive release deletes the key if it holds its
 * number.  A client decides at any moment from the replies so far: held when a quorum
 * granted and validity is left (TTL - DRIFT, less the ticks since the attempt went
 * out); otherwise it undoes (its
 * release) on every master that granted or may still, and fails.
 *
 * Not modelled: extension (the same script's arithmetic as an acquire, checked by the
 * checker and TAP 056), the writer's intent (it only refuses more shared acquires, so it
 * cannot break safety), crashes and restarts (redlock.pml).
 *
 * Options (-D):
 *   N, C, ATT     masters (default 3), clients (3), attempts per client (1)
 *   M0, M1, M2    the clients' modes, 0 exclusive, 1 shared (defaults 1, 1, 0)
 *   T0, T1, T2    their TTLs in ticks (defaults 2, 4, 3)
 *   NOCHECK       negative control (a planted bug): the shared script does not refuse
 *                 an exclusive holder's key
 *   SHORTKEY      negative control: the key's expiry is not pushed out by a later
 *                 reader (it keeps the first reader's)
 *   DROPALL       negative control: a shared release deletes the key whatever readers
 *                 are left
 *   WAIT          the client decides only once every reply came (a smaller state space)
 *   NOB           leave out property (b)
 *
 * Properties:
 *   (a) no exclusive hold overlaps another hold (exclusive or shared) of the resource,
 *       each counted while its client believes it (until its validity ends); checked
 *       where a hold starts;
 *   (b) on each master, after every step: a reader entry with time left has the key,
 *       holding the marker, with at least as much time left (quorumshared.h's
 *       invariant; with a quorum meeting on a master it gives (a)).
 */

#ifndef N
#define N 3
#endif
#define Q (N / 2 + 1)
#ifndef C
#define C 3
#endif
#ifndef ATT
#define ATT 1
#endif
#define DRIFT 1
#define MARK 255
#define RQ(c, m) ((c) * N + (m))

/* A request: client c's on master m (as in set.pml). */
#define NONE 0			/* none, or its reply read and forgotten */
#define SETP 1			/* the acquire in flight */
#define OK 2			/* it granted the hold */
#define DELP 3			/* the undo's release in flight */
#define SDP 4			/* the acquire in flight, and the undo's release after it */
#define RELP 5			/* the release in flight */
#define SRP 6			/* the acquire in flight, and the release after it */
#define pending(r) (rq[r] != NONE && rq[r] != OK)
#define SETTING(r) (rq[r] == SETP || rq[r] == SDP || rq[r] == SRP)

byte rq[C * N];
byte mode[C];			/* 0 exclusive, 1 shared */
byte ttl[C];
byte hid[C];			/* client c's hold: c * ATT + its attempt, 1 .. C ATT */
byte vl[C];				/* validity left: client c believes it holds while vl[c] > 0 */
bit held[C];
byte sets[C];			/* client c's acquires in flight */
byte val[N];			/* 0, MARK, or an exclusive hold's number */
byte kl[N];				/* ticks the key has left */
byte rl[N * C];			/* ticks master m's reader entry of client c has left, 0: none */

inline after(r, reply)
{
	if
	:: rq[r] == SETP -> rq[r] = reply
	:: rq[r] == SDP -> rq[r] = DELP
	:: rq[r] == SRP -> rq[r] = RELP
	fi
}

/* Master x's key and readers go, as Redis expires the key and its hash. */
inline drop_key(x)
{
	val[x] = 0; kl[x] = 0;
	i = 0;
	do
	:: i < C -> rl[x * C + i] = 0; i++
	:: else -> break
	od;
	i = 0
}

/* (b) on master xx: a reader entry with time left has the marked key, which lives as long. */
inline key_outlives_readers(xx)
{
#ifndef NOB
	i = 0;
	do
	:: i < C -> assert(rl[(xx) * C + i] == 0 || (val[xx] == MARK && kl[xx] >= rl[(xx) * C + i])); i++
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
	x = r % N;
	y = r / N;
	if :: SETTING(r) -> sets[y]-- :: else -> skip fi;
	if
	:: SETTING(r) && mode[y] == 0 ->
		if
		:: val[x] == 0 -> val[x] = hid[y]; kl[x] = ttl[y]; after(r, OK)
		:: else -> after(r, NONE)
		fi
	:: SETTING(r) && mode[y] == 1 ->
#ifdef NOCHECK
		if
		:: true ->
#else
		if
		:: val[x] == 0 || val[x] == MARK ->
#endif
			if
			:: val[x] == 0 -> drop_key(x); val[x] = MARK; kl[x] = ttl[y]
			:: else ->
#ifndef SHORTKEY
				if :: ttl[y] > kl[x] -> kl[x] = ttl[y] :: else -> skip fi
#else
				skip
#endif
			fi;
			rl[x * C + y] = ttl[y];
			after(r, OK)
		:: else -> after(r, NONE)
		fi
	:: rq[r] == DELP || rq[r] == RELP ->
		if
		:: val[x] == hid[y] -> drop_key(x)
		:: val[x] == MARK ->
			/* The latest hold's release sets the key's time to the longest left; another's
			 * leaves it (the latest keeps it); the last one's deletes the key. */
			mine = rl[x * C + y];
			rl[x * C + y] = 0;
			e = 0; i = 0;
			do
			:: i < C -> if :: rl[x * C + i] > e -> e = rl[x * C + i] :: else -> skip fi; i++
			:: else -> break
			od;
			i = 0;
#ifdef DROPALL
			drop_key(x);
#else
			if
			:: e == 0 -> drop_key(x)
			:: e > 0 && mine >= kl[x] -> kl[x] = e
			:: else -> skip
			fi;
#endif
			e = 0; mine = 0
		:: else -> skip
		fi;
		rq[r] = NONE
	fi;
	key_outlives_readers(x);
	x = 0; y = 0
}

/* Client c releases (the undo, or rel: the release) where it was granted or may be. */
inline undo(rel)
{
	m = 0;
	do
	:: m < N ->
		r = RQ(c, m);
		if
		:: rq[r] == OK && rel -> rq[r] = RELP
		:: rq[r] == OK && !rel -> rq[r] = DELP
		:: rq[r] == SETP && rel -> rq[r] = SRP
		:: rq[r] == SETP && !rel -> rq[r] = SDP
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
	:: cnt >= Q && vl[c] > 0 ->
		printf("client %d hold %d (mode %d): holds, %d ticks left\n", c, hid[c], mode[c], vl[c]);
		i = 0;
		do
		:: i < C ->
			/* (a) */
			assert(i == c || !held[i] || vl[i] == 0 || (mode[i] == 1 && mode[c] == 1));
			i++
		:: else -> break
		od;
		i = 0;
		held[c] = 1
	:: else ->
		printf("client %d hold %d: fails\n", c, hid[c]);
		undo(0);
		k++
	fi;
	cnt = 0
}

proctype client(byte c)
{
	byte k = 1, m, r, i, cnt, x, y, e, mine;

	do
	:: k > ATT -> break
	:: d_step {
			k <= ATT && !held[c] ->
			m = 0;
			do
			:: m < N ->
				r = RQ(c, m);
				do
				:: pending(r) -> apply(r)	/* the last attempt's releases first */
				:: else -> break
				od;
				rq[r] = SETP;
				m++
			:: else -> break
			od;
			m = 0; r = 0;
			sets[c] = N;
			hid[c] = c * ATT + k;
			vl[c] = ttl[c] - DRIFT
		};
		d_step { DECIDES -> decide() };
		if
		:: !held[c]
		:: d_step {
			held[c] ->
			printf("client %d hold %d: releases\n", c, hid[c]);
			held[c] = 0;
			undo(1);
			k++
		}
		fi
	od
}

/* Master m0 applies the request in flight on client cc's connection, if one is. */
#define AP(cc) :: d_step { pending(RQ(cc, m0)) -> apply(RQ(cc, m0)) }

proctype master(byte m0)
{
	byte x, y, i, e, mine;

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

/* The clock: a tick takes one from every time left; keys go when theirs reaches 0. */
proctype clock()
{
	byte x, i;

end:
	do
	:: d_step {
			x = 0;
			do
			:: x < N ->
				if
				:: kl[x] > 0 -> kl[x]--; if :: kl[x] == 0 -> drop_key(x) :: else -> skip fi
				:: else -> skip
				fi;
				i = 0;
				do
				:: i < C -> if :: rl[x * C + i] > 0 -> rl[x * C + i]-- :: else -> skip fi; i++
				:: else -> break
				od;
				key_outlives_readers(x);
				x++
			:: else -> break
			od;
			x = 0;
			do
			:: x < C -> if :: vl[x] > 0 -> vl[x]-- :: else -> skip fi; x++
			:: else -> break
			od;
			x = 0
		}
	od
}

#ifndef M0
#define M0 1
#endif
#ifndef M1
#define M1 1
#endif
#ifndef M2
#define M2 0
#endif
#ifndef T0
#define T0 2
#endif
#ifndef T1
#define T1 4
#endif
#ifndef T2
#define T2 3
#endif

init
{
	byte j;

	atomic {
		mode[0] = M0; ttl[0] = T0;
#if C > 1
		mode[1] = M1; ttl[1] = T1;
#endif
#if C > 2
		mode[2] = M2; ttl[2] = T2;
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
		run clock();
		j = 0
	}
}
