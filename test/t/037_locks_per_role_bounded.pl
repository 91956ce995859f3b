# One role cannot fill the masters (issue 41): redlock.max_locks_per_role, set per role
# with ALTER ROLE, bounds what the sessions of one role (the session user) have on the
# masters from this cluster, with the library preloaded (counted in shared memory):
# - claims count until their TTL runs out: the 6th of a role limited to 5 is refused
#   with 53400, naming the role and the limit, and sends nothing to the masters; once
#   the claims expired the role claims again; SET ROLE does not move the count to
#   another role; another role is not affected;
# - locks of every kind count (exclusive, shared, permits, each resource of a set),
#   those of two backends of the role together, from the acquire until the entry goes:
#   a release, a rolled-back transaction, a committed transaction's own locks and a
#   terminated backend each give their share back; a set that would pass the limit is
#   refused whole, none of its keys set, the role's count left as it was;
# - the shared table counts at most MaxBackends + 1000 roles: one more role is refused
#   with 53400 (roles counted already go on), and roles whose claims ran out make room.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('quota', $redis,
	$RedisMasters::ROOMY_CONF . "shared_preload_libraries = 'redlock'\n");
$node->safe_psql('postgres', q{
CREATE ROLE quota_users NOLOGIN;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO quota_users;
CREATE ROLE alice LOGIN IN ROLE quota_users;
CREATE ROLE carol LOGIN IN ROLE quota_users;
CREATE ROLE bob LOGIN IN ROLE quota_users;
GRANT bob TO carol;
ALTER ROLE alice SET redlock.max_locks_per_role = 5;
ALTER ROLE carol SET redlock.max_locks_per_role = 5;
});
my $su = session($node);
my ($out, $err);

# Calls of the commands an acquire or a claim sends, per master (after the masters have
# caught up with what went before: call this once the last key is on all five).
sub sent { return join(',', $redis->calls(qw(set eval evalsha))); }

my $refused = qr/ERROR:\s+53400: role "(\w+)" has (\d+) locks? on the Redis masters from this cluster/;

# --- claims count until their TTL runs out (carol: 5) ---

my $carol = session($node, 'postgres', extra_params => ['-U', 'carol']);
($out) = sql($carol, 'SHOW redlock.max_locks_per_role');
is($out, '5', 'ALTER ROLE ... SET gives carol redlock.max_locks_per_role = 5');
($out) = sql($carol, join(' UNION ALL ', map { "SELECT redlock_claim('claim-$_', 30000)" } 1 .. 5));
is($out, join("\n", ('t') x 5), 'carol takes 5 claims');
is($redis->holding('claim-5', 5), 5, '... on every master');
my $before = sent();
($out, $err) = sql($carol, "SELECT redlock_claim('claim-6', 30000)");
like($err, qr/ERROR:\s+53400: role "carol" has 5 locks on the Redis masters from this cluster/,
	'the 6th claim is refused with 53400, naming the role and its count');
like($err, qr/DETAIL:.*every claim until its TTL runs out; redlock\.max_locks_per_role is 5 for this role\./s,
	'... the detail says what counts and the limit for this role');
like($err, qr/HINT:.*ALTER ROLE \.\.\. SET redlock\.max_locks_per_role/, '... the hint how to raise it');
($out, $err) = sql($carol, "SELECT redlock_acquire('carol-lock', 30000)");
like($err, $refused, 'a lock is refused too while the claims live');
($out, $err) = sql($carol, "SET ROLE bob; SELECT redlock_claim('claim-as-bob', 30000)");
like($err, qr/53400: role "carol" has 5 locks/, 'SET ROLE bob: a claim is still carol\'s count (the session user)');
($out, $err) = sql($carol, "SELECT redlock_acquire('lock-as-bob', 30000)");
like($err, qr/53400: role "carol" has 5 locks/, '... and a lock too');
sql($carol, 'RESET ROLE');
is(sent(), $before, 'nothing of the refused requests reached the masters');
is(join(',', map { $redis->holding($_, 0) } qw(claim-6 carol-lock claim-as-bob lock-as-bob)),
	'0,0,0,0', '... no key of theirs on any master');

