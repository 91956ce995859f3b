# The release of locks at backend exit is bounded in time when masters are frozen, and
# reaches the masters that answer, checked in Redis: a backend exiting with a majority of
# masters frozen exits in bounded time, and the live masters' keys are released.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('cleanup', $redis, $RedisMasters::ROOMY_CONF);

my ($out, $t0);

# --- exit with a majority of masters frozen: bounded in time ---

my $quitter = session($node);
sql($quitter, "SET redlock.timeout = 500");
($out) = sql($quitter, "SELECT redlock_acquire('exit-frozen', 30000)");
is($out, 't', 'a session acquires exit-frozen');
is($redis->holding('exit-frozen', 5), 5, '... on all 5 masters');
my $quitter_pid = $quitter->pid;
$redis->stop($_) for 2 .. 4;
$t0 = time;
$quitter->quit;
ok( wait_until(
		30,
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $quitter_pid") eq '0';
		}),
	'the backend exits with 3 of 5 masters frozen');
my $exit_secs = time - $t0;
cmp_ok($exit_secs, '<', 5, "... within bounded time (took ${exit_secs}s; redlock.timeout 500 ms)");
is(join(',', map { $redis->redis_cli($_, 'EXISTS', 'exit-frozen') } 0, 1), '0,0',
	'the live masters released its key at exit');
$redis->cont($_) for 2 .. 4;
$redis->redis_all('DEL', 'exit-frozen');

RedisMasters::no_crash($node);
done_testing();
