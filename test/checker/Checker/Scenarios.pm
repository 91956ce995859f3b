# test/checker/Checker/Scenarios.pm: the checker's scenarios, by name: each one's run()
# options (Checker.pm), its fault schedule among them (most in Checker/Schedules.pm).
#
#   my %o = Checker::scenario('sigstop');    # (name => 'sigstop', desc => ..., faults => ...)
#   my @names = Checker::lease_scenarios();  # issue 21's scenarios and their controls
#   my @names = Checker::permit_scenarios(); # the semaphores' (1.5) and their controls
#   my @names = Checker::set_scenarios();    # the sets' (1.6) and their controls
#   my @names = Checker::shared_scenarios(); # the shared locks' (1.7) and their controls
#
# Checker.pm imports scenario, lease_scenarios, permit_scenarios, set_scenarios and
# shared_scenarios: callers name them
# Checker::...

package Checker::Scenarios;

use strict;
use warnings;

use Exporter 'import';

use Checker::Schedules qw(_all_restart_delayed _delayed_out _extend_faults _fast_clock
  _fdw_stall_faults _force_releases _lease_prefix_faults _lease_stall_faults _lease_stall_loss_faults _lease_term_faults
  _freeze_plan _long_job_faults _majority_blips _majority_restart _majority_wipe _pause_holders
  _renew_faults _servers_faults _ticking);

our @EXPORT_OK = qw(fdw_scenarios lease_scenarios permit_scenarios scenario set_scenarios
  shared_scenarios);

# ---- scenarios ----
#
# Each is a list of run() options: a description, masters (plain, or aof: appendonly yes,
# appendfsync always), the TTL / wait / work of every attempt, whether it must see
# violations (a negative control), and the fault schedule, which scales with the run's
# length ($f->{seconds}) and TTL ($f->{ttl_ms}).  Also: servers (the masters redlock.servers
# names at the start), redis_config (CONFIG SET for the run), the held-lock options of run(),
# expect_no_08006 (a majority was always up: any 08006 is spurious), expect_no_gave_up (no
# holder may find its lock lost).

# The fast-clock runs: Kleppmann's scenario as a new user tried it (issue 11): 12 clients
# on 3 resources, TTL 400 ms, 300 ms of work, fenced writes.
my $FAST_CLOCK_RUN = {
	masters => 'plain',
	clients => 12,
	resources => 3,
	ttl_ms => 400,
	wait_ms => 200,
	work_ms => 300,
	fence => 'fenced',
};

# The semaphore runs (redlock_acquire_permit, 1.5): 16 clients on 2 semaphores of 3
# permits (8 clients for 3 permits each), 20 ms of work: several holders inside at once,
# and a fourth one kept out.
my $PERMITS_RUN = {
	permits => 3,
	resources => 2,
	work_ms => 20,
};

# The set runs (redlock_acquire(text[]), 1.6): 16 clients each take a set of two of 6
# resources, 20 ms of work: sets that share a resource exclude each other, others are
# inside at once.
my $SETS_RUN = {
	sets => 1,
	resources => 6,
	work_ms => 20,
};

# The pair runs (deadlock detection, issue 43): 8 clients on 3 resources, each taking
# two in the order drawn with waits of 4 s, 200 ms of work around the second acquire;
# redlock.deadlock_timeout 200 ms.
my $PAIRS_RUN = {
	clients => 8,
	resources => 3,
	ttl_ms => 5000,
	wait_ms => 4000,
	work_ms => 200,
	pgoptions => ['redlock.deadlock_timeout=200'],
};

my $SHARED_RUN = {
	shared => 1,
	resources => 2,
	work_ms => 20,
	expect_readers_together => 1,
};

# The fdw runs (Checker/Fdw.pm, issue 38 item 5): jobs across commands on two clusters
# (6 clients each) over 3 resources, on auto-extended locks of a 600 ms TTL, each hold
# recorded in a third cluster and writing its guarded rows there through postgres_fdw,
# 3 transactions of one write each; two clients in three idle 400 ms in the transaction
# before its COMMIT (a loss meanwhile meets the COMMIT), the third sleeps in a statement
# (the watchdog cancels it).  The workers of the job clusters stalled in turn.
my $FDW_RUN = {
	masters => 'plain',
	preload => 1,
	fdw => 1,
	clients => 12,
	resources => 3,
	ttl_ms => 600,
	wait_ms => 200,
	job => { roles => [ 'idle-xact', 'idle-xact', 'running' ], xacts => 3, steps => 1, step_ms => 400 },
	faults => sub { _fdw_stall_faults(@_) },
};

