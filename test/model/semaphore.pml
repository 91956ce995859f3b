/*
 * semaphore.pml: the counting semaphore's safety rule (issue 27), for Spin.
 * test/model/README.md ("The semaphore model") says what is modelled, what is not, and
 * which -D options make each configuration; test/model/run runs them.
 *
 * The design: a semaphore of K permits over N independent masters with a quorum of Q
 * (default a majority, N/2 + 1) is K independent exclusive slots, the keys
 * "resource#1" .. "resource#K", each an ordinary Redlock key (SET key token NX PX ttl).
 * An attempt sends SET NX for every slot to every master in one round; each master
 * applies the requests one at a time, each connection's in the order sent, interleaved
 * with every other client's as it likes.  The client decides at any moment (every reply came, or its timeout fired)
 * from the replies so far: it holds slot s when a quorum of masters accepted its SET on
 * s; it keeps one such slot (any one: the model does not fix which) and undoes (deletes,
 * if the key still holds its token) every other slot it got or may still get (a SET in
 * flight); with no slot at a quorum it undoes all and fails.  Release deletes its slot
 * where the key still holds its token.
 *
 * The alternative (CTR): one counter per master, which admits a hold while fewer than K
 * holds are admitted there (INCR-if-below-K, kept as the set of admitted holds so that a
 * release or an undo removes only its own); a client holds when Q masters admitted it,
 * undoes its admissions when it fails, and removes them when it releases.  K + 1 holders
 * need (K + 1) Q admissions and the masters admit at most K N at once: it is safe only
 * when Q > K N / (K + 1).
 *
 * Time is not modelled: no TTL, no expiry, no validity, no clock.  A key set by a
 * request stays until its own hold deletes it.  That the validity (TTL minus the time
 * the round took, minus drift) bounds a slot's hold as it bounds the single key's is
 * Redlock's argument for one key, which redlock.pml checks (with expiry, crashes and
 * restarts); here each slot is such a key, and what is checked is what the slots add:
 * how holds of K keys combine into a count.  Masters do not crash (a restart's hazard is
 * redlock.pml's too).
 *
 * Connections: each client has one connection per master, a pipeline that the master
 * applies in the order sent, one request at a time, interleaved with the other
 * connections' as it likes: the round's SETs (slot 1 first), then the undo's deletes,
 * then the release's.  A delete for a slot whose SET is still in flight follows it (SDP,
 * SRP).  With ATT > 1, the deletes still in flight when the client starts its next
 * attempt are applied then, before its SETs are sent.
 *
 * Options (-D):
 *   N, K, C, ATT  masters (3 to 5), permits (1 to 3), clients (1 to 3), attempts per
 *                 client (defaults 3, 2, 3, 1); C ATT <= 8
 *   Q             the quorum (default N / 2 + 1)
 *   CTR           the alternative: a counter per master, no slots
 *   ANYSLOT       negative control (a planted bug): the client holds when a quorum of
 *                 masters accepted it on any slot, not on the same slot; it keeps a slot
 *                 it got somewhere
 *   KEEPALL       negative control (a planted bug): the client keeps every slot it got a
 *                 quorum on, undoing only the others
 *   NOB, NOC      leave out property (b) or (c) (to single out a control's property)
 *   SYNCDEL       deletes (undo and release) applied when sent, not left in flight
 *   SYNCREL       the release's deletes applied when sent (the undo's stay in flight)
 *   WAIT          the client decides only once every reply came (no timeout)
 *                 (these three make smaller state spaces)
 *
 * Properties (checked where a hold starts: a hold ends only at its release):
 *   (a) at most K clients hold a permit at once;
 *   (b) a client holds at most one slot;
 *   (c) no two clients hold the same slot (not with CTR, which has no slots).
 */