my $bob = session($node, 'postgres', extra_params => ['-U', 'bob']);
($out) = sql($bob, join(' UNION ALL ', map { "SELECT redlock_claim('bob-claim-$_', 2000)" } 1 .. 6)
	  . " UNION ALL SELECT redlock_acquire('bob-lock', 30000) AND redlock_release('bob-lock')");
is($out, join("\n", ('t') x 7), 'bob (default limit) takes 6 claims and a lock meanwhile');

# --- locks of every kind, two backends together (alice: 5) ---

my $a1 = session($node, 'postgres', extra_params => ['-U', 'alice']);
my $a2 = session($node, 'postgres', extra_params => ['-U', 'alice']);
($out) = sql($a1, "SELECT redlock_acquire('l1', 60000), redlock_acquire('l2', 60000), redlock_acquire('l3', 60000)");
is($out, 't|t|t', 'alice takes 3 session locks in one backend');
($out) = sql($a2, "SELECT redlock_acquire('l4', 60000), redlock_acquire('l5', 60000)");
is($out, 't|t', '... and 2 in another');
$redis->holding('l5', 5);
$before = sent();
($out, $err) = sql($a2, "SELECT redlock_acquire('l6', 60000)");
like($err, qr/53400: role "alice" has 5 locks/, 'the 6th is refused: both backends count together');
($out, $err) = sql($a2, "SELECT redlock_acquire('l3', 60000)");
like($err, qr/53400: role "alice" has 5 locks/, '... also for a resource another backend of the role holds');
is(sent(), $before, '... nothing sent');
is($redis->holding('l6', 0), 0, '... no key l6');

($out) = sql($a1, "SELECT redlock_release('l1')");
($out) = sql($a2, "SELECT redlock_acquire('l6', 60000)");
is($out, 't', 'a release gives its share back: another backend takes one more');
($out) = sql($a2, "SELECT redlock_acquire('l6', 60000)");
is($out, 't', '... and a re-acquire of a held lock takes nothing more');

sql($a1, "SELECT redlock_release('l2')");
($out) = sql($a1, "BEGIN; SELECT redlock_acquire('x1', 60000); ROLLBACK;");
is($out, 't', 'a session lock acquired in a transaction that rolls back ...');
($out) = sql($a2, "SELECT redlock_acquire('l7', 60000)");
is($out, 't', '... gives its share back with the rollback');
($out, $err) = sql($a1, "BEGIN; SELECT redlock_xact_acquire('x2', 60000); COMMIT;");
like($err, qr/53400: role "alice" has 5 locks/, 'at 5, a transaction-scoped lock is refused too');
sql($a2, "SELECT redlock_release('l7')");
($out) = sql($a1, "BEGIN; SELECT redlock_xact_acquire('x2', 60000); COMMIT;");
is($out, 't', 'a transaction-scoped lock ...');
($out) = sql($a2, "SELECT redlock_acquire('l7', 60000)");
is($out, 't', '... gives its share back at commit');

# Now a1 holds l3, a2 holds l4 l5 l6 l7.
my $a2_pid = $a2->pid;
($out) = $node->safe_psql('postgres', "SELECT pg_terminate_backend($a2_pid)");
ok(wait_until(30, sub {
			$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $a2_pid") eq '0';
		}), 'the second backend is terminated');
($out) = sql($a1, "SELECT redlock_acquire_permit('sem', 3, 60000), redlock_acquire_shared('sh', 60000),"
	  . " redlock_acquire(ARRAY['s1', 's2'], 60000)");