my $SCENARIOS_REF;
my %SCENARIOS = (
	'baseline' => {
		desc => 'no fault',
		masters => 'plain',
	},
	'kill-minority-delayed' => {
		desc => 'kill -9 of 1 or 2 masters (rolling), each kept down 1.2 x TTL + 0.3 s '
		  . '(§8 delayed restart), no persistence',
		masters => 'plain',
		faults => sub {
			my ($f) = @_;
			my @sets = ([ 0, 1 ], [2], [ 3, 4 ], [1], [ 0, 4 ], [ 2, 3 ]);
			my $out = _delayed_out($f);
			my ($t, $k) = (1.0, 0);
			while ($t + $out + 0.3 < $f->{seconds})
			{
				my $set = $sets[ $k++ % @sets ];
				$f->at($t);
				$f->kill(@$set);
				$f->at($t + $out);
				$f->start(@$set);
				$t += $out + 1.0;
			}
		},
	},
	# Watches (issue 43): a session watches every resource of the run, and the judge
	# matches each "acquired" it heard to a hold a client had then (_watch_figures).
	'watch-kill' => {
		desc => 'a watcher on every resource while kill -9 of 1 or 2 masters (rolling), each'
		  . ' kept down 1.2 x TTL + 0.3 s: every "acquired" heard is a hold a client had',
		masters => 'plain',
		preload => 1,
		watch => {},
		# faults: kill-minority-delayed's, set below the table
	},
	# The judge's control: a hold no client had, on a quorum (another client's token,
	# without a holder record), which the watch rightly reports and the judge must not
	# match to any client's hold.  (A watcher that looked at fewer masters than the
	# clients lock on, a quorum of 2 of masters 0-2, heard no split vote in 3 runs: an
	# attempt's partial hold lives about a millisecond before its undo.)
	'unsafe-watch-stray-holder' => {
		desc => 'NEGATIVE CONTROL: the watcher also watches a fifth resource no client takes,'
		  . ' where another client sets its token (SET PX 300, no holder record) on masters'
		  . ' 0-2 at 1, 2, 3 and 4 s: the watch hears "acquired" for holds no checker client had',
		masters => 'plain',
		preload => 1,
		watch => { resources => 5 },
		expect_watch_unexplained => 1,
		faults => sub {
			my ($f) = @_;
			for my $t (1.0, 2.0, 3.0, 4.0)
			{
				$f->at($t);
				$f->redis($_, 'SET', 'checker-unsafe-watch-stray-holder-5', 'stray-client-token', 'PX', '300')
				  for 0 .. 2;
			}
		},
	},
	'sigstop' => {
		desc => 'SIGSTOP of 1 or 2 masters for 0.2-1 s (> redlock.timeout 50 ms), then SIGCONT',
		masters => 'plain',
		faults => sub {
			_freeze_plan($_[0], [ [2], 0.5 ], [ [0], 1.0 ], [ [ 1, 3 ], 0.3 ], [ [4], 0.2 ],
				[ [ 0, 2 ], 0.8 ], [ [3], 0.6 ]);
		},
	},
	# A majority frozen for blips shorter than the wait (issue 26): an attempt that fewer
	# than a quorum answered is undone and retried, so no acquire raises 08006.
	'blip-majority' => {
		desc => 'SIGSTOP of 3 masters (a majority) for 0.2-0.6 s, then SIGCONT; holders'
		  . ' wait up to 1500 ms, so their acquires ride out each blip',
		masters => 'plain',
		wait_ms => 1500,
		expect_no_08006 => 1,
		faults => sub { _majority_blips(@_) },
	},
	'unsafe-blip-short-ttl' => {
		desc => 'NEGATIVE CONTROL: the blips of blip-majority, with a TTL of 150 ms shorter'
		  . ' than the 400 ms critical section',
		masters => 'plain',
		ttl_ms => 150,
		work_ms => 400,
		wait_ms => 1500,
		expect_violations => 1,
		faults => sub { _majority_blips(@_) },
	},
	# The same blips met by try-locks (issue 42): an attempt whose masters were too slow
	# to make a quorum is retried for redlock.quorum_timeout (2 s) whatever wait_ms says,
	# on the connections it kept, so no acquire raises 08006.
	'blip-majority-try' => {
		desc => 'the blips of blip-majority, acquires with wait_ms 0: redlock.quorum_timeout'
		  . ' (2 s, patience doubling from 50 ms) rides each blip out',
		masters => 'plain',
		wait_ms => 0,
		expect_no_08006 => 1,
		faults => sub { _majority_blips(@_) },
	},
	'unsafe-blip-try-short-ttl' => {
		desc => 'NEGATIVE CONTROL: the blips of blip-majority-try, with a TTL of 150 ms'
		  . ' shorter than the 400 ms critical section',
		masters => 'plain',
		ttl_ms => 150,
		work_ms => 400,
		wait_ms => 0,
		expect_violations => 1,
		faults => sub { _majority_blips(@_) },
	},
	'minority-delayed+sigstop' => {
		desc => 'kill -9 of 2 masters kept down 1.2 x TTL + 0.3 s, then of 1; SIGSTOP of '
		  . '1 master for 0.5 s, of 2 for 0.3 s',
		masters => 'plain',
		faults => sub {
			my ($f) = @_;
			my $out = _delayed_out($f);
			$f->at(1.0);
			$f->kill(0, 1);
			$f->at(1.0 + $out);
			$f->start(0, 1);
			my $t = 1.5 + $out + 0.3;
			$f->at($t);
			$f->kill(3);
			$f->at($t + $out);
			$f->start(3);
			$t += $out + 0.5;
			$f->at($t);
			$f->stop(2);
			$f->at($t + 0.5);
			$f->cont(2);
			$f->at($t + 1.0);
			$f->stop(1, 4);
			$f->at($t + 1.3);
			$f->cont(1, 4);
		},
	},
	'latency' => {
		desc => 'delay proxies in front of 3 masters: 1-15 ms each way, then 10-40 ms '
		  . '(round trips around the 50 ms timeout), then 30-60 ms (3 masters time out)',
		masters => 'plain',
		proxies => 3,
		faults => sub {
			my ($f) = @_;
			my $s = $f->{seconds};
			$f->at(0.15 * $s);
			$f->delay(1, 15);
			$f->at(0.4 * $s);
			$f->delay(10, 40);
			$f->at(0.65 * $s);
			$f->delay(30, 60);
			$f->at(0.85 * $s);
			$f->delay(0, 0);
		},
	},
	'kill-minority-aof' => {
		desc => 'kill -9 of 2 masters (rolling) restarted at once, appendfsync always',
		masters => 'aof',
		faults => sub {
			my ($f) = @_;
			my @sets = ([ 0, 1 ], [ 2, 3 ], [ 4, 0 ], [ 1, 2 ], [ 3, 4 ]);
			my ($t, $k) = (1.0, 0);
			while ($t + 0.5 < $f->{seconds})
			{
				my $set = $sets[ $k++ % @sets ];
				$f->at($t);
				$f->kill(@$set);
				$f->start(@$set);
				$t += 0.8;
			}
		},
	},
	'kill-majority-aof' => {
		desc => 'kill -9 of 3 of 5 masters restarted at once while locks are held, '
		  . 'appendfsync always (the unsafe-majority-restart control, with persistence)',
		masters => 'aof',
		ttl_ms => 10000,
		work_ms => 1000,
		faults => sub { _majority_restart(@_) },
	},
	'unsafe-majority-restart' => {
		desc => 'NEGATIVE CONTROL: kill -9 of 3 of 5 masters restarted at once without '
		  . 'persistence while locks are held',
		masters => 'plain',
		ttl_ms => 10000,
		# Longer than the three masters take to start again (about 0.4 s each, more on
		# a loaded machine): with 1 s of work every holder had finished before they were
		# back, and the control saw nothing (a fresh-clone run: back after 1.22 s).
		work_ms => 3000,
		expect_violations => 1,
		faults => sub { _majority_restart(@_) },
	},
	# Issue 41: the client's restart quarantine.  TTL 3 s, quarantine 3 s: each restart
	# leaves the three masters out for 3 s (08006 meanwhile), so they restart every 5 s.
	'kill-majority-quarantined' => {
		desc => 'kill -9 of 3 of 5 masters restarted at once without persistence while locks '
		  . 'are held, redlock.restart_quarantine 3 s (issue 41): they count toward no quorum '
		  . 'until they have been up 3 s',
		masters => 'plain',
		ttl_ms => 3000,
		work_ms => 2000,
		node_settings => { 'redlock.restart_quarantine' => '3000ms' },
		faults => sub { _majority_restart($_[0], 5) },
	},
	'unsafe-majority-restart-unquarantined' => {
		desc => 'NEGATIVE CONTROL: kill-majority-quarantined with redlock.restart_quarantine 0',
		masters => 'plain',
		ttl_ms => 3000,
		work_ms => 2000,
		node_settings => { 'redlock.restart_quarantine' => '0' },
		expect_violations => 1,
		faults => sub { _majority_restart($_[0], 5) },
	},
	'unsafe-short-ttl' => {
		desc => 'NEGATIVE CONTROL: TTL 20 ms shorter than the 60 ms critical section',
		masters => 'plain',
		ttl_ms => 20,
		work_ms => 60,
		expect_violations => 1,
	},

	# ---- fencing tokens under the faults Kleppmann names (issue 11) ----
	# Each holder takes its fencing token and writes it at the end of its work
	# (check_fence judges the tokens and writes).  Where the lock alone cannot keep two
	# holders apart (a paused holder, a fast clock), the guard's violations are measured,
	# not judged.

	'fence-baseline' => {
		desc => 'no fault; holders take a fencing token and write with it',
		masters => 'plain',
		fence => 'fenced',
	},
	'fence-pause' => {
		desc => 'holder backends SIGSTOPped past their validity (1.2 x TTL + 0.6 s), 2 at a'
		  . ' time, then continued: they write late, with their old token',
		masters => 'plain',
		work_ms => 100,
		fence => 'fenced',
		violations_by_design =>
		  'a paused holder is still inside when the next holder enters',
		expect_stale_refused => 1,
		faults => sub { _pause_holders(@_) },
	},
	'unsafe-fence-pause-unfenced' => {
		desc => 'NEGATIVE CONTROL: fence-pause with writes that do not check the token',
		masters => 'plain',
		work_ms => 100,
		fence => 'unfenced',
		violations_by_design =>
		  'a paused holder is still inside when the next holder enters',
		expect_stale_landed => 1,
		faults => sub { _pause_holders(@_) },
	},
	'fence-force-release' => {
		desc => 'an operator evicts a stuck holder every 2 s: SIGSTOPped, its lock'
		  . ' force-released (redlock_force_release), continued 1.2 s after the release,'
		  . ' within its validity (TTL 3 s): it writes with its old token; work 300 ms,'
		  . ' fenced writes',
		masters => 'plain',
		ttl_ms => 3000,
		work_ms => 300,
		fence => 'fenced',
		violations_by_design =>
		  'an evicted holder works on until it learns of the loss',
		expect_stale_refused => 1,
		faults => sub { _force_releases(@_) },
	},
	'unsafe-fence-force-release-unfenced' => {
		desc => 'NEGATIVE CONTROL: fence-force-release with writes that do not check the token',
		masters => 'plain',
		ttl_ms => 3000,
		work_ms => 300,
		fence => 'unfenced',
		violations_by_design =>
		  'an evicted holder works on until it learns of the loss',
		expect_stale_landed => 1,
		faults => sub { _force_releases(@_) },
	},
	'fast-clock-1' => {
		desc => 'the clock of master 0 runs 2x (its keys\' PTTL shortened from outside'
		  . ' every 20 ms); quorum a majority (3 of 5)',
		%{ $FAST_CLOCK_RUN },
		violations_by_design => 'one fast master can let two holders in (measured)',
		faults => sub { _fast_clock($_[0], 2, 0) },
	},
	'fast-clock-2' => {
		desc => 'NEGATIVE CONTROL of the lock: the clocks of masters 0 and 1 run 2x; quorum'
		  . ' a majority: the checker must see two holders, the tokens must still hold',
		%{ $FAST_CLOCK_RUN },
		expect_violations => 1,
		faults => sub { _fast_clock($_[0], 2, 0, 1) },
	},
	'fast-clock-1-q4' => {
		desc => 'the clock of master 0 runs 2x; redlock.quorum = 4 of 5',
		%{ $FAST_CLOCK_RUN },
		pgoptions => ['redlock.quorum=4'],
		expect_min_nodes => 4,
		faults => sub { _fast_clock($_[0], 2, 0) },
	},
	'fence-kill-majority-aof' => {
		desc => 'kill -9 of 3 of 5 masters restarted at once while locks are held,'
		  . ' appendfsync always; fenced writes',
		masters => 'aof',
		ttl_ms => 10000,
		work_ms => 1000,
		fence => 'fenced',
		faults => sub { _majority_restart(@_) },
	},
	# Callers' clocks skewed (issue 21, item 5): the token's order must not depend on
	# them.  Every master restarted empty at once after README's delay; the backends of
	# the node with an odd process id run 3 s behind (test/checker/skewclock.c).
	'fence-skew-restart-delayed' => {
		desc => 'backends with an odd pid 3 s behind the others (wall clock); every master'
		  . ' killed at once and restarted empty after 1.2 x TTL + 0.3 s (at least 1.2 s),'
		  . ' every 3 s or so; fenced writes',
		masters => 'plain',
		fence => 'fenced',
		skew_callers_ms => -3000,
		faults => sub { _all_restart_delayed($_[0]) },
	},
	'unsafe-fence-skew-masters-back' => {
		desc => 'NEGATIVE CONTROL of the masters\' clocks: fence-skew-restart-delayed with'
		  . ' every restart setting every master\'s wall clock 6 s further back (README\'s'
		  . ' precondition on the masters\' clocks broken)',
		masters => 'plain',
		fence => 'fenced',
		skew_callers_ms => -3000,
		expect_inversions => 1,
		restart_masters_after => 1,
		# The step must exceed the time the masters are down plus a second: with 3 s, a
		# loaded CI machine took 4.4 s to restart them and the control saw nothing.
		faults => sub { _all_restart_delayed($_[0], master_step_ms => -6000) },
	},
	'unsafe-fence-restart-empty' => {
		desc => 'NEGATIVE CONTROL: 3 of 5 masters emptied at once (FLUSHALL: what a restart'
		  . ' without persistence loses, without its downtime) while locks are held; fenced writes',
		masters => 'plain',
		ttl_ms => 10000,
		work_ms => 1000,
		fence => 'fenced',
		expect_violations => 1,
		expect_inversions => 1,
		# A token repeats only when one is asked within the same second as one granted
		# before the loss; kill -9 and a restart took 1.2-1.8 s on a loaded machine, and
		# the control saw nothing in 3 runs of 3.
		faults => sub { _majority_wipe(@_) },
	},

	# ---- the edge paths of issue 7 ----

	'extend-shorter' => {
		desc => 'acquire 2000 ms, extend to 800 ms after the first 250 ms step, work on in'
		  . ' 250 ms steps while redlock_locks() shows validity for one more; a majority'
		  . ' frozen, a minority killed (delayed restart) with one more frozen',
		masters => 'plain',
		ttl_ms => 2000,
		steps => 8,
		step_ms => 250,
		ext_ttls => [ undef, 800 ],
		faults => sub { _extend_faults(@_) },
	},
	'extend-longer' => {
		desc => 'acquire 800 ms, extend before every 250 ms step alternately to 4000 and 800 ms,'
		  . ' work a step only when extend did not say false and the validity covers it;'
		  . ' the faults of extend-shorter',
		masters => 'plain',
		ttl_ms => 800,
		steps => 8,
		step_ms => 250,
		ext_ttls => [ undef, 4000, 800, 4000, 800, 4000, 800, 4000 ],
		faults => sub { _extend_faults(@_) },
	},
	'unsafe-extend-ignored' => {
		desc => 'NEGATIVE CONTROL: holders extend to 60 ms before each 150 ms step and work on'
		  . ' whatever extend returns (false, 08006) and whatever validity is left',
		masters => 'plain',
		ttl_ms => 1000,
		steps => 6,
		step_ms => 150,
		ext_ttls => [ map { 60 } 1 .. 6 ],
		honest => 0,
		expect_violations => 1,
		faults => sub { _extend_faults(@_) },
	},
	'servers-grow-shrink' => {
		desc => 'redlock.servers 3 -> 4 -> 5 -> 4 -> 3 masters, one master per change, 1 s'
		  . ' apart, while holders (5 steps of 100 ms, one command each) span the changes; the'
		  . ' 2 added masters restarted empty before each growth; the first change a TTL + 0.5 s'
		  . ' after the last fault in the masters common to both lists; SIGSTOP and kill -9'
		  . ' (delayed restart) of a master of the current list',
		masters => 'plain',
		servers => [ 0, 1, 2 ],
		steps => 5,
		step_ms => 100,
		faults => sub { _servers_faults(@_, 0) },
	},
	'unsafe-servers-change' => {
		desc => 'NEGATIVE CONTROL: a master of 3 killed and restarted empty at once, then'
		  . ' redlock.servers grown to 5 (and shrunk back) while holders that took their lock'
		  . ' on 2 of 3 work on, ignoring the validity',
		masters => 'plain',
		servers => [ 0, 1, 2 ],
		steps => 5,
		step_ms => 100,
		honest => 0,
		expect_violations => 1,
		faults => sub { _servers_faults(@_, 1) },
	},
	'script-flush' => {
		desc => 'SCRIPT FLUSH on every master every 50 ms, redlock.retry_delay 0 and'
		  . ' retry_jitter 0 (retries at once), work 50 ms; SIGSTOP of 1 master, kill -9 of'
		  . ' 1 (delayed restart)',
		masters => 'plain',
		wait_ms => 200,
		work_ms => 50,
		pgoptions => [ 'redlock.retry_delay=0', 'redlock.retry_jitter=0' ],
		faults => sub {
			my ($f) = @_;
			my $out = _delayed_out($f);
			my $flush = sub { $f->redis($_, 'SCRIPT', 'FLUSH') for 0 .. 4 };
			my @plan;
			for (my $t = 1.0, my $k = 0; $t + $out + 0.5 < $f->{seconds}; $t += $out + 1.0, $k++)
			{
				my ($a, $b) = ($k % 5, ($k + 2) % 5);
				push @plan, [ $t, sub { $f->stop($a) } ], [ $t + 0.5, sub { $f->cont($a) } ],
				  [ $t + 0.6, sub { $f->kill($b) } ], [ $t + 0.6 + $out, sub { $f->start($b) } ];
			}
			_ticking($f, 0.05, $flush, @plan);
		},
	},
	'idle-timeout' => {
		desc => 'Redis timeout 1 (masters close connections idle > 1 s); clients idle 2.5 s'
		  . ' between attempts; a minority killed (delayed restart) and SIGSTOP: no 08006',
		masters => 'plain',
		redis_config => { timeout => 1 },
		idle_ms => 2500,
		expect_no_08006 => 1,
		faults => sub { $SCENARIOS_REF->{'minority-delayed+sigstop'}{faults}->(@_) },
	},
	'reload-loop' => {
		desc => 'pg_reload_conf() every 100 ms (nothing changed) while holders extend to'
		  . ' 1000 ms before each of 5 steps of 50 ms; SIGSTOP of 1 master, kill -9 of 1'
		  . ' (delayed restart), SIGSTOP of 2',
		masters => 'plain',
		steps => 5,
		step_ms => 50,
		ext_ttls => [ map { 1000 } 1 .. 5 ],
		expect_no_gave_up => 1,
		faults => sub { _renew_faults(@_, 1) },
	},
	'extend-renew' => {
		desc => 'reload-loop without the reloads: holders extend to 1000 ms before each of 5'
		  . ' steps of 50 ms; SIGSTOP of 1 master, kill -9 of 1 (delayed restart), SIGSTOP of 2',
		masters => 'plain',
		steps => 5,
		step_ms => 50,
		ext_ttls => [ map { 1000 } 1 .. 5 ],
		expect_no_gave_up => 1,
		faults => sub { _renew_faults(@_, 0) },
	},

	'discard-release' => {
		desc => 'holders give the guard back, then release with DISCARD ALL (a pooler\'s'
		  . ' server_reset_query), not redlock_release; kill -9 of 2 masters (delayed'
		  . ' restart), then of 1; SIGSTOP of 1 master, of 2',
		masters => 'plain',
		steps => 2,
		step_ms => 25,
		discard => 'after',
		faults => sub { $SCENARIOS_REF->{'minority-delayed+sigstop'}{faults}->(@_) },
	},
	'unsafe-discard-early' => {
		desc => 'NEGATIVE CONTROL: DISCARD ALL right after claiming the guard, holders work'
		  . ' on (ignoring the validity): the lock is released under them',
		masters => 'plain',
		steps => 2,
		step_ms => 25,
		discard => 'early',
		honest => 0,
		expect_violations => 1,
		faults => sub { $SCENARIOS_REF->{'minority-delayed+sigstop'}{faults}->(@_) },
	},

	# ---- semaphores: the permits of redlock_acquire_permit (1.5) ----
	# Each holder takes a permit and counts the holders inside (checker_permit_claim in
	# checker.sql): more than 3 is a violation, and so are two holders of one slot; the
	# faults are those of the lock scenarios of the same name.

	'permits-plain' => {
		desc => 'no fault; 2 semaphores of 3 permits',
		masters => 'plain',
		%{ $PERMITS_RUN },
	},
	'permits-kill' => {
		desc => 'the faults of kill-minority-delayed on 2 semaphores of 3 permits: kill -9 of'
		  . ' 1 or 2 masters (rolling), each kept down 1.2 x TTL + 0.3 s, no persistence',
		masters => 'plain',
		%{ $PERMITS_RUN },
		faults => sub { $SCENARIOS_REF->{'kill-minority-delayed'}{faults}->(@_) },
	},
	'permits-sigstop' => {
		desc => 'the faults of sigstop on 2 semaphores of 3 permits: SIGSTOP of 1 or 2'
		  . ' masters for 0.2-1 s, then SIGCONT (the queued SET NX of every slot run late)',
		masters => 'plain',
		%{ $PERMITS_RUN },
		faults => sub { $SCENARIOS_REF->{'sigstop'}{faults}->(@_) },
	},
	'permits-latency' => {
		desc => 'the faults of latency on 2 semaphores of 3 permits: delay proxies in front'
		  . ' of 3 masters, 1-15 ms, 10-40 ms, 30-60 ms each way',
		masters => 'plain',
		proxies => 3,
		%{ $PERMITS_RUN },
		faults => sub { $SCENARIOS_REF->{'latency'}{faults}->(@_) },
	},
	'permits-majority-restart-aof' => {
		desc => 'the faults of kill-majority-aof on 2 semaphores of 3 permits: kill -9 of 3'
		  . ' of 5 masters restarted at once while permits are held, appendfsync always',
		masters => 'aof',
		%{ $PERMITS_RUN },
		ttl_ms => 10000,
		work_ms => 1000,
		faults => sub { _majority_restart(@_) },
	},
	'unsafe-permits-short-ttl' => {
		desc => 'NEGATIVE CONTROL: permits of a TTL of 20 ms, shorter than the 60 ms critical'
		  . ' section (unsafe-short-ttl on 2 semaphores of 3 permits)',
		masters => 'plain',
		%{ $PERMITS_RUN },
		ttl_ms => 20,
		work_ms => 60,
		expect_violations => 1,
	},
	'unsafe-permits-majority-restart' => {
		desc => 'NEGATIVE CONTROL: kill -9 of 3 of 5 masters restarted at once without'
		  . ' persistence while permits are held (unsafe-majority-restart on 2 semaphores'
		  . ' of 3 permits)',
		masters => 'plain',
		%{ $PERMITS_RUN },
		ttl_ms => 10000,
		work_ms => 3000,
		expect_violations => 1,
		faults => sub { _majority_restart(@_) },
	},
	# ---- deadlocks across sessions (issue 43 item 2) ----
	# Each client takes two of 3 resources one after the other, in the order drawn
	# (checker_pair_attempt in checker.sql): opposite orders make cycles, whose victims
	# (40P01) keep their first lock, claimed, through their work.  Waits of 4 s, checks
	# every 200 ms.
	'deadlock-kill' => {
		desc => 'pairs of 3 resources taken in either order (deadlocks found every few'
		  . ' attempts), under kill -9 of 1 or 2 masters (rolling), each kept down'
		  . ' 1.2 x TTL + 0.3 s: no violation, a victim keeps its first lock',
		masters => 'plain',
		%{ $PAIRS_RUN },
		pairs => 1,
		expect_deadlocks => 1,
		faults => sub { $SCENARIOS_REF->{'kill-minority-delayed'}{faults}->(@_) },
	},
	'unsafe-deadlock-victim-lets-go' => {
		desc => 'NEGATIVE CONTROL: pairs as in deadlock-kill, no fault; a victim releases its'
		  . ' first lock at once but works on as if it held it: others take it meanwhile',
		masters => 'plain',
		%{ $PAIRS_RUN },
		pairs => 'unsafe',
		expect_deadlocks => 1,
		expect_violations => 1,
	},
	# ---- sets of resources: redlock_acquire(text[]) (1.6) ----
	# Each holder of a set of two claims the guard of each resource (checker_set_attempt
	# in checker.sql): a guard held already is a violation; the faults are those of the
	# lock scenarios of the same name.

	'sets-plain' => {
		desc => 'no fault; sets of 2 of 6 resources',
		masters => 'plain',
		%{ $SETS_RUN },
	},
	'sets-kill' => {
		desc => 'the faults of kill-minority-delayed on sets of 2 of 6 resources: kill -9 of'
		  . ' 1 or 2 masters (rolling), each kept down 1.2 x TTL + 0.3 s, no persistence',
		masters => 'plain',
		%{ $SETS_RUN },
		faults => sub { $SCENARIOS_REF->{'kill-minority-delayed'}{faults}->(@_) },
	},
	'sets-sigstop' => {
		desc => 'the faults of sigstop on sets of 2 of 6 resources: SIGSTOP of 1 or 2'
		  . ' masters for 0.2-1 s, then SIGCONT (the queued set scripts run late)',
		masters => 'plain',
		%{ $SETS_RUN },
		faults => sub { $SCENARIOS_REF->{'sigstop'}{faults}->(@_) },
	},
	'sets-latency' => {
		desc => 'the faults of latency on sets of 2 of 6 resources: delay proxies in front'
		  . ' of 3 masters, 1-15 ms, 10-40 ms, 30-60 ms each way',
		masters => 'plain',
		proxies => 3,
		%{ $SETS_RUN },
		faults => sub { $SCENARIOS_REF->{'latency'}{faults}->(@_) },
	},
	'sets-majority-restart-aof' => {
		desc => 'the faults of kill-majority-aof on sets of 2 of 6 resources: kill -9 of 3'
		  . ' of 5 masters restarted at once while sets are held, appendfsync always',
		masters => 'aof',
		%{ $SETS_RUN },
		ttl_ms => 10000,
		work_ms => 1000,
		faults => sub { _majority_restart(@_) },
	},
	'sets-extend' => {
		desc => 'sets of 2 of 6 resources held past their TTL by an extension of the set'
		  . ' (redlock_extend(text[])) halfway: TTL 300 ms, work 400 ms, extended to 300 ms'
		  . ' at 200 ms; the faults of sigstop (the extension runs late on frozen masters)',
		masters => 'plain',
		%{ $SETS_RUN },
		ttl_ms => 300,
		work_ms => 400,
		set_extend_ttl_ms => 300,
		faults => sub { $SCENARIOS_REF->{'sigstop'}{faults}->(@_) },
	},
	'unsafe-sets-no-extend' => {
		desc => 'NEGATIVE CONTROL: sets-extend without the extension (TTL 300 ms, work 400 ms):'
		  . ' what the extension keeps safe',
		masters => 'plain',
		%{ $SETS_RUN },
		ttl_ms => 300,
		work_ms => 400,
		expect_violations => 1,
	},
	'unsafe-sets-short-ttl' => {
		desc => 'NEGATIVE CONTROL: sets of a TTL of 20 ms, shorter than the 60 ms critical'
		  . ' section (unsafe-short-ttl on sets of 2 of 6 resources)',
		masters => 'plain',
		%{ $SETS_RUN },
		ttl_ms => 20,
		work_ms => 60,
		expect_violations => 1,
	},
	'unsafe-sets-majority-restart' => {
		desc => 'NEGATIVE CONTROL: kill -9 of 3 of 5 masters restarted at once without'
		  . ' persistence while sets are held (unsafe-majority-restart on sets of 2 of 6'
		  . ' resources)',
		masters => 'plain',
		%{ $SETS_RUN },
		ttl_ms => 10000,
		work_ms => 3000,
		expect_violations => 1,
		faults => sub { _majority_restart(@_) },
	},
	# ---- shared locks: redlock_acquire_shared (1.7) ----
	# Three attempts in four take their resource shared, the others exclusively
	# (checker_shared_attempt in checker.sql): a shared holder must find no exclusive
	# holder inside, an exclusive holder neither; the faults are those of the lock
	# scenarios of the same name.

	'shared-plain' => {
		desc => 'no fault; shared (3 in 4) and exclusive holds of 2 resources',
		masters => 'plain',
		%{ $SHARED_RUN },
	},
	'shared-kill' => {
		desc => 'the faults of kill-minority-delayed on shared and exclusive holds of 2'
		  . ' resources: kill -9 of 1 or 2 masters (rolling), each kept down 1.2 x TTL + 0.3 s',
		masters => 'plain',
		%{ $SHARED_RUN },
		faults => sub { $SCENARIOS_REF->{'kill-minority-delayed'}{faults}->(@_) },
	},
	'shared-sigstop' => {
		desc => 'the faults of sigstop on shared and exclusive holds of 2 resources: SIGSTOP'
		  . ' of 1 or 2 masters for 0.2-1 s, then SIGCONT (queued scripts run late)',
		masters => 'plain',
		%{ $SHARED_RUN },
		faults => sub { $SCENARIOS_REF->{'sigstop'}{faults}->(@_) },
	},
	'shared-latency' => {
		desc => 'the faults of latency on shared and exclusive holds of 2 resources: delay'
		  . ' proxies in front of 3 masters, 1-15 ms, 10-40 ms, 30-60 ms each way',
		masters => 'plain',
		proxies => 3,
		%{ $SHARED_RUN },
		faults => sub { $SCENARIOS_REF->{'latency'}{faults}->(@_) },
	},
	'shared-majority-restart-aof' => {
		desc => 'the faults of kill-majority-aof on shared and exclusive holds of 2'
		  . ' resources: kill -9 of 3 of 5 masters restarted at once, appendfsync always',
		masters => 'aof',
		%{ $SHARED_RUN },
		expect_readers_together => 0,
		ttl_ms => 10000,
		work_ms => 1000,
		faults => sub { _majority_restart(@_) },
	},
	'shared-extend' => {
		desc => 'shared and exclusive holds of 2 resources held past their TTL by'
		  . ' redlock_extend halfway: TTL 300 ms, work 400 ms, extended to 300 ms at 200 ms;'
		  . ' the faults of sigstop (extensions run late on frozen masters)',
		masters => 'plain',
		%{ $SHARED_RUN },
		expect_readers_together => 0,
		ttl_ms => 300,
		work_ms => 400,
		shared_extend_ttl_ms => 300,
		faults => sub { $SCENARIOS_REF->{'sigstop'}{faults}->(@_) },
	},
	'unsafe-shared-no-extend' => {
		desc => 'NEGATIVE CONTROL: shared-extend without the extension (TTL 300 ms, work'
		  . ' 400 ms): what the extension keeps safe',
		masters => 'plain',
		%{ $SHARED_RUN },
		expect_readers_together => 0,
		ttl_ms => 300,
		work_ms => 400,
		expect_violations => 1,
	},
	'unsafe-shared-short-ttl' => {
		desc => 'NEGATIVE CONTROL: shared and exclusive holds of a TTL of 20 ms, shorter than'
		  . ' the 60 ms critical section',
		masters => 'plain',
		%{ $SHARED_RUN },
		expect_readers_together => 0,
		ttl_ms => 20,
		work_ms => 60,
		expect_violations => 1,
	},
	'unsafe-shared-majority-restart' => {
		desc => 'NEGATIVE CONTROL: kill -9 of 3 of 5 masters restarted at once without'
		  . ' persistence while shared and exclusive holds are held',
		masters => 'plain',
		%{ $SHARED_RUN },
		expect_readers_together => 0,
		ttl_ms => 10000,
		work_ms => 3000,
		expect_violations => 1,
		faults => sub { _majority_restart(@_) },
	},
	'permits-auto-extend' => {
		desc => 'auto-extended permits (TTL 3 s) of 2 semaphores of 3 permits held by jobs of'
		  . ' 6 s (3 transactions of 4 writes 500 ms apart), no cancel swallowed; the faults'
		  . ' of long-job counted from the first hold (a majority frozen past the validity:'
		  . ' permits lost, jobs cancelled; a majority frozen 0.5 s, the worker terminated'
		  . ' and frozen 0.5 s, a minority killed)',
		masters => 'plain',
		preload => 1,
		%{ $PERMITS_RUN },
		ttl_ms => 3000,
		wait_ms => 200,
		job => { xacts => 3, steps => 4, step_ms => 500 },
		pgoptions => ['redlock.auto_extend=on'],
		faults => sub { _long_job_faults($_[0], from_first_hold => 1) },
	},

	# ---- a guarded row in a third cluster through postgres_fdw (issue 38, item 5) ----

	'fdw-guard-first' => {
		desc => 'jobs on two clusters write their guarded rows into a third through'
		  . ' postgres_fdw (first used after the session\'s first lock call) under'
		  . ' auto-extended locks (TTL 600 ms); the worker of each job cluster in turn'
		  . ' SIGSTOPped 1.2 x TTL + 0.3 s',
		%{ $FDW_RUN },
		pgoptions => ['redlock.auto_extend=on'],
	},
	'unsafe-fdw-guard-held-back' => {
		desc => 'NEGATIVE CONTROL: fdw-guard-first with the commit guard held back where it'
		  . ' was first registered (redlock.test_commit_guard_first = off, test builds'
		  . ' only): postgres_fdw\'s remote COMMIT goes out before the guard refuses',
		%{ $FDW_RUN },
		pgoptions => [ 'redlock.auto_extend=on', 'redlock.test_commit_guard_first=off' ],
		expect_violations => 1,
	},

	# ---- long jobs: auto-extended locks (issue 8), on a node with the library preloaded ----

	'long-job' => {
		desc => 'auto-extended locks (TTL 3 s) held by jobs of 10 s (4 transactions of 5'
		  . ' writes 500 ms apart); a majority frozen 1.2 x TTL + 0.3 s'
		  . ' (locks lost: jobs cancelled, and half of them swallow the cancel and try to'
		  . ' commit), a majority frozen 0.5 s (< TTL/3: renewals retried), the worker'
		  . ' terminated (restarted by the postmaster) and frozen 0.5 s, a minority killed'
		  . ' (delayed restart)',
		masters => 'plain',
		preload => 1,
		ttl_ms => 3000,
		wait_ms => 200,
		job => { xacts => 4, steps => 5, step_ms => 500 },
		pgoptions => ['redlock.auto_extend=on'],
		faults => sub { _long_job_faults(@_) },
	},
	'unsafe-long-job-no-cancel' => {
		desc => 'NEGATIVE CONTROL: long-job with redlock.cancel_on_loss off: jobs work on after'
		  . ' the worker lost their lock to a frozen majority',
		masters => 'plain',
		preload => 1,
		ttl_ms => 3000,
		wait_ms => 200,
		job => { xacts => 4, steps => 5, step_ms => 500 },
		pgoptions => [ 'redlock.auto_extend=on', 'redlock.cancel_on_loss=off' ],
		expect_violations => 1,
		faults => sub { _long_job_faults(@_) },
	},
);
$SCENARIOS{'watch-kill'}{faults} = $SCENARIOS{'kill-minority-delayed'}{faults};
$SCENARIOS_REF = \%SCENARIOS;

