# README promises that no other test covers, each checked in Redis:
# - locks held while redlock.servers changes are lost: extend returns false (creating no
#   key on the new masters, letting go of the old ones), validity reads 0, and release
#   warns that the masters changed (01000) and releases on the masters it was taken on;
# - redlock.database: the keys land in that Redis database, and only there;
# - fewer than a quorum answering an extend: 08006, the lock kept (and extendable once the
#   masters answer again); a release: a WARNING (01000), the keys left to their TTL;
# - a cancel while requests to hung (SIGSTOPped) masters are in flight: 57014 within one
#   redlock.timeout (the undo on the hung masters waits that long);
#   once the masters resume, no stray key of the cancelled attempt, and the next call in
#   the same session works;
# - a backend exiting with a majority of masters frozen: exit bounded in time, and the
#   live masters' keys released;
# - with redlock preloaded, redlock_stats() is the cluster's (scope 'cluster'), summed
#   over backends.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $other_masters = RedisMasters->new(3);
my $node = RedisMasters::redlock_node('promises', $redis,
	$RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF
	  . "shared_preload_libraries = 'redlock'\n");
my $s = session($node);
my ($out, $err, $secs);

# --- the server list changes while locks are held ---

for my $r ('moved-extend', 'moved-release')
{
	($out) = sql($s, "SELECT redlock_acquire('$r', 30000)");
	is($out, 't', "acquire $r on the first 5 masters");
	is($redis->holding($r, 5), 5, "... all 5 hold it");
}
my $guc = $other_masters->servers_guc;
($out, $err) = sql($s, "SET redlock.servers = '$guc'");
is($err, '', 'the server list now names 3 other masters');
($out, $err) = sql($s, "SELECT redlock_extend('moved-extend', 60000)");
is($out, 'f', 'extend of a lock taken on the old masters returns false (the lock is lost)');
is($other_masters->holding('moved-extend', 0), 0, '... no key was created on the new masters');
is($redis->holding('moved-extend', 0), 0, '... and its keys were let go of on the old masters');
($out) = sql($s, "SELECT count(*) FROM redlock_locks() WHERE resource = 'moved-extend'");
is($out, '0', '... and the lock is forgotten');

($out) = sql($s, "SELECT validity_ms FROM redlock_locks() WHERE resource = 'moved-release'");
is($out, '0', 'a lock taken on the old masters shows no validity left');
($out, $err) = sql($s, "SELECT redlock_release('moved-release')");
is($out, 't', 'release of a lock held on the old masters returns true (it was held)');
like($err, qr/WARNING:\s+01000: lock on resource "moved-release" was lost when the Redis masters, credentials or key prefix changed/,
	'... with the 01000 WARNING that the masters changed');
is($redis->holding('moved-release', 0), 0, '... and it is released on the masters it was taken on');
sql($s, "RESET redlock.servers");
$redis->redis_all('DEL', 'moved-extend', 'moved-release');

# --- redlock.database ---

($out, $err) = sql($s, "SET redlock.database = 3");
is($err, '', 'superuser sets redlock.database = 3');
($out) = sql($s, "SELECT redlock_acquire('in-db3', 30000)");
is($out, 't', 'acquire with redlock.database = 3');
my @db3 = $redis->wait_all(5, sub { 5 == grep { $_ eq '1' } @_ }, '-n', '3', 'EXISTS', 'in-db3');
is(join(',', @db3), '1,1,1,1,1', 'the key is in database 3 on every master');
is(join(',', $redis->redis_all('EXISTS', 'in-db3')), '0,0,0,0,0', '... and not in database 0');
like(join(',', $redis->redis_all('-n', '3', 'GET', 'in-db3')), qr/^([0-9a-f]{40})(,\1){4}$/,
	'... with the same 40-hex token everywhere');
($out) = sql($s, "SELECT redlock_release('in-db3')");
is($out, 't', 'release with redlock.database = 3');
@db3 = $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, '-n', '3', 'EXISTS', 'in-db3');
is(join(',', @db3), '0,0,0,0,0', 'the key is gone from database 3 on every master');
sql($s, "RESET redlock.database");

# --- fewer than a quorum answering an extend, then a release ---

sql($s, "SET redlock.timeout = 300");
($out) = sql($s, "SELECT redlock_acquire('no-quorum', 30000)");
is($out, 't', 'acquire no-quorum on all masters');
is($redis->holding('no-quorum', 5), 5, '... all 5 hold it');
$redis->stop($_) for 2 .. 4;
($out, $err, $secs) = sql($s, "SELECT redlock_extend('no-quorum', 60000)");
like($err, qr/ERROR:\s+08006: could not extend lock on resource "no-quorum"/,
	'extend with 3 of 5 masters frozen: ERROR 08006');
