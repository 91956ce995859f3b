# A burst of new sessions (issue 42): what a new backend's first call asks of the
# masters, and how an acquire rides out masters that are slow rather than gone.
#
# - Scripts once per master (src/wire/node.c): a new connection asks SCRIPT EXISTS and
#   loads only what the master lacks; a master's script cache serves every later
#   connection, and one that lost it (SCRIPT FLUSH) is loaded again.
# - A new session's first call goes out behind its handshake when the handshake has no
#   AUTH or SELECT: a frozen master does not hold up the first acquire (it used to wait
#   redlock.connect_timeout for it).  The script commands sent before the handshake is
#   answered go whole (EVAL): an EVALSHA refused NOSCRIPT there would be sent again
#   after the next attempt's SET, which it would find taken.
# - The handshake's budget is redlock.connect_timeout, not redlock.timeout.
# - A connection to a master that is only slow is kept for redlock.quorum_timeout, not
#   reopened at each attempt (each reopening queues one more handshake there).
# - redlock.quorum_timeout (src/protocol/retry.c's invariant): a try-lock whose masters
#   were too slow to make a quorum is retried; one whose masters are gone (refused) is
#   not; 0 turns the retries off.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('new_sessions', $redis, $RedisMasters::DEBUG_CONF);
my ($out, $err);

# Each master's count of CMD (lower case, as INFO commandstats names it).
sub counts { return join(',', $redis->calls(@_)); }

# Each listed master's total_connections_received (the question itself counts one).
sub connections
{
	return map { ($redis->redis_cli($_, 'INFO', 'stats') =~ /total_connections_received:(\d+)/)[0] }
	  @_;
}

# A new session (a new backend) with SETTINGS (a string of SET statements) applied.
sub new_session
{
	my ($settings) = @_;
	my $s = session($node);
	sql($s, $settings) if $settings;
	return $s;
}

# Runs QUERY in session S; returns (out, err, seconds).
sub timed
{
	my ($s, $query) = @_;
	my $t0 = time;
	my ($o, $e) = sql($s, $query);
	return ($o, $e, time - $t0);
}

# --- scripts: loaded once per master, not once per connection ---

my $loads0 = counts('script|load');
my $s1 = new_session();
($out) = sql($s1, "SELECT redlock_acquire('scripts-1', 30000) AND redlock_release('scripts-1')");
is($out, 't', 'scripts: a first session acquires and releases');
# A master's loads go out when its SCRIPT EXISTS answer is read, which a call decided
# without that master leaves to the session's next call: poll with calls.  (Polling
# without them failed under load, CI 2026-11-30, 3 of 7 runs here beside three busy
# loops: 0 loads on the masters the first call was decided without; their late answers
# then loaded the scripts again after the SCRIPT FLUSH below, so the third session
# found nothing to load there either.)
my @loads1;
wait_until(10, sub {
		@loads1 = split /,/, counts('script|load');
		return 1 unless grep { $_ != $loads1[0] || $_ <= 5 } @loads1;
		sql($s1, "SELECT redlock_acquire('scripts-1', 30000) AND redlock_release('scripts-1')");
		return 0;
	});
my $per_master = $loads1[0];
cmp_ok($per_master, '>', 5, "scripts: the first connection to fresh masters loads every script ($per_master)");
is(join(',', @loads1), join(',', ($per_master) x 5), '... on each master the same number');

my $exists1;
wait_until(10, sub { $exists1 = counts('script|exists'); my @e = split /,/, $exists1; return !grep { $_ != $e[0] } @e; });
my @asked = split /,/, $exists1;
cmp_ok($asked[0], '>=', 1, "scripts: the first connection asked SCRIPT EXISTS ($asked[0] command(s), 8 scripts each)");
my $s2 = new_session();
($out) = sql($s2, "SELECT redlock_acquire('scripts-2', 30000) AND redlock_release('scripts-2')");
is($out, 't', 'scripts: a second session acquires and releases');
my $exists2;
wait_until(10, sub { $exists2 = counts('script|exists'); return $exists2 eq join(',', map { 2 * $_ } @asked); });
is($exists2, join(',', map { 2 * $_ } @asked), 'scripts: its connections ask SCRIPT EXISTS as the first did, on each master');
is(counts('script|load'), join(',', @loads1), '... and load nothing');

