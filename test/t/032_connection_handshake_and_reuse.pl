# A backend's connection to each master starts with a handshake (AUTH when a password is
# set, SELECT when redlock.database is not 0) that must succeed before anything runs on
# it, and is then reused while it is usable, checked in Redis:
# - redlock.database: the keys land in that Redis database, and only there;
# - a connection a master closed while idle (Redis timeout) is re-opened, not a failed
#   call, also for the release at COMMIT;
# - a reload that changes nothing keeps the connections and their figures;
# - a failed handshake (no such database, a password the masters do not have) is 08006
#   and sets no key; the same session then acquires once the setting is right.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('connections', $redis,
	$RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF);
my $s = session($node);
my ($out, $err);

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

# --- a master closed an idle connection ---

$redis->redis_all('CONFIG', 'SET', 'timeout', '1');
($out) = sql($s, "SELECT redlock_acquire('idle', 30000) AND redlock_release('idle')");
is($out, 't', 'idle: acquire and release');
usleep(2_500_000);
($out, $err) = sql($s, "SELECT redlock_acquire('idle', 30000)");
is($out, 't', 'idle: acquire after the masters closed the idle connections succeeds');
is($err, '', '... without an error');
($out) = sql($s, "BEGIN; SELECT redlock_xact_acquire('idle-commit', 30000); SELECT pg_sleep(2.5); COMMIT;");
is($redis->holding('idle-commit', 0), 0, 'idle: the release at commit after 2.5 s idle reaches every master');
sql($s, "SELECT redlock_release('idle')");
$redis->redis_all('CONFIG', 'SET', 'timeout', '0');

# --- a reload that changes nothing keeps the connections ---

($out) = sql($s, "SELECT redlock_acquire('reload', 30000) AND redlock_release('reload')");
is($out, 't', 'reload: acquire and release');
($out) = sql($s, "SELECT sum(requests) FROM redlock_nodes()");
my $requests = $out;
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
usleep(300_000);
($out) = sql($s, "SELECT count(*) FILTER (WHERE connected), sum(requests) >= $requests FROM redlock_nodes()");
is($out, '5|t', 'reload: still 5 connections, figures kept');

# --- a failed handshake runs nothing ---

($out, $err) = sql($s, "SET redlock.database = 16; SELECT redlock_acquire('leak', 600000)");
like($err, qr/ERROR:\s+08006/, 'database 16 (no such database): 08006');
like($err, qr/handshake failed/, '... naming the failed handshake');
usleep(300_000);
is(scalar(grep { $_ eq '1' } $redis->redis_all('EXISTS', 'leak')), 0, 'no key was set in database 0');
($out) = sql($s, "RESET redlock.database; SELECT redlock_acquire('leak', 30000)");
is($out, 't', 'the same session then acquires it');
sql($s, "SELECT redlock_release('leak')");
($out, $err) = sql($s, "SET redlock.password = 'nope'; SELECT redlock_acquire('leak2', 600000)");
like($err, qr/ERROR:\s+08006/, 'a password the masters do not have: 08006');
usleep(300_000);
is(scalar(grep { $_ eq '1' } $redis->redis_all('EXISTS', 'leak2')), 0, '... and no key was set');
sql($s, "RESET redlock.password");

$redis->no_keys_left;
$s->quit;
RedisMasters::no_crash($node);
done_testing();
