# A lock taken under another redlock.servers counts as lost, checked in Redis: once the
# server list changes (SET in the session, or ALTER SYSTEM and a reload), extend returns
# false (creating no key on the new masters and letting go of the old ones), the validity
# reads 0, release warns that the masters changed (01000) and releases on the masters the
# lock was taken on, and a transaction lock taken before the change fails its COMMIT
# (55P03); an undo after SET LOCAL of the servers in a transaction that aborts goes to
# the masters the lock was taken on.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use PsqlSession qw(session sql validity wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $other_masters = RedisMasters->new(3);
my $node = RedisMasters::redlock_node('servers', $redis,
	$RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF);
my @ports = $redis->ports;
my $all5 = $redis->servers_guc;
my $first3 = join(',', map { "127.0.0.1:$_" } @ports[0 .. 2]);

my $s = session($node);
my $o = session($node);
my ($out, $err);

# Sets redlock.servers for the whole cluster (ALTER SYSTEM, reload); a test per session
# in SESSIONS that it sees the new value.
sub set_servers
{
	my ($servers, @sessions) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET redlock.servers = '$servers'; SELECT pg_reload_conf()");
	for my $session (@sessions)
	{
		ok(wait_until(5, sub { (sql($session, "SHOW redlock.servers"))[0] eq $servers }),
			"a session sees redlock.servers = $servers");
	}
}

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

# --- the cluster's server list shrinks and grows (reload) while a lock is held ---

set_servers($first3, $s, $o);
$redis->kill9(2);
($out) = sql($s, "SELECT redlock_acquire('moved', 30000)");
is($out, 't', 'servers: A acquires on 2 of 3 masters');
$redis->restart(2);
set_servers($all5, $s, $o);
($out) = sql($o, "SELECT redlock_acquire('moved', 30000)");
is($out, 't', 'servers: C acquires on the grown list (masters 2-4 were free)');
is(validity($s, 'moved'), '0', "servers: A's validity reads 0");
($out, $err) = sql($s, "SELECT redlock_extend('moved')");
is($out, 'f', "servers: A's extend returns false");
is($redis->redis_cli(0, 'EXISTS', 'moved'), '0', "servers: A's key was let go of on its own masters");
sql($o, "SELECT redlock_release('moved')");

# A transaction-scoped lock across the change fails its commit.
($out) = sql($s, "BEGIN; SELECT redlock_xact_acquire('moved-x', 30000);");
set_servers($first3);
usleep(300_000);
($out, $err) = sql($s, "SELECT 1; COMMIT;");
like($err, qr/ERROR:\s+55P03/, 'servers: a transaction lock taken before the change fails COMMIT');
set_servers($all5, $s);

# SET LOCAL of the servers in a transaction that aborts: the undo goes to the masters
# the lock was taken on.
($out, $err) = sql($s, "BEGIN; SELECT redlock_acquire('local-set', 30000);"
	  . " SET LOCAL redlock.servers = '$first3'; ROLLBACK;");
is($redis->holding('local-set', 0), 0, 'SET LOCAL servers + ROLLBACK: the undo reached all 5 masters');

$s->quit;
$o->quit;
RedisMasters::no_crash($node);
done_testing();
