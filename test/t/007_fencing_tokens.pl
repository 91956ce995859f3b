# Fencing tokens (redlock_fencing_token, doc/redlock.md §9) and redlock.quorum: tokens
# grow from holder to holder and stay fixed for a hold; the counters live on the masters
# under their own keys, and a write never lowers one; a lost lock (token gone, validity
# run out) gets no token; fewer than a quorum answering is 08006; and the guarded write
# of README's pattern refuses a holder paused past its validity (SIGSTOP of its
# backend), on a table of another cluster reached through postgres_fdw.  A later holder
# on a cluster whose clock is 5 s behind gets a larger token after every master was
# restarted empty with README's delay (issue 21, item 5).  A quorum of 4 of 5 is needed
# where set.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('fencing', $redis, "redlock.timeout = 200ms\n");
my $s1 = session($node);
my $s2 = session($node);
my ($out, $err);

# The counter key: the byte 0xFF, "fence:", then the lock's key.
sub counter_key { return "\xff" . 'fence:' . $_[0]; }

# --- tokens grow from holder to holder, fixed for a hold ---

($out) = sql($s1, "SELECT redlock_acquire('fence-a', 10000)");
is($out, 't', 's1 acquires');
my ($t1) = sql($s1, "SELECT redlock_fencing_token('fence-a')");
like($t1, qr/^\d{16}$/, "s1 gets a token ($t1)");
cmp_ok($t1, '>=', (time() - 60) * 1_000_000, 'the token is at least the clock floor');
my @counters = grep { $_ eq $t1 } $redis->redis_all('GET', counter_key('fence-a'));
cmp_ok(scalar @counters, '>=', 3, 'a quorum of masters holds the token in the counter key');
my @pttl = grep { $_ =~ /^\d+$/ && $_ > 29 * 86_400_000 } $redis->redis_all('PTTL', counter_key('fence-a'));
cmp_ok(scalar @pttl, '>=', 3, 'the counter lives 30 days after the last token');
($out) = sql($s1, "SELECT redlock_extend('fence-a', 20000), redlock_acquire('fence-a', 10000)");
is($out, 't|t', 'extend and stack');
($out) = sql($s1, "SELECT redlock_fencing_token('fence-a')");
is($out, $t1, 'the token stays the same across extend and stacking');
sql($s1, "SELECT redlock_release('fence-a'), redlock_release('fence-a')");

($out) = sql($s2, "SELECT redlock_acquire('fence-a', 10000)");
is($out, 't', 's2 acquires after s1 released');
my ($t2) = sql($s2, "SELECT redlock_fencing_token('fence-a')");
cmp_ok($t2, '>', $t1, "s2's token is larger ($t2 > $t1)");
sql($s2, "SELECT redlock_release('fence-a')");

# A counter above the floor (another cluster's clock ahead, or many tokens in a second)
# is counted up from.
my $ahead = $t2 + 5_000_000;
$redis->redis_all('SET', counter_key('fence-a'), $ahead);
sql($s1, "SELECT redlock_acquire('fence-a', 10000)");
($out) = sql($s1, "SELECT redlock_fencing_token('fence-a')");
is($out, $ahead + 1, 'a counter ahead of the clock is counted up from');
sql($s1, "SELECT redlock_release('fence-a')");

# The write round sets a counter only where it is smaller: masters 3 and 4 hold a counter
# far ahead but are frozen through the read round, so the three others give a token
# below it; the write reaches 3 and 4 once they resume, and leaves their counters as
# they were (a counter is never lowered).
my $high = $ahead + 1_000_000_000;
sql($s1, "SELECT redlock_acquire('fence-high', 10000)");
$redis->redis_cli($_, 'SET', counter_key('fence-high'), $high) for 3, 4;
my @before = $redis->calls_at([ 3, 4 ]);
$redis->stop($_) for 3, 4;
($out) = sql($s1, "SELECT redlock_fencing_token('fence-high')");
$redis->cont($_) for 3, 4;
cmp_ok($out, '<', $high, "masters 3 and 4 frozen through the read round: a token below their counter ($out)");
ok(wait_until(10, sub { my @n = $redis->calls_at([ 3, 4 ]); $n[0] >= $before[0] + 2 && $n[1] >= $before[1] + 2 }),
	'... masters 3 and 4, resumed, ran the read and the write');