$redis->redis_all('SCRIPT', 'FLUSH');
($out) = sql($s1, "SELECT redlock_acquire('scripts-3', 30000) AND redlock_release('scripts-3')");
is($out, 't', 'scripts: after SCRIPT FLUSH an open session still releases (NOSCRIPT, then EVAL)');
# A NOSCRIPT read after the release was decided is sent again when it is read: by the
# session's next call at the latest.
sql($s1, "SELECT redlock_acquire('scripts-3b', 30000) AND redlock_release('scripts-3b')");
is($redis->holding('scripts-3', 0, 10), 0, '... and the key is gone from every master');
my $s3 = new_session();
my @loads2 = split /,/, counts('script|load');
($out) = sql($s3, "SELECT redlock_acquire('scripts-4', 30000) AND redlock_release('scripts-4')");
is($out, 't', 'scripts: a new session after the flush acquires and releases');
# Its first call was decided at quorum: a master whose SCRIPT EXISTS reply came after
# that is sent its SCRIPT LOADs when the session's next call reads the reply (CI, two TAP
# files at a time, 2026-11-29: 0 on master 0 with no further call).
my @added;
wait_until(10, sub {
		sql($s3, "SELECT redlock_acquire('scripts-4', 30000) AND redlock_release('scripts-4')");
		my @l3 = split /,/, counts('script|load');
		@added = map { $l3[$_] - $loads2[$_] } 0 .. 4;
		return !grep { $_ < 1 } @added;
	});
ok(!grep({ $_ < 1 } @added), "scripts: its connections load what the flushed masters lack (@added)");
$_->quit for $s1, $s2, $s3;

# --- a first call pipelined behind its handshake (no AUTH, no SELECT) ---

{
	my $s = new_session("SET redlock.connect_timeout = '10s'; SET redlock.timeout = '10s'");
	$redis->stop(4);
	my ($o, $e, $took) = timed($s, "SELECT redlock_acquire('pipelined', 30000)");
	$redis->cont(4);
	is($o, 't', 'pipelined: a new session acquires with master 4 frozen');
	cmp_ok($took, '<', 5,
		sprintf('... without waiting for the frozen master\'s handshake (%.2f s; the timeouts are 10 s)', $took));
	is($redis->holding('pipelined', 5, 10), 5, '... and the SET behind the handshake reaches master 4 once it thaws');
	($o) = sql($s, "SELECT redlock_release('pipelined')");
	is($o, 't', 'pipelined: released');
	is($redis->holding('pipelined', 0, 10), 0, '... from every master');
	$s->quit;
}

# --- script commands sent before the handshake is answered go whole (EVAL) ---

