# The mutual-exclusion checker (test/checker/) on the edge paths of issue 7, short version:
# holders that extend their lock to shorter and longer TTLs while a majority of masters is
# frozen and a minority killed; redlock.servers grown and shrunk under load; SCRIPT FLUSH on
# the masters with retries at once (retry_delay 0); masters that close idle connections
# (Redis timeout 1); a majority frozen for blips shorter than the wait (issue 26), and met
# by try-locks that redlock.quorum_timeout carries through (issue 42);
# pg_reload_conf() in a loop; DISCARD ALL as the release.  Each must
# show zero violations; the negative controls (a holder that ignores what extend says;
# holders of a lock taken on 2 of 3 masters working on when the list grows to 5; a
# DISCARD ALL inside the critical section; a TTL shorter than the work through the
# blips) must show violations, or the checker is blind
# on these paths.  test/checker/run-long runs them longer.
#
# RL_CHECKER_EDGES=name,name runs only those scenarios (for a look at one).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('checker', $redis, Checker::node_conf());
Checker::setup($node);
my %masters = (plain => $redis);
my %only = map { $_ => 1 } split /,/, $ENV{RL_CHECKER_EDGES} // '';

my @table;

# Runs scenario NAME for SECONDS and checks what must hold in every run
# (Checker::check_run: pgbench ran to the end, some locks acquired, no error but 08006,
# and no violation, or some for a negative control).  Returns the figures, or undef when
# skipped.
sub scenario_ok
{
	my ($name, $seconds, %o) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return undef if %only && !$only{$name};
	my $r = Checker::run_scenario($node, \%masters, $name, seconds => $seconds);

	# runs: a control whose violations hang on restart timing (as TAP 013's restart
	# control) gets up to that many runs to show one.
	for (my $run = 2; $r->{expect_violations} && $r->{violations} == 0 && $run <= ($o{runs} // 1); $run++)
	{
		note("$name: no violation in this run; run $run of at most $o{runs}");
		$r = Checker::run_scenario($node, \%masters, $name, seconds => $seconds);
	}
	push @table, $r;
	note(Checker::describe($r));
	Checker::check_run($r);
	return $r;
}

# --- extend: to a shorter TTL (2000 -> 800 ms) while a majority is frozen ---
# An extend that raised 08006 may still have been applied by every master (the frozen ones
# when they wake): the validity redlock_locks() reports must not outlast it.

if (my $r = scenario_ok('extend-shorter', 10))
{
	# How many extends meet a frozen majority depends on timing (0 to a dozen per run).
	note("extend-shorter: $r->{extend_errors} extends met a frozen majority (08006)");
	cmp_ok($r->{extends}, '>', 0, 'extend-shorter: holders extended');
	cmp_ok($r->{steps_done}, '>', $r->{acquired},
		'extend-shorter: holders worked past their first step');
}

# --- negative control: a holder that ignores extend's answer ---

scenario_ok('unsafe-extend-ignored', 5);

# --- redlock.servers 3 -> 5 -> 3 under load ---

if (my $r = scenario_ok('servers-grow-shrink', 10))
{
	cmp_ok($r->{fault_counts}{'server list changes'} // 0, '>=', 2,
		'servers-grow-shrink: the list was grown and shrunk');
}

# --- negative control: a lock on 2 of 3 masters, the list grown to 5 under it ---
# A violation needs a holder that took its lock while master 2 was down still at work
# when the list grows: a window of tens of ms that restart times move (0 violations in
# 2 of about 10 runs this session, on a loaded machine).

scenario_ok('unsafe-servers-change', 5, runs => 3);

# --- SCRIPT FLUSH with retries at once ---

if (my $r = scenario_ok('script-flush', 8))
{
	cmp_ok($r->{fault_counts}{'SCRIPT FLUSH'} // 0, '>', 20, 'script-flush: the masters were flushed');
	cmp_ok($r->{busy}, '>', 0, 'script-flush: under contention (attempts found the lock taken)');
}

# --- masters that close idle connections: no spurious 08006 ---

if (my $r = scenario_ok('idle-timeout', 9))
{
	is($r->{unavailable}, 0,
		'idle-timeout: no 08006 although every master closed the idle connections (a majority was up)')
	  or diag(Checker::describe($r));
}

# --- a majority frozen for blips shorter than the wait: acquires ride them out ---
# (issue 26) Each blip fails the attempts under way for want of a quorum; they are
# undone and retried, so no acquire raises 08006, and no two holders overlap.

if (my $r = scenario_ok('blip-majority', 9))
{
	cmp_ok($r->{fault_counts}{'masters frozen'} // 0, '>=', 12,
		'blip-majority: a majority was frozen, 4 times or more');
	is($r->{unavailable}, 0, 'blip-majority: no 08006: every acquire rode out the blips')
	  or diag(Checker::describe($r));
}
scenario_ok('unsafe-blip-short-ttl', 5);

# --- the same blips met by try-locks: redlock.quorum_timeout rides them out ---
# (issue 42) wait_ms 0: an attempt whose masters were too slow to make a quorum is
# retried on its kept connections, with a doubling timeout, for up to 2 s.

if (my $r = scenario_ok('blip-majority-try', 9))
{
	cmp_ok($r->{fault_counts}{'masters frozen'} // 0, '>=', 12,
		'blip-majority-try: a majority was frozen, 4 times or more');
	is($r->{unavailable}, 0, 'blip-majority-try: no 08006: every try-lock rode out the blips')
	  or diag(Checker::describe($r));
}
scenario_ok('unsafe-blip-try-short-ttl', 5);

# --- pg_reload_conf() in a loop ---

if (my $r = scenario_ok('reload-loop', 7))
{
	cmp_ok($r->{fault_counts}{'pg_reload_conf()'} // 0, '>', 20, 'reload-loop: reloads were sent');
	# Nothing else (the faults never take a majority away from a lock taken with every
	# master up) may make a holder find its lock lost either: see extend-renew in run-long.
	is($r->{gave_up}, 0, 'reload-loop: no holder found its lock lost (extend false)')
	  or diag(Checker::describe($r));
}

# --- DISCARD ALL as the release (a pooler resetting the connection), and its control ---

scenario_ok('discard-release', 7);
scenario_ok('unsafe-discard-early', 5);

diag("\n" . Checker::table_header() . join('', map { Checker::table_line($_) } @table));

RedisMasters::no_crash($node);
done_testing();