is(join(',', map { $redis->redis_cli($_, 'GET', counter_key('fence-high')) } 3, 4), "$high,$high",
	'... and the write left their higher counters as they were');
sql($s1, "SELECT redlock_release('fence-high')");

# A counter that is not a number is an error reply from the masters that hold it.
$redis->redis_all('SET', counter_key('fence-junk'), 'junk');
sql($s1, "SELECT redlock_acquire('fence-junk', 10000)");
($out, $err) = sql($s1, "SELECT redlock_fencing_token('fence-junk')");
like($err, qr/08006.*fencing counter is not a number/s,
	'a counter that is not a number: 08006 naming the masters\' error');
sql($s1, "SELECT redlock_release('fence-junk')");

# --- lost locks get no token ---

sql($s1, "SELECT redlock_acquire('fence-gone', 30000)");
$redis->redis_cli($_, 'DEL', 'fence-gone') for 0 .. 2;
($out, $err) = sql($s1, "SELECT redlock_fencing_token('fence-gone')");
like($err, qr/55P03.*lock on resource "fence-gone" was lost.*3 of 5 Redis masters no longer hold/s,
	'token gone from 3 masters: 55P03 naming them');
($out) = sql($s1, "SELECT count(*) FROM redlock_locks() WHERE resource = 'fence-gone'");
is($out, '0', '... and the lock is forgotten');
is($redis->holding('fence-gone', 0), 0, '... and let go of on the other masters');

# --- fewer than a quorum answering: 08006, the lock kept ---

sql($s1, "SELECT redlock_acquire('fence-frozen', 30000)");
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($s1, "SELECT redlock_fencing_token('fence-frozen')");
$redis->cont($_) for 0 .. 2;
like($err, qr/08006.*could not take a fencing token for resource "fence-frozen": 2 of 5 Redis masters answered with the lock's token, 3 needed/s,
	'3 masters frozen: 08006');
($out) = sql($s1, "SELECT redlock_fencing_token('fence-frozen') > 0");
is($out, 't', '... the lock is kept, and a token comes once they answer');
sql($s1, "SELECT redlock_release('fence-frozen')");

# --- a token stored by fewer than a quorum is not given ---
# The read round reaches all five masters, but three refuse every write (maxmemory 1
# byte: Redis answers OOM to a write and serves reads), so the write round stores the
# token on two only: no token, 08006 naming the three, the lock kept; once the masters
# take writes again, the next token is above what the two stored when a read quorum
# includes one of them.  (A token stored on a minority was never given, so a read quorum
# of the other three may give it again, to this hold; master 0 is frozen for the next
# token so that the read quorum must include one of the two.)

sql($s1, "SELECT redlock_acquire('fence-minority', 30000)");
$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory', '1') for 0 .. 2;
($out, $err) = sql($s1, "SELECT redlock_fencing_token('fence-minority')");
$redis->redis_cli($_, 'CONFIG', 'SET', 'maxmemory', '0') for 0 .. 2;
is($out, '', 'the write round stored the token on 2 of 5 masters: no token given');
like($err, qr/08006.*could not take a fencing token for resource "fence-minority".*OOM command not allowed/s,
	'... 08006, with the masters\' refusal in the detail');
