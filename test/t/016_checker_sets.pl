# The mutual-exclusion checker (test/checker/) on sets of resources (redlock_acquire(text[]),
# 1.6), short version: 16 pgbench clients each take a set of two of 6 resources, all or
# nothing, and the holder claims the guard row of each resource in one committed
# transaction (checker_set_attempt): a guard held already, by a set sharing that resource,
# is a violation.  Under no fault, a minority killed (delayed restart), masters frozen
# with SIGSTOP, latency on 3 masters, a majority restarted from its AOF, and sets held
# past their TTL by an extension of the set (redlock_extend(text[])) under SIGSTOP, the
# only pass is zero violations.  The negative controls (the same without the extension;
# a TTL shorter than the work; a majority restarted without persistence) must show
# violations, or the checker is blind.
# test/checker/run-long runs them longer.
#
# RL_CHECKER_SETS=name,name runs only those scenarios (for a look at one).

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
my %only = map { $_ => 1 } split /,/, $ENV{RL_CHECKER_SETS} // '';

Checker::run_kind_suite($node, \%masters, 'sets', \%only);

RedisMasters::no_crash($node);
done_testing();