cmp_ok($secs, '<', 5, "... within bounded time (took ${secs}s)");
($out) = sql($s, "SELECT resource, ttl_ms FROM redlock_locks()");
is($out, 'no-quorum|30000', '... and the lock is kept as it was');
$redis->cont($_) for 2 .. 4;
($out, $err) = sql($s, "SELECT redlock_extend('no-quorum', 60000)");
is($out, 't', 'once the masters answer again, the kept lock extends');
my @pttl = $redis->wait_all(5, sub { 5 == grep { /^\d+$/ && $_ > 30000 } @_ }, 'PTTL', 'no-quorum');
is(scalar(grep { /^\d+$/ && $_ > 30000 } @pttl), 5, '... to 60 s on all 5 masters')
  or diag("PTTL: @pttl");

$redis->stop($_) for 2 .. 4;
($out, $err, $secs) = sql($s, "SELECT redlock_release('no-quorum')");
is($out, 't', 'release with 3 of 5 masters frozen returns true (it was held)');
like($err, qr/WARNING:\s+01000: could not release lock on resource "no-quorum": 2 of 5 Redis masters answered/,
	'... with the 01000 WARNING that fewer than a quorum answered');
cmp_ok($secs, '<', 5, "... within bounded time (took ${secs}s)");
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', '... and the session no longer lists it');
$redis->cont($_) for 2 .. 4;
# (README promises only that keys the release did not reach expire with their TTL.)
note 'no-quorum after the frozen masters resumed, PTTL: '
  . join(',', $redis->redis_all('PTTL', 'no-quorum'));
$redis->redis_all('DEL', 'no-quorum');
sql($s, "RESET redlock.timeout");

# --- a cancel while requests to hung masters are in flight ---

# A request timeout of 3 s, so that the acquire is still waiting for the frozen masters
# (not giving up on them) when the cancel comes.  The undo that follows the cancel is
# not interrupted and waits for the frozen masters up to redlock.timeout (README: in
# transaction hooks network work "is not interrupted" and bounded by the same timeouts):
# with redlock.timeout = 60 s the cancel took 60 s.  So "promptly" is "within about one
# redlock.timeout".
sql($s, "SET redlock.timeout = 3000");
my $watcher = session($node);
$redis->stop($_) for 2 .. 4;
my $pid = $s->pid;
$s->start("SELECT redlock_acquire('cancelled', 30000)");
my $wait_event;
ok( wait_until(
		30,
		sub {
			($wait_event) = sql($watcher,
				"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid AND state = 'active'");
			return ($wait_event // '') eq 'Extension';
		}),
	'the acquire waits on the frozen masters (wait_event_type Extension)');
usleep(200_000);
my $t0 = time;
($out) = sql($watcher, "SELECT pg_cancel_backend($pid)");
is($out, 't', 'cancel sent while the requests to 3 frozen masters are in flight');
($out, $err) = $s->finish;
like($err, qr/ERROR:\s+57014: canceling statement due to user request/, 'the acquire is cancelled (57014)');
my $cancel_secs = time - $t0;
cmp_ok($cancel_secs, '<', 3 + 3,
	"... within about one redlock.timeout (3 s) for the undo (took ${cancel_secs}s)");
$redis->cont($_) for 2 .. 4;
# The frozen masters now run the SET NX they had queued; the attempt must be undone there
# too.  Its TTL is 30 s: a key still there after 10 s is a stray.
ok(wait_until(10, sub { $redis->holding('cancelled') == 0 }),
	'no stray key of the cancelled attempt on any master once the masters resumed')
  or diag('EXISTS: ' . join(',', $redis->redis_all('EXISTS', 'cancelled'))
	  . '; PTTL: ' . join(',', $redis->redis_all('PTTL', 'cancelled')));
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'the cancelled attempt left no lock in the session');
($out, $err) = sql($s, "SELECT redlock_acquire('after-cancel', 30000)");
is($out, 't', 'the next acquire in the same session works');
is($err, '', '... without error or warning');
is($redis->holding('after-cancel', 5), 5, '... on all 5 masters (connections usable)');
($out, $err) = sql($s, "SELECT redlock_release('after-cancel')");
is($out, 't', '... and so does its release');
is($redis->holding('after-cancel', 0), 0, '... everywhere');
$redis->redis_all('DEL', 'cancelled');
sql($s, "RESET redlock.timeout");

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

# --- cluster-wide counters (redlock preloaded) ---

($out) = sql($s, "SELECT redlock_stats_reset()");
my $a = session($node);
my $b = session($node);
($out) = sql($a, "SELECT redlock_acquire('stats-a', 30000) AND redlock_release('stats-a')");
is($out, 't', 'one backend acquires and releases');
($out) = sql($b, "SELECT redlock_acquire('stats-b', 30000) AND redlock_release('stats-b')");
is($out, 't', 'another backend acquires and releases');
($out) = sql($s, "SELECT scope, attempts, acquired, released FROM redlock_stats()");
is($out, 'cluster|2|2|2', "a third backend sees both in redlock_stats() (scope 'cluster')");
$a->quit;
$b->quit;

$redis->no_keys_left;
$s->quit;
$watcher->quit;
RedisMasters::no_crash($node);
done_testing();
