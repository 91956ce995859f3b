# test/checker/Checker.pm: the mutual-exclusion checker under faults.
#
# pgbench drives CLIENTS sessions that loop on CALL checker_attempt(...) (checker.sql) over
# a few resources; meanwhile a fault schedule (kill -9 / restart, SIGSTOP / SIGCONT, added
# latency through delayproxy.pl) runs in this process.  Afterwards the attempts and
# violations tables give the figures.  Used by test/t/010_checker.pl, 011 and 012, and
# run-long.
#
#   my $redis = RedisMasters->new(5);
#   my $node  = RedisMasters::redlock_node('checker', $redis, Checker::node_conf());
#   Checker::setup($node);
#   my $r = Checker::run(node => $node, redis => $redis, Checker::scenario('sigstop'),
#                        seconds => 10);
#   print Checker::describe($r);     # $r->{violations}, {acquired}, {attempts}, ...
#
# The long-job scenarios (issue 8: locks kept alive by the auto-extend worker) need a node
# made with node_conf(preload => 1), and drive psql clients instead of pgbench (see run).
#
# The fault schedule gets a Checker::Faults object: $f->at(SECONDS) waits until that time
# after the start; $f->kill(I...), $f->start(I...), $f->stop(I...), $f->cont(I...) act on
# masters; $f->delay(MIN, MAX) sets the proxies' delay; $f->worker_term, worker_stop and
# worker_cont act on the auto-extend worker.  Each action is logged with its
# time, and the time between actions is labelled with the state of the masters ("2 killed",
# "1 stopped", ...), so liveness can be reported per state.

package Checker;

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More ();
use Time::HiRes qw(time sleep);

use RedisMasters;

my $DIR = File::Spec->rel2abs(dirname(__FILE__));
my @all_proxies;

# postgresql.conf lines for a checker node: room for the clients, and short retry delays
# so that a wait_ms of a few tens of ms means a few retries.  With preload => 1, for the
# long-job scenarios: redlock in shared_preload_libraries (the auto-extend worker), and
# commit timestamps, which tell when each of a job's writes committed.
sub node_conf
{
	my (%o) = @_;
	my $conf = "max_connections = 64\nredlock.retry_delay = 5\nredlock.retry_jitter = 10\n";
	$conf .= "shared_preload_libraries = 'redlock'\ntrack_commit_timestamp = on\n"
	  if $o{preload};
	return $conf;
}

# Creates the checker's tables and procedure in NODE's postgres database.
sub setup
{
	my ($node) = @_;
	$node->safe_psql('postgres',
		"SET client_min_messages = warning;\n" . slurp_file("$DIR/checker.sql"));
	return;
}

# Points NODE's redlock.servers at GUC (ALTER SYSTEM + reload) and waits until a new
# session sees it.
sub set_servers
{
	my ($node, $guc) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET redlock.servers = '$guc'; SELECT pg_reload_conf();");
	RedisMasters::wait_until(10,
		sub { $node->safe_psql('postgres', 'SHOW redlock.servers') eq $guc })
	  or die "redlock.servers did not change to $guc";
	return;
}

# Starts a delay proxy in front of 127.0.0.1:TARGET_PORT; returns { port, ctl, handle }.
sub start_proxy
{
	my ($target_port) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('proxy');
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $p = { port => $port, target => $target_port, ctl => "$dir/delay" };
	_write_file($p->{ctl}, "0:0\n");
	$p->{handle} = IPC::Run::start(
		[
			$^X, "$DIR/delayproxy.pl", '--listen', $port, '--target', $target_port,
			'--control', $p->{ctl}, '--pidfile', "$dir/pid", '--max-seconds', 3600
		],
		'<', \undef, '>', "$dir/log", '2>&1');
	RedisMasters::wait_until(10, sub { -s "$dir/pid" })
	  or die "delay proxy for port $target_port did not start; see $dir/log";
	push @all_proxies, $p;
	return $p;
}

# Sets proxy P's delay, MIN..MAX ms each way.
sub set_delay
{
	my ($p, $min, $max) = @_;
	_write_file($p->{ctl}, "$min:$max\n");
	return;
}

sub stop_proxy
{
	my ($p) = @_;
	return unless $p->{handle};
	$p->{handle}->signal('TERM');
	eval { $p->{handle}->finish; 1 } or $p->{handle}->kill_kill;
	delete $p->{handle};
	return;
}

END
{
	my $rc = $?;
	for my $p (@all_proxies)
	{
		eval { stop_proxy($p) };
	}
	$? = $rc;
}

sub _write_file
{
	my ($file, $text) = @_;
	open(my $fh, '>', "$file.tmp") or die "cannot write $file: $!";
	print $fh $text;
	close $fh;
	rename("$file.tmp", $file) or die "cannot rename $file.tmp: $!";
	return;
}

# ---- scenarios ----
#
# Each is a list of run() options: a description, masters (plain, or aof: appendonly yes,
# appendfsync always), the TTL / wait / work of every attempt, whether it must see
# violations (a negative control), and the fault schedule, which scales with the run's
# length ($f->{seconds}) and TTL ($f->{ttl_ms}).  Also: servers (the masters redlock.servers
# names at the start), redis_config (CONFIG SET for the run), the held-lock options of run(),
# expect_no_08006 (a majority was always up: any 08006 is spurious), expect_no_gave_up (no
# holder may find its lock lost).

