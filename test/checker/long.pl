# test/checker/long.pl: the long checker run, started by test/checker/run-long (which sets
# PERL5LIB, PATH and TESTDIR and runs this as the postgres user).
#
#   perl long.pl [--seconds N] [SCENARIO ...]     (default: every scenario, 20 s each)
#
# The scenarios of issue 7 (extend, server-list changes, SCRIPT FLUSH, idle timeout,
# reloads) come after the original ones; idle-timeout must also show no 08006, and
# reload-loop no holder that found its lock lost.
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
use RedisMasters;

my $seconds = 20;
GetOptions('seconds=i' => \$seconds) or die "usage: $0 [--seconds N] [SCENARIO ...]\n";
my @names = @ARGV
  ? @ARGV
  : qw(baseline kill-minority-delayed sigstop latency kill-minority-aof kill-majority-aof
  unsafe-majority-restart unsafe-short-ttl extend-shorter extend-longer unsafe-extend-ignored
  servers-grow-shrink unsafe-servers-change script-flush idle-timeout reload-loop extend-renew);

my %masters = (
	plain => RedisMasters->new(5),
	aof => RedisMasters->new(5, redis_args => [ '--appendonly', 'yes', '--appendfsync', 'always' ]),
);
my $node = RedisMasters::redlock_node('checker', $masters{plain}, Checker::node_conf());
Checker::setup($node);

# PostgreSQL::Test::Utils sends STDOUT to the test log; the TAP handle reaches the terminal
# (and the log).
my $out = Test::More->builder->output;

my @results;
for my $name (@names)
{
	my $r = Checker::run_scenario($node, \%masters, $name, seconds => $seconds);
	push @results, $r;
	print $out Checker::describe($r), "\n";
	is($r->{pgbench_rc}, 0, "$name: pgbench ran to the end");
	if ($r->{expect_violations})
	{
		cmp_ok($r->{violations}, '>', 0, "$name (negative control): violations seen");
	}
	else
	{
		is($r->{violations}, 0, "$name: no violation");
	}
	is($r->{unavailable}, 0, "$name: no 08006 (a majority of masters was always up)")
	  if $r->{expect_no_08006};
	is($r->{gave_up}, 0, "$name: no holder found its lock lost") if $r->{expect_no_gave_up};
}

print $out "\n", Checker::table_header();
print $out Checker::table_line($_) for grep { !$_->{expect_violations} } @results;
my @neg = grep { $_->{expect_violations} } @results;
if (@neg)
{
	print $out "negative controls (must show violations):\n";
	print $out Checker::table_line($_) for @neg;
}
print $out "\nliveness (acquisitions per second) by state of the masters:\n";
for my $r (@results)
{
	print $out sprintf("  %-26s %s\n", $r->{name},
	  join('; ', map { sprintf('%s %.1f/s (%.1f s)', $_->[0], $_->[3], $_->[1]) } @{ $r->{states} }));
}
print $out sprintf("\n%d clients, %d resources; TTL/wait/work per scenario above; %d s each\n",
	$results[0]{clients}, $results[0]{resources}, $seconds) if @results;

RedisMasters::no_crash($node);
done_testing();
