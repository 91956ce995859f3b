# A lock taken under another redlock.servers counts as lost, checked in Redis: once the
# session's server list names other masters, extend returns false (creating no key on
# the new masters and letting go of the old ones), the validity reads 0, and release
# warns that the masters changed (01000) and releases on the masters the lock was taken
# on.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $other_masters = RedisMasters->new(3);
my $node = RedisMasters::redlock_node('servers', $redis,
	$RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF);

my $s = session($node);
my ($out, $err);

# --- the session's server list changes to other masters while locks are held ---

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

$s->quit;
RedisMasters::no_crash($node);
done_testing();
