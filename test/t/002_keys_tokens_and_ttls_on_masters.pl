# What redlock writes into Redis, checked with redis-cli on every master: the key, its
# 40-hex token, its PTTL; gone after release; PTTL raised by extend, and extend(resource)
# setting the TTL last set (by the acquire or an extend); someone else's token left alone
# by extend and release (checked once every master has run the script); key_prefix.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('keys', $redis, $RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF);
my $s = session($node);

# Checks KEY on all masters: same 40-hex token everywhere, MIN_MS < PTTL <= MAX_MS.  Polls
# for up to 3 s: a call returns once a majority decided, the other masters may apply the
# request a moment later (see RedisMasters::holding).  Returns the token.
sub check_key
{
	my ($key, $max_ms, $min_ms, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my (@tokens, @pttls);
	my $good_pttl = sub { $_[0] =~ /^\d+$/ && $_[0] > $min_ms && $_[0] <= $max_ms };
	wait_until(
		3,
		sub {
			@tokens = $redis->redis_all('GET', $key);
			@pttls = $redis->redis_all('PTTL', $key);
			return (grep { $_ eq $tokens[0] && /^[0-9a-fA-F]{40}$/ } @tokens) == 5
			  && (grep { $good_pttl->($_) } @pttls) == 5;
		});
	note "GET $key: @tokens; PTTL $key: @pttls";
	is(scalar(grep { /^[0-9a-fA-F]{40}$/ } @tokens), 5,
		"$what: a 40-hex-char token under \"$key\" on all 5 masters");
	is(scalar(grep { $_ eq $tokens[0] } @tokens), 5,
		"$what: the same token on every master");
	is(scalar(grep { $good_pttl->($_) } @pttls), 5,
		"$what: $min_ms < PTTL <= $max_ms on all 5 masters");
	return $tokens[0];
}

# --- acquire, key and token, release ---

my ($out, $err) = sql($s, "SELECT redlock_acquire('nightly-billing', 30000)");
is($out, 't', 'acquire nightly-billing for 30000 ms');
my $token = check_key('nightly-billing', 30000, 25000, 'after acquire');

($out) = sql($s,
	"SELECT resource, key, scope, session_holds, xact_holds, ttl_ms, nodes,"
	  . " validity_ms > 0 AND validity_ms <= 30000, valid_until > acquired_at"
	  . " FROM redlock_locks()");
# nodes: the masters known to have accepted when the outcome was decided, a majority
# at least (the others' replies are not waited for).
$out =~ s/\|[345]\|t\|t$/|3..5|t|t/;
is($out, 'nightly-billing|nightly-billing|session|1|0|30000|3..5|t|t',
	'redlock_locks() describes the lock');

my ($out2) = sql($s, "SELECT redlock_acquire('nightly-billing', 30000)");
is($out2, 't', 'a second acquire by the holder succeeds (stacks)');
is($redis->redis_cli(3, 'GET', 'nightly-billing'), $token,
	'the stacked acquire keeps the same token');
($out) = sql($s, "SELECT session_holds FROM redlock_locks()");
is($out, '2', 'session_holds counts 2');
($out) = sql($s, "SELECT redlock_release('nightly-billing')");
is($out, 't', 'release one of two holds');
is($redis->holding('nightly-billing', 5), 5, 'the key stays while a hold remains');
($out) = sql($s, "SELECT redlock_release('nightly-billing')");
is($out, 't', 'release the last hold');
is($redis->holding('nightly-billing', 0), 0, 'the key is gone from every master after release');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'redlock_locks() is empty');

($out, $err) = sql($s, "SELECT redlock_release('nightly-billing')");
is($out, 'f', 'releasing a lock not held returns false');
like($err, qr/WARNING/, '... with a WARNING');

# A fresh acquisition gets a fresh token.
($out) = sql($s, "SELECT redlock_acquire('nightly-billing', 30000)");
is($out, 't', 'acquire again');
my $token2 = check_key('nightly-billing', 30000, 25000, 'after re-acquire');
isnt($token2, $token, 'a new acquisition writes a new token');
sql($s, "SELECT redlock_release('nightly-billing')");

# --- re-acquiring refreshes the TTL ---

sql($s, "SELECT redlock_acquire('refresh', 3000)");
check_key('refresh', 3000, 0, 'after a 3000 ms acquire');
($out) = sql($s, "SELECT redlock_acquire('refresh', 60000)");
is($out, 't', 'acquire again while holding, with a 60000 ms TTL');
check_key('refresh', 60000, 50000, 're-acquire set the new TTL on the masters');
($out) = sql($s, "SELECT redlock_release_all()");
is($out, '1', 'release_all drops the lock with two holds as one lock');
is($redis->holding('refresh', 0), 0, 'and deletes its key everywhere');

# --- extend ---

sql($s, "SELECT redlock_acquire('extended', 5000)");
check_key('extended', 5000, 0, 'before extend');
($out) = sql($s, "SELECT redlock_extend('extended', 60000)");
is($out, 't', 'extend to 60000 ms');
check_key('extended', 60000, 55000, 'extend raised the PTTL');

