/*
 * redlock.pml: Redlock (doc/redlock.md §3-§6, §8) and the fencing token taken through
 * the lock (§9, src/protocol/fence.c), for Spin.  test/model/README.md says what is modelled,
 * what is not, and which -D options make each configuration; test/model/run runs them.
 *
 * Time is discrete and kept as what is left: a key lives TTL ticks after its SET or
 * extend (kl), a client's validity is TTL from the start of the round that took or
 * extended the lock (vl, rb), and each tick takes one from all of them.  The clock may
 * tick for ever, yet the state space stays finite.  Clocks are perfect (no drift).
 * Each client has one request slot per master (a connection): sending puts a request
 * there, the master's process applies it whenever it likes (delay, reordering across
 * clients and masters), and the client decides a round once a quorum answered yes,
 * every master answered, or a tick has passed (its timeout), from the replies so far.
 * A request still in flight when the client sends the next one on the same connection
 * is applied first (TCP keeps order); a crash drops the requests in flight to that
 * master.  A client may stall anywhere while time passes: nothing ties its steps to
 * the clock.
 *
 * Options (-D):
 *   N, C, ATT, TTL         masters (3 to 5), clients (2 or 3), lock attempts per client,
 *                          TTL in ticks (defaults 3, 2, 1, 1)
 *   CRASHES                master crashes allowed in a run (default 1)
 *   PERSIST                a restarted master keeps its keys and counters (appendfsync
 *                          always); without it a master restarts empty
 *   RDELAY                 ticks a crashed master stays down (default 0; TTL is §8's
 *                          delayed restart)
 *   FLOOR                  the caller's wall-clock floor (1.4), abstractly (see flh below):
 *                          the client raises T to its own clock's floor
 *   MFLOOR                 the master's floor (1.5): the fence read script replies the
 *                          larger of the counter and its own clock's floor - 1
 *   CLAG                   ticks client 1's clock is behind client 0's (default 0)
 *   MLAG                   ticks the clocks of masters 0 .. Q-1 (a quorum) are behind the
 *                          others' (default 0)
 *   ALLDOWN                a crash may take every master down at once (each restarts
 *                          after RDELAY, empty without PERSIST); one crash in all
 *   YOUNG                  a master up fewer than YOUNG ticks since its restart does not
 *                          count toward the fence read quorum (the uptime rule)
 *   QUARANTINE             the client's restart quarantine: a master up fewer than
 *                          QUARANTINE ticks since its restart counts toward no quorum in
 *                          any round (acquire, extend, fence read, fence write): its
 *                          replies are failures.  Its age is read with its reply (when it
 *                          applies the request)
 *   QLATE                  with QUARANTINE: the age is read when the client counts the
 *                          reply instead (a reply made young counts if the client reads
 *                          it late enough)
 *   ONE_ROUND              negative control: no fencing rounds; the acquire's SET NX
 *                          increments a counter beside the key and the token is the
 *                          largest counter of its quorum (a counter beside the lock)
 *   NOFENCE                the lock alone: no fencing rounds, no guarded write
 *   NOEXT, SYNCREL         no extend; releases applied at once (smaller state spaces)
 *   WROUNDS                write rounds a token may take (conflict retries; default 2)
 */

#ifndef N
#define N 3
#endif
#define Q (N / 2 + 1)
#ifndef C
#define C 2
#endif
#ifndef ATT
#define ATT 1
#endif
#ifndef TTL
#define TTL 1
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef RDELAY
#define RDELAY 0
#endif
#ifndef WROUNDS
#define WROUNDS 2
#endif
#ifndef CLAG
#define CLAG 0
#endif
#ifndef MLAG
#define MLAG 0
#endif
#if CLAG > MLAG
#define HLAG CLAG
#else
#define HLAG MLAG
#endif
#define NS (C * N)		/* request slots: one per client and master */
#define NH (C * ATT)	/* holds (lock attempts); a hold's id is its token on the masters */

/* Requests. */
#define SET 1			/* SET key id NX PX ttl */
#define REL 2			/* release script: delete the key if it holds id */
#define EXT 3			/* extend script: new TTL if the key holds id */
#define FREAD 4			/* fence read: the counter if the key holds id, else -1 */
#define FWRITE 5		/* fence write: counter = arg if the key holds id and counter < arg */

