# With redlock in shared_preload_libraries, redlock_stats() is the cluster's (scope
# 'cluster'): what every backend did, summed, seen from any other backend.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('counters', $redis,
	$RedisMasters::ROOMY_CONF . "shared_preload_libraries = 'redlock'\n");
my $s = session($node);
my $out;

# --- cluster-wide counters (redlock preloaded) ---

($out) = sql($s, "SELECT redlock_stats_reset()");
my $one = session($node);
my $two = session($node);
($out) = sql($one, "SELECT redlock_acquire('stats-a', 30000) AND redlock_release('stats-a')");
is($out, 't', 'one backend acquires and releases');
($out) = sql($two, "SELECT redlock_acquire('stats-b', 30000) AND redlock_release('stats-b')");
is($out, 't', 'another backend acquires and releases');
($out) = sql($s, "SELECT scope, attempts, acquired, released FROM redlock_stats()");
is($out, 'cluster|2|2|2', "a third backend sees both in redlock_stats() (scope 'cluster')");
$one->quit;
$two->quit;

$redis->no_keys_left;
$s->quit;
RedisMasters::no_crash($node);
done_testing();