# The run() options of scenario NAME.
sub scenario
{
	my ($name) = @_;
	my $s = $SCENARIOS{$name} or die "no scenario \"$name\"";
	return (name => $name, %$s);
}

# ---- the loss protocol of auto-extended locks (issue 21): jobs across commands ----
#
# Jobs whose session is idle, idle in a transaction or running a statement when the
# auto-extend worker is terminated or stalled, when a majority of masters is frozen
# after a stall the locks survived, after an ERROR in the owner's session, and when
# redlock.key_prefix changes by reload.  Each job is a psql script of commands
# (checker_lease_take, then xacts transactions of steps writes by checker_lease_write,
# then checker_job_end; see checker.sql, and _lease_job_block in Checker.pm) that stops
# at its first error; the long-job judge (_job_figures, Checker/Report.pm) decides, from
# what committed, whether a holder's work committed after the next holder of its resource
# acquired.  job => { roles => [...] } selects these jobs; client c plays
# roles->[(c - 1) % @roles]:
#   idle-xact: BEGIN, a write, idle step_ms (the client sleeps in the transaction), ...,
#     COMMIT;
#   running: BEGIN, a write, pg_sleep(step_ms), ..., COMMIT;
#   idle: BEGIN, steps writes, COMMIT, then idle steps x step_ms outside a transaction.
# error_first => 1: each hold starts with an ERROR (SELECT 1/0) in the owner's session.

