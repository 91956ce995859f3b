# What Redlock assumes of its masters, enforced by the client (issue 41): a master
# restarted without its data is left out of every quorum for redlock.restart_quarantine
# (which also bounds every TTL), a master that may evict keys is left out, a master out
# of memory is reported as such (53200), and redlock_check() says what each master
# lacks.  Real masters, restarted empty with SIGKILL as systemd's Restart=always does.
#
# The negative control: the same restart with the quarantine off lets a second session
# take the lock that the first still holds (two holders), which is what the quarantine
# prevents.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

# A short quarantine, so that it can end within the test; TTLs stay below it.
my $Q = 4000;
my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('quarantine', $redis,
	$RedisMasters::ROOMY_CONF . "redlock.restart_quarantine = ${Q}ms\nredlock.retry_delay = 50\n");
# redlock_node turns the quarantine off for the other tests; the last setting wins.
my $a = session($node);
my $b = session($node);
my ($out, $err);

sub quarantine
{
	my ($ms) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET redlock.restart_quarantine = '${ms}ms'; SELECT pg_reload_conf()");
	wait_until(10, sub { $node->safe_psql('postgres', 'SHOW redlock.restart_quarantine') eq "${ms}ms" })
	  or die "redlock.restart_quarantine did not become ${ms}ms";
	return;
}

# --- every TTL is bounded by the quarantine and by redlock.max_ttl (per role) ---

quarantine($Q);
($out, $err) = sql($a, "SELECT redlock_acquire('too-long', " . ($Q + 1) . ")");
like($err, qr/22023.*ttl_ms must be at most $Q for role "\w+".*redlock\.restart_quarantine is $Q ms/s,
	'a TTL above redlock.restart_quarantine: 22023 naming the role and the setting');
($out, $err) = sql($a, "SELECT redlock_claim('too-long', " . ($Q + 1) . ")");
like($err, qr/22023.*ttl_ms must be at most $Q/s, '... a claim too');

$node->safe_psql('postgres', "CREATE ROLE short LOGIN; ALTER ROLE short SET redlock.max_ttl = 1500;"
	  . " GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO short");
my $short = session($node, 'postgres', extra_params => ['-U', 'short']);
($out, $err) = sql($short, "SELECT redlock_acquire('short-ttl', 2000)");
like($err, qr/22023.*ttl_ms must be at most 1500 for role "short".*redlock\.max_ttl is 1500 ms/s,
	'ALTER ROLE ... SET redlock.max_ttl bounds that role\'s TTLs, naming the role');
($out, $err) = sql($short, "SET redlock.max_ttl = 3000");
like($err, qr/42501.*permission denied to set parameter "redlock.max_ttl"/s,
	'... and the role cannot raise it');

# --- masters just started without their data are left out until the quarantine ends ---

# The masters started moments ago (uptime well below $Q ms), without AOF.
my ($up) = $redis->redis_cli(0, 'INFO', 'server') =~ /uptime_in_seconds:(\d+)/;
SKIP:
{
	skip 'the masters have been up too long already for this check', 3 if $up * 1000 >= $Q - 1500;
	($out, $err) = sql($a, "SELECT redlock_acquire('young', 2000)");
	like($err, qr/08006.*could not acquire lock on resource "young": 0 of 5 Redis masters answered and 5 more are left out of quorums, 3 needed/s,
		'masters just started without AOF: 08006, every master left out');
	like($err, qr/DETAIL:.*left out for \d+ s more: restarted \d+ s ago without its data/s,
		'... the detail says why and for how long');
	like($err, qr/HINT:.*redlock_check\(\)/s, '... and the hint points at redlock_check()');
}
ok(wait_until(($Q + 3000) / 1000, sub { (sql($a, "SELECT redlock_acquire('young', 2000)"))[0] eq 't' }),
	'once they have been up redlock.restart_quarantine, they count: acquired');
sql($a, "SELECT redlock_release('young')");
# A new connection reads the uptime in whole seconds and takes the latest start it
# allows: a session connecting later sees the quarantine end up to a second later.
usleep(1500 * 1000);

# --- the issue's scenario: three masters restarted empty while a lock is held ---

($out) = sql($a, "SELECT redlock_acquire('rq', 3500)");
is($out, 't', 'session A holds rq');
$redis->restart($_) for 0 .. 2;
($out, $err) = sql($b, "SELECT redlock_acquire('rq', 3500)");
isnt($out, 't', 'three masters restarted empty: session B does not get rq while A holds it');
like($err, qr/08006.*2 of 5 Redis masters answered and 3 more are left out of quorums, 3 needed/s,
	'... 08006: the three restarted masters are left out')
  or diag($err);
