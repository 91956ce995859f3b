# The mutual-exclusion checker (test/checker/) on pairs of locks (issue 43 item 2): 8
# pgbench clients each take two of 3 resources one after the other, in the order drawn,
# so that opposite orders deadlock; the victims (40P01) keep their first lock, claimed,
# through their work, while a minority of masters is killed and kept down past the TTL
# (deadlock-kill): no violation, and deadlocks found.  The negative control
# (unsafe-deadlock-victim-lets-go: a victim lets go of its first lock but works on) must
# show violations, or the judge is blind to a victim's lost lock.
#
# RL_CHECKER_DEADLOCK=name,name runs only those scenarios.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use RedisMasters;

my %masters = (plain => RedisMasters->new(5));
my $node = RedisMasters::redlock_node('checker_deadlock', $masters{plain}, Checker::node_conf());
Checker::setup($node);
my %only = map { $_ => 1 } split /,/, $ENV{RL_CHECKER_DEADLOCK} // '';

my @table;
for my $s ([ 'deadlock-kill', 10 ], [ 'unsafe-deadlock-victim-lets-go', 6, runs => 3 ])
{
	my ($name, $seconds, %o) = @$s;
	next if %only && !$only{$name};
	push @table, Checker::run_checked($node, \%masters, $name, $seconds, %o);
}
diag("\n" . Checker::table_header() . join('', map { Checker::table_line($_) } @table));

RedisMasters::no_crash($node);
done_testing();