my %LEASE_SCENARIOS = (
	'lease-worker-term' => {
		desc => 'auto-extended locks (TTL 800 ms) held by jobs idle in their transactions'
		  . ' (3 transactions of 4 writes, 300 ms idle between them); the worker terminated'
		  . ' every 4 s (restarted by the postmaster after 1 s, longer than any validity)',
		ttl_ms => 800,
		job => { roles => ['idle-xact'], xacts => 3, steps => 4, step_ms => 300 },
		faults => sub { _lease_term_faults(@_) },
	},
	'lease-stall-then-loss' => {
		desc => 'auto-extended locks (TTL 600 ms), jobs running or idle in transactions; the'
		  . ' worker SIGSTOPped for 0.35-0.5 s (the watchdogs fire, most locks survive), then'
		  . ' a majority frozen 1.2 x TTL + 0.3 s (a real loss)',
		ttl_ms => 600,
		job => { roles => [ 'running', 'idle-xact' ], xacts => 4, steps => 5, step_ms => 200 },
		faults => sub { _lease_stall_loss_faults(@_) },
	},
	'lease-error-then-stall' => {
		desc => 'auto-extended locks (TTL 1500 ms); each job starts with an ERROR (SELECT 1/0)'
		  . ' in its session, then runs statements; the worker SIGSTOPped 1.2 x TTL + 0.3 s'
		  . ' every 4 s',
		ttl_ms => 1500,
		job => { roles => ['running'], error_first => 1, xacts => 3, steps => 4, step_ms => 400 },
		faults => sub { _lease_stall_faults(@_, 0) },
	},
	'lease-stall-owner-states' => {
		desc => 'auto-extended locks (TTL 1000 ms) held by jobs idle, idle in a transaction'
		  . ' and running; the worker SIGSTOPped 1.2 x TTL + 0.3 s, then terminated, in a loop',
		ttl_ms => 1000,
		job => { roles => [ 'idle', 'idle-xact', 'running' ], xacts => 3, steps => 4, step_ms => 300 },
		faults => sub { _lease_stall_faults(@_, 1) },
	},
	'lease-key-prefix-reload' => {
		desc => 'auto-extended locks (TTL 3000 ms), jobs idle in transactions or running;'
		  . ' redlock.key_prefix changed (ALTER SYSTEM + pg_reload_conf()) every 2 s to a new'
		  . ' prefix',
		ttl_ms => 3000,
		job => { roles => [ 'idle-xact', 'running' ], xacts => 3, steps => 4, step_ms => 300 },
		faults => sub { _lease_prefix_faults(@_) },
		# README: change redlock.key_prefix only while no cluster holds locks.  A reload
		# reaches the backends one at a time, so one may acquire under the new prefix while
		# another still holds under the old one: figures only.
		violations_by_design => 'key_prefix changed under held locks, which README rules out'
		  . ' (measured, not judged)',
	},
);
for my $name (sort keys %LEASE_SCENARIOS)
{
	my $s = $LEASE_SCENARIOS{$name};
	# 8 clients on 4 resources: every lock contended, without 16 connections to open
	# and busy-loop on a small machine.
	my %common = (masters => 'plain', preload => 1, wait_ms => 200, clients => 8);
	$SCENARIOS{$name} = { %common, pgoptions => ['redlock.auto_extend=on'], %$s };
	# The negative control: the same without redlock.cancel_on_loss, so that neither the
	# watchdog, nor the cancel, nor the commit check stops a job whose lock was lost.
	$SCENARIOS{"unsafe-$name-no-cancel"} = {
		%common, %$s,
		desc => "NEGATIVE CONTROL: $name with redlock.cancel_on_loss off",
		pgoptions => [ 'redlock.auto_extend=on', 'redlock.cancel_on_loss=off' ],
		expect_violations => $s->{violations_by_design} ? 0 : 1,
	};
}

