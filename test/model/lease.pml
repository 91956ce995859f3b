/*
 * lease.pml: the loss protocol of an auto-extended lock (src/shared/lease.c), for Spin.
 * test/model/README.md ("The lease model") says what is modelled, what is not, and
 * which -D options make each configuration; test/model/run runs them.
 *
 * One lock, taken with redlock.cancel_on_loss on and auto-extended, and the processes
 * around it:
 *   owner   the backend that holds it: idle, running a statement (in a transaction),
 *           idle in the transaction; a statement ends, or raises an ERROR (a cancel,
 *           or any error: PostgreSQL's error recovery then disables every timeout and
 *           aborts the transaction); COMMIT (the commit check) or ROLLBACK.  A SIGINT
 *           that reaches it while it is not running a statement is dropped, and so is
 *           one that reaches a statement after its last check for interrupts.
 *   worker  the background worker: renews the lease (a round goes out, its answer
 *           comes later: renewed, refused, or too few answered), stalls (SIGSTOP, a
 *           starved process) and resumes, is terminated and restarted by the
 *           postmaster after RDELAY ticks (a round in flight is then forgotten).
 *   masters their answer to a renewal: OK, refused (the lock lost), or too few
 *           answers; a renewal is never OK once another client took the lock.
 *   dog     the owner's watchdog timer: cancels the running statement (SIGINT to
 *           itself) once the validity is within a tick of running out.
 *   clock   a tick takes one from the validity left; time is kept as what is left.
 *   other   another client, which takes the lock once the validity ran out.
 *
 * Time: the validity is TTL ticks from the start of the round that renewed it (vl, what
 * is left).  The watchdog's period is shorter than its margin (50 ms, against two
 * periods): when it is armed and due, it fires before the clock ticks (the clock
 * waits for it).  Nothing else ties a step to the clock: the worker and the owner may
 * take as long as they like between two steps.
 *
 * Identities: lease.c names a run-out by the validity's end (valid_until_ms), which
 * changes when a renewal succeeds or a loss cuts it short, and stays when the validity
 * just runs out (or is lost after it ran out).  The model keeps what refers to it
 * (fired, told, and the ghost's gt) relative to the current validity, and resets them
 * when it changes (newval).
 *
 * Rules (-D): the default is lease.c as of 43a1452: the watchdog does not fire while the
 * owner is idle (an idle tick only forgets an unexplained cancel), fires once per run-out
 * whatever the statements, and checks at once at every statement start (ExecutorStart,
 * ProcessUtility), which comes after the statement's parse and plan (PLANS: the backend
 * is "running" from the statement's start, so the watchdog fires there too); the margin
 * is at least a tick; a gap's commit refusal tells nothing.  The default FAILS (b1): a
 * cancel dropped (its statement ended before it was seen, or another ERROR came first)
 * leaves the run-out fired for, and no later statement is cancelled for it.
 *   UNFIRE      a fix: fired once per run-out and top-level statement (reset when the
 *               backend starts a statement: a cancel caught in a nested statement does
 *               not fire again, a dropped one does); the safe configurations use it
 *   PHASE       the timer's phase: a statement begun within the margin, less than a
 *               period before the run-out, may see no timer expiry before it (the
 *               idealisation without it: a due watchdog fires before the next tick)
 *   NOPLAN      no parse and plan: a statement starts at ExecutorStart
 *   NOCHECK     no check at once at statement start (lease.c before 43a1452)
 *   OLD_IDLE    527b9e1's watchdog: it fires while the owner is idle (dropped), and a
 *               re-arm (ExecutorStart, abort) lets it fire again, with no check
 *   GAP_TELLS   527b9e1: a refusal for a gap (a renewal that came after the validity had
 *               run out) records the owner as told of the current validity's run-out
 *   SLOWDOG     the watchdog's period is longer than its margin (527b9e1's TTL/6 margin,
 *               a TTL under 300 ms)
 *   BEGIN_HELD  the owner begins a transaction only while the validity is not out (to
 *               single out defect 1 among the old rules' counterexamples)
 *   NOA, NOB1, NOB2  leave out a property's assertion (to single out a defect)
 *   OLD_LOSS    the old loss rules: the watchdog fires once per lock and sets
 *               self_cancelled for good, only while the lock is not lost; the worker
 *               cancels the owner when it loses the lock, unless self_cancelled
 *               (cancel_sent); the old commit check
 *   OLD_ARMING  the old arming: the watchdog is armed when the lock registers only, and
 *               error recovery disables it for good
 *   EXTEND      the owner calls redlock_extend() in its statements
 *   TTL, RDELAY the TTL in ticks (default 3: renewal due at TTL/3), the worker's
 *               restart delay in ticks (default 1)
 *
 * Properties (the invariant in lease.c's header):
 *   (a) no transaction of the owner commits if the validity ran out at any point after
 *       it began (or was out when it began), unless the owner was told of that run-out
 *       in an earlier transaction (ghost gbad, checked at COMMIT);
 *   (b1) a statement running when the validity runs out was cancelled before (a SIGINT
 *       is pending), unless the owner was told of that run-out before (checked at the
 *       tick that runs it out);
 *   (b2) a statement running while the validity is out (it started after the run-out,
 *       or the masters refused a renewal) is cancelled within a tick, unless the owner
 *       was told of that run-out (checked at every tick).
 */