# Seconds left (rounded up) and since the restart (rounded down) add up to the quarantine.
my @spans;
push @spans, $1 + $2 while $err =~ /left out for (\d+) s more: restarted (\d+) s ago/g;
is(scalar(grep { $_ >= $Q / 1000 } @spans), 3,
	"... each for the whole quarantine from its start ($Q ms): @spans s");
# Every kind's round counts the same way: a set and a shared lock (scripts) too.
($out, $err) = sql($b, "SELECT redlock_acquire(ARRAY['rq', 'rq-other'], 3500)");
isnt($out, 't', '... nor a set that takes rq');
like($err, qr/08006.*3 more are left out of quorums/s, '... 08006 too') or diag($err);
($out, $err) = sql($b, "SELECT redlock_acquire_shared('rq', 3500)");
isnt($out, 't', '... nor a shared lock on rq');
like($err, qr/08006.*3 more are left out of quorums/s, '... 08006 too') or diag($err);
my @nodes = split /\n/, (sql($b, "SELECT node || '|' || coalesce(last_error, '') FROM redlock_nodes() ORDER BY node"))[0];
is(scalar(grep { /\|left out for \d+ s more: restarted/ } @nodes), 3,
	'... redlock_nodes() shows the three as left out, with why');
# During the quarantine a waiter keeps trying and gets it once the quarantine ends.
($out, $err) = sql($b, "SELECT redlock_acquire('rq', 3000, " . ($Q + 3000) . ")");
is($out, 't', '... a waiter gets rq once the restarted masters count again') or diag($err);
# Its fresh INFO reads the uptime in whole seconds again: up to a second later still.
my $check;
wait_until(3, sub { ($check) = sql($b, "SELECT string_agg(verdict, ',') FROM redlock_check()"); $check eq 'warning,warning,warning,warning,warning' });
is($check, 'warning,warning,warning,warning,warning',
	'redlock_check(): every master counts, with a warning (no AOF: a restart leaves it out)');
sql($b, "SELECT redlock_release('rq')");

# --- the negative control: without the quarantine, B gets the lock A holds ---

quarantine(0);
my $a2 = session($node);
my $b2 = session($node);
($out) = sql($a2, "SELECT redlock_acquire('rq-control', 3500)");
is($out, 't', 'control: session A holds rq-control');
$redis->restart($_) for 0 .. 2;
($out, $err) = sql($b2, "SELECT redlock_acquire('rq-control', 3500)");
is($out, 't', 'control (quarantine off): B acquires rq-control while A holds it: two holders');
($out) = sql($a2, "SELECT count(*) FROM redlock_locks() WHERE resource = 'rq-control'");
is($out, '1', '... A still believes it holds it');
sql($_, 'SELECT redlock_release_all()') for ($a2, $b2);
quarantine($Q);
usleep(($Q + 200) * 1000);	# the restarted masters count again

# --- a master that keeps its data (AOF, appendfsync always) is not quarantined ---

my $aof = RedisMasters->new(3, redis_args => ['--appendonly', 'yes', '--appendfsync', 'always']);
my $aof_guc = $aof->servers_guc;
my $c = session($node);
sql($c, "SET redlock.servers = '$aof_guc'");
($out, $err) = sql($c, "SELECT redlock_acquire('kept', 3000)");
is($out, 't', 'masters with AOF and appendfsync always count at once after their start') or diag($err);
$aof->restart($_) for 0 .. 1;
my $d = session($node);
sql($d, "SET redlock.servers = '$aof_guc'");
($out, $err) = sql($d, "SELECT redlock_acquire('kept', 3000)");
is($out, 'f', '... restarted, they kept the key: busy, not left out') or diag($err);
($check) = sql($d, "SELECT string_agg(verdict || ':' || persistence, ',') FROM redlock_check()");
like($check, qr/^(warning|ok):aof, appendfsync always(,(warning|ok):aof, appendfsync always){2}$/,
	'... redlock_check() shows their persistence');
sql($c, "SELECT redlock_release('kept')");

# --- AOF with appendfsync everysec may lose the last second of writes: quarantined ---

my $sec = RedisMasters->new(3, redis_args => ['--appendonly', 'yes', '--appendfsync', 'everysec']);
my $sec_guc = $sec->servers_guc;
my $es = session($node);
sql($es, "SET redlock.servers = '$sec_guc'");
($out, $err) = sql($es, "SELECT redlock_acquire('everysec', 3000)");
isnt($out, 't', 'masters with AOF but appendfsync everysec, just started: no lock');
like($err, qr/08006.*DETAIL:.*left out for \d+ s more: restarted \d+ s ago without its data \(no AOF with appendfsync always\)/s,
	'... they are quarantined like masters without AOF, the detail says why') or diag($err);
