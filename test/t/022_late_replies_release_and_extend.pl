# A release or extend is decided once a majority acted (README, "How it behaves when
# things fail"); the slower masters must still end up released or extended.  Here one
# master is frozen (SIGSTOP) for 1.5 s during the call, so the call is decided without
# it (checked: the call returns before the master is resumed, and the master's reply is
# then counted in redlock_nodes().late_replies); the master answers afterwards.  When the script was cached there, its EVALSHA does
# the work on its own; when it was not (SCRIPT FLUSH, a restarted master), the master
# answers NOSCRIPT, and the extension must still send the script (EVAL) for the release
# or extension to happen there.  A failed attempt's undo that comes late (NOSCRIPT after
# SCRIPT FLUSH, then EVAL) never deletes the key of the attempt that won after it.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
# redlock.timeout 5 s: the frozen master is not given up on as hung, so its replies come
# late rather than never.
my $node = RedisMasters::redlock_node('late', $redis,
	"redlock.timeout = 5000ms\nredlock.connect_timeout = 2000ms\nlog_min_messages = debug1\n");
my $s = session($node);

# Open the session's connections first, so that the calls below run on established ones.
is((sql($s, "SELECT redlock_acquire('warm-up', 1000) AND redlock_release('warm-up')"))[0],
	't', 'warm-up call opens the connections');
my ($out, $err);

my $slow_node = '127.0.0.1:' . ($redis->ports)[4];
my $freeze_ms = 1500;

# Master 4's late_replies in this session's redlock_nodes().
sub late_replies
{
	my ($n) = sql($s, "SELECT late_replies FROM redlock_nodes() WHERE node = '$slow_node'");
	return $n;
}

