# Waiting for a lock: wait_ms long enough gets it when the holder lets go, wait_ms too
# short gives false, and a wait without limit (NULL) ends on statement_timeout (57014),
# lock_timeout (55P03) or a cancel (57014).  While it waits, pg_stat_activity shows
# wait_event_type 'Extension'; the cancel is sent once it does.  A cancel while requests
# to hung (SIGSTOPped) masters are in flight: 57014 within one redlock.timeout (the undo
# on the hung masters waits that long); once the masters resume, no stray key of the
# cancelled attempt, and the next call in the same session works.  With
# redlock.retry_delay 0 the retries are not a hot loop (at most one attempt per ms).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('wait', $redis, $RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF);
my $holder = session($node);
my $waiter = session($node);

my ($out, $err, $secs);

($out) = sql($holder, "SELECT redlock_acquire('w', 30000)");
is($out, 't', 'holder acquires w');
is($redis->holding('w', 5), 5, 'all masters hold w');
my $token = $redis->redis_cli(0, 'GET', 'w');

# Has the holder release w after 300 ms, without waiting for it.
sub release_later
{
	$holder->start("SELECT pg_sleep(0.3), redlock_release('w')");
}

# Collects the output of release_later's query.
sub release_done
{
	my ($res, $e) = $holder->finish;
	is($res, '|t', 'the holder released w') or diag($e);
}

# --- a wait that outlasts the holder succeeds ---

release_later();
($out, $err, $secs) = sql($waiter, "SELECT redlock_acquire('w', 30000, 5000)");
is($out, 't', 'acquire with wait_ms 5000 gets the lock released after ~300 ms');
cmp_ok($secs, '>=', 0.15, "... after waiting for it (took ${secs}s)");
cmp_ok($secs, '<', 3, '... well before wait_ms ran out');
release_done();
my $waiters = sub {
	!grep { $_ eq $token || $_ ne $_[0] || !/^[0-9a-fA-F]{40}$/ } @_;
};
my @now = $redis->wait_all(3, $waiters, 'GET', 'w');
ok($waiters->(@now),
	'every master now holds the waiter\'s token') or diag "GET w: @now (holder's: $token)";
sql($waiter, "SELECT redlock_release('w')");

# The same with wait_ms NULL (no limit).
sql($holder, "SELECT redlock_acquire('w', 30000)");
release_later();
($out, $err, $secs) = sql($waiter, "SELECT redlock_acquire('w', 30000, NULL)");
is($out, 't', 'acquire with wait_ms NULL gets the lock released after ~300 ms');
cmp_ok($secs, '<', 3, "... promptly (took ${secs}s)");
release_done();

# Now the waiter holds w, the holder waits.
# --- a wait too short gives false ---

($out, $err, $secs) = sql($holder, "SELECT redlock_acquire('w', 30000, 300)");
is($out, 'f', 'acquire with wait_ms 300 on a held lock returns false');
is($err, '', '... without error');
cmp_ok($secs, '<', 3, "... after a bounded wait (took ${secs}s)");

($out, $err, $secs) = sql($holder, "SELECT redlock_acquire('w', 30000, 0)");
is($out, 'f', 'wait_ms 0: one attempt, false');
cmp_ok($secs, '<', 2, "... at once, well before a retry could give it (took ${secs}s)");

# --- waits without limit end on statement_timeout, lock_timeout, cancel ---

sql($holder, "SET statement_timeout = '700ms'");
($out, $err, $secs) = sql($holder, "SELECT redlock_acquire('w', 30000, NULL)");
like($err, qr/ERROR:\s+57014: canceling statement due to statement timeout/,
	'statement_timeout interrupts a wait_ms NULL wait (57014)');
cmp_ok($secs, '>=', 0.6, "... not before the timeout (took ${secs}s)");
cmp_ok($secs, '<', 4, '... and soon after it');
sql($holder, "RESET statement_timeout");

sql($holder, "SET lock_timeout = '700ms'");
($out, $err, $secs) = sql($holder, "SELECT redlock_acquire('w', 30000, NULL)");
like($err, qr/ERROR:\s+55P03: canceling statement due to lock timeout/,
	'lock_timeout interrupts a wait_ms NULL wait with SQLSTATE 55P03');
cmp_ok($secs, '>=', 0.6, "... not before the timeout (took ${secs}s)");
cmp_ok($secs, '<', 4, "... soon after the timeout (took ${secs}s)");
sql($holder, "RESET lock_timeout");