/*
 * Replies (rep, 0 = none yet): SET 1 nil, 2 OK (ONE_ROUND: 2 + the counter); EXT 1 no,
 * 2 yes; FREAD 1 for -1, 2 + the counter; FWRITE 1 not our key, 2 set, 3 + the counter
 * that refused it.
 */

/* Masters */
byte key[N];			/* hold id in the lock's key, 0 when absent */
byte kl[N];				/* ticks the key has left */
byte ctr[N];			/* the fencing counter */
bool up[N];
byte dt[N];				/* ticks down, up to RDELAY */
byte crashes;
#ifdef YOUNG
#define UTY YOUNG
#else
#define UTY 0
#endif
#ifdef QUARANTINE
#define UTQ QUARANTINE
#else
#define UTQ 0
#endif
#if UTY > UTQ
#define UTMAX UTY
#else
#define UTMAX UTQ
#endif
#if defined(YOUNG) || defined(QUARANTINE)
#define UPTIME
byte ut[N];				/* ticks up since a restart, up to UTMAX; UTMAX if never down */
#endif

/* Connections */
byte op[NS];
byte rid[NS];
byte arg[NS];
byte rep[NS];

/* What the clients believe, and the record the properties are checked against. */
byte vl[C];				/* validity left: client c believes it holds while vl[c] > 0 */
byte rb[C];				/* what is left of TTL since client c's acquire or extend began */
byte tok[NH];			/* token granted to each hold, 0 = none */
byte gmask;				/* holds granted a token so far (bit id - 1) */
byte before[C];			/* gmask when the client's current hold began its read */
byte res;				/* the guarded resource: the last token it accepted */
byte resmask;			/* holds granted before some accepted writer began its read */

#if defined(FLOOR) || defined(MFLOOR)
/*
 * The wall-clock floor, abstractly: flh[0] is the floor of the fastest clock, and each
 * tick raises it above every token chosen so far (the real floor, whole seconds x 10^6,
 * rises by more than the tokens one second can take, a tick is at least a second: TTL
 * >= 1 s, and every token comes from counters and floors of clocks no faster than that
 * one).  flh[k] is what it was k ticks ago: the floor of a clock k ticks behind.  With
 * FLOOR a token is at least its client's floor (client 1's clock is CLAG ticks behind);
 * with MFLOOR at least the floor of a master of its read quorum (the clocks of masters
 * 0 .. Q-1 are MLAG ticks behind).
 */
byte flh[HLAG + 1];
byte hiT;				/* the largest token chosen so far, granted or not */

inline raise_hiT()
{
	if
	:: T > hiT -> hiT = T
	:: else -> skip
	fi
}
#endif

#define pending(s) (op[s] != 0 && rep[s] == 0)

/*
 * Client c may decide its round: a quorum replied between lo and hi, or every master
 * replied, or its timeout fired (a tick has passed since the round began).
 */
#if defined(QUARANTINE) && defined(QLATE)
/*
 * QLATE: a reply counts only if its master has been up QUARANTINE ticks when the client
 * counts it.  A crash drops the replies not yet read (the connection is reset), so a
 * reply still here comes from the master's current incarnation, the one whose uptime
 * the client read at the connection's handshake.
 */
#define QOK(i) (ut[i] >= QUARANTINE)
#define R(i, lo, hi) (rep[c * N + i] >= lo && rep[c * N + i] <= hi && QOK(i))
#else
#define R(i, lo, hi) (rep[c * N + i] >= lo && rep[c * N + i] <= hi)
#endif
#define P(i) pending(c * N + i)
#if N == 3
#define YES(lo, hi) (R(0, lo, hi) + R(1, lo, hi) + R(2, lo, hi))
#define ANYP (P(0) || P(1) || P(2))
#elif N == 4
#define YES(lo, hi) (R(0, lo, hi) + R(1, lo, hi) + R(2, lo, hi) + R(3, lo, hi))
#define ANYP (P(0) || P(1) || P(2) || P(3))
#elif N == 5
#define YES(lo, hi) (R(0, lo, hi) + R(1, lo, hi) + R(2, lo, hi) + R(3, lo, hi) + R(4, lo, hi))
#define ANYP (P(0) || P(1) || P(2) || P(3) || P(4))
#endif
#define DECIDES(lo, hi) (YES(lo, hi) >= Q || !ANYP || rb[c] < TTL)