my @minority = grep { defined $_ && $_ =~ /^\d+$/ } map { $redis->redis_cli($_, 'GET', counter_key('fence-minority')) } 3 .. 4;
is(scalar @minority, 2, '... the two masters that took writes hold the token that was not given');
$redis->stop(0);
($out) = sql($s1, "SELECT redlock_fencing_token('fence-minority')");
$redis->cont(0);
cmp_ok($out, '>', $minority[0], "... and the next token, read from a quorum that includes one of the two, is above it ($out > $minority[0]), the lock kept");
sql($s1, "SELECT redlock_release('fence-minority')");

# --- the guarded write: a holder paused past its validity is refused ---

my $store = PostgreSQL::Test::Cluster->new('store');
$store->init;
$store->start;
$store->safe_psql('postgres',
	"CREATE TABLE billing (id int PRIMARY KEY, fence bigint NOT NULL, note text);"
	  . " INSERT INTO billing VALUES (1, 0, 'initial')");
my ($host, $port) = ($store->host, $store->port);
$node->safe_psql('postgres', qq{
CREATE EXTENSION postgres_fdw;
CREATE SERVER store FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER store;
CREATE FOREIGN TABLE billing (id int, fence bigint, note text) SERVER store;
});

# The pattern: the token goes into the row, and the row is written only while its
# fence is not above it.
sub guarded_write
{
	my ($s, $note) = @_;
	return sql($s, qq{
WITH t AS (SELECT redlock_fencing_token('billing') AS token)
UPDATE billing SET fence = t.token, note = '$note' FROM t
 WHERE id = 1 AND fence <= t.token RETURNING 1});
}

($out) = sql($s1, "SELECT redlock_acquire('billing', 1000)");
is($out, 't', 'holder 1 acquires billing, TTL 1 s');
($out) = guarded_write($s1, 'holder 1, first write');
is($out, '1', 'holder 1 writes through postgres_fdw with its token');
my ($tok1) = sql($s1, "SELECT redlock_fencing_token('billing')");

# Holder 1 prepares its second write, then its backend is paused past the validity.
$s1->query("BEGIN");
$s1->query("CREATE TEMP TABLE my_token AS SELECT redlock_fencing_token('billing') AS token");
my $pid1 = $s1->pid;
kill 'STOP', $pid1;
$s1->start(qq{UPDATE billing SET fence = (SELECT token FROM my_token), note = 'holder 1, late'
 WHERE id = 1 AND fence <= (SELECT token FROM my_token) RETURNING 1});

($out) = sql($s2, "SELECT redlock_acquire('billing', 5000, 5000)");
is($out, 't', 'holder 2 acquires once holder 1\'s keys expired');
($out) = guarded_write($s2, 'holder 2');
is($out, '1', 'holder 2 writes with its token');
my ($tok2) = sql($s2, "SELECT redlock_fencing_token('billing')");
cmp_ok($tok2, '>', $tok1, 'holder 2\'s token is larger');

kill 'CONT', $pid1;
($out) = $s1->finish;
is($out, '', 'holder 1, resumed, writes with its old token: refused (0 rows)');
$s1->query("COMMIT");
($out) = $store->safe_psql('postgres', "SELECT note, fence FROM billing");
is($out, "holder 2|$tok2", 'the row holds holder 2\'s write');
($out, $err) = sql($s1, "SELECT redlock_fencing_token('billing')");
like($err, qr/55P03.*was lost.*validity time ran out/s,
	'holder 1 asks for its token again: 55P03, validity ran out');
# Control: the same late write without the fence goes through.
($out) = sql($s1, "UPDATE billing SET note = 'unguarded late write' WHERE id = 1 RETURNING 1");
is($out, '1', 'control: without the fence condition the stale write lands');
sql($s1, "SELECT redlock_release('billing')");
sql($s2, "SELECT redlock_release('billing')");

# --- callers' clocks skewed, masters restarted empty: the order is the masters' ---