{
	$redis->redis_all('SCRIPT', 'FLUSH');
	my $s = new_session("SET redlock.timeout = '5s'");
	my @eval0 = split /,/, counts('eval');
	my @noscript0 = map { ($redis->redis_cli($_, 'INFO', 'errorstats') =~ /errorstat_NOSCRIPT:count=(\d+)/)[0] // 0 } 0 .. 4;
	# Master 4 frozen in its first handshake: the release goes out behind it, before
	# SCRIPT EXISTS is answered (the flush left every master without the scripts).
	$redis->stop(4);
	my ($o) = sql($s, "SELECT redlock_acquire('whole', 30000) AND redlock_release('whole')");
	$redis->cont(4);
	is($o, 't', 'whole: acquire and release while master 4 is frozen in its first handshake');
	is($redis->holding('whole', 0, 10), 0, '... the key is gone from every master once it thaws');
	my @noscript1 = map { ($redis->redis_cli($_, 'INFO', 'errorstats') =~ /errorstat_NOSCRIPT:count=(\d+)/)[0] // 0 } 0 .. 4;
	is($noscript1[4], $noscript0[4], '... and master 4 refused nothing NOSCRIPT (the release went whole)');
	my @eval1 = split /,/, counts('eval');
	cmp_ok($eval1[4], '>', $eval0[4], '... it ran the release as EVAL');
	$s->quit;
}

# --- the handshake's budget is redlock.connect_timeout ---

{
	my $s = new_session("SET redlock.timeout = 50; SET redlock.connect_timeout = '5s'; SET redlock.quorum_timeout = 0");
	my @kids = map { $redis->freeze_for($_, 600) } 0 .. 2;
	my ($o, $e) = sql($s, "SELECT redlock_acquire('handshake-budget', 30000)");
	waitpid($_, 0) for @kids;
	is($o, 't', 'budget: a new session acquires though masters 0-2 answer its handshake after 600 ms')
	  or diag($e);
	sql($s, "SELECT redlock_release('handshake-budget')");
	my @kids2 = map { $redis->freeze_for($_, 600) } 0 .. 2;
	($o, $e) = sql($s, "SELECT redlock_acquire('handshake-budget-2', 30000)");
	waitpid($_, 0) for @kids2;
	like($e, qr/could not acquire lock.*2 of 5 Redis masters answered/s,
		'budget (control): an open connection gets redlock.timeout (50 ms), and 08006 with the retries off');
	$s->quit;
	is($redis->holding('handshake-budget-2', 0, 10), 0, '... and the attempt is undone everywhere');
}

# --- a slow master's connection is kept between calls ---

{
	my $s = new_session("SET redlock.timeout = 50; SET redlock.connect_timeout = 100; SET redlock.quorum_timeout = '10s'");
	($out) = sql($s, "SELECT redlock_acquire('kept-warm', 30000) AND redlock_release('kept-warm')");
	is($out, 't', 'kept: connections open');
	my @c0 = connections(0 .. 2);
	my @kids = map { $redis->freeze_for($_, 1500) } 0 .. 2;
	my ($o, $e) = sql($s, "SET statement_timeout = 300; SELECT redlock_acquire('kept-a', 30000)");
	like($e, qr/canceling statement due to statement timeout/,
		'kept: a try-lock retrying frozen masters 0-2 is cancelled by statement_timeout');
	sql($s, "RESET statement_timeout");
	usleep(400_000);
	my $took;
	($o, $e, $took) = timed($s, "SELECT redlock_acquire('kept', 30000)");
	waitpid($_, 0) for @kids;
	is($o, 't', sprintf('kept: the next call, 400 ms later, acquires once they thaw (%.2f s)', $took))
	  or diag($e);
	my @c1 = connections(0 .. 2);
	is(join(',', map { $c1[$_] - $c0[$_] - 1 } 0 .. 2), '0,0,0',
		'... on the same connections: silent for longer than the timeouts, they were kept (redlock.quorum_timeout), not reopened');
	sql($s, "SELECT redlock_release('kept')");
	$s->quit;
	is($redis->holding('kept-a', 0, 10), 0, 'kept: the cancelled attempts are undone everywhere');
}

# --- redlock.quorum_timeout: slow masters are retried, gone ones are not ---

{
	my $s = new_session("SET redlock.timeout = 50");
	($out) = sql($s, "SELECT redlock_acquire('warm', 30000) AND redlock_release('warm')");
	is($out, 't', 'quorum_timeout: connections open');

	my @kids = map { $redis->freeze_for($_, 700) } 0 .. 2;
	my ($o, $e, $took) = timed($s, "SELECT redlock_acquire('slow', 30000)");
	waitpid($_, 0) for @kids;
	is($o, 't', sprintf('slow: a try-lock acquires after masters 0-2 were frozen 700 ms (%.2f s)', $took))
	  or diag($e);
	sql($s, "SELECT redlock_release('slow')");

	# The backoff: each slow attempt doubles the next one's patience (50, 100, 200 ...
	# ms), so 2 s of silence costs a handful of attempts, not one per redlock.timeout.
	sql($s, "SET redlock.quorum_timeout = '10s'");
	my ($a0) = sql($s, "SELECT attempts FROM redlock_stats()");
	@kids = map { $redis->freeze_for($_, 2000) } 0 .. 2;
	($o, $e, $took) = timed($s, "SELECT redlock_acquire('backoff', 30000)");
	waitpid($_, 0) for @kids;
	my ($a1) = sql($s, "SELECT attempts FROM redlock_stats()");
	is($o, 't', sprintf('backoff: a try-lock acquires after masters 0-2 were frozen 2 s (%.2f s)', $took))
	  or diag($e);
	cmp_ok($a1 - $a0, '<=', 10,
		'... in ' . ($a1 - $a0) . ' attempts: each slow one doubled the patience (at 50 ms each it would take ~25)');
	sql($s, "SELECT redlock_release('backoff')");

	sql($s, "SET redlock.quorum_timeout = 0");
	@kids = map { $redis->freeze_for($_, 700) } 0 .. 2;
	($o, $e, $took) = timed($s, "SELECT redlock_acquire('slow-off', 30000)");
	waitpid($_, 0) for @kids;
	like($e, qr/could not acquire lock on resource "slow-off": .*3 needed/s,
		sprintf('slow (control): with redlock.quorum_timeout = 0 the try-lock raises 08006 (%.2f s)', $took));
	is($redis->holding('slow-off', 0, 10), 0, '... and its attempt is undone everywhere');

	sql($s, "SET redlock.quorum_timeout = '30s'");
	$redis->kill9($_) for 0 .. 2;
	($o, $e, $took) = timed($s, "SELECT redlock_acquire('gone', 30000)");
	like($e, qr/could not acquire lock on resource "gone": 2 of 5 Redis masters answered/,
		'gone: masters that refuse connections are not retried: 08006');
	cmp_ok($took, '<', 15, sprintf('... at once (%.2f s), not after redlock.quorum_timeout (30 s)', $took));
	$redis->restart($_) for 0 .. 2;
	$s->quit;
}

# --- the cluster's patience (src/shared/patience.c): learned from slow attempts, shared
# by new sessions, given back by quick ones ---

{
	# Learned by the cluster when the library is preloaded (else by each backend).
	my ($pre) = RedisMasters::preloaded_clusters($redis, undef, 'patience');
	my $pre_session = sub {
		my $s = session($pre);
		sql($s, $_[0]);
		return $s;
	};

	# Attempts of ONE acquire in a new session (the cluster's counter: nobody else
	# acquires meanwhile), of a TTL of TTL ms (30,000 if not given), while masters 0-2
	# are frozen FREEZE ms.
	my $attempts_while_frozen = sub {
		my ($name, $freeze, $ttl) = @_;
		$ttl //= 30000;
		my $s = $pre_session->("SET redlock.timeout = 100; SET redlock.quorum_timeout = '10s'");
		# Connections open without an attempt (an attempt would teach the cluster).
		sql($s, "SELECT count(*) FROM redlock_lock_info('$name-warm')");
		my ($a0) = sql($s, "SELECT attempts FROM redlock_stats()");
		my @kids = map { $redis->freeze_for($_, $freeze) } 0 .. 2;
		my ($o, $e, $took) = timed($s, "SELECT redlock_acquire('$name', $ttl)");
		waitpid($_, 0) for @kids;
		my ($a1) = sql($s, "SELECT attempts FROM redlock_stats()");
		is($o, 't', sprintf("patience: $name: acquired with masters 0-2 frozen $freeze ms (%.2f s)", $took))
		  or diag($e);
		sql($s, "SELECT redlock_release('$name')");
		$s->quit;
		return $a1 - $a0;
	};
	# Quick attempts in a row give the learned level back (one step each).
	my $quick = sub {
		my $s = $pre_session->("SET redlock.timeout = 100");
		sql($s, "SELECT count(*) FROM generate_series(1, 15) g WHERE redlock_acquire('quick-' || g, 30000) AND redlock_release('quick-' || g)");
		$s->quit;
	};

	$quick->();
	# Unlearned (the control): 100 ms, then 200: the first attempt times out.
	my $n = $attempts_while_frozen->('patience-cold', 250);
	cmp_ok($n, '>=', 2, "patience: at redlock.timeout (100 ms), 250 ms of frozen masters cost a new session $n attempts");

	# A longer freeze teaches the cluster: attempts of 100, 200, 400 ms, each slow one a
	# level up (their random retry delays, up to the attempt's own time, end the third
	# by 1,000 ms); the fourth (800 ms) starts by 1,400 ms, so it is slow, or answered
	# after more than half its patience: 800 ms or more (a fifth, if any, lowers it at
	# most one step from 1,600).
	$quick->();
	$n = $attempts_while_frozen->('patience-teach', 2000);
	cmp_ok($n, '>=', 4, "patience: 2,000 ms of frozen masters took $n attempts (the cluster learns each slow one)");

	# Learned: a new backend's first attempt waits 800 ms or more.
	$n = $attempts_while_frozen->('patience-learned', 250);
	is($n, 1, 'patience: learned: another new session rides out the same 250 ms in one attempt');

	# Given back: quick attempts lower the level to redlock.timeout again.
	$quick->();
	$n = $attempts_while_frozen->('patience-given-back', 250);
	cmp_ok($n, '>=', 2, "patience: after quick attempts a new session is back at redlock.timeout ($n attempts)");
	# Capped: a slow attempt teaches the level its patience reached, plus one.  A TTL of
	# 1,000 ms caps every attempt at 100 ms (a tenth of it), level 0, however many slow
	# attempts a second of frozen masters costs: the cluster learns level 1, not one more
	# level per attempt (which would make the next session's first attempt wait 800 ms or
	# more and ride out 600 ms of frozen masters in one).
	$quick->();
	$n = $attempts_while_frozen->('patience-short', 1000, 1000);
	cmp_ok($n, '>=', 4, "patience: a TTL of 1,000 ms: 1,000 ms of frozen masters took $n attempts of 100 ms (a tenth of its TTL)");
	$n = $attempts_while_frozen->('patience-capped', 600);
	cmp_ok($n, '>=', 2,
		"patience: short TTLs' slow attempts taught one level: 600 ms of frozen masters cost the next session $n attempts (200 ms, then 400)");

	$quick->();
	is(join(',', map { $redis->holding($_, 0, 10) } qw(patience-cold patience-teach patience-learned patience-given-back patience-short patience-capped)),
		'0,0,0,0,0,0', 'patience: every attempt undone or released on every master');
	RedisMasters::no_crash($pre);
	$pre->stop;
}

# --- with AUTH, a new connection's commands wait for its handshake, which is kept ---

{
	my $pw = 'burst-secret';
	is(join(',', map { $redis->redis_cli($_, 'CONFIG', 'SET', 'requirepass', $pw) } 0 .. 4),
		'OK,OK,OK,OK,OK', 'auth: the masters require a password');
	$redis->auth($pw);
	my $s = new_session("SET redlock.password = '$pw'; SET redlock.timeout = 50; "
		  . "SET redlock.connect_timeout = 100; SET redlock.quorum_timeout = '10s'");
	my @c0 = connections(0 .. 2);
	my @kids = map { $redis->freeze_for($_, 800) } 0 .. 2;
	my ($o, $e, $took) = timed($s, "SELECT redlock_acquire('auth-kept', 30000)");
	waitpid($_, 0) for @kids;
	is($o, 't', sprintf('auth: a new session acquires once masters 0-2 answer its AUTH, 800 ms later (%.2f s)', $took))
	  or diag($e);
	my @c1 = connections(0 .. 2);
	is(join(',', map { $c1[$_] - $c0[$_] - 1 } 0 .. 2), '1,1,1',
		'... each slow master got one connection from it: given up in its handshake, it was kept');
	($o) = sql($s, "SELECT redlock_release('auth-kept')");
	is($o, 't', 'auth: released');
	$s->quit;

	# With AUTH the first call waits for every new connection's handshake (its commands
	# cannot go out before): master 4, frozen 300 ms, still gets the lock in that call.
	$s = new_session("SET redlock.password = '$pw'; SET redlock.connect_timeout = '5s'");
	my $kid = $redis->freeze_for(4, 300);
	($o, $e) = sql($s, "SELECT redlock_acquire('auth-first', 30000)");
	waitpid($kid, 0);
	is($o, 't', 'auth: a new session acquires while master 4 is frozen 300 ms') or diag($e);
	($o) = sql($s, "SELECT nodes FROM redlock_locks() WHERE resource = 'auth-first'");
	is($o, '5', '... on all 5 masters: its first call waited for the frozen one\'s handshake');
	sql($s, "SELECT redlock_release('auth-first')");
	$s->quit;
	is($redis->holding('auth-kept', 0, 10), 0, '... from every master, the held attempts undone behind their SETs');
	$redis->redis_all('CONFIG', 'SET', 'requirepass', '');
	$redis->auth(undef);
}

RedisMasters::no_crash($node);
done_testing();
