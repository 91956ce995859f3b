# A backend never counts on more validity than the masters may have left, and a
# transaction commits only while its transaction locks have enough of it, checked in
# Redis:
# - an extend that failed (08006) or was cancelled (57014) may still have been applied by
#   any master, so it cuts the validity to what its TTL allows from now: once that ran
#   out, another session takes the lock and this one no longer believes it holds it;
# - a re-acquire with a shorter TTL in a savepoint rolled back leaves the committed lock
#   and its TTL on the masters;
# - COMMIT is refused (55P03) when a transaction lock has less than redlock.commit_margin
#   left, or was found lost under work that stays; a loss found inside a rolled-back
#   savepoint does not fail it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use PsqlSession qw(session sql validity);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('validity', $redis, $RedisMasters::ROOMY_CONF);

my $s = session($node);
my $o = session($node);
my ($out, $err);

# --- a failed extend to a shorter TTL cuts the validity ---

($out) = sql($s, "SELECT redlock_acquire('ext-short', 60000)");
is($out, 't', 'extend: acquired for 60 s');
is($redis->holding('ext-short', 5), 5, 'extend: on all 5 masters');
$redis->stop($_) for 1 .. 3;
($out, $err) = sql($s, "SET redlock.timeout = 200; SELECT redlock_extend('ext-short', 1000)");
like($err, qr/ERROR:\s+08006/, 'extend with 3 masters frozen raises 08006');
$redis->cont($_) for 1 .. 3;
cmp_ok(validity($s, 'ext-short'), '<=', 1000,
	'after the failed extend to 1 s, the validity is at most 1 s (any master may apply it)');
usleep(1_500_000);
($out) = sql($o, "SELECT redlock_acquire('ext-short', 5000)");
is($out, 't', 'the frozen masters applied the 1 s TTL: another session acquires after 1.5 s');
is(validity($s, 'ext-short'), '0', '... and this session no longer believes it holds it');
sql($o, "SELECT redlock_release('ext-short')");
($out, $err) = sql($s, "SELECT redlock_release('ext-short')");
like($err, qr/WARNING/, 'releasing the lost lock warns');

# A cancelled extend (statement_timeout while masters are frozen) does the same.
($out) = sql($s, "RESET redlock.timeout; SELECT redlock_acquire('ext-cancel', 60000)");
is($out, 't', 'cancelled extend: acquired for 60 s');
$redis->holding('ext-cancel', 5);
$redis->stop($_) for 1 .. 3;
($out, $err) = sql($s,
	"SET redlock.timeout = 5000; SET statement_timeout = 300; SELECT redlock_extend('ext-cancel', 1000)");
like($err, qr/ERROR:\s+57014/, 'extend interrupted by statement_timeout (57014)');
$redis->cont($_) for 1 .. 3;
sql($s, "RESET statement_timeout; RESET redlock.timeout");
cmp_ok(validity($s, 'ext-cancel'), '<=', 1000, 'after the cancelled extend, validity <= 1 s');
sql($s, "SELECT redlock_release('ext-cancel')");

# --- a rolled-back re-acquire does not cut the committed lock ---

($out) = sql($s, "SELECT redlock_acquire('reacq', 60000)");
is($out, 't', 're-acquire: acquired for 60 s');
($out, $err) = sql($s,
	"BEGIN; SAVEPOINT s; SELECT redlock_acquire('reacq', 1000); ROLLBACK TO s; COMMIT;");
is($err, '', 're-acquire with 1 s in a rolled-back savepoint: no error');
($out) = sql($s, "SELECT ttl_ms FROM redlock_locks() WHERE resource = 'reacq'");
is($out, '60000', 'the lock keeps its 60 s TTL');
my @pttl = $redis->redis_all('PTTL', 'reacq');
is(scalar(grep { $_ > 50000 } @pttl), 5, 'every master still has PTTL > 50 s') or diag("@pttl");
usleep(1_500_000);
($out) = sql($o, "SELECT redlock_acquire('reacq', 5000)");
is($out, 'f', 'another session still cannot acquire it 1.5 s later');
sql($s, "SELECT redlock_release('reacq')");

# --- commit margin, a loss inside a rolled-back savepoint ---

($out, $err) = sql($s, "BEGIN; SELECT redlock_xact_acquire('margin', 400); SELECT pg_sleep(0.33); COMMIT;");
like($err, qr/ERROR:\s+55P03/, 'commit margin: less than 100 ms of validity left fails COMMIT');
($out, $err) = sql($s, "BEGIN; SAVEPOINT s; SELECT redlock_xact_acquire('sp-lost', 50); SELECT pg_sleep(0.2);"
	  . " SELECT redlock_extend('sp-lost'); ROLLBACK TO s; COMMIT;");
unlike($err, qr/ERROR/, 'a loss found inside a rolled-back savepoint does not fail COMMIT');
($out) = sql($s, "BEGIN; SELECT redlock_xact_acquire('keep-outer', 50); SAVEPOINT s; SELECT pg_sleep(0.2);"
	  . " SELECT redlock_xact_acquire('keep-outer', 30000); SELECT xact_holds FROM redlock_locks(); ROLLBACK TO s;"
	  . " SELECT xact_holds FROM redlock_locks();");
like($out, qr/\b2\n.*\b1$/s, 'a re-acquire that finds the lock lost keeps the outer hold (2 holds, 1 after ROLLBACK TO)');
($out, $err) = sql($s, "COMMIT");
like($err, qr/ERROR:\s+55P03/, '... and COMMIT fails, since work ran under the lost outer hold');

$s->quit;
$o->quit;
RedisMasters::no_crash($node);
done_testing();