# Out of service for longer than the largest TTL in use (spec §8 "delayed restart").
sub _delayed_out
{
	my ($f) = @_;
	return $f->{ttl_ms} / 1000 * 1.2 + 0.3;
}

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
	'sigstop' => {
		desc => 'SIGSTOP of 1 or 2 masters for 0.2-1 s (> redlock.timeout 50 ms), then SIGCONT',
		masters => 'plain',
		faults => sub {
			my ($f) = @_;
			my @plan = ([ [2], 0.5 ], [ [0], 1.0 ], [ [ 1, 3 ], 0.3 ], [ [4], 0.2 ],
				[ [ 0, 2 ], 0.8 ], [ [3], 0.6 ]);
			my ($t, $k) = (1.0, 0);
			while (1)
			{
				my ($set, $secs) = @{ $plan[ $k++ % @plan ] };
				last if $t + $secs + 0.3 > $f->{seconds};
				$f->at($t);
				$f->stop(@$set);
				$f->at($t + $secs);
				$f->cont(@$set);
				$t += $secs + 0.7;
			}
		},
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
		  . ' every restart setting every master\'s wall clock 3 s further back (README\'s'
		  . ' precondition on the masters\' clocks broken)',
		masters => 'plain',
		fence => 'fenced',
		skew_callers_ms => -3000,
		expect_inversions => 1,
		restart_masters_after => 1,
		faults => sub { _all_restart_delayed($_[0], master_step_ms => -3000) },
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
$SCENARIOS_REF = \%SCENARIOS;

# For the long-job scenarios, in a loop: a majority (3 masters) frozen for 1.2 x TTL +
# 0.3 s, longer than any lock's validity: the worker's renewals get no quorum, it gives
# the locks up while a third of the TTL is left and cancels their jobs; the other
# sessions acquire once the majority is back and the keys expired.  Then a majority
# frozen 0.5 s (under TTL/3, so a renewal due meanwhile is retried until it succeeds),
# the worker terminated (the postmaster starts it again after 1 s, inside the two thirds
# of the TTL a renewed lock has left), a minority (2 masters) killed for 1.2 x TTL + 0.3 s
# (delayed restart, spec §8), and meanwhile the worker frozen for 0.5 s.
sub _long_job_faults
{
	my ($f) = @_;
	my $out = _delayed_out($f);
	my @majority = ([ 0, 1, 2 ], [ 2, 3, 4 ], [ 1, 3, 4 ], [ 0, 2, 4 ], [ 0, 1, 3 ]);
	my ($t, $k) = (1.0, 0);
	while ($t + $out < $f->{seconds})
	{
		my $set = $majority[ $k % @majority ];
		$f->at($t);
		$f->stop(@$set);
		$f->at($t + $out);
		$f->cont(@$set);
		$t += $out + 1.0;
		last if $t + 0.5 > $f->{seconds};
		$set = $majority[ ($k + 1) % @majority ];
		$f->at($t);
		$f->stop(@$set);
		$f->at($t + 0.5);
		$f->cont(@$set);
		push @{ $f->{windows}{'a majority frozen 0.5 s'} }, [ $t, $t + 0.5 ];
		$t += 1.5;
		last if $t > $f->{seconds};
		$f->at($t);
		$f->worker_term;
		$t = $f->now + 1.0;
		last if $t + $out > $f->{seconds};
		my @kill = ($k % 5, ($k + 2) % 5);
		$f->at($t);
		$f->kill(@kill);
		$f->at($t + 1.0);
		$f->worker_stop;
		$f->at($t + 1.5);
		$f->worker_cont;
		$f->at($t + $out);
		$f->start(@kill);
		$t += $out + 1.0;
		$k++;
	}
	return;
}

# Runs the fault schedule PLAN ([time, code] in time order) and, between its actions, TICK
# every PERIOD seconds until the end of the run.
sub _ticking
{
	my ($f, $period, $tick, @plan) = @_;
	for my $p (@plan)
	{
		$f->every($period, $p->[0], $tick);
		last if $f->now >= $f->{seconds};
		$p->[1]->();
	}
	$f->every($period, $f->{seconds}, $tick);
	return;
}

# For reload-loop (RELOADS 1: pg_reload_conf() every 100 ms) and extend-renew (0).
# One master killed at a time, and 2 frozen only 1.5 s after it is back (empty): every lock
# then stays on a majority of the masters that answer, so a holder that finds its lock lost
# lost it to something else than these faults.
sub _renew_faults
{
	my ($f, $reloads) = @_;
	my $out = _delayed_out($f);
	my @plan;
	for (my $t = 1.0, my $k = 0; $t + 0.6 + $out + 0.3 < $f->{seconds}; $t += 0.6 + $out + 2.0, $k++)
	{
		my ($a, $b, $c, $d) = map { ($k + $_) % 5 } 0, 2, 3, 4;
		push @plan, [ $t, sub { $f->stop($a) } ], [ $t + 0.5, sub { $f->cont($a) } ],
		  [ $t + 0.6, sub { $f->kill($b) } ], [ $t + 0.6 + $out, sub { $f->start($b) } ],
		  [ $t + 0.6 + $out + 1.5, sub { $f->stop($c, $d) } ],
		  [ $t + 0.6 + $out + 1.8, sub { $f->cont($c, $d) } ];
	}
	_ticking($f, 0.1, $reloads ? sub { $f->reload } : sub { }, @plan);
	return;
}

# For the extend scenarios: a majority (3 masters) frozen for 0.4 s, so that extends in
# that window raise 08006 while the frozen masters run them when they wake; then a
# minority killed for 1.2 x the largest TTL + 0.3 s (delayed restart), with a third master
# frozen for 0.4 s meanwhile (no quorum), then one master frozen for 0.5 s.
sub _extend_faults
{
	my ($f) = @_;
	my $out = _delayed_out($f);
	my @majority = ([ 0, 1, 2 ], [ 2, 3, 4 ], [ 1, 3, 4 ], [ 0, 2, 4 ], [ 0, 1, 3 ]);
	my ($t, $k) = (0.8, 0);
	while ($t + 0.6 < $f->{seconds})
	{
		my $set = $majority[ $k % @majority ];
		$f->at($t);
		$f->stop(@$set);
		$f->at($t + 0.4);
		$f->cont(@$set);
		$t += 1.4;
		last if $t + $out + 0.3 > $f->{seconds};
		my @kill = ($k % 5, ($k + 3) % 5);
		my $other = ($k + 1) % 5;
		$f->at($t);
		$f->kill(@kill);
		$f->at($t + 0.6);
		$f->stop($other);
		$f->at($t + 1.0);
		$f->cont($other);
		$f->at($t + $out);
		$f->start(@kill);
		$t += $out + 0.5;
		$f->at($t);
		$f->stop(($k + 2) % 5);
		$f->at($t + 0.5);
		$f->cont(($k + 2) % 5);
		$t += 1.2;
		$k++;
	}
	return;
}

# For the server-list scenarios, starting on masters 0-2.
#
# While a list changes, backends switch one by one (each between two commands), and a
# lock on 2 of masters 0-2 and one on 3 of masters 0-4 need not share a master: {0,1} and
# {2,3,4}.  So a change is safe only when every lock still valid, taken on either list,
# holds all 3 masters common to both, which is so once those masters have been up and
# answering for a TTL (and stay so a moment after).  That rule, whatever the client does.
#
# Safe (UNSAFE 0), in a loop: master 1 frozen for 0.3 s, masters 3 and 4 restarted empty
# (they are not in the list); the list grown to 0-4 a TTL + 0.5 s later; master 4 killed
# and restarted (empty) after 1.2 x TTL + 0.3 s (a lock on 3 of 0-3 holds 2 of 0-2); master 0
# frozen for 0.3 s; the list shrunk to 0-2 a TTL + 0.5 s later; master 2 killed and
# restarted after 1.2 x TTL + 0.3 s.
# Unsafe: master 2 killed, and after 0.8 s restarted empty, and the list grown to 0-4 at
# once: a lock taken on 0 and 1 alone meets a second holder on 2, 3 and 4.
sub _servers_faults
{
	my ($f, $unsafe) = @_;
	my $out = _delayed_out($f);
	my $quiet = $f->{ttl_ms} / 1000 + 0.5;
	my $t = 0.5;
	while ($t + 1.5 < $f->{seconds})
	{
		if ($unsafe)
		{
			$f->at($t);
			$f->kill(3, 4);
			$f->start(3, 4);
			$f->kill(2);
			$f->at($t + 0.8);
			$f->start(2);
			$f->servers(0 .. 4);
			$f->at($t + 1.6);
			$f->servers(0, 1, 2);
			$t += 2.4;
			next;
		}
		$f->at($t);
		$f->stop(1);
		$f->at($t + 0.3);
		$f->cont(1);
		$f->kill(3, 4);
		$f->start(3, 4);
		# One master at a time: the old and the new quorum then always share a master
		# (q_old + q_new > masters in either list), whichever list each backend is on.
		$f->at($t + 0.3 + $quiet);
		$f->servers(0 .. 3);
		$f->at($t + 1.3 + $quiet);
		$f->servers(0 .. 4);
		$t += 1.3 + $quiet + 0.5;
		last if $t + $out + 0.3 + $quiet > $f->{seconds};
		$f->at($t);
		$f->kill(4);
		$f->at($t + $out);
		$f->start(4);
		$f->at($t + $out + 0.2);
		$f->stop(0);
		$f->at($t + $out + 0.5);
		$f->cont(0);
		$f->at($t + $out + 0.5 + $quiet);
		$f->servers(0 .. 3);
		$f->at($t + $out + 1.5 + $quiet);
		$f->servers(0, 1, 2);
		$t += $out + 1.5 + $quiet + 0.5;
		last if $t + $out + 0.5 > $f->{seconds};
		$f->at($t);
		$f->kill(2);
		$f->at($t + $out);
		$f->start(2);
		$t += $out + 0.2;
	}
	return;
}

# In a loop: up to 2 holders paused (SIGSTOP) for longer than any validity, then continued.
sub _pause_holders
{
	my ($f) = @_;
	my $pause = _delayed_out($f) + 0.3;
	for (my $t = 1.0; $t + $pause + 0.3 < $f->{seconds}; $t += $pause + 0.7)
	{
		$f->at($t);
		$f->pause_holders(2);
		$f->at($t + $pause);
		$f->resume_holders;
	}
	return;
}

# The clocks of masters I... run FACTOR times too fast for the whole run.
sub _fast_clock
{
	my ($f, $factor, @i) = @_;
	$f->fast_clock($factor, @i);
	$f->every(0.02, $f->{seconds}, sub { $f->fast_clock_tick });
	return;
}

# Masters 0, 1 and 2 killed at once and restarted at once, every 2.5 s.
sub _majority_restart
{
	my ($f) = @_;
	my $t = 1.5;
	while ($t + 0.8 < $f->{seconds})
	{
		$f->at($t);
		$f->kill(0, 1, 2);
		# At once: one after another, a loaded machine took 1.2 s, past the controls'
		# window (a holder still working; a token within the same second).
		$f->start_at_once(0, 1, 2);
		$t += 2.5;
	}
	return;
}

# As _majority_restart, with the data lost at once and no downtime (FLUSHALL).
sub _majority_wipe
{
	my ($f) = @_;
	for (my $t = 1.5; $t + 0.8 < $f->{seconds}; $t += 2.5)
	{
		$f->at($t);
		$f->wipe(0, 1, 2);
	}
	return;
}

# Every master killed at once (first at 3 s, once holders have taken tokens) and started
# again, empty, after 1.2 x TTL + 0.3 s and at least 1.2 s (README's delayed restart:
# longer than the TTL and than 1 s), then up for 2 s from when the last one answers,
# and again.  With master_step_ms, each restart sets every master's wall clock
# that much further off (skewclock.c in LD_PRELOAD): a clock stepped back.
sub _all_restart_delayed
{
	my ($f, %o) = @_;
	my $out = _delayed_out($f);
	$out = 1.2 if $out < 1.2;
	my @all = 0 .. $f->{redis}->count - 1;
	my ($t, $k) = (3.0, 0);
	while ($t + $out + 0.5 < $f->{seconds})
	{
		$f->at($t);
		$f->kill(@all);
		$f->at($t + $out);
		$k++;
		my %env = $o{master_step_ms}
		  ? (LD_PRELOAD => skew_shim(), RL_SKEW_MS => $k * $o{master_step_ms}, RL_SKEW_PIDS => '')
		  : ();
		local @ENV{ keys %env } = values %env;
		$f->start_at_once(@all);
		$f->_mark("masters' clocks now $env{RL_SKEW_MS} ms off") if %env;
		$t = $f->now + 2.0;
	}
	return;
}

# The LD_PRELOAD shim that sets a process's wall clock off (skewclock.c), built once.
my $SKEW_SHIM;

sub skew_shim
{
	return $SKEW_SHIM if $SKEW_SHIM;
	my $dir = PostgreSQL::Test::Utils::tempdir('skewclock');
	system('cc', '-shared', '-fPIC', '-O2', '-o', "$dir/skewclock.so", "$DIR/skewclock.c",
		'-ldl') == 0
	  or die "could not build $DIR/skewclock.c";
	return $SKEW_SHIM = "$dir/skewclock.so";
}

# Restarts NODE with the backends of an odd process id SKEW_MS off (wall clock), or, with
# SKEW_MS 0, as it was.
sub skew_callers
{
	my ($node, $skew_ms) = @_;
	my %env = $skew_ms
	  ? (LD_PRELOAD => skew_shim(), RL_SKEW_MS => $skew_ms, RL_SKEW_PIDS => 'odd')
	  : ();
	local @ENV{ keys %env } = values %env;
	$node->restart;
	return;
}

# The run() options of scenario NAME.
sub scenario
{
	my ($name) = @_;
	my $s = $SCENARIOS{$name} or die "no scenario \"$name\"";
	return (name => $name, %$s);
}

# Runs scenario NAME on NODE with the masters it asks for, from SETS ({ plain => $redis,
# aof => $redis_aof }); starts and stops its delay proxies and points redlock.servers at
# them (or at the masters).  OVERRIDES replace run() options (seconds, clients, ...).
sub run_scenario
{
	my ($node, $sets, $name, %overrides) = @_;
	my %s = scenario($name);
	my $redis = $sets->{ $s{masters} } or die "scenario $name needs $s{masters} masters";
	die "scenario $name needs a node made with node_conf(preload => 1)"
	  if delete $s{preload}
	  && $node->safe_psql('postgres', 'SHOW shared_preload_libraries') !~ /\bredlock\b/;
	my @ports = $redis->ports;
	my @proxies;
	my $guc = $redis->servers_guc;
	if (my $n = delete $s{proxies})
	{
		@proxies = map { start_proxy($ports[$_]) } 0 .. $n - 1;
		$guc = join(',',
			(map { "127.0.0.1:$_->{port}" } @proxies),
			(map { "127.0.0.1:$_" } @ports[ $n .. $#ports ]));
	}
	elsif (my $set = $s{servers})
	{
		$guc = servers_of($redis, @$set);
	}
	set_servers($node, $guc) if $node->safe_psql('postgres', 'SHOW redlock.servers') ne $guc;
	my $restore = delete $s{restart_masters_after};
	skew_callers($node, $s{skew_callers_ms}) if $s{skew_callers_ms};

	# Redis settings for this run only (CONFIG SET on every master, again after each
	# restart), put back afterwards.
	my %saved;
	if (my $conf = $s{redis_config})
	{
		for my $k (sort keys %$conf)
		{
			(undef, $saved{$k}) = split /\n/, $redis->redis_cli(0, 'CONFIG', 'GET', $k);
			$redis->redis_all('CONFIG', 'SET', $k, $conf->{$k});
		}
	}
	my $r = eval { run(node => $node, redis => $redis, %s, %overrides, proxies => \@proxies) };
	my $error = $@;
	stop_proxy($_) for @proxies;
	skew_callers($node, 0) if $s{skew_callers_ms};
	$redis->restart($_) for $restore ? 0 .. $redis->count - 1 : ();
	$redis->redis_all('CONFIG', 'SET', $_, $saved{$_} // '') for sort keys %saved;
	die $error unless $r;
	return $r;
}

# The redlock.servers value naming masters I... of REDIS.
sub servers_of
{
	my ($redis, @i) = @_;
	my @ports = $redis->ports;
	return join(',', map { "127.0.0.1:$ports[$_]" } @i);
}

# ---- long-job clients ----

# The psql lines of one long-job attempt, a block of a client's script: stop (\q) once the
# run's time (DEADLINE, a timestamptz) is up, else pick a resource, run the job, and end
# it with checker_job_end whatever the job's CALL raised (psql goes on after an error).
sub _job_block
{
	my ($prefix, $resources, $ttl, $wait, $job, $swallow, $deadline) = @_;
	return _lease_job_block(@_) if $job->{roles};
	$deadline //= 'DEADLINE';
	return "SELECT clock_timestamp() < '$deadline'::timestamptz AS go,"
	  . " 1 + floor(random() * $resources)::int AS r \\gset\n"
	  . "\\if :go\n"
	  . "CALL checker_job('$prefix' || :r, $ttl, $wait, $job->{xacts}, $job->{steps},"
	  . " $job->{step_ms}, $swallow);\n"
	  . "CALL checker_job_end(:'SQLSTATE', :'LAST_ERROR_MESSAGE');\n"
	  . "\\else\n\\q\n\\endif\n";
}

# Starts CLIENTS psql processes on NODE, each running a script of BLOCK (a sub of
# swallow, deadline) until SECONDS from now; the odd-numbered clients swallow cancels.
# Returns the start time and the IPC::Run handles.
sub _start_job_clients
{
	my ($node, $dir, $clients, $seconds, $work_ms, $block) = @_;
	# Blocks enough for 50 attempts a second (a busy attempt waits wait_ms; one that
	# meets a frozen majority takes about redlock.timeout); a script that runs out
	# says so on its output.
	my $n = int($seconds * 50) + 20;
	my $deadline =
	  $node->safe_psql('postgres', "SELECT clock_timestamp() + interval '$seconds s'");
	my $t0 = time;
	my @h;
	for my $c (1 .. $clients)
	{
		my $file = "$dir/client$c.sql";
		my $b = $block->($c % 2 ? 'true' : 'false', $deadline, $c);
		_write_file($file, ($b x $n) . "\\echo checker-client: ran out of script\n");
		push @h, IPC::Run::start(
			[
				'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-h', $node->host,
				'-p', $node->port, '-d', 'postgres', '-f', $file
			],
			'<', \undef, '>', "$dir/client$c.out", '2>', "$dir/client$c.err",
			IPC::Run::timeout($seconds + $work_ms / 1000 + 120));
	}
	return ($t0, @h);
}

# What the long-job clients printed: (stdout, stderr) of all of them.
sub _job_client_output
{
	my ($dir, $clients) = @_;
	my ($out, $err) = ('', '');
	for my $c (1 .. $clients)
	{
		$out .= PostgreSQL::Test::Utils::slurp_file("$dir/client$c.out");
		$err .= PostgreSQL::Test::Utils::slurp_file("$dir/client$c.err");
	}
	return ($out, $err);
}

# ---- the loss protocol of auto-extended locks (issue 21): jobs across commands ----
#
# Jobs whose session is idle, idle in a transaction or running a statement when the
# auto-extend worker is terminated or stalled, when a majority of masters is frozen
# after a stall the locks survived, after an ERROR in the owner's session, and when
# redlock.key_prefix changes by reload.  Each job is a psql script of commands
# (checker_lease_take, then xacts transactions of steps writes by checker_lease_write,
# then checker_job_end; see checker.sql) that stops at its first error; the long-job
# judge (_job_figures) decides, from what committed, whether a holder's work committed
# after the next holder of its resource acquired.  job => { roles => [...] } selects
# these jobs; client c plays roles->[(c - 1) % @roles]:
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

# The names of the issue 21 scenarios and their controls, in run order.
sub lease_scenarios
{
	return map { ($_, "unsafe-$_-no-cancel") }
	  qw(lease-worker-term lease-stall-then-loss lease-error-then-stall
	  lease-stall-owner-states lease-key-prefix-reload);
}

# Opens the fault session and waits until a job holds a lock (starting 16 psql clients can
# take seconds on a loaded machine); returns the time then, which the schedules count from.
sub _lease_start
{
	my ($f) = @_;
	$f->worker_pid;
	RedisMasters::wait_until($f->{seconds},
		sub { ($f->{psql}->query('SELECT count(*) > 0 FROM checker_jobs'))[0] eq 't' });
	my $b = $f->now;
	$f->_mark(sprintf('first hold (schedule counted from +%.2f s)', $b)) if $b > 1;
	return $b;
}

# The worker terminated every 4 s from 1.5 s (Faults::worker_term waits until it is back).
sub _lease_term_faults
{
	my ($f) = @_;
	my $b = _lease_start($f);
	for (my $t = $b + 0.5; $t + 1.5 < $f->{seconds}; $t += 4)
	{
		$f->at($t);
		$f->worker_term;
	}
	return;
}

# The worker stalled for 1.2 x TTL + 0.3 s (every lock it keeps runs out), then continued;
# with TERM, also terminated 1.5 s later; in a loop.
sub _lease_stall_faults
{
	my ($f, $term) = @_;
	my $out = _delayed_out($f);
	my $t = _lease_start($f) + 0.5;
	while ($t + $out < $f->{seconds})
	{
		$f->at($t);
		$f->worker_stop;
		$f->at($f->now + $out);
		$f->worker_cont;
		$t = $f->now + 1.5;
		if ($term && $t + 1.5 < $f->{seconds})
		{
			$f->at($t);
			$f->worker_term;
			$t = $f->now + 1.5;
		}
	}
	return;
}

# The worker stalled 0.35, 0.45 or 0.5 s (around what a lock renewed TTL/3 ago has left,
# so the watchdogs fire and the worker mostly renews in time), then 0.6 s later a majority
# frozen for 1.2 x TTL + 0.3 s (every lock lost for real); in a loop.
sub _lease_stall_loss_faults
{
	my ($f) = @_;
	my $out = _delayed_out($f);
	my @stalls = (0.35, 0.45, 0.5);
	my @majority = ([ 0, 1, 2 ], [ 2, 3, 4 ], [ 1, 3, 4 ], [ 0, 2, 4 ], [ 0, 1, 3 ]);
	my ($t, $k) = (_lease_start($f) + 0.5, 0);
	while ($t + 0.6 + $out < $f->{seconds})
	{
		$f->at($t);
		$f->worker_stop;
		$f->at($f->now + $stalls[ $k % @stalls ]);
		$f->worker_cont;
		my $set = $majority[ $k % @majority ];
		$f->at($f->now + 0.6);
		$f->stop(@$set);
		$f->at($f->now + $out);
		$f->cont(@$set);
		$t = $f->now + 1.0;
		$k++;
	}
	return;
}

# redlock.key_prefix changed to a new prefix every 2 s from 1.5 s, put back at the end.
sub _lease_prefix_faults
{
	my ($f) = @_;
	$f->{prefix_psql}{ $f->{node}->name } //= RedisMasters::session($f->{node});
	my $k = 0;
	for (my $t = _lease_start($f) + 0.5; $t < $f->{seconds} - 0.5; $t += 2)
	{
		$f->at($t);
		$f->key_prefix('checker-pfx' . ++$k . ':');
	}
	$f->at($f->{seconds});
	$f->key_prefix(undef);
	return;
}

# The psql lines of one hold of a job across commands (see above): stop (\q) once the
# run's time (DEADLINE) is up; else take a lock, and if it was taken, run the job of
# CLIENT's role, each command skipped once one failed (E: the first error's SQLSTATE,
# M: its message), every COMMIT sent (it ends an aborted transaction); then
# checker_job_end with the first error, or 00000.
sub _lease_job_block
{
	my ($prefix, $resources, $ttl, $wait, $job, $swallow, $deadline, $client) = @_;
	my @roles = @{ $job->{roles} };
	my $role = $roles[ (($client // 1) - 1) % @roles ];
	my $step_s = $job->{step_ms} / 1000;
	my $capture = "\\if :ERROR\n\\set E :LAST_ERROR_SQLSTATE\n\\set M :LAST_ERROR_MESSAGE\n\\endif\n";
	my $cmd = sub { return "\\if :{?E}\n\\else\n$_[0]\n$capture\\endif\n"; };
	my $idle = sub { return "\\if :{?E}\n\\else\n\\! sleep $_[0]\n\\endif\n"; };
	my $s = "\\unset E\n\\unset M\n\\unset go\n\\unset held\n"
	  . "SELECT clock_timestamp() < :'deadline'::timestamptz AS go,"
	  . " 1 + floor(random() * $resources)::int AS r \\gset\n"
	  . "\\if :go\n"
	  . "CALL checker_lease_take('$prefix' || :r, $ttl, $wait);\n"
	  . "SELECT EXISTS (SELECT 1 FROM checker_jobs WHERE pid = pg_backend_pid()) AS held \\gset\n"
	  . "\\if :held\n";
	$s .= "SELECT 1/0;\n" if $job->{error_first};
	for my $x (1 .. $job->{xacts})
	{
		$s .= $cmd->('BEGIN;');
		for my $i (1 .. $job->{steps})
		{
			$s .= $cmd->("SELECT checker_lease_write($x, $i);");
			if ($role eq 'running')
			{
				$s .= $cmd->("SELECT pg_sleep($step_s);");
			}
			elsif ($role eq 'idle-xact')
			{
				$s .= $idle->($step_s);
			}
		}
		$s .= "COMMIT;\n$capture";
		$s .= $idle->($step_s * $job->{steps}) if $role eq 'idle';
	}
	$s .= "\\endif\n"
	  . "\\if :{?E}\n\\else\n\\set E 00000\n\\set M ''\n\\endif\n"
	  . "CALL checker_job_end(:'E', :'M');\n"
	  . "\\else\n\\q\n\\endif\n";
	$s = "-- $role\n$s" unless defined $client;
	return $s;
}

# Starts CLIENTS psql processes on NODE for jobs across commands, each running a script of
# BLOCK (a sub of swallow, deadline, client number), and opens them all at once: each
# script first waits (a shell loop) for the file "go" in DIR, which is written only once
# every client is connected, and reads the run's end (a timestamptz, SECONDS after the
# gate opened) from it into the psql variable deadline.  So the run's time counts from the
# moment every client can take a lock, however long 16 connections took to open on a
# loaded machine (they took up to 13 s at load 15 on 2 CPUs), and the fault schedules,
# counted from the first hold, land while jobs hold locks.  Returns the time the gate
# opened and the IPC::Run handles.
sub _start_lease_clients
{
	my ($node, $dir, $clients, $seconds, $block) = @_;
	# A hold takes at least wait_ms (busy) or a job's steps; blocks enough for 8 a second,
	# a script that runs out says so on its output.
	my $n = int($seconds * 8) + 20;
	my $start = time;
	my $gate = "\\! while [ ! -e '$dir/go' ]; do sleep 0.05; done\n"
	  . "\\set deadline `cat '$dir/go'`\n";
	my @h;
	for my $c (1 .. $clients)
	{
		my $file = "$dir/client$c.sql";
		my $b = $block->($c % 2 ? 'true' : 'false', undef, $c);
		_write_file($file, $gate . ($b x $n) . "\\echo checker-client: ran out of script\n");
		push @h, IPC::Run::start(
			[
				'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-h', $node->host,
				'-p', $node->port, '-d', 'postgres', '-f', $file
			],
			'<', \undef, '>', "$dir/client$c.out", '2>', "$dir/client$c.err",
			IPC::Run::timeout($seconds + 180));
	}
	my $s = do { local $ENV{PGAPPNAME} = 'checker-gate'; RedisMasters::session($node) };
	my $all = RedisMasters::wait_until(120, sub {
		($s->query("SELECT count(*) = $clients FROM pg_stat_activity"
			  . " WHERE application_name = 'checker'"))[0] eq 't' });
	if (!$all)
	{
		$_->kill_kill for @h;
		die "checker: the $clients psql clients did not all connect within 120 s";
	}
	Test::More::note(sprintf('checker: the %d psql clients connected in %.1f s', $clients,
		time - $start));
	my ($deadline) = $s->query("SELECT clock_timestamp() + interval '$seconds s'");
	my $t0 = time;
	$s->quit;
	_write_file("$dir/go", $deadline);
	return ($t0, @h);
}

# The figures of a run of jobs across commands, into R: from the LOG lines of
# checker_lease_write (which no rollback takes back), the writes a job made after the
# next holder of its resource had acquired, committed or not (ran_on), and how many
# holds did (holds_ran_on).  Committed ones are the judge's overlaps; the others are work
# the loss protocol should have stopped when the owner could be reached (a running
# statement), or did not let commit.
sub _lease_figures
{
	my ($node, $log, $r) = @_;
	my %next;    # "resource/pid/t1" => the next hold's t1
	my %holds;
	push @{ $holds{ $_->[0] } }, $_
	  for _rows($node, q{
SELECT resource, pid, extract(epoch FROM t1)::text FROM checker_attempts WHERE outcome = 'acquired'
ORDER BY resource, t1});
	for my $res (keys %holds)
	{
		my @h = @{ $holds{$res} };
		$next{"$res/$h[$_][1]/$h[$_][2]"} = $h[ $_ + 1 ][2] for 0 .. $#h - 1;
	}
	my ($ran_on, %holds_ran_on) = (0);
	while ($log =~ /checker-write: (\d+) (\S+) (\S+) (\S+)$/mg)
	{
		my ($pid, $t1, $at, $res) = ($1, $2, $3, $4);
		my $n = $next{"$res/$pid/$t1"};
		next unless defined $n && $at > $n;
		$ran_on++;
		$holds_ran_on{"$res/$pid/$t1"} = 1;
	}
	$r->{ran_on} = $ran_on;
	$r->{holds_ran_on} = scalar keys %holds_ran_on;
	$r->{lease_writes_logged} = () = $log =~ /checker-write: /g;
	# Losses the owners met: a release that found its lock run out (the watchdog or the
	# commit check stopped the job and the job released before the worker, stalled or
	# restarting, could log the loss).
	$r->{release_found_lost} = 0;
	$r->{release_found_lost} += $_
	  for map { $r->{warnings}{$_} }
	  grep { /^lock on resource "\.\.\." had (?:expired|been lost) before it was released/ }
	  keys %{ $r->{warnings} // {} };
	return;
}

# ---- one run ----

# Runs one scenario; returns a hash of figures (see the end).  Options:
#   node, redis (RedisMasters), proxies (list, for delay), name, desc, seconds (10),
#   clients (16), resources (4), ttl_ms (1000), wait_ms (20), work_ms (5), faults (sub).
# A lock held across commands (checker_take/step/done in checker.sql) when steps is set:
#   steps (N), step_ms (work per step), ext_ttls ([TTL or undef per step]: redlock_extend
#   before that step), honest (1: work a step only with validity for it; 0: work on
#   whatever extend and redlock_locks() say), margin_ms (100), discard ('after': give
#   the guard back, then DISCARD ALL instead of redlock_release; 'early': DISCARD ALL
#   right after taking the guard, a negative control).
#   idle_ms: the client sleeps (idle backend) after each attempt; pgoptions: more -c
#   settings for the clients' sessions; fault_ttl_ms: the TTL the fault schedule is told
#   (default the largest TTL in use).
#   fence ('fenced' or 'unfenced'): each holder takes its fencing token and writes it to
#   checker_fence at the end of its work, with or without the fence condition (see
#   checker.sql and _fence_figures).
# A long job (checker_job / checker_job_end in checker.sql) when job is set:
#   job => { xacts, steps, step_ms }: each hold works xacts transactions of steps writes
#   step_ms apart; the odd-numbered clients swallow a cancel and try to commit.  The
#   clients are psql scripts (psql goes on after an error; pgbench 15 would end the
#   client), and the node must have the library preloaded with track_commit_timestamp.
sub run
{
	my (%o) = @_;
	my $node = $o{node} or die 'run: no node';
	my $name = $o{name} // 'run';
	my $seconds = $o{seconds} // 10;
	my $clients = $o{clients} // 16;
	my $resources = $o{resources} // 4;
	my $ttl = $o{ttl_ms} // 1000;
	my $wait = $o{wait_ms} // 20;
	my $work = $o{work_ms} // 5;
	my $steps = $o{steps} // 0;
	my $step_ms = $o{step_ms} // 100;
	my @ext = @{ $o{ext_ttls} // [] };
	my $honest = $o{honest} // 1;
	my $margin = $o{margin_ms} // 100;
	my $idle = $o{idle_ms} // 0;
	my $fault_ttl = $o{fault_ttl_ms} // (sort { $b <=> $a } $ttl, grep { defined } @ext)[0];
	my $job = $o{job};
	my $fence = $o{fence};
	(my $prefix = "checker-$name-") =~ s/[^A-Za-z0-9+._-]/_/g;

	$node->safe_psql('postgres', qq{
TRUNCATE checker_attempts, checker_violations, checker_guard, checker_holds, checker_jobs,
	checker_writes, checker_losses, checker_fence;
INSERT INTO checker_guard (resource)
	SELECT '$prefix' || g FROM generate_series(1, $resources) g;
INSERT INTO checker_fence (resource) SELECT resource FROM checker_guard;
});
	$node->safe_psql('postgres', 'SELECT redlock_stats_reset()') if $job;
	my $dir = PostgreSQL::Test::Utils::tempdir("checker-$name");
	my $script = "$dir/attempt.pgbench";
	my $text = "\\set r random(1, $resources)\n";
	if ($job)
	{
		$work = $job->{xacts} * $job->{steps} * $job->{step_ms};
		$text = _job_block($prefix, $resources, $ttl, $wait, $job, 'SWALLOW');
	}
	elsif ($steps)
	{
		$work = $steps * $step_ms;
		my $h = $honest ? 'true' : 'false';
		my $discard = $o{discard} // '';
		$text .= "CALL checker_take('$prefix' || :r, $ttl, $wait);\n";
		$text .= "DISCARD ALL;\n" if $discard eq 'early';
		$text .= "CALL checker_step('$prefix' || :r, $step_ms, "
		  . ($ext[$_] // 'NULL') . ", $h, $margin);\n"
		  for 0 .. $steps - 1;
		$text .= $discard eq 'after'
		  ? "CALL checker_done('$prefix' || :r, false);\nDISCARD ALL;\n"
		  : "CALL checker_done('$prefix' || :r);\n";
	}
	else
	{
		$text .= "CALL checker_attempt('$prefix' || :r, $ttl, $wait, $work"
		  . ($fence ? ", '$fence'" : '') . ");\n";
	}
	$text .= "\\sleep $idle ms\n" if $idle;
	_write_file($script, $text) unless $job;

	my @cmd = (
		'pgbench', '-n', '-h', $node->host, '-p', $node->port, '-c', $clients,
		'-j', 2, '-T', $seconds, '-f', $script, 'postgres');
	my ($out, $err) = ('', '');
	my $f = Checker::Faults->new(
		node => $node,
		redis => $o{redis},
		proxies => $o{proxies} // [],
		redis_config => $o{redis_config},
		servers => $o{servers},
		seconds => $seconds,
		ttl_ms => $fault_ttl);
	Test::More::note("checker: $name: $clients clients, $resources resources, TTL $ttl ms,"
		  . " wait $wait ms, work $work ms, $seconds s");
	Test::More::note("checker: " . ($job ? 'client script (each block)' : 'pgbench script')
		  . ":\n$text");
	my $log_offset = -s $node->logfile;
	my @h;
	my $t0;
	{
		local $ENV{PGOPTIONS} = '-c client_min_messages=error'
		  . join('', map { " -c $_" } @{ $o{pgoptions} // [] });
		local $ENV{PGAPPNAME} = 'checker';
		if ($job && $job->{roles})
		{
			($t0, @h) = _start_lease_clients($node, $dir, $clients, $seconds,
				sub { _job_block($prefix, $resources, $ttl, $wait, $job, @_) });
		}
		elsif ($job)
		{
			($t0, @h) = _start_job_clients($node, $dir, $clients, $seconds, $work,
				sub { _job_block($prefix, $resources, $ttl, $wait, $job, @_) });
		}
		else
		{
			$t0 = time;
			@h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
				IPC::Run::timeout($seconds + 120));
		}
	}
	$f->{t0} = $t0;
	my $ok = eval { $o{faults}->($f) if $o{faults}; 1 };
	my $fault_error = $@;
	$f->heal;
	if (!$ok)
	{
		$_->kill_kill for @h;
		die "fault schedule of $name failed: $fault_error";
	}
	my $rc = 0;
	for my $h (@h)
	{
		eval { $h->finish; 1 } or do { $_->kill_kill for @h; die "the clients did not finish: $@"; };
		# A client killed by a signal is a failure too: 128 + the signal, as a shell says.
		my $status = $h->full_result(0);
		my $hrc = $status & 127 ? 128 + ($status & 127) : $status >> 8;
		$rc = $hrc if $hrc > $rc;
	}
	($out, $err) = _job_client_output($dir, $clients) if $job;
	my $ran_out = () = $out =~ /^checker-client: ran out of script$/mg;
	my $elapsed = time - $t0;

	# Let the last CALLs finish writing their rows.
	RedisMasters::wait_until(
		30,
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'checker'")
			  eq '0';
		});

	# The WARNINGs the backends logged meanwhile, by kind (resource names and counts
	# blanked out).
	my %warnings;
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_offset);
	for my $w ($log =~ /WARNING:  (.*)/g)
	{
		$w =~ s/"[^"]*"/"..."/g;
		$w =~ s/\b\d+ of \d+\b/N of M/g;
		$warnings{$w}++;
	}

	my %r = (
		warnings => \%warnings,
		name => $name,
		desc => $o{desc} // '',
		masters => $o{masters} // 'plain',
		expect_violations => $o{expect_violations} // 0,
		expect_no_08006 => $o{expect_no_08006} // 0,
		expect_no_gave_up => $o{expect_no_gave_up} // 0,
		violations_by_design => $o{violations_by_design},
		expect_min_nodes => $o{expect_min_nodes},
		fence => $fence,
		expect_inversions => $o{expect_inversions} // 0,
		skew_callers_ms => $o{skew_callers_ms} // 0,
		expect_stale_landed => $o{expect_stale_landed} // 0,
		expect_stale_refused => $o{expect_stale_refused} // 0,
		seconds => $seconds,
		elapsed => $elapsed,
		clients => $clients,
		resources => $resources,
		ttl_ms => $ttl,
		wait_ms => $wait,
		work_ms => $work,
		steps => $steps,
		step_ms => $step_ms,
		ext_ttls => \@ext,
		honest => $honest,
		margin_ms => $margin,
		idle_ms => $idle,
		pgoptions => $o{pgoptions} // [],
		job => $job,
		ran_out => $ran_out,
		fault_counts => $f->{counts},
		pgbench_rc => $rc,
		pgbench_err => $err,
		pgbench_out => $out,
		events => $f->{events},
		errors => {},
	);
	$r{$_} = 0 for qw(attempts acquired busy unavailable other_errors);

	for my $row (_rows($node, q{
SELECT outcome, coalesce(sqlstate, ''), count(*), min(replace(message, E'\n', ' '))
FROM checker_attempts GROUP BY 1, 2 ORDER BY 1, 2}))
	{
		my ($outcome, $state, $n, $msg) = @$row;
		$r{attempts} += $n;
		if ($outcome eq 'acquired') { $r{acquired} += $n; }
		elsif ($outcome eq 'busy') { $r{busy} += $n; }
		elsif ($state eq '08006') { $r{unavailable} += $n; }
		else { $r{other_errors} += $n; }
		$r{errors}{$state} = { n => $n, message => $msg } if $outcome eq 'error';
	}
	($r{overran}, $r{release_false}, $r{release_error}, $r{min_nodes}) = @{
		(
			_rows($node, q{
SELECT count(*) FILTER (WHERE overran), count(*) FILTER (WHERE NOT released),
	count(*) FILTER (WHERE released IS NULL), coalesce(min(nodes), 0)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	};
	(
		$r{extends}, $r{extend_false}, $r{extend_errors}, $r{extend_other_errors},
		$r{gave_up}, $r{steps_done}
	  )
	  = @{
		(
			_rows($node, q{
SELECT coalesce(sum(extends), 0), coalesce(sum(extend_false), 0),
	coalesce(sum(extend_errors), 0), coalesce(sum(extend_other_errors), 0),
	count(*) FILTER (WHERE gave_up), coalesce(sum(steps), 0)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };

	# Per 1-second bucket, and per state window.
	my @acq_times;
	my (@per_sec_acq, @per_sec_unav);
	for my $row (_rows($node, qq{
SELECT extract(epoch FROM t1) - $t0, outcome, coalesce(sqlstate, '') FROM checker_attempts}))
	{
		my ($t, $outcome, $state) = @$row;
		my $b = $t < 0 ? 0 : int($t);
		if ($outcome eq 'acquired')
		{
			$per_sec_acq[$b]++;
			push @acq_times, $t;
		}
		$per_sec_unav[$b]++ if $state eq '08006';
	}
	my $nsec = int($seconds + 0.999);
	$r{per_sec_acq} = [ map { $per_sec_acq[$_] // 0 } 0 .. $nsec - 1 ];
	$r{per_sec_unav} = [ map { $per_sec_unav[$_] // 0 } 0 .. $nsec - 1 ];
	$r{states} = _state_windows($f->{events}, $seconds, \@acq_times);

	$r{violation_rows} = [
		map {
			{
				at => $_->[0],
				resource => $_->[1],
				pid => $_->[2],
				what => $_->[3],
				other_pid => $_->[4],
				other_inside_ms => $_->[5],
				other_validity_left_ms => $_->[6],
				since_acquired_ms => $_->[7],
				nodes => $_->[8],
				validity_ms => $_->[9],
			}
		} _rows($node, qq{
SELECT round((extract(epoch FROM at) - $t0)::numeric, 3), resource, pid, what,
	coalesce(other_pid::text, '-'),
	coalesce(round((extract(epoch FROM at - other_since) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM other_valid_until - at) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM at - acquired_at) * 1000)::numeric, 1)::text, '?'),
	coalesce(nodes::text, '?'), coalesce(validity_ms::text, '?')
FROM checker_violations ORDER BY at})
	];
	$r{violations} = scalar @{ $r{violation_rows} };
	_job_figures($node, $log, $t0, $f, \%r) if $job;
	_lease_figures($node, $log, \%r) if $job && $job->{roles};
	_fence_figures($node, $t0, \%r) if $fence;
	# Why holders gave up (held-lock runs): counts by reason, and the first few with times.
	$r{gave_up_rows} = [
		_rows($node, qq{
SELECT round((extract(epoch FROM gave_up_at) - $t0)::numeric, 3), resource, pid,
	regexp_replace(gave_up_why, '[0-9]+ ms', 'N ms'), gave_up_why,
	round((extract(epoch FROM gave_up_at - t1) * 1000)::numeric)
FROM checker_attempts WHERE gave_up ORDER BY gave_up_at})
	];
	$r{gave_up_why}{ $_->[3] }++ for @{ $r{gave_up_rows} };
	$r{acq_per_s} = $r{acquired} / $seconds;
	$r{busy_pct} = $r{attempts} ? 100 * $r{busy} / $r{attempts} : 0;
	$r{unavailable_pct} = $r{attempts} ? 100 * $r{unavailable} / $r{attempts} : 0;
	return \%r;
}

# The figures of a fenced run, into R.  A token is granted when redlock_fencing_token
# returns; the scheme promises (README "Fencing tokens") that a token granted after
# another one of the same resource was granted is larger.  So:
#   inversions: holds B for which a hold A of the same resource got its token before B
#     asked for one (A's token_t1 < B's token_t0) and A's token >= B's;
#   token_dups: tokens that two holds of the same resource both got;
#   stale_landed: writes that landed although a write with a larger token had landed
#     before (the fence condition refuses them; the unfenced control lets them in);
#   stale_refused: writes the fence condition refused; late_writes: writes made after
#     the writer's own validity had run out (paused holders).
sub _fence_figures
{
	my ($node, $t0, $r) = @_;
	(
		$r->{tokens}, $r->{token_errors}, $r->{writes}, $r->{stale_refused},
		$r->{stale_landed}, $r->{late_writes}, $r->{late_refused}
	  )
	  = @{
		(
			_rows($node, q{
SELECT count(token), count(token_sqlstate), count(write_at),
	count(*) FILTER (WHERE NOT write_applied),
	count(*) FILTER (WHERE write_applied AND write_prev > token),
	count(*) FILTER (WHERE write_at > valid_until),
	count(*) FILTER (WHERE write_at > valid_until AND NOT write_applied)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };
	$r->{token_error_states} = {
		map { $_->[0] => $_->[1] } _rows($node, q{
SELECT token_sqlstate, count(*) FROM checker_attempts
WHERE token_sqlstate IS NOT NULL GROUP BY 1})
	};
	# One sweep over the token calls' starts and ends in time order (a start before an end
	# at the same time: "before" is strict), keeping per resource the largest token
	# granted so far; each start compares its token with that.  Times read by backends
	# whose clock was set off (skew_callers_ms: those of an odd pid) are put back first.
	my $back = -($r->{skew_callers_ms} // 0) / 1000;
	my @holds = _rows($node, qq{
SELECT resource, pid, token,
	extract(epoch FROM token_t0) - $t0 + CASE WHEN pid % 2 = 1 THEN $back ELSE 0 END,
	extract(epoch FROM token_t1) - $t0 + CASE WHEN pid % 2 = 1 THEN $back ELSE 0 END
FROM checker_attempts WHERE token IS NOT NULL});
	my %largest;
	my @inversions;
	for my $e (sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] }
		(map { [ $_->[3], 0, $_ ] } @holds), (map { [ $_->[4], 1, $_ ] } @holds))
	{
		my ($t, $is_end, $h) = @$e;
		my $m = $largest{ $h->[0] };
		if ($is_end)
		{
			$largest{ $h->[0] } = $h if !$m || $h->[2] > $m->[2];
		}
		elsif ($m && $m->[2] >= $h->[2])
		{
			push @inversions, [ $t, @$h[ 0 .. 2 ], $m->[1], $m->[2], 1000 * ($t - $m->[4]) ];
		}
	}
	$r->{inversion_rows} = \@inversions;
	$r->{inversions} = @inversions;

	# Around the first restart of every master (a run with skew_callers_ms): tokens
	# granted before the kill, and asked for after the masters were up again.
	my ($kill) = map { $_->[0] } grep { $_->[1] =~ /^kill -9 master/ } @{ $r->{events} // [] };
	my ($up) = map { $_->[0] } grep { $_->[1] =~ / up again$/ } @{ $r->{events} // [] };
	if (defined $kill && defined $up)
	{
		$r->{tokens_before_restart} = grep { $_->[4] < $kill } @holds;
		$r->{tokens_after_restart} = grep { $_->[3] > $up } @holds;
	}
	my @dups = _rows($node, q{
SELECT resource, token FROM checker_attempts WHERE token IS NOT NULL
GROUP BY 1, 2 HAVING count(*) > 1});
	$r->{token_dups} = @dups;
	return;
}

# The figures of a long-job run, into R; its violations replace those of the guard alone.
#
# A job's guard stays claimed from its claim to checker_job_end, also after a cancel, and
# a job that swallowed the cancel is still inside, writing, when another session takes
# the lock (run out on the masters) and claims the guard.  Such a claim conflict is
# harmless only if the work of the first holder after its loss never became visible.
# So a conflict (a claim that found the guard held) is a violation unless all of these
# hold:
#   - the worker had logged the loss of the other holder's lock (LOG "redlock lock on
#     resource ... was lost", owner PID) before the claim;
#   - none of the other holder's writes of that hold committed after the loss
#     (pg_xact_commit_timestamp; the log has millisecond resolution, so a commit within
#     1 ms after the logged time counts as before it);
#   - none of them committed after this session acquired.
# And whatever the guard saw, a hold whose write committed after the next holder of the
# same resource acquired is a violation (committed work of two holders overlapping),
# counted once per pair of holds.
sub _job_figures
{
	my ($node, $log, $t0, $f, $r) = @_;

	# The worker's LOG lines of losses, with the DETAIL naming the owner.
	my @losses;
	while ($log =~ /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+) \[(\d+)\] (?:\S+ )?LOG:  redlock lock on resource "([^"\n]*)" was lost: ([^\n]*)\n(?:[^\n]*\n)*?[^\n]*\[\2\] (?:\S+ )?DETAIL:  Owner PID (\d+); ([^\n]*)$/mg)
	{
		push @losses, [ $1, $3, $5, $4, $6 ];
	}
	my $logged = () = $log =~ /LOG:  redlock lock on resource "[^"\n]*" was lost: /g;
	die "checker: $logged losses in the server log, but only " . scalar(@losses)
	  . ' with the DETAIL naming the owner'
	  if $logged != @losses;
	if (@losses)
	{
		my $q = sub { (my $v = shift) =~ s/'/''/g; return "'$v'"; };
		$node->safe_psql('postgres',
			'INSERT INTO checker_losses (at, resource, owner_pid, reason, detail) VALUES '
			  . join(',',
				map { '(' . join(', ', $q->($_->[0]) . '::timestamptz', $q->($_->[1]), $_->[2],
						$q->($_->[3]), $q->($_->[4])) . ')' } @losses));
	}
	$r->{losses} = scalar @losses;
	for my $l (@losses)
	{
		(my $why = $l->[3]) =~ s/\d+/N/g;
		$r->{loss_reasons}{$why}++;
		(my $what = $l->[4]) =~ s/\.$//;
		$r->{loss_details}{$what}++;
	}

	# How the jobs ended.
	$r->{$_} = 0 for qw(jobs_done cancelled cancelled_other refused job_errors);
	for my $row (_rows($node, q{
SELECT coalesce(end_sqlstate, '?'), replace(coalesce(end_message, ''), E'\n', ' '), count(*)
FROM checker_attempts WHERE outcome = 'acquired' GROUP BY 1, 2}))
	{
		my ($state, $msg, $n) = @$row;
		if ($state eq '00000') { $r->{jobs_done} += $n; }
		elsif ($state eq '57014' && $msg =~ /^canceling statement because lock on resource ".*" was lost$/)
		{
			$r->{cancelled} += $n;
		}
		elsif ($state eq '57014') { $r->{cancelled_other} += $n; }
		elsif ($state eq '55P03' && $msg =~ /^lock on resource ".*" was lost during this transaction$/)
		{
			$r->{refused} += $n;
		}
		else
		{
			$r->{job_errors} += $n;
			(my $m = $msg) =~ s/"[^"]*"/"..."/g;
			$r->{job_error_kinds}{"$state $m"} += $n;
		}
	}
	$r->{swallowed} = () = $log =~ /WARNING:  checker: a job swallowed a cancel/g;
	(
		$r->{lost_holds}, $r->{renewals_max}, $r->{renewals_sum}, $r->{taken_over},
		$r->{done_renewals_min}
	  )
	  = @{
		(
			_rows($node, q{
SELECT count(*) FILTER (WHERE lost), coalesce(max(renewals), 0), coalesce(sum(renewals), 0),
	count(*) FILTER (WHERE taken_over),
	coalesce(min(renewals) FILTER (WHERE end_sqlstate = '00000'), 0)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };
	($r->{renewals}, $r->{renewals_failed}, $r->{locks_lost}) = @{
		(_rows($node, 'SELECT renewals, renewals_failed, locks_lost FROM redlock_stats()'))[0] };
	$r->{worker_gaps} = $f->{worker_gaps} // [];
	$r->{nodes_hist} = { map { @$_ } _rows($node, q{
SELECT nodes, count(*) FROM checker_attempts WHERE outcome = 'acquired' GROUP BY 1}) };

	# Each loss: how long after the lock's last renewal (or its acquisition) the worker
	# gave it up.  The validity a renewal gives is TTL x 0.99 - 2 ms from the renewal's
	# start, a little before last_renewal: so this is a slight underestimate.
	$r->{loss_rows} = [
		_rows($node, qq{
SELECT round((extract(epoch FROM l.at) - $t0)::numeric, 3), l.resource, l.owner_pid,
	coalesce(round((extract(epoch FROM l.at - coalesce(a.last_renewal, a.t1)) * 1000)::numeric)::text, '?'),
	coalesce(a.renewals::text, '?'), coalesce(a.end_sqlstate, '?'), coalesce(a.nodes::text, '?'),
	l.reason
FROM checker_losses l
LEFT JOIN LATERAL (SELECT * FROM checker_attempts a WHERE a.pid = l.owner_pid
	AND a.resource = l.resource AND a.outcome = 'acquired' AND a.t1 < l.at
	ORDER BY a.t1 DESC LIMIT 1) a ON true
ORDER BY l.at})
	];
	my @since = grep { $_ ne '?' } map { $_->[3] } @{ $r->{loss_rows} };
	# Losses during a window of the fault schedule (or within TTL/3 after it).
	for my $w (sort keys %{ $f->{windows} // {} })
	{
		$r->{losses_in}{$w} = grep {
			my $l = $_;
			grep { $l->[0] >= $_->[0] && $l->[0] <= $_->[1] + $r->{ttl_ms} / 3000 }
			  @{ $f->{windows}{$w} }
		} @{ $r->{loss_rows} };
	}
	$r->{losses_unrenewed} = grep { $_->[7] =~ /validity time ran out before it could be renewed/ }
	  @{ $r->{loss_rows} };
	$r->{loss_after_renewal_max_ms} = @since ? (sort { $b <=> $a } @since)[0] : undef;

	# Writes committed after their hold's loss (the transaction running at the loss must
	# not commit; with cancel_on_loss off, the job is not told and works on).
	($r->{writes_after_loss}, $r->{holds_writes_after_loss}) = @{
		(
			_rows($node, q{
SELECT count(*), count(DISTINCT (w.pid, w.t1))
FROM checker_writes w JOIN checker_losses l ON l.owner_pid = w.pid AND l.resource = w.resource
	AND l.at > w.t1
WHERE pg_xact_commit_timestamp(w.xmin) >= l.at + interval '1 ms'}))[0]
	};
	($r->{writes}, $r->{writes_swallowed}) = @{
		(_rows($node, 'SELECT count(*), count(*) FILTER (WHERE swallowed) FROM checker_writes'))[0] };

	# Claim conflicts, excused or not (see above).
	my (@violations, @excused, %pair);
	for my $row (_rows($node, qq{
WITH c AS (
	SELECT v.*,
		(SELECT min(l.at) FROM checker_losses l WHERE l.owner_pid = v.other_pid
			AND l.resource = v.resource AND l.at > v.other_acquired_at AND l.at < v.at) AS lost_at,
		(SELECT max(pg_xact_commit_timestamp(w.xmin)) FROM checker_writes w
			WHERE w.pid = v.other_pid AND w.resource = v.resource
			AND w.t1 = v.other_acquired_at) AS last_commit
	FROM checker_violations v)
SELECT round((extract(epoch FROM at) - $t0)::numeric, 3), resource, pid, what,
	coalesce(other_pid::text, '-'),
	coalesce(round((extract(epoch FROM at - other_since) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM other_valid_until - at) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM at - acquired_at) * 1000)::numeric, 1)::text, '?'),
	coalesce(nodes::text, '?'), coalesce(validity_ms::text, '?'),
	coalesce(round((extract(epoch FROM at - lost_at) * 1000)::numeric, 1)::text, '-'),
	coalesce(round((extract(epoch FROM last_commit - lost_at) * 1000)::numeric, 1)::text, '-'),
	coalesce(lost_at IS NOT NULL AND (last_commit IS NULL
		OR (last_commit < lost_at + interval '1 ms' AND last_commit < acquired_at)), false),
	resource || '/' || extract(epoch FROM other_acquired_at) || '/' || extract(epoch FROM acquired_at)
FROM c ORDER BY at}))
	{
		my %v = (
			at => $row->[0],
			resource => $row->[1],
			pid => $row->[2],
			what => $row->[3],
			other_pid => $row->[4],
			other_inside_ms => $row->[5],
			other_validity_left_ms => $row->[6],
			since_acquired_ms => $row->[7],
			nodes => $row->[8],
			validity_ms => $row->[9],
			other_lost_ms_before => $row->[10],
			other_commit_after_loss_ms => $row->[11],
		);
		if ($row->[12] eq 't')
		{
			push @excused, \%v;
		}
		else
		{
			push @violations, \%v;
			$pair{ $row->[13] } = 1;
		}
	}

	# Committed work overlapping the next holder's.
	for my $row (_rows($node, qq{
WITH holds AS (
	SELECT pid, resource, t1 FROM checker_attempts WHERE outcome = 'acquired'
	UNION SELECT pid, resource, t1 FROM checker_writes),
seq AS (
	SELECT *, lead(pid) OVER w AS next_pid, lead(t1) OVER w AS next_t1
	FROM holds WINDOW w AS (PARTITION BY resource ORDER BY t1))
SELECT round((extract(epoch FROM min(pg_xact_commit_timestamp(w.xmin))) - $t0)::numeric, 3),
	s.resource, s.next_pid, s.pid, count(*),
	round((extract(epoch FROM max(pg_xact_commit_timestamp(w.xmin)) - s.next_t1) * 1000)::numeric, 1),
	s.resource || '/' || extract(epoch FROM s.t1) || '/' || extract(epoch FROM s.next_t1)
FROM seq s JOIN checker_writes w ON w.pid = s.pid AND w.resource = s.resource AND w.t1 = s.t1
WHERE s.next_t1 IS NOT NULL AND pg_xact_commit_timestamp(w.xmin) > s.next_t1
GROUP BY s.resource, s.pid, s.t1, s.next_pid, s.next_t1
ORDER BY 1}))
	{
		$r->{overlaps}++;
		push @{ $r->{overlap_rows} },
		  sprintf('+%.3f s %s: %s writes of pid %s committed up to %s ms after pid %s acquired',
			$row->[0], $row->[1], $row->[4], $row->[3], $row->[5], $row->[2]);
		next if $pair{ $row->[6] };
		push @violations,
		  {
			at => $row->[0],
			resource => $row->[1],
			pid => $row->[2],
			what => "overlap: $row->[4] writes of the previous holder committed up to $row->[5] ms"
			  . ' after it acquired;',
			other_pid => $row->[3],
			other_inside_ms => '?',
			other_validity_left_ms => '?',
			since_acquired_ms => '?',
			nodes => '?',
			validity_ms => '?',
		  };
	}
	$r->{overlaps} //= 0;
	$r->{conflicts} = scalar(grep { $_->{what} eq 'claim' } @violations) + @excused;
	$r->{excused_rows} = \@excused;
	$r->{excused} = scalar @excused;
	$r->{violation_rows} = [ sort { $a->{at} <=> $b->{at} } @violations ];
	$r->{violations} = scalar @violations;
	return;
}

# Rows of QUERY's result as lists of fields (psql unaligned, | separated).
sub _rows
{
	my ($node, $query) = @_;
	my $out = $node->safe_psql('postgres', $query);
	return map { [ split /\|/, $_, -1 ] } grep { length } split /\n/, $out;
}

# From EVENTS ([t, text, state] in time order), SECONDS and the acquisition times: per state
# label, [label, seconds spent, acquisitions, acq/s], in order of first appearance.
sub _state_windows
{
	my ($events, $seconds, $acq_times) = @_;
	my @bounds = ([ 0, 'all up' ]);
	push @bounds, [ $_->[0], $_->[2] ] for @$events;
	my (%secs, %acq, @order);
	my @sorted = sort { $a <=> $b } @$acq_times;
	my $i = 0;
	for my $k (0 .. $#bounds)
	{
		my ($from, $label) = @{ $bounds[$k] };
		my $to = $k < $#bounds ? $bounds[ $k + 1 ][0] : $seconds;
		$to = $seconds if $to > $seconds;
		next if $to <= $from;
		push @order, $label unless exists $secs{$label};
		$secs{$label} += $to - $from;
		$acq{$label} //= 0;
		$i++ while $i < @sorted && $sorted[$i] < $from;
		while ($i < @sorted && $sorted[$i] < $to)
		{
			$acq{$label}++;
			$i++;
		}
	}
	return [ map { [ $_, $secs{$_}, $acq{$_}, $acq{$_} / $secs{$_} ] } @order ];
}

# ---- reports ----

my $HEADER = sprintf("%-26s %8s %8s %10s %8s %7s %7s %6s %7s %7s\n",
	'scenario', 'attempts', 'acquired', 'violations', 'acq/s', 'busy', 'unavail', '08006',
	'extends', 'gaveup');

# The header of the figures table.
sub table_header
{
	return $HEADER . ('-' x (length($HEADER) - 1)) . "\n";
}

# One line of the figures table.
sub table_line
{
	my ($r) = @_;
	return sprintf("%-26s %8d %8d %10d %8.1f %6.1f%% %6.1f%% %6d %7s %7s\n",
		$r->{name}, $r->{attempts}, $r->{acquired}, $r->{violations}, $r->{acq_per_s},
		$r->{busy_pct}, $r->{unavailable_pct}, $r->{unavailable},
		$r->{steps} ? $r->{extends} : '-', $r->{steps} ? $r->{gave_up} : '-');
}

# A full description of one run: settings, figures, errors, violations with their timing,
# the fault log, liveness per state and per second.
sub describe
{
	my ($r) = @_;
	my $s = "== $r->{name}: $r->{desc}\n";
	$s .= sprintf(
		"   %d clients, %d resources, TTL %d ms, wait %d ms, work %d ms, %d s, %s masters\n",
		$r->{clients}, $r->{resources}, $r->{ttl_ms}, $r->{wait_ms}, $r->{work_ms},
		$r->{seconds}, $r->{masters});
	$s .= sprintf(
		"   attempts %d: acquired %d (%.1f/s), busy %d (%.1f%%), unavailable 08006 %d (%.1f%%),"
		  . " other errors %d\n",
		$r->{attempts}, $r->{acquired}, $r->{acq_per_s}, $r->{busy}, $r->{busy_pct},
		$r->{unavailable}, $r->{unavailable_pct}, $r->{other_errors});
	for my $state (sort keys %{ $r->{errors} })
	{
		$s .= sprintf("   error %s x %d, e.g. \"%s\"\n",
			$state, $r->{errors}{$state}{n}, $r->{errors}{$state}{message} // '');
	}
	$s .= sprintf(
		"   holders whose validity ran out before the work was done: %d; release false: %d,"
		  . " release error: %d; fewest masters in an acquisition: %d\n",
		$r->{overran}, $r->{release_false}, $r->{release_error}, $r->{min_nodes});
	if ($r->{steps})
	{
		$s .= sprintf(
			"   held across commands: %d steps of %d ms, extend before each step to [%s] ms,"
			  . " %s holders (margin %d ms)\n",
			$r->{steps}, $r->{step_ms},
			join(',', map { $_ // '-' } @{ $r->{ext_ttls} }[ 0 .. $r->{steps} - 1 ]),
			$r->{honest} ? 'honest' : 'DISHONEST', $r->{margin_ms} // 100);
		$s .= sprintf(
			"   extends %d: false %d, 08006 %d, other errors %d; holders that gave up"
			  . " early %d; steps worked %d\n",
			$r->{extends}, $r->{extend_false}, $r->{extend_errors},
			$r->{extend_other_errors}, $r->{gave_up}, $r->{steps_done});
	}
	if (@{ $r->{gave_up_rows} // [] })
	{
		$s .= "   gave up: "
		  . join(', ', map { "$_ x $r->{gave_up_why}{$_}" } sort keys %{ $r->{gave_up_why} })
		  . "\n";
		my $n = @{ $r->{gave_up_rows} } < 5 ? @{ $r->{gave_up_rows} } : 5;
		for my $g (@{ $r->{gave_up_rows} }[ 0 .. $n - 1 ])
		{
			my $last = _last_event($r->{events}, $g->[0]);
			$s .= sprintf("     +%.3f s %s: pid %s gave up (%s) %s ms after acquiring%s\n",
				$g->[0], $g->[1], $g->[2], $g->[4], $g->[5],
				$last ? sprintf('; last fault +%.3f s %s', @$last[ 0, 1 ]) : '');
		}
	}
	$s .= _describe_job($r) if $r->{job};
	$s .= "   clients idle $r->{idle_ms} ms between attempts\n" if $r->{idle_ms};
	$s .= "   client settings: @{ $r->{pgoptions} }\n" if @{ $r->{pgoptions} // [] };
	$s .= "   fault counts: "
	  . join(', ', map { "$_ x $r->{fault_counts}{$_}" } sort keys %{ $r->{fault_counts} })
	  . "\n"
	  if %{ $r->{fault_counts} // {} };
	$s .= ($r->{job} ? '   psql clients: exit status' : '   pgbench exit status')
	  . " $r->{pgbench_rc}\n";
	$s .= "   clients that ran out of script before the end: $r->{ran_out}\n" if $r->{ran_out};
	for my $w (sort { $r->{warnings}{$b} <=> $r->{warnings}{$a} } keys %{ $r->{warnings} })
	{
		$s .= sprintf("   server log WARNING x %d: %s\n", $r->{warnings}{$w}, $w);
	}
	if ($r->{pgbench_rc} != 0)
	{
		my @lines = split /\n/, $r->{pgbench_err};
		$s .= "   pgbench stderr: $_\n" for @lines[ 0 .. ($#lines < 9 ? $#lines : 9) ];
	}
	$s .= _describe_fence($r) if $r->{fence};
	$s .= sprintf("   VIOLATIONS: %d%s\n", $r->{violations},
		$r->{expect_violations} ? ' (negative control: expected > 0)'
		: $r->{violations_by_design} ? " (not judged: $r->{violations_by_design})"
		:                              '');
	my $shown = 0;
	for my $v (@{ $r->{violation_rows} })
	{
		last if ++$shown > 20;
		my $last = _last_event($r->{events}, $v->{at});
		$s .= sprintf(
			"     +%.3f s %s: pid %s %s found pid %s inside for %s ms (its validity %s ms"
			  . " left); ours acquired %s ms before with %s masters, validity %s ms%s\n",
			$v->{at}, $v->{resource}, $v->{pid}, $v->{what}, $v->{other_pid},
			$v->{other_inside_ms}, $v->{other_validity_left_ms}, $v->{since_acquired_ms},
			$v->{nodes}, $v->{validity_ms},
			$last ? sprintf('; last fault +%.3f s %s', @$last[ 0, 1 ]) : '');
	}
	$s .= "     ... and " . ($r->{violations} - 20) . " more\n" if $r->{violations} > 20;
	if (@{ $r->{events} })
	{
		$s .= "   faults:";
		$s .= sprintf(" +%.2f %s;", $_->[0], $_->[1]) for @{ $r->{events} };
		$s .= "\n";
	}
	$s .= "   liveness by state:";
	$s .= sprintf(" %s %.1f acq/s (%.1f s);", $_->[0], $_->[3], $_->[1]) for @{ $r->{states} };
	$s .= "\n";
	$s .= "   acquisitions per second: @{ $r->{per_sec_acq} }\n";
	$s .= "   08006 errors per second: @{ $r->{per_sec_unav} }\n"
	  if grep { $_ } @{ $r->{per_sec_unav} };
	return $s;
}

# The fencing lines of describe.
sub _describe_fence
{
	my ($r) = @_;
	my $s = sprintf(
		"   fencing (%s writes): tokens %d, token errors %d%s; writes %d, refused by the"
		  . " fence %d, stale writes that landed %d; writes after the writer's validity %d"
		  . " (refused %d)\n",
		$r->{fence}, $r->{tokens}, $r->{token_errors},
		%{ $r->{token_error_states} }
		? ' (' . join(', ', map { "$_ x $r->{token_error_states}{$_}" }
			  sort keys %{ $r->{token_error_states} }) . ')'
		: '',
		$r->{writes}, $r->{stale_refused}, $r->{stale_landed}, $r->{late_writes},
		$r->{late_refused});
	$s .= sprintf("   tokens granted before the first restart of the masters %d, asked for after"
		  . " it %d\n", $r->{tokens_before_restart}, $r->{tokens_after_restart})
	  if defined $r->{tokens_before_restart};
	$s .= sprintf("   TOKEN INVERSIONS: %d, equal tokens: %d%s\n",
		$r->{inversions}, $r->{token_dups},
		$r->{expect_inversions} ? ' (negative control: expected > 0)' : '');
	my $n = @{ $r->{inversion_rows} } < 10 ? @{ $r->{inversion_rows} } : 10;
	$s .= sprintf("     +%.3f s %s: pid %s got token %s, %.1f ms after pid %s got %s\n",
		@$_[ 0 .. 3, 6, 4, 5 ])
	  for @{ $r->{inversion_rows} }[ 0 .. $n - 1 ];
	return $s;
}

# The header of the fencing table.
sub fence_table_header
{
	my $h = sprintf("%-28s %8s %10s %7s %10s %6s %8s %6s %5s %6s\n", 'scenario', 'acquired',
		'violations', 'tokens', 'inversions', 'equal', 'refused', 'stale', 'late', 'nodes');
	return $h . ('-' x (length($h) - 1)) . "\n";
}

# One line of the fencing table: token inversions (equal tokens taken one after the
# other count there too), tokens two holds both got, writes refused by the fence, stale
# writes that landed, writes made after the writer's validity, fewest masters in an
# acquisition.
sub fence_table_line
{
	my ($r) = @_;
	return sprintf("%-28s %8d %10d %7d %10d %6d %8d %6d %5d %6d\n", $r->{name},
		$r->{acquired}, $r->{violations}, $r->{tokens}, $r->{inversions}, $r->{token_dups},
		$r->{stale_refused}, $r->{stale_landed}, $r->{late_writes}, $r->{min_nodes});
}

# The Test::More checks every scenario run R must pass (TAP 011 and 013): the clients ran
# to the end, locks were acquired, no error but 08006; no violation, or some for a
# negative control (none judged where the scenario measures them by design); a fenced
# run's checks (check_fence).
sub check_run
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	Test::More::is($r->{pgbench_rc}, 0, "$name: pgbench ran to the end (no client aborted)")
	  or Test::More::diag($r->{pgbench_err});
	Test::More::cmp_ok($r->{acquired}, '>', 0, "$name: locks were acquired");
	Test::More::is($r->{other_errors}, 0, "$name: no error other than 08006")
	  or Test::More::diag(Test::More::explain($r->{errors}));
	if ($r->{expect_violations})
	{
		Test::More::cmp_ok($r->{violations}, '>', 0,
			"$name (negative control): the checker sees violations")
		  or Test::More::diag(describe($r));
	}
	elsif (!$r->{violations_by_design})
	{
		Test::More::is($r->{violations}, 0, "$name: no violation")
		  or Test::More::diag(describe($r));
	}
	check_fence($r) if $r->{fence};
	return;
}

# The Test::More checks of a fenced run R (check_run, and run-long): tokens were taken;
# no inversion and no equal tokens (a negative control: some inversion); no stale write
# landed (the unfenced control: some did); where holders were paused, some of their late
# writes were refused; with expect_min_nodes, every acquisition had that many masters.
sub check_fence
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	Test::More::cmp_ok($r->{tokens}, '>', 0, "$name: fencing tokens were taken");
	if ($r->{skew_callers_ms})
	{
		Test::More::cmp_ok($r->{tokens_before_restart} // 0, '>', 0,
			"$name: tokens were granted before the masters were restarted");
		Test::More::cmp_ok($r->{tokens_after_restart} // 0, '>', 0,
			"$name: tokens were asked for after the masters were up again");
	}
	if ($r->{expect_inversions})
	{
		Test::More::cmp_ok($r->{inversions} + $r->{token_dups}, '>', 0,
			"$name (negative control): the checker sees token inversions");
	}
	else
	{
		Test::More::is($r->{inversions}, 0,
			"$name: every token is larger than every token granted before it was asked for");
		Test::More::is($r->{token_dups}, 0, "$name: no two holds got the same token");
	}
	if ($r->{expect_stale_landed})
	{
		Test::More::cmp_ok($r->{stale_landed}, '>', 0,
			"$name (negative control): without the fence, stale writes land");
	}
	else
	{
		Test::More::is($r->{stale_landed}, 0, "$name: no stale write landed");
	}
	Test::More::cmp_ok($r->{stale_refused}, '>', 0,
		"$name: paused holders wrote late and the fence refused them")
	  if $r->{expect_stale_refused};
	Test::More::cmp_ok($r->{min_nodes}, '>=', $r->{expect_min_nodes},
		"$name: every acquisition had at least $r->{expect_min_nodes} masters")
	  if $r->{expect_min_nodes};
	return;
}

# The long-job lines of describe.
sub _describe_job
{
	my ($r) = @_;
	my $j = $r->{job};
	my $validity = int($r->{ttl_ms} * 0.99 - 2);
	my $s = sprintf(
		"   long jobs: %d transactions of %d writes %d ms apart (%d ms of work, %.1f x the TTL),"
		  . " auto-extended; odd-numbered clients swallow a cancel and try to commit\n",
		$j->{xacts}, $j->{steps}, $j->{step_ms}, $r->{work_ms}, $r->{work_ms} / $r->{ttl_ms});
	$s .= sprintf(
		"   jobs: %d done, %d cancelled on loss (57014), %d commits refused (55P03; %d cancels"
		  . " swallowed), %d other cancels, %d other errors%s\n",
		$r->{jobs_done}, $r->{cancelled}, $r->{refused}, $r->{swallowed}, $r->{cancelled_other},
		$r->{job_errors},
		$r->{job_errors}
		? ' (' . join('; ', map { "$_ x $r->{job_error_kinds}{$_}" } sort keys %{ $r->{job_error_kinds} }) . ')'
		: '');
	$s .= sprintf(
		"   worker: %d renewals, %d failed (retried), %d locks lost; renewals per hold up to %d,"
		  . " at least %d in a job that ran to its end; restarted after SIGTERM in %s\n",
		$r->{renewals}, $r->{renewals_failed}, $r->{locks_lost}, $r->{renewals_max},
		$r->{done_renewals_min},
		@{ $r->{worker_gaps} } ? join(', ', map { sprintf('%.2f s', $_) } @{ $r->{worker_gaps} }) : '-');
	$s .= sprintf("   losses logged by the worker: %d (%s; %s)%s\n",
		$r->{losses},
		join(', ', map { "$_ x $r->{loss_reasons}{$_}" } sort keys %{ $r->{loss_reasons} // {} }),
		join(', ', map { "$_ x $r->{loss_details}{$_}" } sort keys %{ $r->{loss_details} // {} }),
		defined $r->{loss_after_renewal_max_ms}
		? "; given up at most $r->{loss_after_renewal_max_ms} ms after the lock's last renewal"
		  . " (validity $validity ms)"
		: '');
	$s .= "   losses during $_ (or TTL/3 after): $r->{losses_in}{$_}\n"
	  for sort keys %{ $r->{losses_in} // {} };
	$s .= "   masters that accepted each acquisition: "
	  . join(', ', map { "$_ x $r->{nodes_hist}{$_}" } sort { $b <=> $a } keys %{ $r->{nodes_hist} })
	  . "\n";
	for my $l (@{ $r->{loss_rows} })
	{
		my $last = _last_event($r->{events}, $l->[0]);
		$s .= sprintf("     +%.3f s %s: owner %s, %s ms after its last renewal (%s renewals),"
			  . " its job ended %s; acquired on %s masters%s\n", @$l[ 0 .. 6 ],
			$last ? sprintf('; last fault +%.3f s %s', @$last[ 0, 1 ]) : '');
	}
	$s .= sprintf(
		"   writes: %d committed (%d of them written after a swallowed cancel); committed after"
		  . " their hold's loss: %d (in %d holds)\n",
		$r->{writes}, $r->{writes_swallowed}, $r->{writes_after_loss},
		$r->{holds_writes_after_loss});
	$s .= sprintf(
		"   guard: %d claims found it held: %d excused (the holder found had lost its lock"
		  . " before, and none of its work committed after the loss); holds whose committed"
		  . " work overlapped the next holder's: %d; guards found taken over at the end: %d\n",
		$r->{conflicts}, $r->{excused}, $r->{overlaps}, $r->{taken_over});
	$s .= "     overlap: $_\n" for @{ $r->{overlap_rows} // [] };
	for my $v (@{ $r->{excused_rows} })
	{
		my $c = $v->{other_commit_after_loss_ms};
		$s .= sprintf(
			"     excused: +%.3f s %s: pid %s found pid %s inside for %s ms, its lock lost %s ms"
			  . " before; %s\n",
			$v->{at}, $v->{resource}, $v->{pid}, $v->{other_pid}, $v->{other_inside_ms},
			$v->{other_lost_ms_before},
			$c eq '-' ? 'none of its writes committed'
			: $c < 0 ? sprintf('its last write committed %.1f ms before the loss', -$c)
			: "its last write committed $c ms after the loss (within the log's resolution)");
	}
	return $s;
}

# A line of the long-job figures table (header: job_table_header).
sub job_table_header
{
	my $h = sprintf("%-26s %8s %8s %10s %5s %9s %7s %8s %7s %5s %7s %9s\n",
		'scenario', 'attempts', 'acquired', 'violations', 'done', 'cancelled', 'refused',
		'renewals', 'failed', 'lost', 'excused', 'wr.after');
	return $h . ('-' x (length($h) - 1)) . "\n";
}

sub job_table_line
{
	my ($r) = @_;
	return sprintf("%-26s %8d %8d %10d %5d %9d %7d %8d %7d %5d %7d %9d\n",
		$r->{name}, $r->{attempts}, $r->{acquired}, $r->{violations}, $r->{jobs_done},
		$r->{cancelled}, $r->{refused}, $r->{renewals}, $r->{renewals_failed},
		$r->{locks_lost}, $r->{excused}, $r->{writes_after_loss});
}

sub _last_event
{
	my ($events, $t) = @_;
	my $last;
	for my $e (@$events)
	{
		last if $e->[0] > $t;
		$last = $e;
	}
	return $last;
}

# ---- the fault injector ----

package Checker::Faults;

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use Test::More ();
use Time::HiRes qw(time sleep);

sub new
{
	my ($class, %o) = @_;
	return bless {
		%o,
		t0 => time,
		events => [],
		down => {},
		stopped => {},
		slow => '',
		counts => {},
		servers_label => $o{servers} ? _servers_label(@{ $o{servers} }) : '',
	}, $class;
}

sub _servers_label { return 'servers ' . join(',', @_); }

# Seconds since the start of the run.
sub now
{
	my ($self) = @_;
	return time - $self->{t0};
}

# Sleeps until T seconds after the start (at most until the end of the run).
sub at
{
	my ($self, $t) = @_;
	$t = $self->{seconds} if $t > $self->{seconds};
	my $d = $self->{t0} + $t - time;
	sleep($d) if $d > 0;
	return;
}

sub _list { return join(',', @_); }

# The state label: which masters are killed, stopped, slow.
sub _state
{
	my ($self) = @_;
	my @parts;
	my @down = sort keys %{ $self->{down} };
	my @stopped = sort keys %{ $self->{stopped} };
	push @parts, scalar(@down) . ' killed' if @down;
	push @parts, scalar(@stopped) . ' stopped' if @stopped;
	push @parts, $self->{slow} if $self->{slow};
	push @parts, 'worker stopped' if $self->{worker_stopped};
	push @parts, scalar(@{ $self->{fast} }) . " fast ($self->{fast_factor}x)"
	  if @{ $self->{fast} // [] };
	push @parts, scalar(keys %{ $self->{paused} }) . ' holders paused'
	  if %{ $self->{paused} // {} };
	push @parts, 'worker down' if $self->{worker_down};
	my $state = @parts ? join(' + ', @parts) : 'all up';
	$state = "$self->{servers_label}: $state" if $self->{servers_label};
	return $state;
}

# Logs TEXT at time T (seconds since start, default now) with the state after it.
sub _mark
{
	my ($self, $text, $t) = @_;
	$t //= $self->now;
	push @{ $self->{events} }, [ $t, $text, $self->_state ];
	Test::More::note(sprintf('checker: +%.3f s %s', $t, $text));
	return;
}

# SIGKILLs masters I... at the same moment, then waits until they are gone.
sub kill
{
	my ($self, @i) = @_;
	my $redis = $self->{redis};
	my @pids = grep { defined } map { $redis->{pids}[$_] } @i;
	my $t = $self->now;
	CORE::kill('KILL', @pids);
	$redis->kill9($_) for @i;    # waits, and forgets the pids
	$self->{down}{$_} = 1 for @i;
	delete $self->{stopped}{$_} for @i;
	$self->_mark('kill -9 master ' . _list(@i), $t);
	return;
}

# Starts masters I... again (empty, or from their AOF); logged once they answer.
sub start
{
	my ($self, @i) = @_;
	$self->{redis}->restart($_) for @i;
	$self->_configure(@i);
	delete $self->{down}{$_} for @i;
	$self->_mark('master ' . _list(@i) . ' up again');
	return;
}

# The scenario's Redis settings (redis_config) on masters I..., which start without them.
sub _configure
{
	my ($self, @i) = @_;
	my $conf = $self->{redis_config} // {};
	for my $i (@i)
	{
		$self->{redis}->redis_cli($i, 'CONFIG', 'SET', $_, $conf->{$_}) for sort keys %$conf;
	}
	return;
}

# Runs CODE->(I) for each master I... in a child process of its own, all at the same
# moment, and waits for them all; dies with "master I WHAT" when one fails.
sub _on_masters_at_once
{
	my ($self, $what, $code, @i) = @_;
	require POSIX;
	my %kids;
	for my $i (@i)
	{
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			# _exit: no END block or destructor of the parent's objects in the child.
			my $ok = eval { $code->($i); 1 };
			POSIX::_exit($ok ? 0 : 1);
		}
		$kids{$pid} = $i;
	}
	for my $pid (keys %kids)
	{
		waitpid($pid, 0);
		die "master $kids{$pid} $what" if $?;
	}
	return;
}

# Starts masters I... again at the same moment (start does them one after another, which
# a loaded machine stretches to seconds); logged once all answer.
sub start_at_once
{
	my ($self, @i) = @_;
	my $redis = $self->{redis};
	$self->_on_masters_at_once('did not start again', sub { $redis->_start($_[0]) }, @i);
	$redis->{pids}[$_] = RedisMasters::_read_pid("$redis->{dir}/redis$_/redis.pid") for @i;
	$self->_configure(@i);
	delete $self->{down}{$_} for @i;
	$self->_mark('master ' . _list(@i) . ' up again');
	return;
}

# Empties masters I... at once (FLUSHALL): the data loss of a restart without
# persistence, without the seconds a restart takes on a loaded machine.
sub wipe
{
	my ($self, @i) = @_;
	my $redis = $self->{redis};
	my $t = $self->now;
	$self->_on_masters_at_once('was not emptied (FLUSHALL)',
		sub { $redis->redis_cli($_[0], 'FLUSHALL') }, @i);
	$self->_mark('FLUSHALL master ' . _list(@i), $t);
	return;
}

sub stop
{
	my ($self, @i) = @_;
	my @pids = map { $self->{redis}{pids}[$_] // die "master $_ is not running" } @i;
	CORE::kill('STOP', @pids);
	$self->{stopped}{$_} = 1 for @i;
	$self->_mark('SIGSTOP master ' . _list(@i));
	return;
}

sub cont
{
	my ($self, @i) = @_;
	my @pids = map { $self->{redis}{pids}[$_] // die "master $_ is not running" } @i;
	CORE::kill('CONT', @pids);
	delete $self->{stopped}{$_} for @i;
	$self->_mark('SIGCONT master ' . _list(@i));
	return;
}

# Sets every proxy's delay to MIN..MAX ms each way (0, 0: none).
sub delay
{
	my ($self, $min, $max) = @_;
	Checker::set_delay($_, $min, $max) for @{ $self->{proxies} };
	my $n = @{ $self->{proxies} };
	$self->{slow} = $max > 0 ? "$n slow $min-${max}ms" : '';
	$self->_mark($max > 0 ? "delay $min-$max ms each way on $n masters" : 'delay off');
	return;
}

# Points redlock.servers at masters I... (ALTER SYSTEM + pg_reload_conf()), logged once a
# new session sees it.  Backends take it in between two commands.
sub servers
{
	my ($self, @i) = @_;
	Checker::set_servers($self->{node}, Checker::servers_of($self->{redis}, @i));
	$self->{servers_label} = _servers_label(@i);
	$self->{counts}{'server list changes'}++;
	$self->_mark('redlock.servers = masters ' . _list(@i));
	return;
}

# One pg_reload_conf() (the configuration files unchanged).
sub reload
{
	my ($self) = @_;
	$self->{psql} //= RedisMasters::session($self->{node});
	my ($out, $err) = $self->{psql}->query('SELECT pg_reload_conf()');
	die "pg_reload_conf() failed: $err" unless $out eq 't';
	$self->{counts}{'pg_reload_conf()'}++;
	return;
}

# Sends one Redis command to master I over a fresh connection, waiting at most 0.5 s for
# its reply; skips a master that is killed or stopped.  Returns the reply line or undef.
# Each command sent is counted in the run's fault counts.
sub redis
{
	my ($self, $i, @args) = @_;
	my $reply = $self->_redis_command($i, @args);
	$self->{counts}{ join(' ', @args) }++ if defined $reply;
	return $reply;
}

sub _redis_command
{
	my ($self, $i, @args) = @_;
	return undef if $self->{down}{$i} || $self->{stopped}{$i};
	my $port = ($self->{redis}->ports)[$i];
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
		Proto => 'tcp', Timeout => 0.5) or return undef;
	my $cmd = '*' . @args . "\r\n" . join('', map { '$' . length($_) . "\r\n$_\r\n" } @args);
	print $sock $cmd;
	my $sel = IO::Select->new($sock);
	my $reply;
	$reply = <$sock> if $sel->can_read(0.5);
	close $sock;
	return $reply;
}

# SIGSTOPs up to N backends that are inside their critical section (checker_guard), as a
# GC pause, swapping or a stopped VM would pause a lock holder; resume_holders continues
# them.  Waits up to 0.5 s for a holder to be inside.  Returns how many it paused.
sub pause_holders
{
	my ($self, $n) = @_;
	my @pids;
	RedisMasters::wait_until(
		0.5,
		sub {
			@pids = grep { length } split /\n/, $self->{node}->safe_psql('postgres',
				"SELECT holder FROM checker_guard WHERE holder IS NOT NULL"
				  . " ORDER BY random() LIMIT $n");
		}) or return 0;
	CORE::kill('STOP', @pids);
	$self->{paused}{$_} = 1 for @pids;
	$self->{counts}{'holders paused'} += @pids;
	$self->_mark('SIGSTOP holder backend ' . _list(@pids));
	return scalar @pids;
}

sub resume_holders
{
	my ($self) = @_;
	my @pids = sort keys %{ $self->{paused} // {} } or return;
	CORE::kill('CONT', @pids);
	$self->{paused} = {};
	$self->_mark('SIGCONT holder backend ' . _list(@pids));
	return;
}

# A clock that runs FACTOR times too fast on masters I..., as seen from outside: every
# fast_clock_tick takes (FACTOR - 1) x the real time since the last tick off the PTTL of
# every checker key on those masters (deleting a key whose PTTL it reaches), which is what
# such a clock does to expiry.  Fencing counter keys (0xFF fence:...) are left alone: they
# live 30 days, which a fast clock shortens by hours at most in a run.
my $FAST_CLOCK_LUA = <<'LUA';
local n = 0
for _, k in ipairs(redis.call('keys', ARGV[1])) do
	local p = redis.call('pttl', k)
	if p > 0 then
		if p <= tonumber(ARGV[2]) then redis.call('del', k)
		else redis.call('pexpire', k, p - tonumber(ARGV[2])) end
		n = n + 1
	end
end
return n
LUA

sub fast_clock
{
	my ($self, $factor, @i) = @_;
	$self->{fast} = [@i];
	$self->{fast_factor} = $factor;
	$self->{fast_last} = time;
	$self->{fast_owed_ms} = 0;
	$self->_mark("clock of master " . _list(@i) . " runs ${factor}x");
	return;
}

sub fast_clock_tick
{
	my ($self) = @_;
	my $now = time;
	$self->{fast_owed_ms} += ($self->{fast_factor} - 1) * ($now - $self->{fast_last}) * 1000;
	$self->{fast_last} = $now;
	my $ms = int($self->{fast_owed_ms});
	return if $ms < 1;
	$self->{fast_owed_ms} -= $ms;
	for my $i (@{ $self->{fast} })
	{
		my $reply = $self->_redis_command($i, 'EVAL', $FAST_CLOCK_LUA, 0, 'checker-*', $ms)
		  // next;
		die "fast clock on master $i: $reply" unless $reply =~ /^:(\d+)/;
		$self->{counts}{'keys shortened by a fast clock'} += $1;
	}
	$self->{counts}{'fast clock ticks'}++;
	return;
}

# Calls CODE every PERIOD seconds until T seconds after the start (or the end of the run).
sub every
{
	my ($self, $period, $t, $code) = @_;
	$t = $self->{seconds} if $t > $self->{seconds};
	while ($self->now + $period < $t)
	{
		my $next = $self->now + $period;
		$code->();
		$self->at($next);
	}
	$self->at($t);
	return;
}

# The PID of the node's auto-extend worker (pg_stat_activity), or '' while none runs.
sub worker_pid
{
	my ($self) = @_;
	# One session for the run: a new connection can take seconds on a loaded machine.
	$self->{psql} //= RedisMasters::session($self->{node});
	my ($out, $err) = $self->{psql}->query(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
	die "could not look up the auto-extend worker: $err" if $err;
	return $out;
}

# SIGTERMs the auto-extend worker, then waits (up to 10 s) until the postmaster has
# started another; logs both, and keeps the gap in {worker_gaps} (seconds).
sub worker_term
{
	my ($self) = @_;
	my $pid = $self->worker_pid or die 'no auto-extend worker runs';
	my $t = $self->now;
	CORE::kill('TERM', $pid);
	$self->{worker_down} = 1;
	$self->_mark("SIGTERM worker (pid $pid)", $t);
	my $new;
	RedisMasters::wait_until(10, sub { $new = $self->worker_pid; $new ne '' && $new ne $pid })
	  or die "the auto-extend worker (pid $pid) was not started again";
	delete $self->{worker_down};
	my $gap = $self->now - $t;
	push @{ $self->{worker_gaps} }, $gap;
	$self->{counts}{'worker restarts'}++;
	$self->_mark(sprintf('worker back (pid %d), %.2f s after SIGTERM', $new, $gap));
	return;
}

# Freezes the auto-extend worker (SIGSTOP); worker_cont resumes it.
sub worker_stop
{
	my ($self) = @_;
	my $pid = $self->worker_pid or die 'no auto-extend worker runs';
	CORE::kill('STOP', $pid);
	$self->{worker_stopped} = $pid;
	$self->{counts}{'worker frozen'}++;
	$self->_mark("SIGSTOP worker (pid $pid)");
	return;
}

sub worker_cont
{
	my ($self) = @_;
	my $pid = delete $self->{worker_stopped} or return;
	CORE::kill('CONT', $pid);
	$self->_mark("SIGCONT worker (pid $pid)");
	return;
}

# Puts everything back: masters continued and started, proxies without delay, the
# worker continued.
sub heal
{
	my ($self) = @_;
	$self->worker_cont if $self->{worker_stopped};
	$self->resume_holders;
	if (@{ $self->{fast} // [] })
	{
		$self->{fast} = [];
		$self->_mark('clocks right again');
	}
	$self->cont(sort keys %{ $self->{stopped} }) if %{ $self->{stopped} };
	$self->start(sort keys %{ $self->{down} }) if %{ $self->{down} };
	$self->delay(0, 0) if $self->{slow};
	if ($self->{psql})
	{
		$self->{psql}->quit;
		delete $self->{psql};
	}
	return;
}

# Sets redlock.key_prefix to PREFIX (undef: RESET) by ALTER SYSTEM and pg_reload_conf() on
# the node (and on every node of {nodes}, for more clusters), then waits until a new session
# of each sees it.  Backends take it in between two commands.
sub key_prefix
{
	my ($self, $prefix) = @_;
	my $set = defined $prefix
	  ? "ALTER SYSTEM SET redlock.key_prefix = '$prefix'"
	  : 'ALTER SYSTEM RESET redlock.key_prefix';
	for my $node (@{ $self->{nodes} // [ $self->{node} ] })
	{
		# A session kept for the run (a new connection can take seconds on a loaded
		# machine); it reads the new value at its next command once the postmaster
		# has passed the reload on.
		my $psql = $self->{prefix_psql}{ $node->name } //= RedisMasters::session($node);
		my ($out, $err) = $psql->query($set);
		($out, $err) = $psql->query('SELECT pg_reload_conf()') unless $err;
		die "could not change redlock.key_prefix: $err" if $err;
		RedisMasters::wait_until(10,
			sub { ($psql->query('SHOW redlock.key_prefix'))[0] eq ($prefix // '') })
		  or die 'redlock.key_prefix did not change to ' . ($prefix // "''");
		if (!defined $prefix)
		{
			$psql->quit;
			delete $self->{prefix_psql}{ $node->name };
		}
	}
	$self->{counts}{'key prefix changes'}++;
	$self->_mark('redlock.key_prefix = ' . ($prefix // "''"));
	return;
}

1;
