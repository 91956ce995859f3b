# Security: Redis masters that require a password (requirepass) and an ACL user; a wrong
# or missing password is a prompt 08006 ERROR naming every master with Redis' own words
# (the worker's subscriptions authenticate too),
# and neither the real nor the wrong password shows in errors or the server log; with the
# library preloaded, plain users cannot set where or how backends connect, nor read the
# password; EXECUTE is revoked from PUBLIC; awkward resource names (quotes, spaces,
# newlines, multi-byte UTF-8, RESP look-alikes, exactly 1024 bytes) are stored as binary-
# safe keys, and 1025 bytes is a 22023 error; the key is the UTF-8 form of the name
# whatever the database encoding (a LATIN1 database and a UTF8 one contend for one key).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $pw = 'Pw-7f3c1e9a-redis-secret';
my $wrong_pw = 'Wrong-4b2d8c0e-guess';
my $user_pw = 'Usr-91ae55d2-acl-secret';

my $redis = RedisMasters->new(5);
my @ports = $redis->ports;

is(join(',', map { $redis->redis_cli($_, 'CONFIG', 'SET', 'requirepass', $pw) } 0 .. $#ports),
	join(',', ('OK') x 5), 'every master requires a password');
like($redis->redis_cli(0, 'GET', 'x'), qr/NOAUTH/, 'redis-cli without it gets NOAUTH');
$redis->auth($pw);    # redis-cli authenticates from here on

my $node = RedisMasters::redlock_node('security', $redis, $RedisMasters::ROOMY_CONF . qq{
shared_preload_libraries = 'redlock'
redlock.password = '$pw'
log_min_messages = debug1
});
$node->safe_psql('postgres', q{
CREATE ROLE plain LOGIN;
CREATE ROLE granted LOGIN;
GRANT EXECUTE ON FUNCTION redlock_acquire(text, integer, integer),
	redlock_xact_acquire(text, integer, integer), redlock_release(text),
	redlock_extend(text, integer), redlock_release_all(), redlock_locks() TO granted;
CREATE DATABASE utf8 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
});
$node->safe_psql('utf8', 'CREATE EXTENSION redlock');

my $su = session($node);
my ($out, $err, $secs);

# --- requirepass: the right password works ---

($out, $err) = sql($su, "SELECT redlock_acquire('auth-job', 30000)");
is($out, 't', 'acquire with redlock.password from postgresql.conf');
is($err, '', '... no error');
is(scalar(grep { /^[0-9a-f]{40}$/ } $redis->redis_all('GET', 'auth-job')), 5,
	'... the token is on all 5 masters');
($out) = sql($su, "SELECT redlock_release('auth-job')");
is($out, 't', 'release with the password');
# A release is decided once a majority acted (README); the others follow at once.
ok(wait_until(2, sub { join(',', $redis->redis_all('EXISTS', 'auth-job')) eq '0,0,0,0,0' }),
	'... the key is gone from every master within 2 s')
  or diag('EXISTS: ' . join(',', $redis->redis_all('EXISTS', 'auth-job')));

# The worker's subscriptions (wake-on-release) connect through the same funnel, with the
# same AUTH: a waiter here gets one subscriber of its release channel on every master.
$redis->redis_all('SET', 'auth-wait', 'held-elsewhere', 'PX', 60000);
my $waiter = session($node);
sql($waiter, 'SET redlock.retry_delay = 5000; SET redlock.retry_jitter = 0');
$waiter->start("SELECT redlock_acquire('auth-wait', 30000, 20000)");
ok(wait_until(10, sub {
	!grep { (split /\s+/)[1] ne '1' }
	  $redis->redis_all('PUBSUB', 'NUMSUB', 'redlock:released:auth-wait') }),
	"a waiter's release channel is subscribed to on every password-protected master")
  or diag('NUMSUB: ' . join(',', $redis->redis_all('PUBSUB', 'NUMSUB', 'redlock:released:auth-wait')));
$redis->redis_all('DEL', 'auth-wait');
($out) = $waiter->finish;
is($out, 't', '... and it acquires once the holder elsewhere is gone');
sql($waiter, "SELECT redlock_release('auth-wait')");
$waiter->quit;

# Checks that ERR is a prompt 08006 whose detail names the failed masters with Redis'
# words matching WORDS: at least 3 of the 5 (the extension stops waiting once a quorum
# can no longer be reached, and lists the masters it heard from), and every master it
# names comes with those words.
sub auth_error
{
	my ($what, $err, $secs, $words) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	like($err, qr/ERROR:\s+08006: could not acquire lock on resource/, "$what: ERROR 08006");
	my ($detail) = $err =~ /DETAIL:\s+(.*?)(?:\nHINT:|\nLOCATION:|\z)/s;
	$detail //= '';
	my @lines = split /\n/, $detail;
	my @named = grep { my $p = $_; grep { /127\.0\.0\.1:$p\b/ } @lines } @ports;
	cmp_ok(scalar(@named), '>=', 3, "$what: the detail names at least 3 masters (a quorum's worth of failures)")
	  or diag($err);
	is(scalar(grep { /^127\.0\.0\.1:\d+: .*$words/ } @lines), scalar(@lines),
		"$what: each detail line is \"host:port: <Redis' $words text>\"") or diag($err);
	like($err, qr/HINT:\s+Check redlock\.servers and redlock_nodes\(\)/,
		"$what: the hint says where to look") or diag($err);
	cmp_ok($secs, '<', 2, "$what: returned at once (${secs}s), no hang");
	unlike($err, qr/\Q$pw\E|\Q$wrong_pw\E|\Q$user_pw\E/, "$what: no password in the message");
}

# --- a wrong password, no password ---

sql($su, "SET redlock.password = '$wrong_pw'");
($out, $err, $secs) = sql($su, "SELECT redlock_acquire('auth-fail', 30000)");
note $err;
auth_error('wrong password', $err, $secs, qr/WRONGPASS/);
is(join(',', $redis->redis_all('EXISTS', 'auth-fail')), '0,0,0,0,0', '... nothing was written');

($out, $err, $secs) = sql($su, "SELECT redlock_acquire('auth-fail', 30000, 1000)");
auth_error('wrong password, with wait_ms', $err, $secs, qr/WRONGPASS/);

($out) = sql($su, 'SELECT node, connected, last_error FROM redlock_nodes()');
note "redlock_nodes() after the wrong password:\n$out";
like($out, qr/WRONGPASS/, "redlock_nodes() shows the masters' WRONGPASS errors");
unlike($out, qr/\Q$pw\E|\Q$wrong_pw\E/, '... but no password');

sql($su, "SET redlock.password = ''");
($out, $err, $secs) = sql($su, "SELECT redlock_acquire('auth-fail', 30000)");
note $err;
auth_error('no password', $err, $secs, qr/NOAUTH/);

sql($su, 'RESET redlock.password');
($out, $err) = sql($su, "SELECT redlock_acquire('auth-again', 30000)");
is($out, 't', 'after RESET the configured password works again (reconnected)');
($out) = sql($su, "SELECT redlock_release('auth-again')");
is($out, 't', '... and release');

# --- an ACL user: redlock.username + redlock.password ---

is( join(',',
		$redis->redis_all('ACL', 'SETUSER', 'locker', 'on', ">$user_pw", '~*', '&*', '+@all')),
	join(',', ('OK') x 5),
	'ACL user "locker" on every master');
sql($su, "SET redlock.username = 'locker'; SET redlock.password = '$user_pw'");
($out, $err) = sql($su, "SELECT redlock_acquire('acl-job', 30000)");
is($out, 't', 'acquire as ACL user "locker"');
is($err, '', '... no error');
my @clients = $redis->redis_all('CLIENT', 'LIST');
is(scalar(grep { /user=locker/ } @clients), 5, '... connected as user=locker on all 5 masters');
($out) = sql($su, "SELECT redlock_release('acl-job')");
is($out, 't', 'release as "locker"');

sql($su, "SET redlock.username = 'nobody'");
($out, $err, $secs) = sql($su, "SELECT redlock_acquire('acl-job', 30000)");
note $err;
auth_error('unknown ACL user', $err, $secs, qr/WRONGPASS/);

sql($su, "SET redlock.username = 'locker'; SET redlock.password = '$wrong_pw'");
($out, $err, $secs) = sql($su, "SELECT redlock_acquire('acl-job', 30000)");
auth_error('ACL user, wrong password', $err, $secs, qr/WRONGPASS/);

# A user allowed only some keys: the others are refused (NOPERM), a false result or an
# error, never a lock.
$redis->redis_all('ACL', 'SETUSER', 'narrow', 'on', ">$user_pw", 'resetkeys', '~jobs:*', '&*', '+@all');
sql($su, "SET redlock.username = 'narrow'; SET redlock.password = '$user_pw'");
($out) = sql($su, "SELECT redlock_acquire('jobs:1', 30000)");
is($out, 't', 'ACL user "narrow" acquires a key it may write');
($out, $err) = sql($su, "SELECT redlock_acquire('other:1', 30000)");
isnt($out, 't', 'ACL user "narrow" does not get a lock on a key it may not write');
note "narrow on other:1: out=$out err=$err";
is(join(',', $redis->redis_all('EXISTS', 'other:1')), '0,0,0,0,0', '... and no key was written');
($out) = sql($su, "SELECT redlock_release('jobs:1')");
is($out, 't', '"narrow" releases jobs:1');
sql($su, 'RESET redlock.username; RESET redlock.password');

# --- redlock.password_file: no secret in any setting ---

my $pwfile = $node->basedir . '/redis.pass';
sub write_secret
{
	my ($text, $mode) = @_;
	open(my $fh, '>', $pwfile) or die "open $pwfile: $!";
	print $fh $text;
	close($fh);
	chmod($mode, $pwfile) or die "chmod $pwfile: $!";
	return;
}

write_secret("$pw\n", 0600);
sql($su, "SET redlock.password = ''");
($out, $err) = sql($su,
	"SET redlock.password_file = '$pwfile'; SELECT redlock_acquire('file-auth', 30000)");
is($out, 't', 'redlock.password_file (0600, the password on its first line): acquire works');
is($err, '', '... no error');
($out) = sql($su, "SELECT redlock_release('file-auth')");
is($out, 't', '... and release');
($out) = sql($su, 'SHOW redlock.password_file');
is($out, $pwfile, '... SHOW gives the path, not the password');

write_secret("$wrong_pw\r\nsecond line ignored\n", 0600);
($out, $err, $secs) = sql($su,
	"SET redlock.password_file = '$pwfile'; SELECT redlock_acquire('file-auth', 30000)");
auth_error('a wrong password in the file (CRLF, a second line)', $err, $secs, qr/WRONGPASS/);

write_secret("$pw\n", 0644);
($out, $err) = sql($su, "SET redlock.password_file = '$pwfile'");
like($err, qr/ERROR:\s+22023: invalid value for parameter "redlock.password_file"/,
	'a password file readable by others is refused (22023)');
like($err, qr/DETAIL:\s+File "\Q$pwfile\E" has group or world access/, '... saying why');
like($err, qr/HINT:\s+.*chmod 0600/, '... and what to do');
unlike($err, qr/\Q$pw\E/, '... without the password');

($out, $err) = sql($su, "SET redlock.password_file = '$pwfile.missing'");
like($err, qr/ERROR:\s+22023: .*\n.*DETAIL:\s+Could not stat file ".*missing": No such file/,
	'a missing password file is refused (22023), naming it');

write_secret(('x' x 1025) . "\n", 0600);
($out, $err) = sql($su, "SET redlock.password_file = '$pwfile'");
like($err, qr/DETAIL:\s+The password in file .* is longer than 1024 bytes/,
	'a password longer than 1024 bytes is refused');

sql($su, 'RESET redlock.password_file; RESET redlock.password');
($out) = sql($su, "SELECT redlock_acquire('file-auth', 30000) AND redlock_release('file-auth')");
is($out, 't', 'after RESET the configured redlock.password works again');

# --- plain users: superuser-only settings, the hidden password ---

my $plain = session($node, 'postgres', extra_params => [ '-U', 'plain' ]);
for my $set (
	"SET redlock.servers = '127.0.0.1:1'",
	"SET redlock.password = 'x'",
	"SET redlock.password_file = '/etc/passwd'",
	"SET redlock.username = 'x'",
	"SET redlock.key_prefix = 'stolen:'",
	"SET redlock.database = 1",
	"SET redlock.clock_drift_factor = 0",
	"SELECT set_config('redlock.servers', '127.0.0.1:1', false)",
	"SELECT set_config('redlock.password', 'x', true)",
	"ALTER ROLE plain SET redlock.servers = '127.0.0.1:1'")
{
	($out, $err) = sql($plain, $set);
	like($err, qr/ERROR:\s+42501: permission denied to set parameter "redlock\./,
		"plain user: $set is refused (42501)");
}
($out, $err) = sql($plain, 'SET redlock.timeout = 100; SHOW redlock.timeout');
is($out, '100ms', 'plain user may set redlock.timeout (its own business)');

($out, $err) = sql($plain, 'SHOW redlock.password');
like($err, qr/ERROR:\s+42501/, 'plain user: SHOW redlock.password is refused');
($out, $err) = sql($plain, 'SHOW redlock.password_file');
like($err, qr/ERROR:\s+42501/, 'plain user: SHOW redlock.password_file is refused');
($out, $err) = sql($plain, "SELECT current_setting('redlock.password')");
like($err, qr/ERROR:\s+42501/, "plain user: current_setting('redlock.password') is refused");
($out, $err) = sql($plain, "SELECT current_setting('redlock.password', true)");
unlike($out, qr/\Q$pw\E/, "plain user: current_setting(..., missing_ok) does not show it");
($out) = sql($plain, "SELECT count(*) FROM pg_settings WHERE name = 'redlock.password'");
is($out, '0', 'plain user: redlock.password is not in pg_settings');
($out) = sql($plain, "SELECT count(*) FROM pg_settings WHERE name LIKE 'redlock.%'");
cmp_ok($out, '>=', 8, '... while the other redlock settings are');
($out, $err) = sql($plain, 'SHOW ALL');
unlike($out, qr/\Q$pw\E|redlock\.password/, 'plain user: SHOW ALL shows neither name nor value');
($out, $err) = sql($plain, 'SELECT setting FROM pg_file_settings');
unlike($out, qr/\Q$pw\E/, 'plain user: pg_file_settings does not give it away');
($out) = sql($su, 'SHOW redlock.password');
is($out, $pw, 'a superuser sees it');

# --- EXECUTE as installed: revoked from PUBLIC ---

for my $call (
	"SELECT redlock_acquire('priv-job')",
	"SELECT redlock_acquire('priv-job', 1000, 0)",
	"SELECT redlock_xact_acquire('priv-job')",
	"SELECT redlock_release('priv-job')",
	"SELECT redlock_extend('priv-job')",
	"SELECT redlock_release_all()",
	"SELECT * FROM redlock_locks()",
	"SELECT * FROM redlock_nodes()",
	"SELECT * FROM redlock_stats()",
	"SELECT redlock_stats_reset()")
{
	($out, $err) = sql($plain, $call);
	like($err, qr/ERROR:\s+42501: permission denied for function redlock_/,
		"fresh role: $call is refused (42501)");
}
is(join(',', $redis->redis_all('EXISTS', 'priv-job')), '0,0,0,0,0', '... and took no lock');

my $granted = session($node, 'postgres', extra_params => [ '-U', 'granted' ]);
($out, $err) = sql($granted, "SELECT redlock_acquire('priv-job', 30000)");
is($out, 't', 'a role granted EXECUTE acquires (with the password it cannot read)');
($out) = sql($granted, "SELECT redlock_extend('priv-job', 40000), redlock_release('priv-job')");
is($out, 't|t', '... extends and releases');
$granted->quit;

# --- resource names as binary-safe keys (UTF-8 database) ---

my $u = session($node, 'utf8');
my @before = $redis->redis_all('DBSIZE');
my %names = (
	'quotes' => q{it's a "quoted" name; DROP TABLE x; --},
	'spaces' => '  leading and trailing spaces  ',
	'newlines' => "line one\nline two\r\nthree\n",
	'utf-8' => "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x94\x92",
	'RESP look-alike' => "x\r\n*1\r\n\$8\r\nFLUSHALL\r\n",
	'1024 bytes ASCII' => 'a' x 1024,
	'1024 bytes UTF-8' => "\xc3\xa9" x 512,
	'Lua-ish' => q{"]) redis.call("flushall") --},
);
for my $what (sort keys %names)
{
	my $name = $names{$what};
	my $hex = unpack('H*', $name);
	my $lit = "convert_from('\\x$hex'::bytea, 'UTF8')";
	($out, $err) = sql($u,
		"SELECT redlock_acquire($lit, 30000), (SELECT key = $lit FROM redlock_locks()"
		  . " WHERE resource = $lit), octet_length($lit)");
	is($out, 't|t|' . length($name), "$what: acquired, redlock_locks().key is the name");
	is($err, '', "$what: no error") or diag($err);
	my @got = map { $redis->redis_cli($_, 'GET', $name) } 0 .. $#ports;
	is(scalar(grep { /^[0-9a-f]{40}$/ } @got), 5,
		"$what: redis-cli GET of the exact bytes shows a 40-hex token on all 5 masters");
}
is(join(',', $redis->redis_all('DBSIZE')), join(',', map { $_ + 2 * scalar keys %names } @before),
	'two more keys per name on each master, the lock and its holder record, nothing else (nothing was injected)');
($out) = sql($u, 'SELECT redlock_release_all()');
is($out, scalar keys %names, 'release_all releases every one');
ok( wait_until(
		2,
		sub {
			my $left = 0;
			for my $name (values %names)
			{
				$left += $_ for map { $redis->redis_cli($_, 'EXISTS', $name) } 0 .. $#ports;
			}
			return $left == 0;
		}),
	'... and every key is gone from every master within 2 s');
@before = $redis->redis_all('DBSIZE');

for my $long ("repeat('a', 1025)", "repeat(convert_from('\\xc3a9'::bytea, 'UTF8'), 512) || 'a'")
{
	($out, $err) = sql($u, "SELECT redlock_acquire($long, 30000)");
	like($err, qr/ERROR:\s+22023/, "a 1025-byte name ($long) is a 22023 error");
	like($err, qr/1024/, '... which states the 1024-byte limit');
	($out, $err) = sql($u, "SELECT redlock_release($long)");
	like($err, qr/ERROR:\s+22023/, '... release too');
}
is(join(',', $redis->redis_all('DBSIZE')), join(',', @before), 'no key written for too-long names');
($out, $err) = sql($u, "SELECT redlock_acquire('', 30000)");
like($err, qr/ERROR:\s+22023/, 'an empty name is a 22023 error');

# --- encodings: the key is the UTF-8 form of the name ---

$node->safe_psql('postgres',
	"CREATE DATABASE latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
$node->safe_psql('latin1', 'CREATE EXTENSION redlock');
my $l = session($node, 'latin1');
sql($l, "SET client_encoding = 'UTF8'");
($out) = sql($l, "SELECT redlock_acquire('café', 30000)");
is($out, 't', 'encoding: a LATIN1 database acquires café');
($out) = sql($u, "SELECT redlock_acquire('café', 30000)");
is($out, 'f', 'encoding: a UTF8 database cannot take café meanwhile');
is($redis->redis_cli(0, 'EXISTS', 'café'), '1', 'encoding: the key is the UTF-8 name');
sql($l, "SELECT redlock_release('café')");
$l->quit;

$u->quit;
$plain->quit;
$su->quit;

# --- the server log: no password ---

RedisMasters::no_crash($node);
my $log = slurp_file($node->logfile);
like($log, qr/WRONGPASS/, 'the server log shows the failed AUTH errors (so the grep is real)');
unlike($log, qr/\Q$pw\E/, 'the server log never contains the configured password');
unlike($log, qr/\Q$user_pw\E/, '... nor the ACL user\'s password');
unlike($log, qr/\Q$wrong_pw\E/, '... nor the wrong one');

done_testing();
