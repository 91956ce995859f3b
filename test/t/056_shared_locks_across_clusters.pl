# Shared locks across clusters (issue 27, doc/shared.md): two clusters, alpha and beta,
# share five Redis masters.
# - Shared holders in both clusters at once: the key holds the marker on every master,
#   the readers hash both tokens and expiries, the key expires with the latest hold.
#   An exclusive acquire or a set sharing the resource is refused, and a shared acquire
#   is refused beside an exclusive holder, with one script call per master.
# - Release of one shared hold leaves the others; the last one deletes the key and
#   wakes an exclusive waiter in the other cluster.
# - A waiting writer's intent: on the masters while it waits, refusing new shared
#   holders; gone when it gets the lock; a killed writer's intent expires within its TTL.
# - A shared hold's expiry on the masters: one never released lets the writer in at its
#   TTL; its extension then finds it lost.  The worker keeps an auto-extended shared hold
#   past its TTL, and cancels its owner's statement when a forced release evicts it.  Two masters killed: still shared and exclusive, and exclusion holds.
#   A cancelled shared waiter and an exit leave no hold.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my ($alpha, $beta) = RedisMasters::preloaded_clusters($redis, undef, qw(alpha beta));
my ($a1, $a2, $b1, $b2) = (session($alpha), session($alpha), session($beta), session($beta));
my ($out, $err);
my $readers = "\xffreaders";
my $intent = "\xffintent";