/* A master applies the request in slot s (master s % N). */
inline apply(s)
{
	m = (s) % N;
	if
	:: op[s] == SET ->
		if
		:: key[m] == 0 ->
			key[m] = rid[s];
			kl[m] = TTL;
			printf("master %d: SET NX for hold %d\n", m, rid[s]);
#ifdef ONE_ROUND
			ctr[m]++;
			rep[s] = 2 + ctr[m]
#else
			rep[s] = 2
#endif
		:: else -> rep[s] = 1
		fi
	:: op[s] == REL ->
		if
		:: key[m] == rid[s] -> key[m] = 0; kl[m] = 0
		:: else -> skip
		fi;
		op[s] = 0; rid[s] = 0	/* nobody waits for this reply */
	:: op[s] == EXT ->
		if
		:: key[m] == rid[s] -> kl[m] = TTL; rep[s] = 2
		:: else -> rep[s] = 1
		fi
	:: op[s] == FREAD ->
		if
#ifdef YOUNG
		:: ut[m] < YOUNG -> rep[s] = 1	/* too young to count */
		:: ut[m] >= YOUNG && key[m] == rid[s] ->
#else
		:: key[m] == rid[s] ->
#endif
			rep[s] = 2 + ctr[m];
#ifdef MFLOOR
			if
			:: m < Q && ctr[m] + 1 < flh[MLAG] -> rep[s] = 2 + flh[MLAG] - 1
			:: m >= Q && ctr[m] + 1 < flh[0] -> rep[s] = 2 + flh[0] - 1
			:: else -> skip
			fi;
#endif
			printf("master %d: hold %d reads counter %d (reply %d)\n", m, rid[s], ctr[m], rep[s] - 2)
		:: else -> rep[s] = 1
		fi
	:: op[s] == FWRITE ->
		if
		:: key[m] != rid[s] -> rep[s] = 1
		:: key[m] == rid[s] && ctr[m] < arg[s] -> ctr[m] = arg[s]; rep[s] = 2;
			printf("master %d: hold %d writes counter %d\n", m, rid[s], arg[s])
		:: else -> rep[s] = 3 + ctr[m]
		fi
	fi
#if defined(QUARANTINE) && !defined(QLATE)
	;
	/*
	 * The restart quarantine, the master's age read with its reply: the reply of a
	 * master up fewer than QUARANTINE ticks is a failure, 1, which no round counts (as
	 * yes, a counter or a conflict).  The request still acts on the master.
	 */
	if
	:: rep[s] != 0 && ut[m] < QUARANTINE -> rep[s] = 1
	:: else -> skip
	fi
#endif
}

/* Client c sends request o (argument a) for hold id to every master that is up. */
inline send(o, a)
{
	m = 0;
	do
	:: m < N ->
		s = c * N + m;
		if
		:: pending(s) -> apply(s)	/* the older request on this connection first */
		:: else -> skip
		fi;
		if
		:: up[m] -> op[s] = o; rid[s] = id; arg[s] = a; rep[s] = 0
		:: else -> op[s] = 0; rep[s] = 0	/* connection refused */
		fi;
		m++
	:: else -> break
	od;
	m = 0; s = 0
}

/* Counts this round's replies r with lo <= r <= hi into cnt, the largest into mx. */
inline count(lo, hi)
{
	cnt = 0; mx = 0; m = 0;
	do
	:: m < N ->
		s = c * N + m;
		if
#if defined(QUARANTINE) && defined(QLATE)
		:: rid[s] == id && rep[s] >= lo && rep[s] <= hi && QOK(m) ->
#else
		:: rid[s] == id && rep[s] >= lo && rep[s] <= hi ->
#endif
			cnt++;
			if
			:: rep[s] > mx -> mx = rep[s]
			:: else -> skip
			fi
		:: else -> skip
		fi;
		m++
	:: else -> break
	od;
	m = 0; s = 0
}

/* Forgets this client's answered requests: their replies are no longer read. */
inline forget()
{
	m = 0;
	do
	:: m < N ->
		s = c * N + m;
		if
		:: rep[s] != 0 -> op[s] = 0; rid[s] = 0; arg[s] = 0; rep[s] = 0
		:: else -> skip
		fi;
		m++
	:: else -> break
	od;
	m = 0; s = 0
}

/* (a) Client c now believes it holds the lock: no other client does, within validity. */
inline exclusive()
{
	m = 0;
	do
	:: m < C ->
		assert(m == c || vl[m] == 0);
		m++
	:: else -> break
	od;
	m = 0
}

/* Marks the start of a token's read: what was granted before it. */
inline read_begins()
{
	before[c] = gmask
}