#ifndef TTL
#define TTL 3
#endif
#ifndef RDELAY
#define RDELAY 1
#endif

/* The lease (lease.c's RedlockLease): HELD or LOST, never held again once lost. */
#define HELD 1
#define LOST 2
byte st = HELD;
byte vl = TTL;			/* validity left, in ticks: 0 once it ran out or the lock is lost */
bool gapx;				/* a gap ended since the current transaction began (gap_end_ms) */

/* The worker */
#define WRUN 0
#define WSTOP 1			/* SIGSTOPped, starved */
#define WDEAD 2			/* terminated; the postmaster restarts it after RDELAY ticks */
byte ws;
bool wr;				/* a renewal round in flight */
byte rt;				/* ticks since it went out (up to TTL) */
byte wd;				/* ticks dead (up to RDELAY) */

/* The owner */
#define IDLE 0			/* no transaction, reading a command */
#define RUN 1			/* running a statement, in a transaction */
#define IIX 2			/* idle in transaction */
#define PLANS 3			/* running a statement, before its ExecutorStart (parse, plan) */
byte os;
bool cp;				/* a SIGINT pending: the running statement is cancelled */
#define RUNNING (os == RUN || os == PLANS)

/* The watchdog, and what the owner was told (lease.c's RedlockLeaseWatch) */
bool armed = 1;
bool fired;				/* fired for the current validity in this statement; OLD_LOSS:
						 * fired for the lock (self_cancelled, never cleared) */
byte wf;				/* watchdog_fired, not yet explained: 1 for the current
						 * validity, 2 for an older one, 0 none */
bool told;				/* told_run_out_ms is the current validity's end */
bool toldx;				/* ... and told_lxid the current transaction */

/* EXTEND: the owner's redlock_extend() on the lock (redlock_registry_extend) */
bool ex;				/* the owner waits for the worker's answer */
bool rq;				/* a request for a new TTL is pending (request_seq != done_seq) */
bool wq;				/* the round in flight carries it */
byte ans;				/* the answer to the owner's wait: 1 renewed, 2 too few answered */
bool gone;				/* the owner let go of the lock (a false from redlock_extend) */
bool cx;				/* ... and its commit refusal is carried to the transaction's end */

/* The old rules' flags */
bool cs;				/* cancel_sent: the worker cancelled the owner at the loss */
bool lostx;				/* lost_at >= xact_start */
bool ranx;				/* valid_until >= xact_start (ran_out_at >= xact_start) */

/* Ghosts: what the properties are checked against */
bool gt;				/* the owner was told of the current validity's run-out */
bool gtx;				/* ... in the current transaction */
bool gbad;				/* (a) the current transaction must not commit */
bool taken;				/* another client holds the lock */

/* The watchdog is due: armed, and the validity within a tick of running out. */
#ifdef OLD_LOSS
#define DOG_DUE (armed && st == HELD && vl <= 1 && !fired)
#elif defined(OLD_IDLE)
#define DOG_DUE (armed && vl <= 1 && !fired && !told && !gone)
#else
#define DOG_DUE (armed && RUNNING && vl <= 1 && !fired && !told && !gone)
#endif
#if defined(OLD_LOSS) || defined(OLD_IDLE)
#define FIRES_IDLE 1
#endif

