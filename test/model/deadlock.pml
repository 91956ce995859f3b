/*
 * deadlock.pml: the deadlock check's wait records (issue 43 item 2, doc/deadlock.md §2-§4),
 * for Spin.  test/model/README.md ("The deadlock model") says what is modelled and which
 * -D options make each configuration; test/model/run runs them.
 *
 * Three waiters on N masters (Q a majority): A, the checker, waits throughout; B waits
 * from the start and C starts waiting at any moment; each of B and C posts its wait
 * record (one request per master on its own connection, FIFO as TCP keeps it; a quorum of
 * acks ends the round), may post it again (a check's renewal), and ends its wait at any
 * moment: it takes its record back (a withdraw per master, a quorum of acks) and only
 * then stops waiting.  A master applies each connection's requests in order, at moments
 * of its own.  The cycle A -> B -> C -> A needs B and C waiting at once (A holds and
 * waits throughout; the holds are taken as live, doc/deadlock.md §4 treats them as the
 * records).  A checks once: it reads the masters one by one (each read atomic, as a
 * script is), counts each record present on a quorum, and, when both are, reads them all
 * again and reports if both are still on a quorum.
 *
 * Options (-D):
 *   N          masters (default 3)
 *   POSTS      posts of a record before its wait may end (default 2: a renewal)
 *   ONEREAD    negative control: report after the first read
 *   CANCEL     negative control: a waiter stops waiting first and takes its record back
 *              after (a cancel's abort, doc/deadlock.md §4 lists it)
 *   LOWQ       negative control: a record counts on one master
 *
 * Property (a): when A reports, there was a moment since its check began at which B and
 * C were both waiting (the cycle was whole).
 */

#ifndef N
#define N 3
#endif
#ifndef POSTS
#define POSTS 2
#endif
#ifdef LOWQ
#define Q 1
#else
#define Q (N / 2 + 1)
#endif

#define PUB 1
#define WD 2

chan conn[2 * N] = [4] of { byte, byte };	/* waiter w's requests to master m: (kind, round) */
bool rec[2 * N];		/* waiter w's record on master m */
byte ackr[2 * N];		/* the round of the last request master m applied for waiter w */
bool waiting[2];		/* B, C */
bool checking;			/* A's check is under way */
bool everboth;			/* B and C were both waiting at some moment of A's check */

#define IX(w, m) ((w) * N + (m))

/* B and C waiting both, noted while A checks (call right after a flag changes). */
#define NOTE_BOTH	if :: checking && waiting[0] && waiting[1] -> everboth = true :: else -> skip fi

proctype master(byte m)
{
	byte kind, round, w;
end:
	do
	:: atomic {
			nempty(conn[IX(0, m)]) -> conn[IX(0, m)] ? kind, round;
			rec[IX(0, m)] = (kind == PUB);
			ackr[IX(0, m)] = round
		}
	:: atomic {
			nempty(conn[IX(1, m)]) -> conn[IX(1, m)] ? kind, round;
			rec[IX(1, m)] = (kind == PUB);
			ackr[IX(1, m)] = round
		}
	od
}

/* Masters that applied waiter w's round r or a later one. */
#if N == 3
#define ACKS(w, r) ((ackr[IX(w, 0)] >= r) + (ackr[IX(w, 1)] >= r) + (ackr[IX(w, 2)] >= r))
#elif N == 5
#define ACKS(w, r) ((ackr[IX(w, 0)] >= r) + (ackr[IX(w, 1)] >= r) + (ackr[IX(w, 2)] >= r) + \
					(ackr[IX(w, 3)] >= r) + (ackr[IX(w, 4)] >= r))
#else
#error "N must be 3 or 5"
#endif

/* Sends kind to every master for waiter w as round r, and waits for a quorum of acks. */
inline round_trip(w, kind, r)
{
	m = 0;
	do
	:: m < N -> conn[IX(w, m)] ! kind, r; m++
	:: else -> break
	od;
	(ACKS(w, r) >= Q)
}

proctype waiter(byte w)
{
	byte m, r = 0, posts = 0;

	if
	:: w == 0 -> skip	/* B waits from the start */
	:: w == 1 -> atomic { waiting[w] = true; NOTE_BOTH }
	fi;
	do
	:: posts < POSTS -> r++; posts++; round_trip(w, PUB, r)
	:: posts > 0 -> break
	od;
	/* the wait ends */
#ifdef CANCEL
	atomic { waiting[w] = false };
	r++; round_trip(w, WD, r);
#else
	r++; round_trip(w, WD, r);
	atomic { waiting[w] = false };
#endif
}

/* A's check: reads every master, counting each record; again if both made a quorum. */
proctype checker()
{
	byte m, b, c;
	bool report = false;

	atomic { checking = true; NOTE_BOTH };
	b = 0; c = 0; m = 0;
	do
	:: m < N -> atomic { b = b + rec[IX(0, m)]; c = c + rec[IX(1, m)] }; m++
	:: else -> break
	od;
	if
	:: b >= Q && c >= Q ->
#ifdef ONEREAD
		report = true
#else
		b = 0; c = 0; m = 0;
		do
		:: m < N -> atomic { b = b + rec[IX(0, m)]; c = c + rec[IX(1, m)] }; m++
		:: else -> break
		od;
		report = (b >= Q && c >= Q)
#endif
	:: else -> skip
	fi;
	assert(!report || everboth)	/* (a) */
}

init
{
	byte m;
	atomic {
		waiting[0] = true;
		m = 0;
		do
		:: m < N -> run master(m); m++
		:: else -> break
		od;
		run waiter(0);
		run waiter(1);
		run checker()
	}
}
