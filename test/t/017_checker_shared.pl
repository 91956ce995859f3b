# The mutual-exclusion checker (test/checker/) on shared locks (redlock_acquire_shared,
# 1.7), short version: 16 pgbench clients take one of 2 resources, shared three times in
# four and exclusively otherwise; a shared holder counts itself in the resource's guard
# row and must find no exclusive holder there, an exclusive holder must find neither an
# exclusive holder nor readers (checker_shared_attempt).  Under no fault, a minority
# killed (delayed restart), masters frozen with SIGSTOP, latency on 3 masters, a majority
# restarted from its AOF, and holds kept past their TTL by redlock_extend under SIGSTOP,
# the only pass is zero violations, with (where the work is short) 2 or more shared
# holders inside at once at some moment.  The negative controls (the same without the extension; a TTL shorter than the
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

Checker::run_kind_suite($node, \%masters, 'shared', \%only);

RedisMasters::no_crash($node);
done_testing();