#ifndef N
#define N 3
#endif
#ifndef Q
#define Q (N / 2 + 1)
#endif
#ifndef K
#define K 2
#endif
#ifndef C
#define C 3
#endif
#ifndef ATT
#define ATT 1
#endif
#ifdef CTR
#define NK 1			/* one request per client and master: the counter */
#define NOC
#else
#define NK K			/* one request per client, master and slot */
#endif
#define NR (C * N * NK)
#define RQ(c, m, s) (((c) * N + (m)) * NK + (s))

/* A request (rq), on client c's connection to master m for slot s. */
#define NONE 0			/* none, or its reply read and forgotten */
#define SETP 1			/* SET key id NX in flight (CTR: admit id if fewer than K are) */
#define OK 2			/* it set the key (CTR: admitted) */
#define DELP 3			/* the undo's delete (if the key holds id) in flight (CTR: remove id) */
#define SDP 4			/* the SET in flight, and the undo's delete after it */
#define RELP 5			/* the release's delete in flight (after the undo's) */
#define SRP 6			/* the SET in flight, and the release's delete after it */
#define pending(r) (rq[r] != NONE && rq[r] != OK)
#ifdef SYNCDEL
#define SYNCUNDO 1
#else
#define SYNCUNDO 0
#endif
#define SETTING(r) (rq[r] == SETP || rq[r] == SDP || rq[r] == SRP)

byte rq[NR];
byte hid[C];			/* client c's hold: c * ATT + its attempt, 1 .. C ATT; every request
						 * in flight on its connections is for it (the next attempt's
						 * SETs go after the last one's deletes) */
#define RID(r) hid[(r) / (N * NK)]
byte sets[C];			/* client c's SETs in flight */

#ifdef CTR
byte adm[N];			/* master m's admitted holds (bit id - 1): its counter is their number */
#else
byte key[N * K];		/* the hold whose token is in master m's key for slot s, 0 = none */
#endif

/* What the clients believe */
byte holders;			/* clients that hold a permit */
byte heldby[NK];		/* client + 1 holding slot s, 0 = none */

#define BIT(x, i) (((x) >> (i)) & 1)
#define BITS(x) (BIT(x, 0) + BIT(x, 1) + BIT(x, 2) + BIT(x, 3) + BIT(x, 4) + BIT(x, 5) + BIT(x, 6) + BIT(x, 7))

/* After a SET: its reply (OK, or NONE for a refusal, forgotten), or the delete after it. */
inline after(r, reply)
{
	if
	:: rq[r] == SETP -> rq[r] = reply
	:: rq[r] == SDP -> rq[r] = DELP
	:: rq[r] == SRP -> rq[r] = RELP
	fi
}

/* A master applies (one step of) request r; x and y are scratch. */
inline apply(r)
{
	x = ((r) / NK) % N;
	y = (r) % NK;
	if
	:: SETTING(r) ->
		sets[(r) / (N * NK)]--;
#ifdef CTR
		if
		:: BITS(adm[x]) < K ->
			adm[x] = adm[x] | (1 << (RID(r) - 1));
			printf("master %d: admits hold %d (%d admitted)\n", x, RID(r), BITS(adm[x]));
			after(r, OK)
		:: else -> after(r, NONE)
		fi
#else
		if
		:: key[x * K + y] == 0 ->
			key[x * K + y] = RID(r);
			printf("master %d: slot %d set for hold %d\n", x, y + 1, RID(r));
			after(r, OK)
		:: else -> after(r, NONE)
		fi
#endif
	:: rq[r] == DELP || rq[r] == RELP ->
#ifdef CTR
		adm[x] = adm[x] & ~(1 << (RID(r) - 1));
#else
		if
		:: key[x * K + y] == RID(r) -> key[x * K + y] = 0;
			printf("master %d: slot %d deleted for hold %d\n", x, y + 1, RID(r))
		:: else -> skip
		fi;
#endif
		rq[r] = NONE	/* nobody waits for this reply */
	fi;
	x = 0; y = 0
}

