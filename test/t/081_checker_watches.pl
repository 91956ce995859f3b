# The mutual-exclusion checker (test/checker/) with a watcher (issue 43 item 1): while 16
# pgbench clients contend for 4 resources and a minority of masters is killed and kept
# down past the TTL (watch-kill), a session watches every resource (redlock_watch); each
# "acquired" it hears must be a hold a client had then, with a quorum (its holder record's
# pid, an acquired attempt on that resource, the notifier's look within that hold's time
# on the masters).  The negative control (unsafe-watch-stray-holder: another client's
# token, without a holder record, on 3 of 5 masters for 300 ms, four times) must show
# "acquired" events that no client's hold explains, or the judge is blind.
#
# RL_CHECKER_WATCH=name,name runs only those scenarios.

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
my $node = RedisMasters::redlock_node('checker_watch', $masters{plain},
	Checker::node_conf(preload => 1));
Checker::setup($node);
my %only = map { $_ => 1 } split /,/, $ENV{RL_CHECKER_WATCH} // '';

my @table;
for my $s ([ 'watch-kill', 8 ], [ 'unsafe-watch-stray-holder', 5, runs => 3 ])
{
	my ($name, $seconds, %o) = @$s;
	next if %only && !$only{$name};
	push @table, Checker::run_checked($node, \%masters, $name, $seconds, %o);
}
diag("\n" . Checker::table_header() . join('', map { Checker::table_line($_) } @table));

RedisMasters::no_crash($node);
done_testing();