/*
 * (b) Hold id is granted token T: larger than every token granted before its read
 * began, and no other hold's.
 */
inline grant()
{
	assert(T > 0);
	m = 0;
	do
	:: m < NH ->
		assert(((before[c] >> m) & 1) == 0 || tok[m] < T);
		assert(tok[m] != T);
		m++
	:: else -> break
	od;
	m = 0;
	printf("client %d hold %d: granted token %d\n", c, id, T);
	tok[id - 1] = T;
	gmask = gmask | (1 << (id - 1))
}

proctype client(byte c)
{
	byte k = 1, id, T, w, cnt, mx, m, s;

acquire:
	/* Acquire (§3): SET NX on every master; a quorum said OK within the TTL. */
	atomic {
		id = c * ATT + k;
		rb[c] = TTL;
#ifdef ONE_ROUND
		read_begins();
#endif
		send(SET, 0)
	}
	atomic {
#ifdef ONE_ROUND
		DECIDES(2, 255) -> count(2, 255);
#else
		DECIDES(2, 2) -> count(2, 2);
#endif
		if
		:: cnt >= Q && rb[c] > 0 ->
			vl[c] = rb[c];
			printf("client %d hold %d: acquired\n", c, id);
			exclusive();
#ifdef ONE_ROUND
			T = mx - 2;
			grant();
#endif
			cnt = 0; mx = 0; rb[c] = 0; forget()
		:: else -> cnt = 0; mx = 0; rb[c] = 0; forget(); goto release	/* §3 step 5: undo */
		fi
	}

	/* Extend (§6), or not. */
	if
	:: skip
#ifndef NOEXT
	:: atomic { rb[c] = TTL; send(EXT, 0) };
		atomic {
			DECIDES(2, 2) -> count(2, 2);
			if
			:: cnt >= Q && vl[c] > 0 -> vl[c] = rb[c]; exclusive()
			:: else -> skip	/* 08006 or lost: the old validity stands */
			fi;
			cnt = 0; mx = 0; rb[c] = 0; forget()
		}
#endif
	fi;

#if !defined(ONE_ROUND) && !defined(NOFENCE)
	/* Fence round 1: the counters of a quorum of masters where our key is. */
	atomic { rb[c] = TTL; read_begins(); send(FREAD, 0) }
	atomic {
		DECIDES(2, 255) -> count(2, 255);
		if
		:: cnt >= Q ->
			T = mx - 2 + 1;
#ifdef FLOOR
			if
			:: c == 1 && T < flh[CLAG] -> T = flh[CLAG]
			:: c != 1 && T < flh[0] -> T = flh[0]
			:: else -> skip
			fi;
#endif
#if defined(FLOOR) || defined(MFLOOR)
			raise_hiT();
#endif
			cnt = 0; mx = 0; rb[c] = 0; forget()
		:: else -> cnt = 0; mx = 0; rb[c] = 0; forget(); goto release
		fi
	}

	/*
	 * Fence round 2: set-if-greater where our key still is, decided within the
	 * validity; a conflict is retried above the highest counter reported.
	 */
	w = 1;
write:
	atomic { rb[c] = TTL; send(FWRITE, T) };
	atomic {
		DECIDES(2, 2) -> count(2, 2);
		if
		:: cnt >= Q && vl[c] > 0 -> grant(); cnt = 0; mx = 0; rb[c] = 0; forget()
		:: else ->
			count(3, 255);
			if
			:: cnt > 0 && w < WROUNDS && vl[c] > 0 ->
				T = mx - 3 + 1;
#if defined(FLOOR) || defined(MFLOOR)
				raise_hiT();
#endif
				w++;
				cnt = 0; mx = 0; rb[c] = 0; forget();
				goto write
			:: else -> cnt = 0; mx = 0; rb[c] = 0; forget(); goto release
			fi
		fi
	}
#endif

	/*
	 * The guarded write, maybe long after (a pause): accepted when its token is at
	 * least the last one accepted.  (b) It is not from a hold granted its token before
	 * an accepted writer began its read.
	 */
#ifndef NOFENCE
	atomic {
		if
		:: res <= T ->
			printf("client %d hold %d: resource accepts token %d\n", c, id, T);
			assert(((resmask >> (id - 1)) & 1) == 0);
			res = T;
			resmask = resmask | before[c]
		:: else -> printf("client %d hold %d: resource refuses token %d\n", c, id, T)
		fi
	}
#endif

release:
	/* Release (§5), or undo: everywhere, without waiting for the replies. */
	atomic {
		vl[c] = 0; rb[c] = 0; before[c] = 0; T = 0; w = 0;
		send(REL, 0);
#ifdef SYNCREL
		m = 0;
		do
		:: m < N -> s = c * N + m; if :: pending(s) -> apply(s) :: else -> skip fi; m = s % N + 1
		:: else -> break
		od;
		m = 0; s = 0;
#endif
		k++
	};
	if
	:: k <= ATT -> goto acquire
	:: else -> skip
	fi
}

