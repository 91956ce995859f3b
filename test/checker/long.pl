# test/checker/long.pl: the long checker run, started by test/checker/run-long (which sets
# PERL5LIB, PATH and TESTDIR and runs this as the postgres user).
#
#   perl long.pl [--seconds N] [SCENARIO ...]     (default: every scenario, 20 s each)
#
# The scenarios of issue 7 (extend, server-list changes, SCRIPT FLUSH, idle timeout,
# reloads) come after the original ones; idle-timeout must also show no 08006, and
# reload-loop no holder that found its lock lost.  Then the fencing scenarios of issue 11
# (paused holders, fast master clocks, restarts), judged by Checker::check_fence.  Last, the long jobs of issue 8 (locks
# kept alive by the auto-extend worker), on a second node with the library preloaded,
# for 3 x N seconds (their jobs last 10 s and one round of their faults about 13 s);
# long-job must also show no write committed after a loss.  Then the scenarios of issue 21
# (the loss protocol: jobs across commands while the worker is terminated or stalled,
# after an ERROR, under a key prefix changed by reload), each with its negative control,
# also 3 x N seconds on the preloaded node.  Last, the semaphores (redlock_acquire_permit,
# 1.5): 2 semaphores of 3 permits under the faults of the lock scenarios, judged by
# Checker::check_permits (2 or more holders inside at once at some moment, never more than
# 3, no two holders of a slot; the controls: more than 3), permits-auto-extend on the
# preloaded node for 3 x N seconds.  And the sets (redlock_acquire(text[]), 1.6): sets of 2
# of 6 resources under the same faults, judged by their guards (a guard held already is a
# violation; the controls must show some).  And the shared locks (redlock_acquire_shared,
# 1.7): shared (3 in 4) and exclusive holds of 2 resources under the same faults, judged
# by the guard's holder and readers, and by Checker::check_shared (2 or more shared
# holders inside at once at some moment).  Last, issue 38's guarded row in a third cluster
# through postgres_fdw (Checker/Fdw.pm): jobs on two more preloaded clusters under stalled
# workers, 3 x N seconds, and its control (the guard held back; test builds only).
#
# Runs each scenario against 5 plain masters or 5 with appendfsync always, prints the
# details of each run, then one table of figures.  TAP output: each scenario must show
# zero violations, each negative control more than zero.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use Getopt::Long;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use Checker::Fdw;
use RedisMasters;

my $seconds = 20;
GetOptions('seconds=i' => \$seconds) or die "usage: $0 [--seconds N] [SCENARIO ...]\n";
my @names = @ARGV
  ? @ARGV
  : (qw(baseline kill-minority-delayed sigstop latency kill-minority-aof kill-majority-aof
  unsafe-majority-restart kill-majority-quarantined unsafe-majority-restart-unquarantined
  unsafe-short-ttl extend-shorter extend-longer unsafe-extend-ignored
  servers-grow-shrink unsafe-servers-change script-flush idle-timeout reload-loop extend-renew
  discard-release unsafe-discard-early fence-baseline fence-pause unsafe-fence-pause-unfenced
  fence-force-release unsafe-fence-force-release-unfenced
  fast-clock-1 fast-clock-2 fast-clock-1-q4 fence-kill-majority-aof unsafe-fence-restart-empty
  fence-skew-restart-delayed unsafe-fence-skew-masters-back long-job unsafe-long-job-no-cancel
  deadlock-kill unsafe-deadlock-victim-lets-go),
	Checker::lease_scenarios(), Checker::permit_scenarios(), Checker::set_scenarios(),
	Checker::shared_scenarios(), Checker::fdw_scenarios());

my %masters = (
	plain => RedisMasters->new(5),
	aof => RedisMasters->new(5, redis_args => [ '--appendonly', 'yes', '--appendfsync', 'always' ]),
);
my $node = RedisMasters::redlock_node('checker', $masters{plain}, Checker::node_conf());
Checker::setup($node);
my $preloaded;    # for the long-job scenarios, made when the first one runs
my $fdw;          # the three clusters of the fdw scenarios, made when the first one runs