# The masters (indexes) where KEY exists.
sub masters_with
{
	my ($key) = @_;
	my @v = $redis->redis_all('EXISTS', $key);
	return join(',', grep { $v[$_] eq '1' } 0 .. $#v);
}

# --- shared holders in two clusters; no exclusive holder beside them ---

($out) = sql($a1, "SELECT redlock_acquire_shared('catalog', 20000)");
is($out, 't', 'alpha: a shared hold of catalog');
($out) = sql($b1, "SELECT redlock_acquire_shared('catalog', 30000)");
is($out, 't', 'beta: a second shared hold of catalog beside it');
is(join(',', $redis->redis_all('GET', 'catalog')), join(',', ('redlock:shared') x 5),
	'the key holds the shared marker on every master');
is(join(',', $redis->redis_all('HLEN', "catalog$readers")), '3,3,3,3,3',
	'... and the readers hash two holds (and their latest expiry) on every master');
my @until = $redis->redis_all('HGET', "catalog$readers", '');
my @expire = $redis->redis_all('PEXPIRETIME', 'catalog');
is(join(',', @expire), join(',', @until), '... the key expires at the latest hold\'s expiry, on each master');
my @pttl = $redis->redis_all('PTTL', 'catalog');
ok(!grep({ $_ < 25000 || $_ > 30000 } @pttl), "... which is beta's, the later (PTTLs @pttl)");

my @scripts = $redis->calls;
my @sets = $redis->calls('set');
($out) = sql($a2, "SELECT redlock_acquire('catalog', 30000)");
is($out, 'f', 'alpha: an exclusive acquire is refused');
($out) = sql($a2, "SELECT redlock_acquire(ARRAY['catalog-x', 'catalog'], 30000)");
is($out, 'f', 'alpha: a set sharing catalog is refused');
is(masters_with('catalog-x'), '', '... and leaves nothing of itself');
($out) = sql($b2, "SELECT redlock_acquire('catalog', 30000, 300)");
is($out, 'f', 'beta: an exclusive acquire that waits 300 ms is refused');

($out) = sql($a2, "SELECT redlock_acquire('orders', 30000)");
# Settled: the acquire was decided at quorum, and its last SETs may still be on their way.
@scripts = $redis->settled_calls;
@sets = $redis->settled_calls('set');
($out) = sql($b2, "SELECT redlock_acquire_shared('orders', 30000)");
is($out, 'f', 'beta: a shared acquire beside an exclusive holder is refused');
$redis->wait_calls(\@scripts);
my @sets_after = $redis->calls('set');
is(join(',', map { $sets_after[$_] - $sets[$_] } 0 .. 4), '0,0,0,0,0', '... by its script alone, no SET');
is(join(',', $redis->redis_all('EXISTS', "orders$readers")), '0,0,0,0,0', '... no readers hash');
ok(!grep({ $_ eq 'redlock:shared' } $redis->redis_all('GET', 'orders')),
	'... and the exclusive holder\'s token is left alone');
sql($a2, "SELECT redlock_release('orders')");

# --- release: one hold, then the last, which wakes an exclusive waiter ---

($out) = sql($b1, "SELECT redlock_release('catalog')");
is($out, 't', 'beta: its shared hold is released');
is(join(',', $redis->redis_all('HLEN', "catalog$readers")), '2,2,2,2,2',
	'... one hold is left in the readers hash on every master');
is(masters_with('catalog'), '0,1,2,3,4', '... and the key stays');
my @until_after = $redis->redis_all('HGET', "catalog$readers", '');
ok(!grep({ $until_after[$_] >= $until[$_] } 0 .. 4),
	'... with an earlier expiry: alpha\'s, the one left');

sql($b2, 'SET redlock.retry_delay = 60000');
sql($b2, 'SET redlock.retry_jitter = 0');
my $b2_pid = $b2->pid;
$b2->start("SELECT redlock_acquire('catalog', 30000, 40000)");
ok(wait_until(10, sub { (sql($b1, "SELECT count(*) FROM redlock_waiters() WHERE resource = 'catalog'"))[0] eq '1' }),
	'beta: an exclusive acquire waits for the shared holder');
my $t_release = time;
($out) = sql($a1, "SELECT redlock_release('catalog')");
is($out, 't', 'alpha: the last shared hold is released');
ok(wait_until(15, sub { (sql($a2, "SELECT pid FROM redlock_lock_info('catalog')"))[0] eq $b2_pid }),
	'beta: the writer holds catalog within 15 s, with a 60 s retry delay: woken by the release');
note sprintf('beta took catalog within %.3f s of the last shared release', time - $t_release);
($out) = $b2->finish;
is($out, 't', '... and its acquire returns true');
is(join(',', $redis->redis_all('EXISTS', "catalog$readers")), '0,0,0,0,0',
	'... the readers hash went with the last hold');
sql($b2, 'RESET redlock.retry_delay');
sql($b2, 'RESET redlock.retry_jitter');
sql($b2, "SELECT redlock_release('catalog')");

# --- the writer's intent ---

sql($a1, "SELECT redlock_acquire_shared('ledger', 60000)");
my $writer = session($beta);
sql($writer, 'SET redlock.retry_delay = 100');
my $writer_pid = $writer->pid;
$writer->start("SELECT redlock_acquire('ledger', 30000, 30000)");
ok(wait_until(10, sub { masters_with("ledger$intent") eq '0,1,2,3,4' }),
	'beta: a waiting writer posts its intent on every master');
my @intent_ttl = $redis->redis_all('PTTL', "ledger$intent");
ok(!grep({ $_ <= 0 || $_ > 30000 } @intent_ttl), "... with its TTL (PTTLs @intent_ttl)");
($out) = sql($b1, "SELECT string_agg(coalesce(resource, '?') || ':' || held || ':' || masters, ',') FROM redlock_cluster_locks()");
is($out, 'ledger:true:5',
	'redlock_cluster_locks shows ledger held on 5 masters, and neither its readers hash nor the intent');
($out) = sql($a2, "SELECT redlock_acquire_shared('ledger', 60000)");
is($out, 'f', 'alpha: a new shared acquire is refused while the writer waits');
($out) = sql($b1, "SELECT redlock_acquire_shared('ledger', 60000, 500)");
is($out, 'f', 'beta: ... also after waiting 500 ms');
($out) = sql($a1, "SELECT redlock_extend('ledger', 60000)");
is($out, 't', 'alpha: the shared holder already in still extends its hold');
sql($a1, "SELECT redlock_release('ledger')");
($out) = $writer->finish;
is($out, 't', 'beta: the writer gets ledger when the shared holder leaves');
is(join(',', $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', "ledger$intent")),
	'0,0,0,0,0', '... and its intent is gone from every master');
sql($writer, "SELECT redlock_release('ledger')");
($out) = sql($a2, "SELECT redlock_acquire_shared('ledger', 60000)");
is($out, 't', 'alpha: shared holders are admitted again');

# A steady stream of overlapping readers (three, in both clusters, each holding 300 ms,
# then at once again, staggered) keeps the key marked without a gap: a writer still gets
# in, since its intent stops the stream, and the readers, who wait, get in after it.
my @stream = map { session($_) } $alpha, $beta, $alpha;
for my $k (0 .. 2)
{
	$stream[$k]->start("DO \$\$ BEGIN FOR i IN 1..20 LOOP"
		  . " IF NOT redlock_acquire_shared('stream', 10000, 10000) THEN RAISE 'reader refused'; END IF;"
		  . " PERFORM pg_sleep(0.3); PERFORM redlock_release('stream'); END LOOP; END \$\$");
	usleep(100_000);
}
usleep(500_000);
my $t_writer = time;
($out) = sql($b2, "SELECT redlock_acquire('stream', 10000, 8000)");
my $writer_waited = time - $t_writer;
is($out, 't', 'beta: a writer gets a resource that a stream of overlapping readers keeps marked');
cmp_ok($writer_waited, '<', 3, sprintf('... after %.2f s: its intent stopped the stream', $writer_waited));
sql($b2, "SELECT redlock_release('stream')");
for my $k (0 .. 2)
{
	($out, $err) = $stream[$k]->finish;
	is($err, '', "reader $k: every acquire of its stream succeeded, waiting behind the writer when it had to");
}
$_->quit for @stream;

# A writer cancelled while it waits: its intent expires within its short TTL (twice the
# gap between attempts, a deadlock check's three rounds included: 2 x (100 + 200 + 50 +
# 200 + 3 x 50) ms here).
my $doomed = session($beta);
sql($doomed, 'SET redlock.retry_delay = 100');
sql($doomed, 'SET redlock.timeout = 50');
sql($doomed, 'SET redlock.connect_timeout = 200');
my $doomed_pid = $doomed->pid;
$doomed->start("SELECT redlock_acquire('ledger', 30000, 30000)");
ok(wait_until(10, sub { masters_with("ledger$intent") eq '0,1,2,3,4' }),
	'beta: a second waiting writer posts its intent');
@intent_ttl = $redis->redis_all('PTTL', "ledger$intent");
ok(!grep({ $_ <= 0 || $_ > 1400 } @intent_ttl),
	"... with a TTL of at most 1.4 s, not the lock's 30 s (PTTLs @intent_ttl)");
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($doomed_pid)");
($out, $err) = $doomed->finish;
like($err, qr/57014/, '... cancelled (57014)');
my $t_cancel = time;
ok(wait_until(10, sub { masters_with("ledger$intent") eq '' }),
	'... its intent is gone from every master');
cmp_ok(time - $t_cancel, '<', 2, sprintf('... within %.1f s: its TTL', time - $t_cancel));
($out) = sql($b1, "SELECT redlock_acquire_shared('ledger', 60000)");
is($out, 't', 'beta: a shared acquire is admitted again');

# A writer whose masters are slow: each attempt's intent lives twice the gap with that
# attempt's patience in it (the timeout doubles with each slow attempt: 50, 100, 200,
# 400, 800 ms; an intent from the 400 ms attempt on lives 1,700 ms or more), not
# redlock.timeout's (2 x (100 + 0 + 50 + 200 + 150) = 1,000 ms here), which would let
# it expire between attempts.  Masters 0-2 frozen 2 s; 3 and 4 answer (busy: b1's
# shared hold), so each attempt is slow and is retried.  The session's connections are
# open before (a first attempt would wait for the frozen masters' handshakes instead).
my $slow_writer = session($beta);
sql($slow_writer, "SET redlock.retry_delay = 100; SET redlock.retry_jitter = 0; SET redlock.timeout = 50; SET redlock.connect_timeout = 200; SET redlock.quorum_timeout = '10s'");
sql($slow_writer, "SELECT count(*) FROM redlock_lock_info('ledger-warm')");
my $slow_pid = $slow_writer->pid;
my @kids = map { $redis->freeze_for($_, 2000) } 0 .. 2;
$slow_writer->start("SELECT redlock_acquire('ledger', 30000, 30000)");
my $longest = 0;
my $t_freeze = time;
while (time - $t_freeze < 2.2)
{
	for my $m (3, 4)
	{
		my $pttl = $redis->redis_cli($m, 'PTTL', "ledger$intent");
		$longest = $pttl if $pttl =~ /^\d+$/ && $pttl > $longest;
	}
	usleep(20_000);
}
waitpid($_, 0) for @kids;
cmp_ok($longest, '>', 1400,
	"beta: a writer's intent on slow masters lives as its attempts wait (longest PTTL seen $longest ms; 1,000 at redlock.timeout)");
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($slow_pid)");
($out, $err) = $slow_writer->finish;
like($err, qr/57014/, '... the writer cancelled (57014)');
ok(wait_until(10, sub { masters_with("ledger$intent") eq '' }),
	'... its intent is gone from every master');
$slow_writer->quit;
sql($b1, "SELECT redlock_release('ledger')");
sql($a2, "SELECT redlock_release('ledger')");

# --- expiry, extension, the worker ---

($out) = sql($a1, "SELECT redlock_acquire_shared('report', 1500)");
my $t0 = time;
($out) = sql($b1, "SELECT redlock_acquire('report', 30000, 20000)");
my $waited = time - $t0;
is($out, 't', 'beta: a writer gets report once a shared hold (TTL 1.5 s, never released) expires');
cmp_ok($waited, '<', 10, sprintf('... after %.1f s', $waited));
($out) = sql($a1, "SELECT redlock_extend('report', 30000)");
is($out, 'f', 'alpha: the expired shared hold\'s extension finds it lost');
($out) = sql($a1, "SELECT count(*) FROM redlock_locks()");
is($out, '0', '... and forgets it');
sql($b1, "SELECT redlock_release('report')");

# A hold that expired while another keeps the key marked is lost too: its extension
# finds it expired on every master, not revived.
sql($a1, "SELECT redlock_acquire_shared('report-2', 1000)");
sql($b1, "SELECT redlock_acquire_shared('report-2', 30000)");
usleep(1_500_000);
($out) = sql($a1, "SELECT redlock_extend('report-2', 30000)");
is($out, 'f', 'alpha: a shared hold expired beside a live one is not extended: lost');
($out) = sql($b1, "SELECT redlock_extend('report-2', 30000)");
is($out, 't', 'beta: the live one extends');
sql($b1, "SELECT redlock_release('report-2')");

my $job = session($alpha);
sql($job, 'SET redlock.auto_extend = on');
($out) = sql($job, "SELECT redlock_acquire_shared('nightly', 1500)");
is($out, 't', 'alpha: an auto-extended shared hold, TTL 1.5 s');
usleep(4_000_000);
($out) = sql($job, "SELECT validity_ms > 0 AND renewals > 0 AND NOT lost FROM redlock_locks()");
is($out, 't', '... still valid 4 s later, renewed by the worker');
($out) = sql($b1, "SELECT redlock_acquire('nightly', 30000)");
is($out, 'f', '... and still keeps an exclusive holder out');
($out) = sql($b1, "SELECT redlock_acquire_shared('nightly', 30000)");
is($out, 't', '... but not a shared one');
sql($job, "SELECT redlock_release('nightly')");
sql($b1, "SELECT redlock_release('nightly')");

# An auto-extended shared hold evicted by redlock_force_release: the worker's next
# renewal finds it gone, and the owner's running statement is cancelled (cancel on loss).
($out) = sql($job, "SELECT redlock_acquire_shared('evicted', 1500)");
is($out, 't', 'alpha: an auto-extended shared hold of evicted, TTL 1.5 s');
$job->start("SELECT pg_sleep(20)");
usleep(300_000);
($out) = sql($b1, "SELECT redlock_force_release('evicted')");
is($out, '5', 'beta: redlock_force_release deletes it on all 5 masters');
is(join(',', $redis->redis_all('EXISTS', "evicted$readers")), '0,0,0,0,0', '... with its readers hash');
my (undef, $evicted_err, $evicted_secs) = $job->finish;
like($evicted_err, qr/57014.*evicted/s, "... and the owner's statement is cancelled, naming the lock (57014)");
cmp_ok($evicted_secs, '<', 5, sprintf('... after %.1f s, not the 20 s sleep', $evicted_secs));
($out) = sql($job, "SELECT count(*) FROM redlock_locks() WHERE NOT lost");
is($out, '0', '... and it holds nothing it believes valid');
sql($job, "SELECT redlock_release_all()");

# --- masters fail ---

$redis->kill9($_) for 3, 4;
($out) = sql($a1, "SELECT redlock_acquire_shared('stock', 30000)");
is($out, 't', 'masters 3 and 4 killed: a shared hold on the other three');
($out) = sql($b1, "SELECT redlock_acquire_shared('stock', 30000)");
is($out, 't', '... and a second one');
($out) = sql($b2, "SELECT redlock_acquire('stock', 30000)");
is($out, 'f', '... which exclude an exclusive holder');
sql($_, "SELECT redlock_release('stock')") for $a1, $b1;
($out) = sql($b2, "SELECT redlock_acquire('stock', 30000)");
is($out, 't', '... released, the exclusive holder gets it');
($out) = sql($a1, "SELECT redlock_acquire_shared('stock', 30000)");
is($out, 'f', '... and excludes a shared holder');
sql($b2, "SELECT redlock_release('stock')");
$redis->restart($_) for 3, 4;
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($b1, "SELECT redlock_acquire_shared('stock', 30000)");
like($err, qr/08006.*resource "stock": 2 of 5 Redis masters answered, 3 needed/,
	'three of five frozen: 08006');
$redis->cont($_) for 0 .. 2;

# --- a cancelled shared waiter, an exit ---

sql($a1, "SELECT redlock_acquire('queue', 60000)");
sql($b2, 'SET redlock.retry_delay = 50');
$b2_pid = $b2->pid;
$b2->start("SELECT redlock_acquire_shared('queue', 30000, NULL)");
ok(wait_until(10, sub { (sql($b1, "SELECT attempts > 2 FROM redlock_waiters()"))[0] eq 't' }),
	'beta: a shared waiter retries');
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($b2_pid)");
($out, $err) = $b2->finish;
like($err, qr/57014/, '... until cancelled (57014)');
is(join(',', $redis->redis_all('EXISTS', "queue$readers")), '0,0,0,0,0', '... and leaves no hold');
sql($a1, "SELECT redlock_release('queue')");

my $leaver = session($alpha);
sql($leaver, "SELECT redlock_acquire_shared('queue', 60000)");
$leaver->quit;
($out) = sql($b1, "SELECT redlock_acquire('queue', 30000, 10000)");
is($out, 't', "alpha: a shared holder's exit releases its hold for a writer");
sql($b1, "SELECT redlock_release_all()");

$_->quit for ($a1, $a2, $b1, $b2, $job, $writer, $doomed);
# Only the fencing counter redlock_force_release raised is left, on masters 0-2 (masters 3
# and 4 were killed and restarted empty after it).
my @dbsize = $redis->wait_all(5, sub { join(',', @_) eq '1,1,1,0,0' }, 'DBSIZE');
is(join(',', @dbsize), '1,1,1,0,0',
	'every key, hash and intent gone from every master; the fencing counter left on masters 0-2');
RedisMasters::no_crash($_) for $alpha, $beta;
done_testing();