is($out, 't|t|t', 'its locks went with it: a permit, a shared lock and a set of 2 fit again');
$redis->holding('s2', 5);
$before = sent();
($out, $err) = sql($a1, "SELECT redlock_acquire('l8', 60000)");
like($err, qr/53400: role "alice" has 5 locks/, 'a permit, a shared lock and each resource of a set count');
is(sent(), $before, '... nothing sent');
sql($a1, "SELECT redlock_release(ARRAY['s1', 's2']), redlock_release('sh')");
($out, $err) = sql($a1, "SELECT redlock_acquire(ARRAY['t1', 't2', 't3', 't4'], 60000)");
like($err, qr/53400: role "alice" has 2 locks .*DETAIL:.*Each resource of the set is a lock: 4 more/s,
	'a set that would pass the limit is refused whole (the count before it, and what it asks)');
is($redis->holding('t1', 0) + $redis->holding('t3', 0), 0, '... none of its keys set');
($out) = sql($a1, "SELECT redlock_acquire('u1', 60000), redlock_acquire('u2', 60000), redlock_acquire('u3', 60000)");
is($out, 't|t|t', '... and the role is left as it was: 3 locks fit');
($out) = sql($a1, 'SELECT redlock_release_all()');
is($out, '5', 'alice releases her 5 locks');
($out) = sql($a1, "SELECT redlock_acquire(ARRAY['t1', 't2', 't3', 't4', 't5'], 60000)");
is($out, 't', 'a set of 5 fits then');
sql($a1, 'SELECT redlock_release_all()');
($out) = sql($a1, "SELECT redlock_acquire('keep', 60000)");
is($out, 't', 'alice keeps one lock (her role stays counted)');

# --- the shared table counts at most MaxBackends + 1000 roles ---

my ($max_roles) = $node->safe_psql('postgres',
	"SELECT current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int + 1"
	  . " + current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int + 1000");
my $flood = $max_roles + 10;
$node->safe_psql('postgres', "DO \$\$ BEGIN FOR i IN 1 .. $flood LOOP"
	  . " EXECUTE format('CREATE ROLE flood_%s IN ROLE quota_users', i); END LOOP; END \$\$");
($out, $err) = sql($su, join('', map {
			"SET SESSION AUTHORIZATION flood_$_; SELECT redlock_claim('flood-$_', 30000); RESET SESSION AUTHORIZATION;\n"
		} 1 .. $flood));
my $claimed = () = $out =~ /^t$/mg;
note "$claimed roles of $flood claimed; the table counts at most $max_roles";
ok($claimed >= 1000 && $claimed < $max_roles, "roles claim until the table is full ($claimed)");
like($err, qr/ERROR:\s+53400: too many roles have locks on the Redis masters from this cluster\nDETAIL:\s+Locks and claims are counted for at most $max_roles roles at once/,
	'one more role is refused with 53400, naming the table\'s size');
is($redis->holding("flood-$flood", 0), 0, '... and sends nothing');
($out) = sql($a1, "SELECT redlock_acquire('keep-2', 60000)");
is($out, 't', 'a role counted already goes on');

# --- once claims expire, their role claims again, and their roles make room ---

ok(wait_until(90, sub { (sql($carol, "SELECT redlock_claim('claim-7', 2000)"))[0] eq 't' }),
	'carol claims again once her claims expired');
ok(wait_until(90, sub {
			(sql($su, "SET SESSION AUTHORIZATION flood_$flood; SELECT redlock_claim('flood-again', 2000);"
				  . " RESET SESSION AUTHORIZATION;"))[0] eq 't';
		}), 'a new role claims once the roles whose claims ran out are swept out');
sql($a1, 'SELECT redlock_release_all()');

$_->quit for ($carol, $bob, $a1, $su);
ok(wait_until(60, sub { !grep { $_ ne '0' } $redis->redis_all('DBSIZE') }), 'every claim expired');
$redis->no_keys_left;
RedisMasters::no_crash($node);
done_testing();