# A cancel, sent once the waiter is seen waiting in pg_stat_activity.
my $holder_pid = $holder->pid;
$holder->start("SELECT redlock_acquire('w', 30000, NULL)");
my $wait_event;
ok( wait_until(
		30,
		sub {
			($wait_event) = sql($waiter,
				"SELECT wait_event_type || ':' || coalesce(wait_event, '') FROM pg_stat_activity"
				  . " WHERE pid = $holder_pid AND state = 'active'");
			return ($wait_event // '') =~ /^Extension:/;
		}),
	"the waiting backend shows wait_event_type 'Extension' in pg_stat_activity")
  or diag("pg_stat_activity: " . ($wait_event // 'no active row'));
my $t0 = time;
($out) = sql($waiter, "SELECT pg_cancel_backend($holder_pid)");
is($out, 't', 'cancel sent to the waiting backend');
($out, $err) = $holder->finish;
like($err, qr/ERROR:\s+57014: canceling statement due to user request/,
	'a cancel interrupts the wait (57014)');
cmp_ok(time - $t0, '<', 3, 'the cancel takes effect promptly');

($out) = sql($holder, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'interrupted waits leave no lock behind');
is($redis->holding('w', 5), 5, 'the key is still there');
($out) = sql($waiter, "SELECT redlock_release('w')");
is($out, 't', 'the real holder still holds w and releases it');
is($redis->holding('w', 0), 0, 'w is gone from every master');

# --- a cancel while requests to hung masters are in flight ---

# A request timeout of 3 s, so that the acquire is still waiting for the frozen masters
# (not giving up on them) when the cancel comes.  The undo that follows the cancel is
# not interrupted and waits for the frozen masters up to redlock.timeout (README: in
# transaction hooks network work "is not interrupted" and bounded by the same timeouts):
# with redlock.timeout = 60 s the cancel took 60 s.  So "promptly" is "within about one
# redlock.timeout".  The waiter is cancelled; the holder watches.
sql($waiter, "SET redlock.timeout = 3000");
$redis->stop($_) for 2 .. 4;
my $pid = $waiter->pid;
$waiter->start("SELECT redlock_acquire('cancelled', 30000)");
ok( wait_until(
		30,
		sub {
			($wait_event) = sql($holder,
				"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid AND state = 'active'");
			return ($wait_event // '') eq 'Extension';
		}),
	'the acquire waits on the frozen masters (wait_event_type Extension)');
usleep(200_000);
$t0 = time;
($out) = sql($holder, "SELECT pg_cancel_backend($pid)");
is($out, 't', 'cancel sent while the requests to 3 frozen masters are in flight');
($out, $err) = $waiter->finish;
like($err, qr/ERROR:\s+57014: canceling statement due to user request/, 'the acquire is cancelled (57014)');
my $cancel_secs = time - $t0;
cmp_ok($cancel_secs, '<', 3 + 3,
	"... within about one redlock.timeout (3 s) for the undo (took ${cancel_secs}s)");
$redis->cont($_) for 2 .. 4;
# The frozen masters now run the SET NX they had queued; the attempt must be undone there
# too.  Its TTL is 30 s: a key still there after 10 s is a stray.
ok(wait_until(10, sub { $redis->holding('cancelled') == 0 }),
	'no stray key of the cancelled attempt on any master once the masters resumed')
  or diag('EXISTS: ' . join(',', $redis->redis_all('EXISTS', 'cancelled'))
	  . '; PTTL: ' . join(',', $redis->redis_all('PTTL', 'cancelled')));
($out) = sql($waiter, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'the cancelled attempt left no lock in the session');
($out, $err) = sql($waiter, "SELECT redlock_acquire('after-cancel', 30000)");
is($out, 't', 'the next acquire in the same session works');
is($err, '', '... without error or warning');
is($redis->holding('after-cancel', 5), 5, '... on all 5 masters (connections usable)');
($out, $err) = sql($waiter, "SELECT redlock_release('after-cancel')");
is($out, 't', '... and so does its release');
is($redis->holding('after-cancel', 0), 0, '... everywhere');
$redis->redis_all('DEL', 'cancelled');
sql($waiter, "RESET redlock.timeout");

# --- retry_delay 0 is not a hot loop ---

sql($holder, "SELECT redlock_acquire('hot', 30000)");
($out) = sql($waiter, "SELECT redlock_stats_reset(); SET redlock.retry_delay = 0; SET redlock.retry_jitter = 0;"
	  . " SELECT redlock_acquire('hot', 30000, 500); SELECT attempts FROM redlock_stats();");
my ($attempts) = $out =~ /(\d+)$/;
cmp_ok($attempts, '<=', 550, "retry_delay 0: $attempts attempts in 500 ms (at most one per ms)");
sql($holder, "SELECT redlock_release('hot')");
sql($waiter, "RESET redlock.retry_delay; RESET redlock.retry_jitter");

$holder->quit;
$waiter->quit;
RedisMasters::no_crash($node);
done_testing();
