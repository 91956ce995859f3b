# The mutual-exclusion checker (test/checker/) on shared locks (redlock_acquire_shared,
# 1.7), short version: 16 pgbench clients take one of 2 resources, shared three times in
# four and exclusively otherwise; a shared holder counts itself in the resource's guard
# row and must find no exclusive holder there, an exclusive holder must find neither an
# exclusive holder nor readers (checker_shared_attempt).  Under no fault, a minority
# killed (delayed restart), masters frozen with SIGSTOP, latency on 3 masters, a majority
# restarted from its AOF, and holds kept past their TTL by redlock_extend under SIGSTOP,
# the only pass is zero violations, with 2 or more shared holders inside at once at some
# moment.  The negative controls (the same without the extension; a TTL shorter than the
# work; a majority restarted without persistence) must show violations, or the checker
# is blind.
# test/checker/run-long runs them longer.
#
# RL_CHECKER_SHARED=name,name runs only those scenarios (for a look at one).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use RedisMasters;

my %masters = (
	plain => RedisMasters->new(5),
	aof => RedisMasters->new(5, redis_args => [ '--appendonly', 'yes', '--appendfsync', 'always' ]),
);
my $node = RedisMasters::redlock_node('checker', $masters{plain}, Checker::node_conf());
Checker::setup($node);
my %only = map { $_ => 1 } split /,/, $ENV{RL_CHECKER_SHARED} // '';

my @table;

# Acquisitions counted while the masters were in STATE.
sub acquired_in
{
	my ($r, $state) = @_;
	my ($w) = grep { $_->[0] eq $state } @{ $r->{states} };
	return $w ? $w->[2] : 0;
}

# Runs scenario NAME for SECONDS and checks what must hold in every run (Checker::check_run:
# the clients ran to the end, sets were acquired, no error but 08006, no violation or
# some for a negative control).  A negative control that saw nothing runs again, up to
# RUNS times.  Returns the figures, or undef when skipped.
sub scenario_ok
{
	my ($name, $seconds, %o) = @_;
	return if %only && !$only{$name};
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = Checker::run_scenario($node, \%masters, $name, seconds => $seconds);
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

scenario_ok('shared-plain', 4);
if (my $r = scenario_ok('shared-kill', 6))
{
	cmp_ok(acquired_in($r, '2 killed'), '>', 0,
		'shared-kill: holds were acquired while 2 of 5 masters were down');
}
if (my $r = scenario_ok('shared-sigstop', 5))
{
	cmp_ok(acquired_in($r, '1 stopped'), '>', 0,
		'shared-sigstop: holds were acquired while a master was frozen');
}
scenario_ok('shared-latency', 4);
scenario_ok('shared-majority-restart-aof', 6);
if (my $r = scenario_ok('shared-extend', 5))
{
	cmp_ok($r->{extends}, '>', 0, "shared-extend: holds were extended ($r->{extends})");
	cmp_ok($r->{acquired} - $r->{gave_up}, '>', 0,
		'shared-extend: holders worked past their TTL on the extension ('
		  . ($r->{acquired} - $r->{gave_up}) . ", $r->{gave_up} gave up)");
}
scenario_ok('unsafe-shared-no-extend', 3);
scenario_ok('unsafe-shared-short-ttl', 3);
scenario_ok('unsafe-shared-majority-restart', 6, runs => 2);

diag("\n" . Checker::table_header() . join('', map { Checker::table_line($_) } @table));

RedisMasters::no_crash($node);
done_testing();