# PostgreSQL::Test::Utils sends STDOUT to the test log; the TAP handle reaches the terminal
# (and the log).
my $out = Test::More->builder->output;

my @results;
my @fdw_results;
for my $name (@names)
{
	my %s = Checker::scenario($name);
	if ($s{fdw})
	{
		$fdw //= Checker::Fdw::clusters($masters{plain});
		push @fdw_results, run_fdw($name, \%s) // ();
		next;
	}
	my $on = $node;
	my $secs = $seconds;
	if ($s{preload})
	{
		$preloaded //= RedisMasters::redlock_node('checker_preloaded', $masters{plain},
			Checker::node_conf(preload => 1));
		Checker::setup($preloaded);
		$on = $preloaded;
		$secs = 3 * $seconds;
	}
	my $r = Checker::run_scenario($on, \%masters, $name, seconds => $secs);
	push @results, $r;
	print $out Checker::describe($r), "\n";
	is($r->{pgbench_rc}, 0, "$name: the clients ran to the end");
	if ($r->{expect_violations})
	{
		cmp_ok($r->{violations}, '>', 0, "$name (negative control): violations seen");
	}
	elsif (!$r->{violations_by_design})
	{
		is($r->{violations}, 0, "$name: no violation");
	}
	Checker::check_fence($r) if $r->{fence};
	Checker::check_permits($r) if $r->{permits};
	is($r->{unavailable}, 0, "$name: no 08006 (a majority of masters was always up)")
	  if $r->{expect_no_08006};
	is($r->{gave_up}, 0, "$name: no holder found its lock lost") if $r->{expect_no_gave_up};
	if ($r->{job} && !$r->{expect_violations})
	{
		is($r->{writes_after_loss}, 0, "$name: no write committed after its lock was lost");
		is($r->{losses_in}{$_}, 0, "$name: no lock lost during $_ (or TTL/3 after)")
		  for sort keys %{ $r->{losses_in} };
		# The issue 21 scenarios stall or terminate the worker past the validity on purpose.
		is($r->{losses_unrenewed}, 0, "$name: no validity ran out before the worker renewed it")
		  unless $r->{job}{roles};
	}
	if ($r->{job} && $r->{permits})
	{
		cmp_ok($r->{committed_overlap_max}, '<=', $r->{permits},
			"$name: never more than $r->{permits} holds' committed work spanned an acquisition");
		cmp_ok($r->{losses}, '>', 0, "$name: the worker gave permits up");
		cmp_ok($r->{cancelled}, '>', 0, "$name: jobs were cancelled on the loss");
	}
	if ($r->{job} && $r->{job}{roles} && !$r->{violations_by_design})
	{
		# The issue 21 scenarios are real only if locks were lost (and, safe, jobs
		# stopped), as TAP 014 judges: a loss is the worker's LOG line, a release that
		# found its lock run out, or, where the watchdog stopped the job before the
		# stalled worker could log it (lease-error-then-stall), its cancel.
		cmp_ok($r->{losses} + $r->{release_found_lost}
			  + ($r->{expect_violations} ? 0 : $r->{cancelled}), '>', 0,
			"$name: locks were lost");
		unless ($r->{expect_violations})
		{
			cmp_ok($r->{cancelled} + $r->{refused}, '>', 0, "$name: jobs were stopped by a loss");
			is($r->{holds_ran_on}, 0,
				"$name: no job wrote after the next holder of its resource acquired, committed or not");
		}
	}
	print $out "   $name: $r->{ran_on} writes (in $r->{holds_ran_on} holds) made after the next"
	  . " holder acquired, committed or not\n"
	  if $r->{job} && $r->{job}{roles};
}