# The names of the fdw scenarios (Checker/Fdw.pm) and their control, in run order.
sub fdw_scenarios
{
	return qw(fdw-guard-first unsafe-fdw-guard-held-back);
}

# The names of the semaphore scenarios (permits) and their controls, in run order; the
# last needs a node with the library preloaded.
sub permit_scenarios
{
	return qw(permits-plain permits-kill permits-sigstop permits-latency
	  permits-majority-restart-aof unsafe-permits-short-ttl unsafe-permits-majority-restart
	  permits-auto-extend);
}

# The names of the set scenarios and their controls, in run order.
sub set_scenarios
{
	return qw(sets-plain sets-kill sets-sigstop sets-latency sets-majority-restart-aof
	  sets-extend unsafe-sets-no-extend unsafe-sets-short-ttl unsafe-sets-majority-restart);
}

# The names of the shared lock scenarios and their controls, in run order.
sub shared_scenarios
{
	return qw(shared-plain shared-kill shared-sigstop shared-latency
	  shared-majority-restart-aof shared-extend unsafe-shared-no-extend
	  unsafe-shared-short-ttl unsafe-shared-majority-restart);
}

# The names of the issue 21 scenarios and their controls, in run order.
sub lease_scenarios
{
	return map { ($_, "unsafe-$_-no-cancel") }
	  qw(lease-worker-term lease-stall-then-loss lease-error-then-stall
	  lease-stall-owner-states lease-key-prefix-reload);
}

1;