/*
 * The clock waits for a due watchdog: its period is shorter than its margin.  SLOWDOG:
 * the period is longer than the margin (min(2 periods, TTL/6) with a TTL under 6
 * periods, 300 ms): it may miss the last tick before the run-out, and fires at the
 * latest in the tick after it.
 */
#ifdef SLOWDOG
#define CLOCK_MAY_TICK !(DOG_DUE && vl == 0)
#else
#define CLOCK_MAY_TICK (!DOG_DUE || late)
#endif
bool late;				/* PHASE: the owner began a statement within the margin; the
						 * timer's next expiry may come after the next tick */

/* The validity changes (a renewal, or a loss that cuts it): a new run-out to name. */
inline newval()
{
	gt = 0; gtx = 0;
	if
	:: wf == 1 -> wf = 2
	:: else -> skip
	fi;
#ifndef OLD_LOSS
	fired = 0;
#endif
	told = 0; toldx = 0;
	late = 0		/* PHASE's late was for the old run-out */
}

/* (a) The validity runs out now: a transaction under way must not commit, unless told. */
inline ran_out()
{
	if
	:: os != IDLE && !(gt && !gtx) -> gbad = 1
	:: else -> skip
	fi
}

/* (a) at a commit */
inline check_a()
{
#ifndef NOA
	assert(!gbad)
#else
	skip
#endif
}

/* The owner was told of the current validity's run-out (an error says so). */
inline tell()
{
	gt = 1; gtx = 1
}

/* The watchdog's check (lease_watchdog_tick in lease.c): fires when due; while the owner is idle it only
 * forgets an unexplained cancel (FIRES_IDLE: fires into the idle owner, dropped). */
inline dog_check()
{
	if
	:: DOG_DUE ->
		fired = 1; wf = 1;
		if
		:: RUNNING -> cp = 1; printf("dog: cancels the statement\n")
		:: else -> printf("dog: SIGINT dropped (idle)\n")
		fi
	:: else -> skip
	fi
}

/*
 * The watchdog re-armed (lease.c's redlock_lease_rearm): at a statement's start
 * (ExecutorStart, ProcessUtility: check, the at-once check), and at abort.  OLD_IDLE
 * (527b9e1): a re-arm lets it fire again for a run-out it fired for (fired and the
 * unexplained cancel reset), without a check.  OLD_ARMING: no re-arm at all.
 */
inline rearm(check)
{
	skip;
#ifndef OLD_ARMING
	armed = 1;
#if defined(OLD_LOSS)
	skip	/* self_cancelled stays */
#elif defined(OLD_IDLE)
	fired = 0; wf = 0
#else
	if
	:: check ->
#ifndef NOCHECK
		dog_check()
#else
		skip
#endif
	:: else -> skip
	fi
#endif
#endif
}
/* An ERROR in the owner (a cancel, a refused commit, any error): recovery and abort. */
inline error_recovery()
{
	armed = 0;				/* disable_all_timeouts */
	cp = 0;					/* QueryCancelPending = false */
	rearm(0);				/* AbortTransaction: XACT_EVENT_ABORT */
	os = IDLE
}

/* The worker loses the lease (redlock_lease_lose, or the old entry_mark_lost). */
inline lose()
{
	st = LOST; wr = 0; rt = 0; wq = 0;
	if
	:: vl > 0 -> vl = 0; newval(); ran_out()	/* the validity ends now */
	:: else -> skip
	fi;
#ifdef OLD_LOSS
	lostx = 1;
	if
	:: !fired ->			/* may_cancel: not self_cancelled */
		cs = 1;
		if
		:: RUNNING -> cp = 1
		:: else -> skip	/* dropped: the owner is idle */
		fi
	:: else -> skip
	fi
#endif
}

/* The worker answers the owner's request its round carried (done_seq, answer). */
inline answer(a)
{
	if
	:: wq -> rq = 0; wq = 0;
		if
		:: ex -> ans = a
		:: else -> skip
		fi
	:: else -> skip
	fi
}

