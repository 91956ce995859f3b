# An acquire that is willing to wait rides out a blip of the masters: an attempt that
# fewer than a quorum answered (08006) is undone and retried like a busy one until the
# wait runs out.  With 3 of 5 masters frozen for 1 s, wait_ms 5000 acquires once they
# thaw; wait_ms 0 with redlock.quorum_timeout = 0 still fails at once, after one attempt
# (with the default, a try-lock rides out slow masters too: 072); a wait shorter than the blip
# ends in 08006 naming the masters of its last attempt.  The failed attempts' SETs that
# the frozen masters run late are undone behind them (each undo follows its SET on the
# same connection): afterwards every master holds the winner's token, and nothing is
# left once it is released.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql);
use RedisMasters;

my $redis = RedisMasters->new(5);
# A request waits 300 ms for a master, so that a 1 s blip outlasts an attempt.
my $node = RedisMasters::redlock_node('blip', $redis,
	"redlock.timeout = 300ms\nredlock.connect_timeout = 2000ms\nredlock.retry_delay = 100\n"
	  . $RedisMasters::DEBUG_CONF);
my $s = session($node);
my ($out, $err, $secs);

# Acquire attempts and unavailable attempts this session made so far (not preloaded:
# redlock_stats() counts the backend's own).
sub attempts
{
	my ($row) = sql($s, "SELECT attempts || '|' || unavailable FROM redlock_stats()");
	return split /\|/, $row;
}

# --- wait_ms 0 fails at once: one attempt ---

($out) = sql($s, "SELECT redlock_acquire('warm', 30000) AND redlock_release('warm')");
is($out, 't', 'connections open, their handshakes answered');
my ($a0, $u0) = attempts();
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($s, "SET redlock.quorum_timeout = 0; SELECT redlock_acquire('blip-now', 30000, 0)");
$redis->cont($_) for 0 .. 2;
sql($s, "RESET redlock.quorum_timeout");
like($err, qr/08006.*could not acquire lock on resource "blip-now": 2 of 5 Redis masters answered, 3 needed/s,
	'wait_ms 0 with 3 of 5 masters frozen: 08006');
my ($a1, $u1) = attempts();
is($a1 - $a0, 1, '... after one attempt');
is($u1 - $u0, 1, '... that fewer than a quorum answered');

# --- a wait outlasts a 1 s blip ---

# What the frozen masters owed is read first (a later reply would count as progress).
($out) = sql($s, "SELECT redlock_acquire('warm', 30000) AND redlock_release('warm')");
is($out, 't', 'the thawed masters answer again');
my @children = map { $redis->freeze_for($_, 1000) } 0 .. 2;
($out, $err, $secs) = sql($s, "SELECT redlock_acquire('blip-wait', 30000, 5000)");
waitpid($_, 0) for @children;
is($out, 't', "wait_ms 5000 with 3 of 5 masters frozen for 1 s: acquired (in ${secs}s)")
  or diag($err);
my ($a2, $u2) = attempts();
cmp_ok($u2 - $u1, '>=', 1, '... after riding out attempts that fewer than a quorum answered');
cmp_ok($a2 - $a1, '>=', 2, '... and retrying (' . ($a2 - $a1) . ' attempts)');
# The winner's SET may still wait, unsent, in a new connection to a master that had
# failed (the next call sends it): a quorum holds the key, and no master another token.
my $one_token = sub {
	my %tokens = map { $_ => 1 } grep { $_ ne '' } @_;
	my ($t) = keys %tokens;
	return keys %tokens == 1 && $t =~ /^[0-9a-f]{40}$/ && (grep { $_ eq $t } @_) >= 3;
};
my @now = $redis->wait_all(5, $one_token, 'GET', 'blip-wait');
ok($one_token->(@now),
	'... a quorum holds the winning token and no master another: the late SETs were undone behind them')
  or diag("GET blip-wait: @now");
($out) = sql($s, "SELECT redlock_release('blip-wait')");
is($out, 't', '... and it is released');

# --- a wait shorter than the blip ends in 08006, with the last attempt's detail ---

$redis->stop($_) for 0 .. 2;
($out, $err, $secs) = sql($s, "SELECT redlock_acquire('blip-short', 30000, 1500)");
$redis->cont($_) for 0 .. 2;
like($err, qr/08006.*could not acquire lock on resource "blip-short": 2 of 5 Redis masters answered, 3 needed/s,
	'wait_ms 1500 with 3 of 5 masters frozen throughout: 08006');
like($err, qr/DETAIL:.*127\.0\.0\.1:\d+: .*time/si, '... naming the masters that did not answer');
cmp_ok($secs, '>=', 1.5, "... once the wait ran out (took ${secs}s)");
my ($a3, $u3) = attempts();
cmp_ok($a3 - $a2, '>=', 2, '... after retrying (' . ($a3 - $a2) . ' attempts)');
is($u3 - $u2, $a3 - $a2, '... every one of them unanswered by a quorum');

$redis->no_keys_left('no key left on any master: every failed attempt was undone');

done_testing();
