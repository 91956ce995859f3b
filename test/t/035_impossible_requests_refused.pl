# A request that cannot be carried out is refused and says why, and sets no key:
# - an acquire in a parallel worker (its lock would belong to no session): 25000;
# - a TTL too short to leave any validity after the drift allowance: 22023;
# - redlock_release of a lock held only at transaction scope: a WARNING saying so;
# - a socket path in redlock.servers longer than sun_path can hold: 22023.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('refused', $redis, $RedisMasters::ROOMY_CONF);
my $s = session($node);
my ($out, $err);

# --- parallel workers ---

# force_parallel_mode was renamed debug_parallel_query in PostgreSQL 16.
my $parallel_guc = $node->safe_psql('postgres',
	"SELECT current_setting('server_version_num')::int >= 160000") eq 't'
  ? 'debug_parallel_query' : 'force_parallel_mode';
($out, $err) = sql($s, "CREATE FUNCTION par_acquire(r text) RETURNS boolean PARALLEL SAFE"
	  . " LANGUAGE sql AS \$\$ SELECT redlock_acquire(r) \$\$;"
	  . " SET $parallel_guc = on; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;"
	  . " SELECT par_acquire('par') FROM (VALUES (1)) v;");
like($err, qr/ERROR:\s+25000/, 'parallel: acquiring in a parallel worker raises 25000');
sql($s, "RESET $parallel_guc");
is($redis->holding('par', 0), 0, 'parallel: no key was set');

# --- TTLs that can never be valid; releasing a transaction-only lock ---

($out, $err) = sql($s, "SELECT redlock_acquire('tiny', 2)");
like($err, qr/ERROR:\s+22023: ttl_ms is too short/, 'a 2 ms TTL is refused (22023)');
($out, $err) = sql($s, "BEGIN; SELECT redlock_xact_acquire('xonly', 30000); SELECT redlock_release('xonly'); COMMIT;");
like($err, qr/held only at transaction scope/, 'releasing a transaction-only lock says so');

# --- a socket path longer than sun_path ---

($out, $err) = sql($s, "SET redlock.servers = '/tmp/" . ('x' x 120) . "'");
like($err, qr/ERROR:\s+22023.*socket path is too long/s, 'a socket path longer than sun_path is refused');

$redis->no_keys_left;
$s->quit;
RedisMasters::no_crash($node);
done_testing();
