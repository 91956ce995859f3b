# A backend's connection to each master starts with a handshake that selects
# redlock.database, checked in Redis: the keys land in that Redis database, and only
# there.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql);
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

$redis->no_keys_left;
$s->quit;
RedisMasters::no_crash($node);
done_testing();