/*
 * Client c deletes on request r (its hold's key), for the undo or (rel) the release:
 * after the SET in flight there, if one is.
 */
inline del(r, rel)
{
	if
	:: rq[r] == SETP && !rel -> rq[r] = SDP
	:: rq[r] == SETP && rel -> rq[r] = SRP
	:: rq[r] != SETP && !rel -> rq[r] = DELP
	:: rq[r] != SETP && rel -> rq[r] = RELP
	fi;
#if defined(SYNCDEL) || defined(SYNCREL)
	do
	:: (rel || SYNCUNDO) && pending(r) -> apply(r)
	:: else -> break
	od
#endif
}

/*
 * Client c undoes (or, rel, releases) every slot not in mask kp: deletes where it got
 * the key or may still get it (a refusal was forgotten).
 */
inline undo(kp, rel)
{
	m = 0;
	do
	:: m < N ->
		s = 0;
		do
		:: s < NK ->
			r = RQ(c, m, s);
			if
			:: BIT(kp, s) -> skip
			:: !BIT(kp, s) && (rq[r] == OK || rq[r] == SETP) -> del(r, rel)
			:: !BIT(kp, s) && rq[r] != OK && rq[r] != SETP -> skip
			fi;
			s++
		:: else -> break
		od;
		m++
	:: else -> break
	od;
	m = 0; s = 0; r = 0
}

/*
 * Client c decides, from the replies so far, preferring slot p: keep is the slot it
 * holds (a mask; KEEPALL: the slots), 0 when it fails.  One d_step: the interleaving
 * is at its start, any moment after the round was sent.
 */
#ifdef WAIT
#define DECIDES (sets[c] == 0)
#else
#define DECIDES 1
#endif

inline decide(p)
{
	cand = 0;
#ifdef ANYSLOT
	/* Planted bug: a quorum of masters that accepted it on any slot... */
	cnt = 0; m = 0;
	do
	:: m < N ->
		s = 0;
		do
		:: s < NK && rq[RQ(c, m, s)] == OK -> cnt++; break
		:: s < NK && rq[RQ(c, m, s)] != OK -> s++
		:: else -> break
		od;
		m++
	:: else -> break
	od;
	/* ... and it may keep any slot it got somewhere. */
	s = 0;
	do
	:: cnt >= Q && s < NK ->
		m = 0;
		do
		:: m < N && rq[RQ(c, m, s)] == OK -> cand = cand | (1 << s); break
		:: m < N && rq[RQ(c, m, s)] != OK -> m++
		:: else -> break
		od;
		s++
	:: else -> break
	od;
#else
	/* The slots a quorum of masters accepted it on. */
	s = 0;
	do
	:: s < NK ->
		cnt = 0; m = 0;
		do
		:: m < N -> if :: rq[RQ(c, m, s)] == OK -> cnt++ :: else -> skip fi; m++
		:: else -> break
		od;
		if :: cnt >= Q -> cand = cand | (1 << s) :: else -> skip fi;
		s++
	:: else -> break
	od;
#endif
	cnt = 0; m = 0; s = 0;

	/* It keeps one of them: p if it may, else the first (KEEPALL: all). */
#ifdef KEEPALL
	keep = cand;
#else
	if
	:: BIT(cand, p) -> keep = 1 << (p)
	:: else -> keep = cand & -cand		/* the lowest bit, 0 if none */
	fi;
#endif
	cand = 0;
	if
	:: keep != 0 ->
#ifdef CTR
		printf("client %d hold %d: holds (a quorum admitted it), %d holders before\n", c, hid[c], holders);
#else
		s = 0;
		do
		:: s < NK ->
			if
			:: BIT(keep, s) -> printf("client %d hold %d: holds slot %d, %d holders before\n", c, hid[c], s + 1, holders)
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
		s = 0;
#endif
		assert(holders < K);				/* (a) */
#ifndef NOB
		assert((keep & (keep - 1)) == 0);	/* (b) */
#endif
		s = 0;
		do
		:: s < NK ->
			if
			:: BIT(keep, s) ->
#ifndef NOC
				assert(heldby[s] == 0);		/* (c) */
#endif
				heldby[s] = c + 1
			:: else -> skip
			fi;
			s++
		:: else -> break
		od;
		s = 0;
		holders++
	:: else -> printf("client %d hold %d: fails\n", c, hid[c]); k++
	fi;
	/* Undo every slot not kept (all of them when it failed). */
	undo(keep, 0)
}

