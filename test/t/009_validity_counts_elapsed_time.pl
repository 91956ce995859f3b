# The validity time counts from the start of the attempt, not from when the quorum
# answered (README's first safety rule; spec §3 steps 3 and 4): validity = TTL - elapsed -
# drift.  Three of five masters are frozen (SIGSTOP) while an acquire, then an extend,
# waits for them under a long redlock.timeout; they are resumed once the two others have
# processed the request and 1.5 s more have passed, so the quorum's replies come at least
# 1.5 s after the request went out.  Then a 1 s TTL leaves no validity (acquire false;
# extend false, the lock lost), and a 4 s TTL leaves at most 4000 - 1500 - drift ms.
# Only upper bounds on the validity are asserted: a loaded machine makes it smaller.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('elapsed', $redis, $RedisMasters::PATIENT_CONF);
my $s = session($node);
my ($out, $err);

my $late_ms = 1500;
my @frozen = (2, 3, 4);

# Runs QUERY while masters 2-4 are frozen, resumed late_ms after masters 0 and 1
# processed the query's CMD; returns the query's (stdout, stderr).
sub with_late_quorum
{
	my ($query, $cmd) = @_;
	my ($o, $e, $sent) = $redis->answer_late(\@frozen, $late_ms, $s, $query, $cmd);
	ok($sent, "masters 0 and 1 processed the $cmd before masters 2-4 were resumed");
	return ($o, $e);
}

# Open the connections first, so that the requests below go out at once.
($out) = sql($s, "SELECT redlock_acquire('warm-up', 1000) AND redlock_release('warm-up')");
is($out, 't', 'warm-up call opens the connections');

# The drift allowance for a TTL (README: TTL x redlock.clock_drift_factor + 2 ms); the
# setting exists once the library is loaded, by the call above.
my ($factor) = sql($s, 'SHOW redlock.clock_drift_factor');
like($factor, qr/^[0-9.]+$/, "redlock.clock_drift_factor is $factor");
sub drift_ms { return $_[0] * $factor + 2; }

# --- acquire ---

($out, $err) = with_late_quorum("SELECT redlock_acquire('late-1s', 1000)", 'set');
is($out, 'f', "acquire with a 1 s TTL whose quorum answers $late_ms ms late: false");
is($err, '', '... without an error');
($out) = sql($s, "SELECT count(*) FROM redlock_locks() WHERE resource = 'late-1s'");
is($out, '0', '... and the lock is not held');

($out, $err) = with_late_quorum(
	"SELECT redlock_acquire('late-4s', 4000);\n"
	  . "SELECT validity_ms FROM redlock_locks() WHERE resource = 'late-4s'", 'set');
my ($ok, $validity) = split /\n/, $out;
is($ok, 't', "acquire with a 4 s TTL whose quorum answers $late_ms ms late: true");
my $bound = 4000 - $late_ms - drift_ms(4000);
cmp_ok($validity, '<=', $bound,
	"... with a validity of $validity ms, at most TTL - $late_ms - drift = $bound ms");
cmp_ok($validity, '>', 0, '... and some validity left');
sql($s, "SELECT redlock_release('late-4s')");

# --- extend (a held lock, its TTL set anew) ---

($out) = sql($s, "SELECT redlock_acquire('ext-1s', 60000)");
is($redis->holding('ext-1s', 5), 5, 'a 60 s lock is on all 5 masters');
($out, $err) = with_late_quorum("SELECT redlock_extend('ext-1s', 1000)", 'evalsha');
is($out, 'f', "extend to 1 s whose quorum answers $late_ms ms late: false (lost)");
($out) = sql($s, "SELECT count(*) FROM redlock_locks() WHERE resource = 'ext-1s'");
is($out, '0', '... and the lock is forgotten');

($out) = sql($s, "SELECT redlock_acquire('ext-4s', 60000)");
is($redis->holding('ext-4s', 5), 5, 'another 60 s lock is on all 5 masters');
($out, $err) = with_late_quorum(
	"SELECT redlock_extend('ext-4s', 4000);\n"
	  . "SELECT validity_ms FROM redlock_locks() WHERE resource = 'ext-4s'", 'evalsha');
($ok, $validity) = split /\n/, $out;
is($ok, 't', "extend to 4 s whose quorum answers $late_ms ms late: true");
cmp_ok($validity, '<=', $bound,
	"... with a validity of $validity ms, at most TTL - $late_ms - drift = $bound ms");
sql($s, "SELECT redlock_release('ext-4s')");

$redis->no_keys_left;
$s->quit;
RedisMasters::no_crash($node);
done_testing();
