# Waiters are visible: redlock_waiters() lists each backend of this cluster that waits for
# a busy lock, with its pid, the resource, when its wait began and the attempts made so
# far (the resource without redlock.key_prefix).  The resource is shown as
# pg_stat_activity shows a query: to the waiting role, to
# members of pg_read_all_stats and to superusers; to other roles it is NULL.  Once the
# waiter gets the lock, its row is gone.  A LATIN1 database shows a resource in its own
# encoding, or NULL when it cannot.  Without the library preloaded (no waiter board)
# there are no rows.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
# A key prefix, which the resource column leaves out.
my $node = RedisMasters::redlock_node('waiters', $redis,
	$RedisMasters::ROOMY_CONF . "shared_preload_libraries = 'redlock'\nredlock.key_prefix = 'app1:'\n");
$node->safe_psql('postgres', q{
CREATE ROLE regress_job LOGIN;
CREATE ROLE regress_stranger LOGIN;
CREATE ROLE regress_monitor LOGIN IN ROLE pg_read_all_stats;
GRANT EXECUTE ON FUNCTION redlock_acquire(text, integer, integer), redlock_release(text)
   TO regress_job;
GRANT EXECUTE ON FUNCTION redlock_waiters() TO regress_job, regress_stranger, regress_monitor;
});

my $holder = session($node);
my $waiter = session($node, 'postgres', extra_params => [ '-U', 'regress_job' ]);
my $stranger = session($node, 'postgres', extra_params => [ '-U', 'regress_stranger' ]);
my $monitor = session($node, 'postgres', extra_params => [ '-U', 'regress_monitor' ]);
my $out;

($out) = sql($holder, "SELECT redlock_acquire('nightly-billing', 30000)");
is($out, 't', 'the holder acquires nightly-billing');
($out) = sql($holder, "SELECT count(*) FROM redlock_waiters()");
is($out, '0', 'nobody waits yet: no rows');
is($redis->holding('app1:nightly-billing', 5), 5, 'the key on the masters has the prefix');

my ($waiter_pid) = sql($waiter, 'SELECT pg_backend_pid()');
$waiter->start("SELECT redlock_acquire('nightly-billing', 30000, NULL)");

# The waiter's row, once it shows an attempt.
my $row;
wait_until(10, sub {
	($row) = sql($holder, "SELECT pid, resource, attempts FROM redlock_waiters()");
	return $row =~ /\|(\d+)$/ && $1 >= 1;
});
like($row, qr/^$waiter_pid\|nightly-billing\|\d+$/,
	"the waiter's row: its pid ($waiter_pid) and the resource ($row)");
my ($attempts) = $row =~ /\|(\d+)$/;
cmp_ok($attempts, '>=', 1, "... and its attempts so far ($attempts)");
($out) = sql($holder,
	"SELECT waiting_since BETWEEN now() - interval '15 s' AND clock_timestamp() FROM redlock_waiters()");
is($out, 't', '... and when its wait began: within the last seconds');
# (Polled: between its waits the waiter runs, and shows no wait event for that moment.)
ok(wait_until(5, sub {
			(sql($holder,
				"SELECT w.pid = a.pid AND a.wait_event IS NOT NULL FROM redlock_waiters() w JOIN pg_stat_activity a USING (pid)"))[0] eq 't';
		}),
	'... which joins pg_stat_activity, where it shows a wait event');

($out) = sql($stranger, "SELECT pid, resource IS NULL FROM redlock_waiters()");
is($out, "$waiter_pid|t", 'another role sees the waiter but not its resource (NULL)');
($out) = sql($monitor, "SELECT resource FROM redlock_waiters()");
is($out, 'nightly-billing', 'a member of pg_read_all_stats sees the resource');

($out) = sql($holder, "SELECT redlock_release('nightly-billing')");
is($out, 't', 'the holder releases');
my ($got) = $waiter->finish;
is($got, 't', 'the waiter acquires');
($out) = sql($holder, "SELECT count(*) FROM redlock_waiters()");
is($out, '0', '... and its row is gone');
sql($waiter, "SELECT redlock_release('nightly-billing')");

# --- names in the database's encoding ---
# Seen from a LATIN1 database, the waiter for café (whose key is the UTF-8 name) shows
# café, and the waiter for a name that LATIN1 cannot show shows NULL.

$node->safe_psql('postgres',
	"CREATE DATABASE latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
$node->safe_psql('latin1', 'CREATE EXTENSION redlock');
my $latin1 = session($node, 'latin1');
sql($latin1, "SET client_encoding = 'UTF8'");
($out) = sql($holder, "SELECT redlock_acquire('café', 30000) AND redlock_acquire('語', 30000)");
is($out, 't', 'the holder acquires café and 語');
my @named = (session($node), session($node));
$named[0]->start("SELECT redlock_acquire('café', 30000, 30000)");
$named[1]->start("SELECT redlock_acquire('語', 30000, 30000)");
ok(wait_until(10, sub { (sql($latin1, "SELECT count(*) FROM redlock_waiters()"))[0] eq '2' }),
	'a LATIN1 database sees the two waiters');
($out) = sql($latin1,
	"SELECT string_agg(coalesce(resource, '(null)'), ',' ORDER BY resource) FROM redlock_waiters()");
is($out, 'café,(null)', "... café's as café, and NULL for 語, which LATIN1 cannot show");
sql($holder, "SELECT redlock_release('café'), redlock_release('語')");
for my $w (@named)
{
	my ($got) = $w->finish;
	is($got, 't', '... each waiter acquires once released');
	sql($w, "SELECT redlock_release_all()");
	$w->quit;
}
$latin1->quit;

# --- not preloaded: no board, no rows ---

my $plain = RedisMasters::redlock_node('plain', $redis, $RedisMasters::ROOMY_CONF);
my $plain_holder = session($plain);
my $plain_waiter = session($plain);
sql($plain_holder, "SELECT redlock_acquire('plain-lock', 30000)");
$plain_waiter->start("SELECT redlock_acquire('plain-lock', 30000, 3000)");
wait_until(5, sub {
	my ($n) = sql($plain_holder,
		"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%plain-lock%30000, 3000%' AND wait_event IS NOT NULL");
	return $n eq '1';
});
($out) = sql($plain_holder, "SELECT count(*) FROM redlock_waiters()");
is($out, '0', 'without the library preloaded: no rows, although a backend waits');
sql($plain_holder, "SELECT redlock_release('plain-lock')");
($got) = $plain_waiter->finish;
is($got, 't', '... and the waiter acquires once it is released');
sql($plain_waiter, "SELECT redlock_release('plain-lock')");

$redis->no_keys_left;

done_testing();