proctype worker()
{
end:
	do
	/* redlock_lease_due: RAN_OUT, the caller loses it */
	:: atomic { ws == WRUN && st == HELD && !wr && vl == 0 ->
		printf("worker: the validity ran out before it could renew: lost\n");
		lose() }
	/* DUE (TTL/3 in): a round goes out (the cut changes nothing: vl <= TTL) */
	:: atomic { ws == WRUN && st == HELD && !wr && vl > 0 && (vl <= TTL - TTL / 3 || rq) ->
		wr = 1; rt = 0; wq = rq; printf("worker: a renewal goes out\n") }
	/* The round's answer (redlock_lease_decide, redlock_lease_apply) */
	:: atomic { ws == WRUN && wr && !taken && rt < TTL ->
		printf("worker: renewed, %d ticks after it went out\n", rt);
		wr = 0;
#ifndef OLD_LOSS
		if
		:: vl == 0 -> gapx = 1	/* a gap: gap_end_ms = now */
		:: else -> skip
		fi;
#endif
		vl = TTL - rt; rt = 0; ranx = 1;
		newval();
		answer(1) }
	:: atomic { ws == WRUN && wr && !taken && rt >= TTL ->
		printf("worker: a quorum renewed it too late\n");
		lose() }
	:: atomic { ws == WRUN && wr ->
		printf("worker: a quorum refused the renewal: lost\n");
		lose() }
	:: atomic { ws == WRUN && wr ->
		wr = 0; rt = 0;
		if
		:: vl * 3 < TTL -> printf("worker: too few answered, too late: lost\n"); lose()
		:: else -> printf("worker: too few answered: retries\n"); answer(2)
		fi }
	/* Stalls, resumes, is terminated and restarted */
	:: atomic { ws == WRUN -> ws = WSTOP; printf("worker: stopped\n") }
	:: atomic { ws == WSTOP -> ws = WRUN; printf("worker: resumed\n") }
	:: atomic { ws == WRUN -> ws = WDEAD; wd = 0; wr = 0; rt = 0; wq = 0; printf("worker: terminated\n") }
	:: atomic { ws == WDEAD && wd >= RDELAY -> ws = WRUN; wd = 0; printf("worker: restarted\n") }
	od
}

/*
 * A statement starts: the backend reports itself running (pgstat_report_activity, at the
 * start of exec_simple_query), parses and plans (PLANS), then ExecutorStart or
 * ProcessUtility re-arms the watchdog and checks at once.  NOPLAN: no parse and plan, the
 * statement starts at ExecutorStart.  PHASE: a statement begun within the margin may see
 * no timer expiry before the run-out (the timer's phase: it began after the last tick).
 */
inline statement_starts()
{
#ifdef PHASE
	if
	:: vl == 1 -> late = 1
	:: else -> skip
	fi;
#endif
#ifdef UNFIRE
	fired = 0; wf = 0;	/* once per run-out and top-level statement */
#endif
#ifdef NOPLAN
	os = RUN; rearm(1)
#else
	os = PLANS
#endif
}

/*
 * A false from redlock_extend (lockops_refresh in lockops.c): redlock_lease_told, then the lock is let
 * go of; its commit check, run then, refuses the transaction to its end if it refuses
 * (redlock_lease_unwatch, the carried refusal).  The model of the lock ends with that
 * transaction.
 */
inline let_go()
{
	if
	:: !told -> told = 1; toldx = 1
	:: else -> skip		/* told already, maybe in an earlier transaction */
	fi;
	tell();
	cx = (gapx || !(told && !toldx));
	gone = 1
}

/* The commit check (redlock_lease_commit_refusal; OLD_LOSS: the old one). */
inline commit()
{
	if
	:: gone && cx -> printf("owner: COMMIT refused (carried)\n"); error_recovery()
	:: gone && !cx -> printf("owner: COMMIT (the lock let go of)\n"); check_a(); os = IDLE
	:: else -> commit_check()
	fi
}

inline commit_check()
{
#ifdef OLD_LOSS
	if
	:: (st == LOST && cs && lostx) || (st == HELD && vl == 0 && ranx) ->
		printf("owner: COMMIT refused\n");
		tell(); error_recovery()
	:: else ->
		printf("owner: COMMIT\n");
		check_a();
		os = IDLE
	fi
#else
	if
	:: gapx ->
		printf("owner: COMMIT refused (a gap)\n");
#ifdef GAP_TELLS
		told = 1; toldx = 1;
#endif
		error_recovery()
	:: !gapx && vl == 0 && told && !toldx ->
		printf("owner: COMMIT (the run-out was told in an earlier transaction)\n");
		check_a();
		os = IDLE
	:: !gapx && vl == 0 && !(told && !toldx) ->
		printf("owner: COMMIT refused (run out)\n");
		told = 1; toldx = 1;
		tell(); error_recovery()
	:: !gapx && vl > 0 ->
		printf("owner: COMMIT\n");
		check_a();
		os = IDLE
	fi
#endif
}