# extend(resource) with no TTL sets the TTL last set on the masters: the acquire's here.
# The checks leave 3 s of room between the extend and the look at the PTTLs.
($out) = sql($s, "SELECT redlock_acquire('extended-default', 20000)");
is($out, 't', 'acquire extended-default for 20000 ms');
usleep(3_200_000);
check_key('extended-default', 17000, 0, '3.2 s after a 20000 ms acquire');
($out) = sql($s, "SELECT redlock_extend('extended-default')");
is($out, 't', 'extend with the default TTL');
check_key('extended-default', 20000, 17000, 'extend(resource) set the PTTL to 20000 again');
# ... and after an extend with a TTL, the TTL of that extend (the last one set).
($out) = sql($s, "SELECT redlock_extend('extended-default', 40000)");
is($out, 't', 'extend to 40000 ms');
check_key('extended-default', 40000, 37000, 'extend(resource, 40000)');
usleep(3_200_000);
check_key('extended-default', 37000, 0, '3.2 s after the extend to 40000 ms');
($out) = sql($s, "SELECT redlock_extend('extended-default')");
is($out, 't', 'extend with the default TTL again');
($out) = sql($s, "SELECT ttl_ms FROM redlock_locks() WHERE resource = 'extended-default'");
is($out, '40000', '... redlock_locks().ttl_ms is still 40000');
check_key('extended-default', 40000, 37000,
	'extend(resource) after an extend to 40000 set the last TTL set (40000), not the acquire\'s');
sql($s, "SELECT redlock_release('extended-default')");

# The key was deleted behind our back: the lock is lost, extend says so.
# (the lock's key only: its holder record stays until its TTL, never shown beside another
# token; deleted here so that no key is left at the end)
$redis->redis_cli($_, 'DEL', 'extended') for 0 .. 4;
$redis->redis_cli($_, 'DEL', "extended\xffholder") for 0 .. 4;
($out, $err) = sql($s, "SELECT redlock_extend('extended', 60000)");
is($out, 'f', 'extend returns false once the keys are gone (lock lost)');
is($redis->holding('extended', 0), 0, 'and does not create the keys again');
($out) = sql($s, "SELECT count(*) FROM redlock_locks() WHERE resource = 'extended'");
is($out, '0', 'a lost lock is forgotten by the session');

# Someone else's token under our key: extend must not touch it.
sql($s, "SELECT redlock_release_all()");
sql($s, "SELECT redlock_acquire('stolen', 5000)");
is($redis->holding('stolen', 5), 5, 'lock stolen acquired on all masters');
$redis->redis_cli($_, 'SET', 'stolen', 'x' x 40, 'PX', 90000) for 0 .. 4;
my @before = $redis->script_calls;
($out) = sql($s, "SELECT redlock_extend('stolen', 60000)");
is($out, 'f', 'extend returns false when another token holds the key');
ok($redis->wait_scripts(\@before), 'every master has run the extend script');
is(join(',', $redis->redis_all('GET', 'stolen')), join(',', ('x' x 40) x 5),
	'the other token is left alone by extend');
my @pttl = $redis->redis_all('PTTL', 'stolen');
is(scalar(grep { /^\d+$/ && $_ > 60000 } @pttl), 5, '... and its PTTL (90 s) too')
  or diag("PTTL: @pttl");
# extend found the lock lost and forgot it, so a release now would send nothing: take the
# lock again, let another token take its keys over, then release.
$redis->redis_cli($_, 'DEL', 'stolen') for 0 .. 4;
($out) = sql($s, "SELECT redlock_acquire('stolen', 5000)");
is($out, 't', 'acquire stolen again');
is($redis->holding('stolen', 5), 5, '... on all masters');
$redis->redis_cli($_, 'SET', 'stolen', 'x' x 40, 'PX', 90000) for 0 .. 4;
@before = $redis->script_calls;
($out, $err) = sql($s, "SELECT redlock_release('stolen')");
is($out, 't', 'release of a lock whose keys were taken over returns true (it was held)');
like($err, qr/WARNING:\s+01000: lock on resource "stolen" was no longer held by a majority/,
	'... with the "no longer held by a majority" WARNING');
ok($redis->wait_scripts(\@before), 'every master has run the release script');
is(join(',', $redis->redis_all('GET', 'stolen')), join(',', ('x' x 40) x 5),
	'and by release (only the holder\'s token is deleted)');
$redis->redis_cli($_, 'DEL', 'stolen') for 0 .. 4;
sql($s, "SELECT redlock_release_all()");

# --- key_prefix ---

($out, $err) = sql($s, "SET redlock.key_prefix = 'app1:'");
is($err, '', 'superuser sets redlock.key_prefix');
($out) = sql($s, "SELECT redlock_acquire('prefixed', 30000)");
is($out, 't', 'acquire with a prefix');
check_key('app1:prefixed', 30000, 25000, 'with key_prefix app1:');
is($redis->holding('prefixed', 0), 0, 'no unprefixed key');
($out) = sql($s, "SELECT resource, key FROM redlock_locks()");
is($out, 'prefixed|app1:prefixed', 'redlock_locks() shows resource and prefixed key');
($out) = sql($s, "SELECT redlock_release('prefixed')");
is($out, 't', 'release with a prefix');
is($redis->holding('app1:prefixed', 0), 0, 'the prefixed key is gone everywhere');
sql($s, "RESET redlock.key_prefix");

# Each master got exactly the keys above, and none are left over.
$redis->no_keys_left;

$s->quit;
RedisMasters::no_crash($node);
done_testing();
