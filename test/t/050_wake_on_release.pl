# Waiting without polling (issue 9), on two clusters sharing five masters: "auto" has
# redlock preloaded (its worker subscribes to release announcements), "plain" does not.
# Waiters use a retry delay of several seconds, so that acquiring within a fraction of
# it shows that a wake-up, not a retry, ended the wait:
# - wake on release: a release on the other cluster wakes the waiter (through the
#   worker's subscription), a release in the same cluster wakes it directly; one
#   waiter a release per cluster, the longest-waiting first; a session that starts
#   waiting while another waits queues behind it (even right after its own release);
# - wake on expiry: a refused attempt learns the keys' PTTL and retries when they expire;
# - subscriptions only while someone waits: none while nobody does (a release then costs
#   no message), one per master for a key waited for, however many sessions wait for it,
#   dropped after the wait; a release made before the subscription took effect is
#   caught up at once;
# - fallback: the worker frozen (the announcement is lost) costs one retry delay; a
#   master restarted during a wait is subscribed to again; the plain cluster polls;
# - cancel, statement_timeout and lock_timeout end a wait and leave no waiter behind.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('auto', $redis,
	$RedisMasters::ROOMY_CONF . "shared_preload_libraries = 'redlock'\n");
my $other = RedisMasters::redlock_node('plain', $redis, $RedisMasters::ROOMY_CONF);
my ($out, $err, $secs);

my $slow = 'SET redlock.retry_delay = 5000; SET redlock.retry_jitter = 0';

sub waiting
{
	return $node->safe_psql('postgres', 'SELECT waiting_backends FROM redlock_stats()');
}

sub wakeups
{
	return $node->safe_psql('postgres', 'SELECT wakeups FROM redlock_stats()');
}

# The subscribers of RESOURCE's release channel on each master (key_prefix is empty).
sub numsub
{
	my ($resource) = @_;
	my @n = $redis->redis_all('PUBSUB', 'NUMSUB', "redlock:released:$resource");
	return map { (split /\s+/)[1] } @n;
}

# The release channels subscribed to on each master, "" when none.
sub channels
{
	return join('|', $redis->redis_all('PUBSUB', 'CHANNELS', 'redlock:released*'));
}

# Waits until every master has N subscribers of RESOURCE's release channel.
sub subscribed
{
	my ($resource, $n) = @_;
	return wait_until(10, sub { !grep { $_ ne $n } numsub($resource) });
}

sub busy
{
	return $node->safe_psql('postgres', 'SELECT busy FROM redlock_stats()');
}

# Starts WAITER's acquire of RESOURCE and returns once it is waiting and the worker has
# subscribed to the lock's release channel on every master.
sub start_wait
{
	my ($waiter, $resource, $wait) = @_;
	$waiter->start("SELECT redlock_acquire('$resource', 60000, $wait)");
	ok(wait_until(10, sub { waiting() eq '1' }),
		"the waiter for $resource is registered (waiting_backends = 1)");
	ok(subscribed($resource, 1), "... and the worker subscribed to its release channel on every master");
	return;
}

my $holder = session($other);
my $waiter = session($node);
my $waiter_pid = $waiter->pid;
sql($waiter, $slow);

my $wpid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");

# --- wake on release, across clusters ---

($out) = sql($holder, "SELECT redlock_acquire('handoff', 60000)");
is($out, 't', 'the plain cluster holds "handoff"');
my $wakeups = wakeups();
start_wait($waiter, 'handoff', 20000);
my $t_release = time;
sql($holder, "SELECT redlock_release('handoff')");
($out, $err) = $waiter->finish;
my $handoff = time - $t_release;
is($out, 't', 'the waiter acquires it once it is released on the other cluster');
cmp_ok($handoff, '<', 2.5,
	sprintf('... %.3f s after the release, well inside its 5 s retry delay: it was woken', $handoff));
cmp_ok(wakeups(), '>', $wakeups, '... and redlock_stats().wakeups counted the wake-up');
is(waiting(), '0', '... and it no longer waits');
sql($waiter, "SELECT redlock_release('handoff')");
ok(subscribed('handoff', 0), '... and the worker unsubscribed once nobody waited for it');
is(channels(), join('|', ('') x 5), '... leaving no release channel subscribed');

# --- a forced release wakes the waiters too ---

($out) = sql($holder, "SELECT redlock_acquire('forced', 60000)");
$wakeups = wakeups();
start_wait($waiter, 'forced', 20000);
$t_release = time;
$other->safe_psql('postgres', "SELECT redlock_force_release('forced')");
($out, $err) = $waiter->finish;
$handoff = time - $t_release;
is($out, 't', 'a waiter for a lock an operator force-releases (on the other cluster) acquires it');
cmp_ok(wakeups(), '>', $wakeups, '... woken by the forced release (redlock_stats().wakeups)');
cmp_ok($handoff, '<', 2.5,
	sprintf('... %.3f s after it, well inside its 5 s retry delay', $handoff));