#ifdef BEGIN_HELD
#define MAY_BEGIN (os == IDLE && vl > 0 && !gone)
#else
#define MAY_BEGIN (os == IDLE && !gone)
#endif

proctype owner()
{
end:
	do
	/* A transaction and its first statement begin. */
	:: atomic { MAY_BEGIN ->
		printf("owner: BEGIN, a statement\n");
		gtx = 0; toldx = 0; gapx = 0; lostx = 0; ranx = (vl > 0);
		gbad = (vl == 0 && !gt);
		statement_starts() }
	:: atomic { os == IIX -> printf("owner: a statement\n"); statement_starts() }
	:: atomic { os == PLANS && !cp -> os = RUN; printf("owner: ExecutorStart\n"); rearm(1) }
	:: atomic { RUNNING && !ex -> os = IIX; printf("owner: the statement ends (idle in transaction)\n");
		cp = 0 }	/* a cancel that came too late to be seen is dropped at the next read */
#ifdef EXTEND
	/* redlock_extend(): a request to the worker, or false at once for a lost lease */
	:: atomic { os == RUN && !ex && !gone && st == HELD -> ex = 1; rq = 1;
		printf("owner: redlock_extend() waits for the worker\n") }
	:: atomic { os == RUN && !gone && (st == LOST && ans == 0) -> ex = 0;
		printf("owner: redlock_extend() returns false: lets go of the lock\n");
		let_go() }
	:: atomic { ex && ans == 1 -> ex = 0; ans = 0; printf("owner: redlock_extend() returns true\n") }
	:: atomic { ex && ans == 2 -> ex = 0; ans = 0; printf("owner: redlock_extend() raises an ERROR (too few answered)\n");
		error_recovery() }
#endif
	/* An ERROR: the pending cancel, or any other (SELECT 1/0). */
	:: atomic { RUNNING ->
		if
		:: cp && wf == 1 -> printf("owner: ERROR, cancelled by the watchdog\n");
			tell();
#ifndef OLD_LOSS
			told = 1; toldx = 1;
#endif
			wf = 0
		:: cp && wf == 2 -> printf("owner: ERROR, cancelled by the watchdog (an older run-out)\n");
#ifndef OLD_LOSS
			told = 0;	/* told_run_out_ms = fired_run_out_ms, an older validity's end */
#endif
			wf = 0
#ifdef OLD_LOSS
		:: cp && wf == 0 && cs -> printf("owner: ERROR, cancelled by the worker\n"); tell()
#endif
		:: true -> printf("owner: ERROR (any other, before a pending cancel is seen)\n")
		fi;
		ex = 0; ans = 0;
		error_recovery() }
	:: atomic { os == IIX -> commit() }
	:: atomic { os == IIX -> printf("owner: ROLLBACK\n"); rearm(0); os = IDLE }
	od
}

proctype dog()
{
end:
	do
	:: atomic { DOG_DUE -> dog_check() }
#ifndef FIRES_IDLE
	:: atomic { armed && !RUNNING && wf != 0 -> printf("dog: idle tick, forgets the unexplained cancel\n");
		wf = 0 }
#endif
	od
}

proctype clock()
{
end:
	do
	:: atomic { CLOCK_MAY_TICK ->
		printf("tick\n");
		late = 0;
#ifndef NOB1
		assert(!(vl == 1 && RUNNING && !cp && !gt));	/* (b1) */
#endif
#ifndef NOB2
		assert(!(vl == 0 && RUNNING && !cp && !gt));	/* (b2) */
#endif
		if
		:: vl > 0 -> vl--;
			if
			:: vl == 0 -> printf("the validity runs out\n"); ran_out()
			:: else -> skip
			fi
		:: else -> skip
		fi;
		if
		:: wr && rt < TTL -> rt++
		:: else -> skip
		fi;
		if
		:: ws == WDEAD && wd < RDELAY -> wd++
		:: else -> skip
		fi }
	od
}

proctype other()
{
	atomic { vl == 0 -> taken = 1; printf("other: takes the lock\n") }
}

init
{
	atomic {
		run owner();
		run worker();
		run dog();
		run clock();
		run other()
	}
}