proctype client(byte c)
{
	byte k = 1, m, s, r, x, y, cnt, cand, keep;

	do
	:: k > ATT -> break
	:: d_step {
			/* SET NX for every slot on every master, in one round. */
			k <= ATT ->
			r = RQ(c, 0, 0);
			do
			:: r < RQ(c + 1, 0, 0) ->
				do
				:: pending(r) -> apply(r)	/* the last attempt's deletes first */
				:: else -> break
				od;
				rq[r] = SETP;
				r++
			:: else -> break
			od;
			r = 0;
			sets[c] = N * NK;
			hid[c] = c * ATT + k
		};

		/*
		 * Decide, at any moment (every reply came, or the timeout fired), keeping any
		 * slot held by a quorum: one alternative per slot it may prefer.
		 */
		if
		:: d_step { DECIDES -> decide(0) }
#if NK > 1
		:: d_step { DECIDES -> decide(1) }
#endif
#if NK > 2
		:: d_step { DECIDES -> decide(2) }
#endif
		fi;

		/*
		 * Hold, for as long as it likes; then release: delete the kept slot where it
		 * got it (or may still get it).
		 */
		if
		:: keep == 0	/* it failed */
		:: d_step {
			keep != 0 ->
			printf("client %d hold %d: releases\n", c, hid[c]);
			holders--;
			s = 0;
			do
			:: s < NK -> if :: BIT(keep, s) -> heldby[s] = 0 :: else -> skip fi; s++
			:: else -> break
			od;
			s = 0;
			undo(0, 1);
			keep = 0;
			k++
		}
		fi
	od
}

/*
 * Master m0 applies the next request in flight on client cc's connection, in the order
 * the client sent them: the first slot's SET in flight, else the first slot's undo
 * delete, else the release's.
 */
#if NK == 1
#define CONNP(cc) pending(RQ(cc, m0, 0))
#elif NK == 2
#define CONNP(cc) (pending(RQ(cc, m0, 0)) || pending(RQ(cc, m0, 1)))
#else
#define CONNP(cc) (pending(RQ(cc, m0, 0)) || pending(RQ(cc, m0, 1)) || pending(RQ(cc, m0, 2)))
#endif
#define AP(cc) :: d_step { CONNP(cc) -> next(cc); apply(r); r = 0 }

inline next(cc)
{
	r = RQ(cc, m0, 0);
	do
	:: r < RQ(cc, m0 + 1, 0) && !SETTING(r) -> r++
	:: else -> break
	od;
	if
	:: r == RQ(cc, m0 + 1, 0) ->
		r = RQ(cc, m0, 0);
		do
		:: r < RQ(cc, m0 + 1, 0) && rq[r] != DELP -> r++
		:: else -> break
		od
	:: else -> skip
	fi;
	if
	:: r == RQ(cc, m0 + 1, 0) ->
		r = RQ(cc, m0, 0);
		do
		:: rq[r] != RELP -> r++
		:: else -> break
		od
	:: else -> skip
	fi
}

proctype master(byte m0)
{
	byte r, x, y;

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

init
{
	byte i;

	atomic {
		i = 0;
		do
		:: i < N -> run master(i); i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < C -> run client(i); i++
		:: else -> break
		od;
		i = 0
	}
}