# Runs QUERY while master 4 is frozen for 1.5 s; returns the query's output.  Tests that
# the call was decided while master 4 was frozen: it returned before the master was
# resumed, and master 4's reply was read late (at the next call, on another key).
sub with_slow_master
{
	my ($query, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $late0 = late_replies();
	my $child = $redis->freeze_for(4, $freeze_ms);
	my ($o, $e, $secs) = sql($s, $query);
	cmp_ok($secs, '<', $freeze_ms / 1000,
		"$what: returned while master 4 was still frozen (took ${secs}s)");
	waitpid($child, 0);
	note "stderr: $e" if $e ne '';
	# Give the late master time to answer, then make more calls, on another key, so that
	# the extension reads what it owed (on a loaded machine the resumed master, or the
	# EVAL that follows a late NOSCRIPT, may need more than one; up to 10 s).
	usleep(500_000);
	my $late1;
	wait_until(
		10,
		sub {
			sql($s, "SELECT redlock_acquire('other', 1000) AND redlock_release('other')");
			$late1 = late_replies();
			return $late1 > $late0;
		});
	cmp_ok($late1, '>', $late0, "$what: master 4's reply was read late (late_replies $late0 -> $late1)");
	return $o;
}

# The scripts as README gives them, loaded on every master so that EVALSHA finds them.
my @scripts = (
	'if redis.call("get", KEYS[1]) == ARGV[1] then local n = redis.call("del", KEYS[1]) redis.call("publish", "redlock:released:" .. KEYS[1], KEYS[1]) return n else return 0 end',
	'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end'
);

for my $flush (0, 1)
{
	my $how = $flush ? 'script not cached (NOSCRIPT)' : 'script cached';
	my $key = $flush ? 'late-noscript' : 'late-cached';

	for my $script (@scripts)
	{
		is(scalar(grep { /^[0-9a-f]{40}$/ } $redis->redis_all('SCRIPT', 'LOAD', $script)),
			5, "$how: SCRIPT LOAD on every master")
		  unless $flush;
	}

	# --- release ---
	($out) = sql($s, "SELECT redlock_acquire('$key', 60000)");
	is($out, 't', "$how: acquire $key on all masters");
	ok(wait_until(2, sub { 5 == grep { $_ eq '1' } $redis->redis_all('EXISTS', $key) }),
		"$how: $key exists on all 5 masters");
	$redis->redis_all('SCRIPT', 'FLUSH') if $flush;
	$out = with_slow_master("SELECT redlock_release('$key')", "$how: release");
	is($out, 't', "$how: release decided while master 4 was frozen");
	ok(wait_until(3, sub { $redis->redis_cli(4, 'EXISTS', $key) eq '0' }),
		"$how: the key is gone from the slow master too")
	  or diag("EXISTS $key on master 4: " . $redis->redis_cli(4, 'EXISTS', $key)
		  . ', PTTL ' . $redis->redis_cli(4, 'PTTL', $key));
	is(join(',', map { $redis->redis_cli($_, 'EXISTS', $key) } 0 .. 3), '0,0,0,0',
		"$how: and from the other four");

	# --- extend (another key, so that a key left by the release cannot pass for it) ---
	my $ekey = "$key-extend";
	($out) = sql($s, "SELECT redlock_acquire('$ekey', 5000)");
	is($out, 't', "$how: acquire $ekey for 5 s");
	ok(wait_until(2, sub { 5 == grep { $_ eq '1' } $redis->redis_all('EXISTS', $ekey) }),
		"$how: $ekey exists on all 5 masters");
	$redis->redis_all('SCRIPT', 'FLUSH') if $flush;
	$out = with_slow_master("SELECT redlock_extend('$ekey', 60000)", "$how: extend");
	is($out, 't', "$how: extend to 60 s decided while master 4 was frozen");
	ok( wait_until(
			3,
			sub {
				my $pttl = $redis->redis_cli(4, 'PTTL', $ekey);
				return $pttl =~ /^\d+$/ && $pttl > 30000;
			}),
		"$how: PTTL raised on the slow master too")
	  or diag("PTTL $ekey on master 4: " . $redis->redis_cli(4, 'PTTL', $ekey));
	($out) = sql($s, "SELECT redlock_release('$ekey')");
	is($out, 't', "$how: release $ekey");
	ok(wait_until(3, sub { 0 == grep { $_ eq '1' } $redis->redis_all('EXISTS', $ekey) }),
		"$how: $ekey gone from every master");
}

# --- the undo of a failed attempt (spec §3 step 5) on a slow master ---
# Another client holds "split" on masters 0-2; the extension's SET succeeds on 3 and 4
# only, so the attempt fails and must be undone on every master.  Master 4 is frozen
# while the attempt is decided, and (second round) has no cached script.
for my $flush (0, 1)
{
	my $how = $flush ? 'script not cached (NOSCRIPT)' : 'script cached';
	my $key = $flush ? 'split-noscript' : 'split-cached';
	if ($flush)
	{
		$redis->redis_all('SCRIPT', 'FLUSH');
	}
	else
	{
		$redis->redis_all('SCRIPT', 'LOAD', $_) for @scripts;
	}
	$redis->redis_cli($_, 'SET', $key, 'someone-else', 'PX', 60000) for 0 .. 2;
	my @before = $redis->script_calls;
	$out = with_slow_master("SELECT redlock_acquire('$key', 60000)", "$how: failed acquire");
	is($out, 'f', "$how: acquire of $key held on 3 of 5 masters fails");
	ok(wait_until(3, sub { $redis->redis_cli(3, 'EXISTS', $key) eq '0' }),
		"$how: the failed attempt is undone on master 3");
	ok(wait_until(3, sub { $redis->redis_cli(4, 'EXISTS', $key) eq '0' }),
		"$how: ... and on the slow master 4")
	  or diag("GET $key on master 4: " . $redis->redis_cli(4, 'GET', $key)
		  . ', PTTL ' . $redis->redis_cli(4, 'PTTL', $key));
	ok($redis->wait_scripts(\@before), "$how: every master has run the undo script");
	is(join(',', map { $redis->redis_cli($_, 'GET', $key) } 0 .. 2),
		'someone-else,someone-else,someone-else', "$how: the other client's keys are untouched");
	$redis->redis_all('DEL', $key);
}

# --- the undo goes to the masters that did not answer too (spec §3 step 5) ---
# Another client holds "unanswered" on masters 0-3, so the attempt is refused by a
# quorum and no master granted it; the SET to the frozen master 4 runs there once it
# resumes, and sets the key: only the undo sent behind it takes the key away again.  The
# other client writes a holder record too, as another cluster of ours does, so that our
# attempt's record is refused as well and nothing but the unanswered master calls for
# the undo.
{
	my $key = 'unanswered';
	$redis->redis_cli($_, 'SET', $key, 'someone-else', 'PX', 60000) for 0 .. 3;
	$redis->redis_cli($_, 'SET', "$key\xffholder", "someone-else\t1", 'PX', 60000) for 0 .. 3;
	$out = with_slow_master("SELECT redlock_acquire('$key', 60000)",
		'refused by a quorum: failed acquire');
	is($out, 'f', "acquire of $key held on 4 of 5 masters fails");
	ok(wait_until(3, sub { $redis->redis_cli(4, 'EXISTS', $key) eq '0' }),
		'the SET that ran late on the frozen master is undone there')
	  or diag("GET $key on master 4: " . $redis->redis_cli(4, 'GET', $key)
		  . ', PTTL ' . $redis->redis_cli(4, 'PTTL', $key));
	$redis->redis_all('DEL', $key, "$key\xffholder");
}

# --- a failed attempt's late undo never deletes the next attempt's key ---
# Another client holds "undo" on masters 0-2, so the acquire (retry_delay 0) fails and
# retries at once; then masters 0-2 lose the other client's key and their script cache:
# an undo answered NOSCRIPT is sent again late, and must not delete the key of the
# attempt that won meanwhile.

for my $try (1 .. 4)
{
	$redis->redis_cli($_, 'SET', 'undo', 'other-client', 'PX', '30000') for 0 .. 2;
	my ($pout, $perr) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
		  "SET redlock.retry_delay = 0; SET redlock.retry_jitter = 0;"
		  . " SELECT redlock_acquire('undo', 30000, 5000); SELECT pg_sleep(4)" ],
		'>', \$pout, '2>', \$perr);
	usleep(150_000);
	for my $i (0 .. 2)
	{
		$redis->redis_cli($i, 'SCRIPT', 'FLUSH');
		$redis->redis_cli($i, 'DEL', 'undo');
	}
	# The session sleeps 4 s after its acquire, holding the lock: look meanwhile (each
	# look runs redis-cli five times, which took over 3 s on a loaded machine).
	ok( wait_until(
			1,
			sub {
				my @v = grep { $_ ne '' && $_ ne 'other-client' } $redis->redis_all('GET', 'undo');
				return @v >= 3;
			}),
		"undo try $try: the acquire's keys are on a majority once the other client's went");
	usleep(300_000);
	my @vals = grep { $_ ne '' } $redis->redis_all('GET', 'undo');
	my %distinct = map { $_ => 1 } @vals;
	cmp_ok(scalar(@vals), '>=', 3, "undo try $try: a majority still holds the winner's key 0.3 s later");
	is(scalar(keys %distinct), 1, "undo try $try: with one token");
	$h->finish;
	like($pout, qr/^t$/m, "undo try $try: the acquire returned true");
	$redis->redis_all('DEL', 'undo');
}

