# Interoperability with node-redlock (npm "redlock" 5.0.0-beta.2 over ioredis): with
# redlock.key_prefix empty, on the same five masters and the same resource name, each
# side's lock excludes the other (our holder record, on by default, changes nothing for
# it), redlock_lock_info and redlock_cluster_locks show node-redlock's lock as held by
# an unknown holder, neither side's release removes the other's keys, and
# each can take the lock once the other has released it; a waiter of ours acquires within
# one retry delay of a node-redlock release (node-redlock announces no release, so the
# waiter is not woken).  Keys and values are read with redis-cli.  The npm packages
# (test/interop/package-lock.json) are installed with `npm ci` into a temp copy, so the
# test needs node, npm and the npm registry.

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Copy qw(copy);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $srcdir = $ENV{TESTDIR} ? "$ENV{TESTDIR}/test/interop" : dirname(__FILE__) . '/../interop';

# --- node-redlock, installed into a temp copy of test/interop ---

my $js = PostgreSQL::Test::Utils::tempdir('interop');
for my $f (qw(package.json package-lock.json interop.js))
{
	copy("$srcdir/$f", "$js/$f") or die "copy $srcdir/$f: $!";
}
my ($npm_out, $npm_err) = ('', '');
my $npm_ok = IPC::Run::run(
	[ 'npm', 'ci', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error' ],
	'<', \undef, '>', \$npm_out, '2>', \$npm_err,
	init => sub { chdir $js or die "chdir $js: $!"; $ENV{npm_config_cache} = "$js/.npm-cache"; },
	IPC::Run::timeout(300));
ok($npm_ok, 'npm ci installs redlock and ioredis') or diag("npm ci: $npm_out$npm_err");
die "cannot run without node-redlock" unless $npm_ok;
my $installed = `node -p "require('$js/node_modules/redlock/package.json').version + ' ' + require('$js/node_modules/ioredis/package.json').version"`;
chomp $installed;
like($installed, qr/^v?5\.0\.0-beta\.2 4\.31\.0$/, 'node-redlock 5.0.0-beta.2 with ioredis 4.31.0');

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('interop', $redis, $RedisMasters::ROOMY_CONF . "redlock.key_prefix = ''\n");
my $s = session($node);
my ($out, $err);

($out) = sql($s, 'SHOW redlock.key_prefix');
is($out, '', 'redlock.key_prefix is empty');

my ($js_in, $js_out, $js_err) = ('', '', '');
my $js_timer = IPC::Run::timer(30);
my $js_proc = IPC::Run::start([ 'node', "$js/interop.js", $redis->ports ],
	'<', \$js_in, '>', \$js_out, '2>', \$js_err, $js_timer);

# Sends one command line to the node client; returns its one-line answer.
sub js
{
	my ($cmd) = @_;
	$js_out = '';
	$js_in .= "$cmd\n";
	$js_timer->start(30);
	$js_proc->pump until $js_out =~ /\n/ || $js_timer->is_expired;
	die "node-redlock did not answer \"$cmd\" in 30 s: $js_err" unless $js_out =~ /\n/;
	my ($line) = $js_out =~ /^(.*)\n/;
	note "node-redlock: $cmd -> $line";
	return $line;
}

# The values of KEY on the 5 masters, joined with commas.
sub values_of
{
	my ($key) = @_;
	return join(',', $redis->redis_all('GET', $key));
}

# node-redlock answers once a quorum has voted; the other masters follow a moment later.
# Waits up to 5 s until CODE is true; returns its last result.
sub settled
{
	my ($code) = @_;
	return wait_until(5, $code);
}

# Waits until KEY has expired on every master.
sub wait_expired
{
	my ($key) = @_;
	is($redis->holding($key, 0, 10), 0, "\"$key\" expired on every master");
}

# --- node-redlock holds: the extension cannot take the lock nor release it ---

my $answer = js('acquire shared-job 30000');
like($answer, qr/^ok [0-9a-f]{32}$/, 'node-redlock acquires shared-job (a 32-hex value)');
my ($js_value) = $answer =~ /^ok (\S+)/;
$js_value //= 'none';
ok(settled(sub { values_of('shared-job') eq join(',', ($js_value) x 5) }),
	'node-redlock: key = the resource name, value on all 5 masters');
my @pttl = $redis->redis_all('PTTL', 'shared-job');
note "node-redlock PTTL: @pttl";
is(scalar(grep { $_ > 25000 && $_ <= 30000 } @pttl), 5,
	'node-redlock: PTTL set from its duration on all 5 masters');

($out) = sql($s, "SELECT held, masters, ttl_ms > 25000, cluster IS NULL AND pid IS NULL, scope FROM redlock_lock_info('shared-job')");
is($out, 't|5|t|t|unknown', "lock_info: node-redlock's lock is held by 5 masters, its holder unknown");
($out) = sql($s, "SELECT resource, held, scope FROM redlock_cluster_locks()");
is($out, 'shared-job|t|unknown', '... and cluster_locks lists it so');

my @before = $redis->calls('set');
($out, $err) = sql($s, "SELECT redlock_acquire('shared-job', 30000)");
is($out, 'f', 'extension: acquire returns false while node-redlock holds it');
is($err, '', '... without error or warning');
ok($redis->wait_calls(\@before, 'set'), '... and every master has processed its SET NX');
is(values_of('shared-job'), join(',', ($js_value) x 5),
	"... and node-redlock's value is left on every master");
# Our holder record's SET NX succeeded beside it (node-redlock writes none): the refused
# attempt's undo deletes it, as it would the attempt's own keys.
is(join(',', $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', "shared-job\xffholder")),
	'0,0,0,0,0', '... and the holder record our refused attempt set is undone on every master');

($out, $err) = sql($s, "SELECT redlock_release('shared-job')");
is($out, 'f', 'extension: release of a lock it does not hold returns false');
like($err, qr/WARNING: .*not held by this session/, '... with a WARNING');
is(values_of('shared-job'), join(',', ($js_value) x 5),
	"... and node-redlock's keys remain on every master");

is(js('release shared-job'), 'ok', 'node-redlock releases shared-job');
ok($redis->holding('shared-job', 0, 5) == 0, '... and the key is gone from every master');

# --- the extension holds: node-redlock cannot take the lock ---

($out, $err) = sql($s, "SELECT redlock_acquire('shared-job', 30000)");
is($out, 't', 'extension acquires shared-job after node-redlock released it');
my $pg_token = $redis->redis_cli(0, 'GET', 'shared-job');
like($pg_token, qr/^[0-9a-f]{40}$/, 'extension: value is 40 hex characters');
is(values_of('shared-job'), join(',', ($pg_token) x 5), '... the same on all 5 masters');

like(js('acquire shared-job 30000'), qr/^fail ExecutionError/,
	'node-redlock: acquire fails while the extension holds it');
is(values_of('shared-job'), join(',', ($pg_token) x 5),
	"... and the extension's token is left on every master");

($out, $err) = sql($s, "SELECT redlock_release('shared-job')");
is($out, 't', 'extension releases shared-job');
# The extension decides a release once a majority deleted the key (README); the other
# masters follow at once, so a short wait covers them.
ok($redis->holding('shared-job', 0, 5) == 0, '... and the key is gone from every master')
  or diag('EXISTS: ' . join(',', $redis->redis_all('EXISTS', 'shared-job')));
like(js('acquire shared-job 30000'), qr/^ok [0-9a-f]{32}$/,
	'node-redlock acquires shared-job after the extension released it');
is(js('release shared-job'), 'ok', 'node-redlock releases it again');

# --- a stale node-redlock lock: its release leaves the extension's lock alone ---

like(js('acquire stale-a 300'), qr/^ok /, 'node-redlock acquires stale-a for 300 ms');
wait_expired('stale-a');
($out) = sql($s, "SELECT redlock_acquire('stale-a', 30000)");
is($out, 't', 'extension acquires stale-a once it expired');
$pg_token = $redis->redis_cli(0, 'GET', 'stale-a');
like(js('release stale-a'), qr/^fail ExecutionError/,
	"node-redlock: releasing its expired lock fails");
is(values_of('stale-a'), join(',', ($pg_token) x 5),
	"... and the extension's token remains on every master");
($out) = sql($s, "SELECT redlock_release('stale-a')");
is($out, 't', 'extension releases stale-a');
ok($redis->holding('stale-a', 0, 5) == 0, '... and the key is gone from every master')
  or diag('EXISTS: ' . join(',', $redis->redis_all('EXISTS', 'stale-a')));

# --- a stale extension lock: its release leaves node-redlock's lock alone ---

($out) = sql($s, "SELECT redlock_acquire('stale-b', 300)");
is($out, 't', 'extension acquires stale-b for 300 ms');
wait_expired('stale-b');
$answer = js('acquire stale-b 30000');
like($answer, qr/^ok [0-9a-f]{32}$/, 'node-redlock acquires stale-b once it expired');
($js_value) = $answer =~ /^ok (\S+)/;
$js_value //= 'none';
ok(settled(sub { values_of('stale-b') eq join(',', ($js_value) x 5) }),
	"node-redlock's value is on all 5 masters");
@before = $redis->script_calls;
($out, $err) = sql($s, "SELECT redlock_release('stale-b')");
is($out, 't', 'extension: release of its own expired lock returns true (it held it)');
like($err, qr/WARNING:\s+01000: .*had expired before it was released/, '... with a WARNING');
ok($redis->wait_scripts(\@before), '... and every master has run its release script');
is(values_of('stale-b'), join(',', ($js_value) x 5),
	"... and node-redlock's keys remain on every master");
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'extension: the expired lock is forgotten');
($out) = sql($s, "SELECT redlock_acquire('stale-b', 30000)");
is($out, 'f', 'extension: acquire returns false while node-redlock holds stale-b');
is(js('release stale-b'), 'ok', 'node-redlock releases stale-b');
ok($redis->holding('stale-b', 0, 5) == 0, '... and the key is gone from every master');
($out) = sql($s, "SELECT redlock_acquire('stale-b', 30000)");
is($out, 't', 'extension acquires stale-b after node-redlock released it');
($out) = sql($s, "SELECT redlock_release('stale-b')");
is($out, 't', 'extension releases stale-b');

# --- extend: each side's extend touches only its own value ---

like(js('acquire ext-job 5000'), qr/^ok /, 'node-redlock acquires ext-job for 5 s');
ok($redis->holding('ext-job', 5, 5) == 5, '... on all 5 masters');
($out, $err) = sql($s, "SELECT redlock_extend('ext-job', 60000)");
is($out, 'f', 'extension: extend of a lock it does not hold returns false');
@pttl = $redis->redis_all('PTTL', 'ext-job');
is(scalar(grep { $_ > 0 && $_ <= 5000 } @pttl), 5, "... and node-redlock's PTTL is unchanged");
is(js('extend ext-job 20000'), 'ok', 'node-redlock extends ext-job to 20 s');
ok( settled(
		sub {
			@pttl = $redis->redis_all('PTTL', 'ext-job');
			return 5 == grep { $_ > 15000 && $_ <= 20000 } @pttl;
		}),
	'... PTTL raised on all 5 masters') or diag("PTTL: @pttl");
is(js('release ext-job'), 'ok', 'node-redlock releases ext-job');

# --- a node-redlock release ends our wait within one retry delay ---
# node-redlock does not announce its releases (only our release script publishes on
# redlock:released), so nothing wakes our waiter: it sees the lock free at its next
# attempt, one retry delay after the refused one at most.  Its PTTL read finds
# node-redlock's 30 s keys, so no wake on expiry shortens that delay either.  (Whether
# this cluster has the library preloaded does not matter here.)

like(js('acquire wake-js 30000'), qr/^ok /, 'node-redlock acquires wake-js for 30 s');
ok($redis->holding('wake-js', 5, 5) == 5, '... on all 5 masters');
sql($s, 'SET redlock.retry_delay = 1500; SET redlock.retry_jitter = 0');
my ($attempts0) = sql($s, 'SELECT attempts FROM redlock_stats()');
@before = $redis->calls('set');
$s->start("SELECT redlock_acquire('wake-js', 30000, 10000)");
ok($redis->wait_calls(\@before, 'set'), 'our waiter (retry delay 1.5 s) was refused on every master');
my $t_release = time;
is(js('release wake-js'), 'ok', 'node-redlock releases wake-js while our session waits');
my $secs;
($out, $err, $secs) = $s->finish;
my $waited = time - $t_release;
is($out, 't', 'our waiter acquires wake-js after the node-redlock release');
cmp_ok($waited, '<', 1.5 + 1.0,
	sprintf('... %.3f s after the release: within one retry delay (1.5 s) and a margin', $waited));
my ($attempts1) = sql($s, 'SELECT attempts FROM redlock_stats()');
note sprintf('the wait took %.3f s and %d attempts', $secs, $attempts1 - $attempts0);
($out) = sql($s, "SELECT redlock_release('wake-js')");
is($out, 't', 'extension releases wake-js');
sql($s, 'RESET redlock.retry_delay; RESET redlock.retry_jitter');

# --- a key prefix puts the extension's locks in another namespace ---

like(js('acquire prefixed 30000'), qr/^ok /, 'node-redlock acquires "prefixed"');
ok($redis->holding('prefixed', 5, 5) == 5, '... on all 5 masters');
($out) = sql($s, "SET redlock.key_prefix = 'pg:'; SELECT redlock_acquire('prefixed', 30000)");
is($out, 't', "with key_prefix 'pg:' the extension's lock does not meet node-redlock's");
ok($redis->holding('pg:prefixed', 5, 5) == 5, '... it lives under "pg:prefixed"');
($out) = sql($s, "SELECT redlock_release('prefixed'); RESET redlock.key_prefix");
is($out, 't', 'extension releases pg:prefixed');
is(js('release prefixed'), 'ok', 'node-redlock releases "prefixed"');

# --- a race: both sides try the same resource at the same moment, 40 times ---

my ($both, $pg_wins, $js_wins, $neither) = (0, 0, 0, 0);
for my $round (1 .. 40)
{
	my $res = "race-$round";
	# Send node-redlock's acquire without waiting, so that both attempts overlap.
	$js_out = '';
	$js_in .= "acquire $res 10000\n";
	$js_proc->pump_nb;
	($out) = sql($s, "SELECT redlock_acquire('$res', 10000)");
	$js_timer->start(30);
	$js_proc->pump until $js_out =~ /\n/ || $js_timer->is_expired;
	my ($line) = $js_out =~ /^(.*)\n/;
	$line //= 'no answer';
	my $js_ok = $line =~ /^ok /;
	my $pg_ok = $out eq 't';
	$both++ if $js_ok && $pg_ok;
	$pg_wins++ if $pg_ok && !$js_ok;
	$js_wins++ if $js_ok && !$pg_ok;
	$neither++ if !$js_ok && !$pg_ok;
	if ($js_ok)
	{
		is(js("release $res"), 'ok', "race $round: node-redlock releases") if !$pg_ok;
		js("release $res") if $pg_ok;
	}
	if ($pg_ok)
	{
		($out) = sql($s, "SELECT redlock_release('$res')");
	}
}
note "race: extension won $pg_wins, node-redlock won $js_wins, neither $neither, both $both";
is($both, 0, 'in 40 simultaneous attempts the two clients never both held the lock');
cmp_ok($pg_wins + $js_wins, '>', 0, '... and someone won some of them');

is(js('quit'), 'bye', 'node-redlock client exits');
$js_proc->finish;
$s->quit;
$redis->no_keys_left('no key is left on any master');
RedisMasters::no_crash($node);

done_testing();