# A second cluster whose wall clock runs $SKEW_MS behind (an LD_PRELOAD shim on
# gettimeofday and clock_gettime(CLOCK_REALTIME), test/checker/skewclock.c).  A holder on
# the first cluster takes a token and releases; every master is killed and restarted
# empty (no persistence) after README's delay (longer than the TTL of 1 s and at least
# 1 s: 2.2 s); a later holder on the slow cluster must get a larger token.  With the
# floor taken from the caller's clock (1.4) it got a smaller or equal one.
my $SKEW_MS = -5000;
my $shim_dir = PostgreSQL::Test::Utils::tempdir('skewclock');
my $shim = "$shim_dir/skewclock.so";
system('cc', '-shared', '-fPIC', '-O2', '-o', $shim, "$FindBin::RealBin/../checker/skewclock.c",
	'-ldl') == 0
  or BAIL_OUT('could not build test/checker/skewclock.c');
my $slow;
{
	local $ENV{LD_PRELOAD} = $shim;
	local $ENV{RL_SKEW_MS} = $SKEW_MS;
	$slow = RedisMasters::redlock_node('slowclock', $redis, "redlock.timeout = 200ms\n");
}
($out) = $slow->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
cmp_ok($out, '<', time() + $SKEW_MS / 1000 + 1,
	"the slow cluster's wall clock is behind (by about " . (-$SKEW_MS) . ' ms)');
my $s_slow = session($slow);
for my $run (1 .. 3)
{
	my $res = "fence-skew-$run";
	($out) = sql($s2, "SELECT redlock_acquire('$res', 1000)");
	my ($ta) = sql($s2, "SELECT redlock_fencing_token('$res')");
	sql($s2, "SELECT redlock_release('$res')");
	$redis->kill9($_) for 0 .. 4;
	usleep(2_200_000);
	$redis->restart($_) for 0 .. 4;
	($out) = sql($s_slow, "SELECT redlock_acquire('$res', 1000)");
	is($out, 't', "run $run: the slow cluster acquires after the masters restarted empty");
	my ($tb) = sql($s_slow, "SELECT redlock_fencing_token('$res')");
	cmp_ok($tb, '>', $ta,
		"run $run: the later holder on the slow cluster gets a larger token ($tb > $ta)");
	sql($s_slow, "SELECT redlock_release('$res')");
}
$s_slow->quit;
RedisMasters::no_crash($slow);
$slow->stop;

# --- redlock.quorum = 4 of 5 ---

$node->safe_psql('postgres', "LOAD 'redlock'; ALTER SYSTEM SET redlock.quorum = 4; SELECT pg_reload_conf()");
my $s3 = session($node);
$redis->kill9(0);
($out) = sql($s3, "SELECT redlock_acquire('quorum-4', 10000)");
is($out, 't', 'quorum 4: acquired with 1 of 5 masters down');
($out) = sql($s3, "SELECT nodes FROM redlock_locks() WHERE resource = 'quorum-4'");
is($out, '4', '... on 4 masters');
$redis->stop(1);
($out, $err) = sql($s3, "SELECT redlock_acquire('quorum-4b', 10000)");
like($err, qr/08006.*3 of 5 Redis masters answered, 4 needed/s,
	'quorum 4: 2 masters down is 08006');
($out, $err) = sql($s3, "SELECT redlock_fencing_token('quorum-4')");
like($err, qr/08006.*3 of 5 Redis masters answered with the lock's token, 4 needed/s,
	'... and so is a token for a lock held before');
$redis->cont(1);
($out) = sql($s3, "SELECT redlock_fencing_token('quorum-4') > 0");
is($out, 't', '... which comes from 4 once a fourth master is back');
$redis->restart(0);
sql($s3, "SELECT redlock_release_all()");

# A quorum above the server count is refused at SET time.
($out, $err) = sql($s3, "SET redlock.quorum = 6");
like($err, qr/invalid value for parameter "redlock.quorum": 6/, 'quorum 6 of 5 refused');

$_->quit for ($s1, $s2, $s3);
RedisMasters::no_crash($node);
$store->stop;
$node->stop;
done_testing();