# --- a set's acquire answered NOSCRIPT after its call is over is not sent again ---
# Master 4 has the set's release script cached but not its acquire script (flushed, then
# a set released there, which sends the release whole).  A set acquired while master 4
# is frozen is decided on the others and released at once; when master 4 resumes, it
# answers the acquire NOSCRIPT and runs the release (nothing of ours to delete there).
# Sending the acquire again now would set the set's keys after their release, on a token
# nobody holds, for the whole TTL.
{
	sql($s, "SELECT redlock_acquire(ARRAY['late-warm-1', 'late-warm-2'], 60000)");
	$redis->redis_cli(4, 'SCRIPT', 'FLUSH');
	sql($s, "SELECT redlock_release(ARRAY['late-warm-1', 'late-warm-2'])");
	ok(wait_until(10, sub {
				sql($s, "SELECT redlock_acquire('other', 1000) AND redlock_release('other')");
				return $redis->redis_cli(4, 'EXISTS', 'late-warm-1') eq '0';
			}),
		'a set released while master 4 had no script cached is released there too (EVAL)');
	$out = with_slow_master(
		"SELECT redlock_acquire(ARRAY['late-set-2', 'late-set-1'], 60000)"
		  . " AND redlock_release(ARRAY['late-set-1', 'late-set-2'])",
		'a set acquired and released while master 4 is frozen');
	is($out, 't', 'the set was acquired and released on the other masters');
	usleep(1_000_000);
	sql($s, "SELECT redlock_acquire('other', 1000) AND redlock_release('other')") for 1 .. 3;
	is(join(',', map { $redis->redis_cli(4, 'EXISTS', $_) } qw(late-set-1 late-set-2)), '0,0',
		'master 4 holds no key of the set after its release: the late acquire was not sent again');
	$redis->redis_all('DEL', 'late-set-1', 'late-set-2');
}

$s->quit;
RedisMasters::no_crash($node);
done_testing();