/* Master m: applies the requests in flight to it in any order; crashes and restarts. */
proctype master(byte m0)
{
	byte m, s;

end:
	do
	:: atomic {
		up[m0] && crashes < CRASHES ->
		up[m0] = 0;
		printf("master %d: crashes\n", m0);
		crashes++;
		s = 0;
		do
		:: s < C -> op[s * N + m0] = 0; rep[s * N + m0] = 0; s++
		:: else -> break
		od;
		s = 0;
#ifndef PERSIST
		key[m0] = 0; kl[m0] = 0; ctr[m0] = 0
#endif
	}
	:: atomic { !up[m0] && dt[m0] >= RDELAY -> up[m0] = 1; dt[m0] = 0;
#ifdef UPTIME
		ut[m0] = 0;
#endif
		printf("master %d: restarts\n", m0) }
	:: atomic { pending(0 * N + m0) -> s = 0 * N + m0; apply(s); m = 0; s = 0 }
#if C > 1
	:: atomic { pending(1 * N + m0) -> s = 1 * N + m0; apply(s); m = 0; s = 0 }
#endif
#if C > 2
	:: atomic { pending(2 * N + m0) -> s = 2 * N + m0; apply(s); m = 0; s = 0 }
#endif
	od
}

#ifdef ALLDOWN
/*
 * Every master crashes at once (a power cut, a deploy): each drops its requests in
 * flight and comes back after RDELAY ticks through its own process, empty without
 * PERSIST.  Uses up the run's crash.
 */
proctype outage()
{
	byte i, s;

	atomic {
		crashes < CRASHES ->
		crashes++;
		printf("every master crashes\n");
		i = 0;
		do
		:: i < N ->
			up[i] = 0;
			s = 0;
			do
			:: s < C -> op[s * N + i] = 0; rep[s * N + i] = 0; s++
			:: else -> break
			od;
#ifndef PERSIST
			key[i] = 0; kl[i] = 0; ctr[i] = 0;
#endif
			i++
		:: else -> break
		od;
		i = 0; s = 0
	}
}
#endif

/*
 * The clock: a tick takes one from every time left (keys go when theirs reaches 0);
 * times are kept as what is left, so the clock may tick for ever in a finite state space.
 */
proctype clock()
{
	byte i;

end:
	do
	:: d_step {
		printf("tick\n");
		i = 0;
		do
		:: i < N ->
			if
			:: kl[i] > 0 -> kl[i]--; if :: kl[i] == 0 -> key[i] = 0 :: else -> skip fi
			:: else -> skip
			fi;
			if
			:: !up[i] && dt[i] < RDELAY -> dt[i]++
			:: else -> skip
			fi;
#ifdef UPTIME
			if
			:: up[i] && ut[i] < UTMAX -> ut[i]++
			:: else -> skip
			fi;
#endif
			i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < C ->
			if :: vl[i] > 0 -> vl[i]-- :: else -> skip fi;
			if :: rb[i] > 0 -> rb[i]-- :: else -> skip fi;
			i++
		:: else -> break
		od;
#if defined(FLOOR) || defined(MFLOOR)
		i = HLAG;
		do
		:: i > 0 -> flh[i] = flh[i - 1]; i--
		:: else -> break
		od;
		flh[0] = hiT + 1;
#endif
		i = 0
	}
	od
}

init
{
	byte i;

	atomic {
		i = 0;
		do
		:: i < N -> up[i] = 1;
#ifdef UPTIME
			ut[i] = UTMAX;
#endif
			run master(i); i++
		:: else -> break
		od;
#if defined(FLOOR) || defined(MFLOOR)
		i = 0;
		do
		:: i <= HLAG -> flh[i] = 1; i++
		:: else -> break
		od;
#endif
#ifdef ALLDOWN
		run outage();
#endif
		i = 0;
		do
		:: i < C -> run client(i); i++
		:: else -> break
		od;
		i = 0;
		run clock()
	}
}