print $out "\n", Checker::table_header() if @results;
print $out Checker::table_line($_) for grep { !$_->{expect_violations} } @results;
my @neg = grep { $_->{expect_violations} } @results;
if (@neg)
{
	print $out "negative controls (must show violations):\n";
	print $out Checker::table_line($_) for @neg;
}
my @fenced = grep { $_->{fence} } @results;
if (@fenced)
{
	print $out "\nfencing tokens (inversions: a token not larger than one granted before it was"
	  . " asked for; equal: tokens two holds both got; refused: writes the fence refused;"
	  . " stale: writes that landed after a larger token's; late: writes after the writer's"
	  . " validity; violations are measured only where the lock alone cannot prevent them:"
	  . " paused holders, fast clocks):\n";
	print $out Checker::fence_table_header();
	print $out Checker::fence_table_line($_) for @fenced;
}
my @permits = grep { $_->{permits} } @results;
if (@permits)
{
	print $out "\nsemaphores (count: claims that found k or more others inside; slot: claims that"
	  . " found their slot held; max in: the most holders inside at once; shared: claims that"
	  . " found others inside):\n";
	print $out Checker::permit_table_header();
	print $out Checker::permit_table_line($_) for @permits;
}
my @jobs = grep { $_->{job} } @results;
if (@jobs)
{
	print $out "\nlong jobs (done: ran to the end; refused: commits refused after a swallowed"
	  . " cancel; renewals, failed, lost: the worker's; excused: claims that found a cancelled"
	  . " holder whose later work did not commit; wr.after: writes committed after their"
	  . " lock was lost):\n";
	print $out Checker::job_table_header();
	print $out Checker::job_table_line($_) for @jobs;
}
if (@fdw_results)
{
	print $out "\nguarded rows in a third cluster through postgres_fdw (rows: committed there;"
	  . " orphan: committed there while their local transaction was refused; viol: committed"
	  . " after the next holder of their resource acquired; vholds: holds with such rows):\n";
	print $out Checker::Fdw::table(@fdw_results);
}
print $out "\nliveness (acquisitions per second) by state of the masters:\n" if @results;
for my $r (@results)
{
	print $out sprintf("  %-26s %s\n", $r->{name},
	  join('; ', map { sprintf('%s %.1f/s (%.1f s)', $_->[0], $_->[3], $_->[1]) } @{ $r->{states} }));
}
print $out sprintf("\n%d clients, %d resources; TTL/wait/work per scenario above; %d s each\n",
	$results[0]{clients}, $results[0]{resources}, $seconds) if @results;

RedisMasters::no_crash($_) for grep { defined } $node, $preloaded,
  $fdw ? (@{ $fdw->{jobs} }, $fdw->{guarded}) : ();
done_testing();

# Runs fdw scenario NAME (options S) for 3 x the seconds on the three clusters and judges
# it as TAP 018 does; returns the figures, or nothing when the control cannot run here
# (redlock.test_commit_guard_first exists in test builds only: sudo test/run installs one,
# make install does not).
sub run_fdw
{
	my ($name, $s) = @_;
	if ($s->{expect_violations} && !Checker::Fdw::test_build($fdw))
	{
		print $out "   $name: skipped: the installed redlock is not a test build"
		  . " (no redlock.test_commit_guard_first)\n";
		return;
	}
	my $r = Checker::Fdw::run_scenario($fdw, \%masters, $name, seconds => 3 * $seconds);
	print $out Checker::Fdw::describe($r), "\n";
	is($r->{pgbench_rc}, 0, "$name: the clients ran to the end");
	cmp_ok($r->{rows}, '>', 0, "$name: guarded rows committed in the third cluster");
	is($r->{job_errors}, 0, "$name: no job ended with an error other than a cancel or a"
		  . ' refused commit');
	if ($r->{expect_violations})
	{
		cmp_ok($r->{violations}, '>', 0, "$name (negative control): violations seen");
		cmp_ok($r->{orphans}, '>', 0,
			"$name: guarded rows committed whose local transaction was refused");
	}
	else
	{
		is($r->{violations}, 0, "$name: no violation");
		is($r->{orphans}, 0, "$name: no guarded row committed whose local transaction was refused");
		cmp_ok($r->{refused}, '>', 0, "$name: COMMITs after a loss were refused");
	}
	return $r;
}