($check) = sql($es, "SELECT string_agg(verdict || ':' || persistence, ',') FROM redlock_check()");
like($check, qr/^left out:aof, appendfsync not always(,left out:aof, appendfsync not always){2}$/,
	'... redlock_check(): left out, appendfsync not always');

# --- masters that may evict keys are left out ---

$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory', '64mb') for 0 .. 4;
$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru') for 0 .. 2;
my $e = session($node);
($out, $err) = sql($e, "SELECT redlock_acquire('evict', 3000)");
isnt($out, 't', 'three masters with maxmemory-policy allkeys-lru: no lock');
like($err, qr/08006.*and 3 more are left out of quorums.*DETAIL:.*left out: it may evict keys \(maxmemory 67108864 bytes, maxmemory-policy allkeys-lru\)/s,
	'... they are left out, the detail says why');
($check) = sql($e, "SELECT string_agg(verdict, ',' ORDER BY master) FROM redlock_check() WHERE maxmemory_policy = 'allkeys-lru'");
is($check, 'left out,left out,left out', 'redlock_check(): left out');
my ($hint) = sql($e, "SELECT hint FROM redlock_check() WHERE maxmemory_policy = 'allkeys-lru' LIMIT 1");
like($hint, qr/maxmemory-policy noeviction/, '... with a hint to set noeviction');
$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory-policy', 'volatile-ttl') for 0 .. 2;
$redis->redis_cli(2, 'CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
my $f = session($node);
($out, $err) = sql($f, "SELECT redlock_acquire('evict', 3000)");
is($out, 't', 'two masters with a volatile-* policy left out: the other three still make a quorum')
  or diag($err);
my ($out2, $err2) = sql($f, "SELECT redlock_acquire('evict-2', 3000)");
($out, $err) = sql($f, "SELECT redlock_acquire('evict-3', 3000)");
$err = "$err2$err";
like($err, qr/WARNING:.*is left out of every quorum.*maxmemory-policy volatile-ttl/s,
	'... and a WARNING says they are left out') or diag($err);
sql($f, 'SELECT redlock_release_all()');
$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory-policy', 'noeviction') for 0 .. 4;

# --- a user that may not run CONFIG still counts; one that may not run INFO does not ---

my $pw = 'probe-pw';
$redis->redis_all('ACL', 'SETUSER', 'noconfig', 'on', ">$pw", '~*', '&*', '+@all', '-config');
$redis->redis_all('ACL', 'SETUSER', 'noinfo', 'on', ">$pw", '~*', '&*', '+@all', '-info');
my $h = session($node);
sql($h, "SET redlock.username = 'noconfig'; SET redlock.password = '$pw'");
($out, $err) = sql($h, "SELECT redlock_acquire('acl-probe', 3000)");
is($out, 't', 'CONFIG refused (appendfsync unknown): the masters still count, up long enough')
  or diag($err);
sql($h, "SELECT redlock_release('acl-probe')");
sql($h, "SET redlock.username = 'noinfo'");
($out, $err) = sql($h, "SELECT redlock_acquire('acl-probe', 3000)");
like($err, qr/08006.*0 of 5 Redis masters answered and 5 more are left out of quorums.*DETAIL:.*left out: INFO was refused: NOPERM/s,
	'INFO refused: every master left out, the detail says why');
($check) = sql($h, "SELECT string_agg(DISTINCT verdict || ': ' || hint, ',') FROM redlock_check()");
like($check, qr/^left out: Grant the Redis user redlock connects as the INFO command/,
	'redlock_check(): left out, with a hint to grant INFO');
sql($h, 'RESET redlock.username; RESET redlock.password');

# --- a master out of memory is reported as such, not as silent ---

$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory', '1') for 0 .. 2;
my $g = session($node);
($out, $err) = sql($g, "SELECT redlock_acquire('oom', 3000)");
like($err, qr/53200.*could not acquire lock on resource "oom": 3 of 5 Redis masters are out of memory, 2 answered, 3 needed/s,
	'three masters at maxmemory (noeviction): 53200 counting them as out of memory');
like($err, qr/DETAIL:.*OOM command not allowed/s, '... the detail has Redis\' OOM error');
($out, $err) = sql($g, "SELECT redlock_claim('oom', 3000)");
like($err, qr/53200.*could not claim resource "oom": 3 of 5 Redis masters are out of memory/s,
	'... a claim too');
$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory', '0') for 0 .. 4;
($out, $err) = sql($g, "SELECT redlock_acquire('oom', 3000)");
is($out, 't', 'memory back: acquired') or diag($err);
sql($g, "SELECT redlock_release('oom')");

$_->quit for ($a, $b, $short, $a2, $b2, $c, $d, $e, $f, $g, $h);
RedisMasters::no_crash($node);
done_testing();