sql($waiter, "SELECT redlock_release('forced')");
sql($holder, 'SET client_min_messages = error; SELECT redlock_release_all(); RESET client_min_messages');
# The forced release leaves its mark and the raised fencing counter: not this test's.
for my $i (0 .. 4)
{
	my @k = grep { /forced/ } split /\n/, $redis->redis_cli($i, 'KEYS', '*');
	$redis->redis_cli($i, 'DEL', @k) if @k;
}

# --- a release made before the subscription took effect is caught up ---

# The worker frozen while the wait begins: the release is announced to nobody, and the
# waiter (5 s retry delay) acquires because the worker, thawed, subscribes and has the
# oldest waiter try once more.
sql($holder, "SELECT redlock_acquire('catch-up', 60000)");
kill 'STOP', $wpid;
my $busy = busy();
$waiter->start("SELECT redlock_acquire('catch-up', 60000, 20000)");
ok(wait_until(10, sub { waiting() eq '1' && busy() > $busy }),
	'a waiter for "catch-up" is registered, and its first attempt was refused');
sql($holder, "SELECT redlock_release('catch-up')");
is(join(',', numsub('catch-up')), join(',', (0) x 5), '... and released before anyone subscribed');
$t_release = time;
kill 'CONT', $wpid;
($out) = $waiter->finish;
$handoff = time - $t_release;
is($out, 't', 'the waiter acquires it');
cmp_ok($handoff, '<', 2.5,
	sprintf('... %.3f s after the worker thawed, well inside its 5 s retry delay: caught up', $handoff));
sql($waiter, "SELECT redlock_release('catch-up')");

# --- wake on release, within the cluster ---

# The worker is frozen during the release, so that only the releasing backend's own
# wake-up can end the wait: the announcement waits in the frozen worker's socket.
my $local = session($node);
($out) = sql($local, "SELECT redlock_acquire('local-handoff', 60000)");
start_wait($waiter, 'local-handoff', 20000);
kill 'STOP', $wpid;
$t_release = time;
sql($local, "SELECT redlock_release('local-handoff')");
($out) = $waiter->finish;
$handoff = time - $t_release;
kill 'CONT', $wpid;
is($out, 't', 'a release in the same cluster hands the lock over');
cmp_ok($handoff, '<', 2.5,
	sprintf('... after %.3f s, with the worker frozen: the releasing backend woke it directly', $handoff));
sql($waiter, "SELECT redlock_release('local-handoff')");

# --- one waiter a release, the longest-waiting first ---

my $second = session($node);
sql($second, $slow);
($out) = sql($holder, "SELECT redlock_acquire('queue', 60000)");
start_wait($waiter, 'queue', 20000);
$second->start("SELECT redlock_acquire('queue', 60000, 20000)");
ok(wait_until(10, sub { waiting() eq '2' }), 'a second waiter for "queue" is registered');
is(join(',', numsub('queue')), join(',', (1) x 5), '... and the cluster still holds one subscription per master');
$wakeups = wakeups();
$t_release = time;
sql($holder, "SELECT redlock_release('queue')");
($out) = $waiter->finish;
is($out, 't', 'the release hands "queue" to the waiter that waited longest');
cmp_ok(time - $t_release, '<', 2.5, '... woken, not after its 5 s retry delay');
is(wakeups() - $wakeups, 1, '... and it alone was woken (one wake-up for the release)');
is(waiting(), '1', '... while the other still waits');
$t_release = time;
sql($waiter, "SELECT redlock_release('queue')");
($out) = $second->finish;
is($out, 't', 'the next release hands it to the other waiter');
cmp_ok(time - $t_release, '<', 2.5, '... woken in turn');
sql($second, "SELECT redlock_release('queue')");
$second->quit;

# --- a backend that starts waiting behind a waiter of its cluster queues behind it ---

# The releasing session asks again at once, in the same statement: it must not take the
# lock from under the waiter that the release has just woken.
sql($local, $slow);
($out) = sql($local, "SELECT redlock_acquire('no-barging', 60000)");
start_wait($waiter, 'no-barging', 20000);
$local->start("SELECT redlock_release('no-barging') AND redlock_acquire('no-barging', 60000, 20000)");
($out) = $waiter->finish;
is($out, 't', 'the waiter gets the lock its holder released and asked for again at once');
ok(wait_until(10, sub { waiting() eq '1' }),
	'... while the releasing session waits behind it');
$t_release = time;
sql($waiter, "SELECT redlock_release('no-barging')");
($out) = $local->finish;
is($out, 't', '... and gets it back when the waiter releases it');
cmp_ok(time - $t_release, '<', 2.5, '... woken, not after its 5 s retry delay');
sql($local, "SELECT redlock_release('no-barging')");

# --- wake on expiry ---

($out) = sql($holder, "SELECT redlock_claim('expiring', 1500)");
is($out, 't', 'the plain cluster claims "expiring" for 1.5 s (never released)');
my $t0 = time;
($out, $err, $secs) = sql($waiter, "SET redlock.retry_delay = 10000; SELECT redlock_acquire('expiring', 60000, 20000)");
is($out, 't', 'a waiter with a 10 s retry delay acquires it');
cmp_ok($secs, '<', 4, sprintf('... after %.3f s: it slept until the keys expired, not 10 s', $secs));
sql($waiter, "SELECT redlock_release('expiring'); SET redlock.retry_delay = 5000");

# --- no storm: a failed attempt's undo does not announce while another client holds a quorum ---

# The holder's keys are on masters 0-2 only (as after a minority restarted), so every
# attempt of the waiter wins masters 3 and 4 and must undo them.  Announcing those undos
# would wake the waiter itself (and every other waiter) into a retry loop.
sql($holder, "SELECT redlock_acquire('no-storm', 60000)");
$redis->redis_cli($_, 'DEL', 'no-storm') for 3, 4;
my ($attempts) = $node->safe_psql('postgres', 'SELECT attempts FROM redlock_stats()');
$wakeups = wakeups();
($out, $err, $secs) = sql($waiter, "SET redlock.retry_delay = 1000; SELECT redlock_acquire('no-storm', 60000, 3000)");
is($out, 'f', 'a waiter that wins only masters 3 and 4 of a lock held on 0-2 does not acquire it');
my $made = $node->safe_psql('postgres', 'SELECT attempts FROM redlock_stats()') - $attempts;
cmp_ok($made, '<=', 6, "... it made $made attempts in 3 s with a 1 s retry delay: no wake-up storm");
is(wakeups(), $wakeups, '... and its undos woke nobody');
is($redis->holding('no-storm', 3), 3, '... and left only the holder\'s 3 keys');
sql($holder, "SELECT redlock_release('no-storm')");
sql($waiter, 'SET redlock.retry_delay = 5000');

# --- a lost announcement (worker frozen): one retry delay ---

sql($holder, "SELECT redlock_acquire('lost-message', 60000)");
sql($waiter, 'SET redlock.retry_delay = 1500');
start_wait($waiter, 'lost-message', 20000);
kill 'STOP', $wpid;
$t_release = time;
sql($holder, "SELECT redlock_release('lost-message')");
($out) = $waiter->finish;
$handoff = time - $t_release;
kill 'CONT', $wpid;
is($out, 't', 'with the worker frozen the announcement is lost, and the waiter still acquires');
cmp_ok($handoff, '<', 1.5 + 1.5,
	sprintf('... after %.3f s: at most one retry delay (1.5 s) and an attempt', $handoff));
sql($waiter, "SELECT redlock_release('lost-message'); SET redlock.retry_delay = 5000");

# --- a master restarted during a wait is subscribed to again ---

sql($holder, "SELECT redlock_acquire('restart-wait', 60000)");
start_wait($waiter, 'restart-wait', 30000);
$redis->restart(0);
ok(subscribed('restart-wait', 1), 'master 0, restarted during the wait, is subscribed to again');
$t_release = time;
sql($holder, "SELECT redlock_release('restart-wait')");
($out) = $waiter->finish;
$handoff = time - $t_release;
is($out, 't', 'the waiter acquires it after the release');
cmp_ok($handoff, '<', 2.5, sprintf('... after %.3f s: woken', $handoff));
sql($waiter, "SELECT redlock_release('restart-wait')");

# --- the plain cluster polls ---

my $poller = session($other);
sql($poller, 'SET redlock.retry_delay = 1000; SET redlock.retry_jitter = 0');
sql($waiter, "SELECT redlock_acquire('polled', 60000)");
$poller->start("SELECT redlock_acquire('polled', 60000, 20000)");
usleep(300_000);
sql($waiter, "SELECT redlock_release('polled')");
($out) = $poller->finish;
is($out, 't', 'without the library preloaded a waiter polls, and acquires');
sql($poller, "SELECT redlock_release('polled')");

# --- cancel, statement_timeout, lock_timeout: the wait ends, no waiter is left ---

sql($holder, "SELECT redlock_acquire('blocked', 60000)");
start_wait($waiter, 'blocked', 'NULL');
my $t_cancel = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($waiter_pid)");
($out, $err) = $waiter->finish;
like($err, qr/57014/, sprintf('a cancelled wait ends (%.3f s after the cancel)', time - $t_cancel));
is(waiting(), '0', '... and leaves no waiter registered');
($out, $err, $secs) = sql($waiter, "SET statement_timeout = 300; SELECT redlock_acquire('blocked', 60000, NULL)");
like($err, qr/57014: canceling statement due to statement timeout/, 'statement_timeout ends a wait');
cmp_ok($secs, '<', 2, sprintf('... after %.3f s', $secs));
is(waiting(), '0', '... and leaves no waiter registered');
($out, $err, $secs) = sql($waiter, "RESET statement_timeout; SET lock_timeout = 300; SELECT redlock_acquire('blocked', 60000, NULL)");
like($err, qr/55P03/, 'lock_timeout ends a wait with 55P03');
is(waiting(), '0', '... and leaves no waiter registered');
sql($holder, "SELECT redlock_release('blocked')");

$waiter->quit;
$holder->quit;
$local->quit;
$poller->quit;
$redis->no_keys_left;
RedisMasters::no_crash($_) for $node, $other;
done_testing();
