# Deadlock detection across clusters (issue 43 item 2, doc/deadlock.md): two clusters,
# alpha and beta, share five Redis masters.
# - A session on alpha and one on beta each hold one transaction-scoped lock and wait for
#   the other's: the one that began waiting last (alpha's) gets 40P01 about one
#   redlock.deadlock_timeout after the cycle closed, with a DETAIL naming both members
#   (cluster, pid, the resource waited for, the one held); its transaction rolls back,
#   its lock goes, and beta's wait gets it.  Nothing of either wait is left on the
#   masters.
# - A cycle of three (alpha, beta, alpha): the last to wait is the victim, the DETAIL
#   has three lines, the two others get their locks in turn.
# - With one master frozen the cycle is still found (four masters make a quorum).
# - A wait record on 2 of 5 masters (a minority: a record half taken back) does not
#   count, nor when each of those holds it under two fields: the waiter it would close a
#   cycle with waits its wait out; on 3 of 5 it counts.
# - A record whose hold is no longer live (the key holds another token) makes no edge.
# - A record past its expiry makes no edge, even on every master, and the reads delete it.
# - A victim that never checks (a ghost that began waiting last): the other member
#   reports the cycle at its second check.
# - A session blocked by a cycle it is not on (two ghost waiters' records) waits its
#   wait out: the cycle's members break it.
# - Who posts: an exclusive waiter that holds nothing posts no record (it can be on no
#   cycle); one that holds a lock does, and takes it back; a writer that holds nothing
#   does once it posts its intent (shared waiters then wait for it).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my ($alpha, $beta) = RedisMasters::preloaded_clusters($redis, undef, qw(alpha beta));
my $WAITS = "\xffredlock-waits";

# Records left in the waits hash, on every master: a list of counts.
sub records_left
{
	return join ',', map { $_ eq '' ? 0 : $_ } $redis->redis_all('HLEN', $WAITS);
}

# --- a cycle of two across clusters ---

my $a = session($alpha);
my $b = session($beta);
my ($a_pid, $b_pid) = ($a->pid, $b->pid);
sql($a, 'BEGIN');
sql($b, 'BEGIN');
my ($out, $err, $secs);
($out) = sql($a, "SELECT redlock_xact_acquire('job-a', 30000)");
is($out, 't', 'alpha holds job-a');
($out) = sql($b, "SELECT redlock_xact_acquire('job-b', 30000)");
is($out, 't', 'beta holds job-b');
$b->start("SELECT redlock_xact_acquire('job-a', 30000, 20000)");
usleep(300_000);
($out, $err, $secs) = sql($a, "SELECT redlock_xact_acquire('job-b', 30000, 20000)");
like($err, qr/ERROR:  40P01: deadlock detected/, 'alpha, the last to wait, gets 40P01');
like($err,
	qr/DETAIL:  Process $a_pid of cluster "alpha" waits for "job-b", holding "job-a"; blocked by process $b_pid of cluster "beta"\.\nProcess $b_pid of cluster "beta" waits for "job-a", holding "job-b"; blocked by process $a_pid of cluster "alpha"\./,
	'... its DETAIL names both members: cluster, pid, the resource waited for and the one held');
ok($secs > 0.9 && $secs < 19,
	"... after its first deadlock_timeout (1 s), before its 20 s wait ran out (took ${secs} s)");
sql($a, 'ROLLBACK');
($out, $err) = $b->finish;
is($out, 't', "beta's wait gets job-a once alpha's transaction rolled back");
($out) = sql($a, 'SELECT count(*) FROM redlock_locks()');
is($out, '0', 'the victim holds nothing');
is($redis->holding('job-a', 5), 5, "job-a is beta's on every master");
sql($b, 'COMMIT');
is(records_left(), '0,0,0,0,0', 'no wait record is left on any master');

# --- a cycle of three: alpha, beta, alpha ---

my $c = session($alpha);
my $c_pid = $c->pid;
sql($_, 'BEGIN') for ($a, $b, $c);
sql($a, "SELECT redlock_xact_acquire('three-a', 30000)");
sql($b, "SELECT redlock_xact_acquire('three-b', 30000)");
sql($c, "SELECT redlock_xact_acquire('three-c', 30000)");
$a->start("SELECT redlock_xact_acquire('three-b', 30000, 20000)");
usleep(200_000);
$b->start("SELECT redlock_xact_acquire('three-c', 30000, 20000)");
usleep(200_000);
($out, $err) = sql($c, "SELECT redlock_xact_acquire('three-a', 30000, 20000)");
like($err, qr/ERROR:  40P01: deadlock detected/, 'a cycle of three: the last to wait gets 40P01');
my @lines = $err =~ /^(?:DETAIL:  )?(Process \d+ of cluster .*)$/mg;
is(scalar @lines, 3, '... its DETAIL has one line per member');
like($err, qr/Process $c_pid of cluster "alpha" waits for "three-a", holding "three-c"; blocked by process $a_pid of cluster "alpha"/,
	'... starting with the victim');
sql($c, 'ROLLBACK');
($out) = $b->finish;
is($out, 't', "beta gets three-c, the victim's");
sql($b, 'COMMIT');
($out) = $a->finish;
is($out, 't', 'then alpha gets three-b');
sql($a, 'COMMIT');
is(records_left(), '0,0,0,0,0', 'no wait record is left');

# --- one master frozen: four make a quorum ---

$redis->stop(4);
sql($_, 'BEGIN') for ($a, $b);
sql($a, "SELECT redlock_xact_acquire('frozen-a', 30000)");
sql($b, "SELECT redlock_xact_acquire('frozen-b', 30000)");
$b->start("SELECT redlock_xact_acquire('frozen-a', 30000, 20000)");
usleep(300_000);
($out, $err) = sql($a, "SELECT redlock_xact_acquire('frozen-b', 30000, 20000)");
like($err, qr/ERROR:  40P01: deadlock detected/, 'with master 5 frozen the cycle is still found');
sql($a, 'ROLLBACK');
($out) = $b->finish;
is($out, 't', '... and beta gets its lock');
sql($b, 'COMMIT');
$redis->cont(4);

# --- records a minority holds, and holds no longer live ---

# A waiter "ghost" (pid 1) that waits for ghost-a and holds ghost-b with token T; the
# record's expiry is far off (the hash field's text starts with it).
sub ghost_record
{
	my ($token) = @_;
	my @f = ('1', 'ghost', '1', 'feedfacefeedface', '1', 'x', '1', 'ghost-a', '1', 'ghost-b', $token);
	return '99999999999999 ' . join('', map { length($_) . ":$_" } @f);
}
$redis->redis_cli($_, 'SET', 'ghost-b', 'ghost-token', 'PX', '60000') for 0 .. 4;
$redis->redis_cli($_, 'HSET', $WAITS, "ghost\t1", ghost_record('ghost-token')) for 0 .. 1;
sql($a, "SELECT redlock_acquire('ghost-a', 30000)");
($out, $err) = sql($a, "SELECT redlock_acquire('ghost-b', 30000, 2500)");
is($out, 'f', 'a record on 2 of 5 masters closes no cycle: the wait runs out (false)');
is($err, '', '... with no error');
$redis->redis_cli($_, 'HSET', $WAITS, "ghost\t1\tagain", ghost_record('ghost-token')) for 0 .. 1;
($out, $err) = sql($a, "SELECT redlock_acquire('ghost-b', 30000, 2500)");
is($out, 'f', '... nor under two fields on each of those 2: a master counts a record once');
is($err, '', '... with no error');
$redis->redis_cli($_, 'HDEL', $WAITS, "ghost\t1\tagain") for 0 .. 1;
$redis->redis_cli(2, 'HSET', $WAITS, "ghost\t1", ghost_record('ghost-token'));
($out, $err) = sql($a, "SELECT redlock_acquire('ghost-b', 30000, 20000)");
like($err, qr/40P01: deadlock detected.*Process 1 of cluster "ghost" waits for "ghost-a", holding "ghost-b"/s,
	'on 3 of 5 it counts: the cycle with the ghost is found');
$redis->redis_cli($_, 'SET', 'ghost-b', 'another-token', 'PX', '60000') for 0 .. 4;
($out, $err) = sql($a, "SELECT redlock_acquire('ghost-b', 30000, 2500)");
is($out, 'f', "a hold that is not live (the key holds another token) makes no edge: the wait runs out");
is($err, '', '... with no error');
$redis->redis_cli($_, 'DEL', $WAITS, 'ghost-b') for 0 .. 4;
sql($a, "SELECT redlock_release('ghost-a')");

# A cycle of two ghosts (records on every master, each holding the key the other waits
# for): a session waiting for one of their keys is blocked by their cycle, not on it; it
# waits its wait out, and leaves the cycle to its members.
# ghost(PID, WAITS, HOLDS, TOKEN[, START]): a ghost's record; START (us) defaults to PID.
sub ghost
{
	my ($pid, $waits, $holds, $token, $start) = @_;
	my @f = ('1', 'ghost', $pid, "feedface$pid", $start // $pid, 'x', '1', $waits, '1', $holds, $token);
	return '99999999999999 ' . join('', map { length($_) . ":$_" } @f);
}
for my $i (0 .. 4)
{
	$redis->redis_cli($i, 'SET', 'gc-a', 'tok-1', 'PX', '60000');
	$redis->redis_cli($i, 'SET', 'gc-b', 'tok-2', 'PX', '60000');
	$redis->redis_cli($i, 'HSET', $WAITS, "ghost\t1", ghost(1, 'gc-b', 'gc-a', 'tok-1'));
	$redis->redis_cli($i, 'HSET', $WAITS, "ghost\t2", ghost(2, 'gc-a', 'gc-b', 'tok-2'));
}
# It holds a lock of its own: a waiter that holds nothing reads no records at all.
sql($a, "SELECT redlock_acquire('gc-own', 30000)");
($out, $err) = sql($a, "SELECT redlock_acquire('gc-a', 30000, 2500)");
is($out, 'f', 'blocked by a cycle it is not on (two ghosts): the wait runs out');
is($err, '', '... with no error');
sql($a, "SELECT redlock_release('gc-own')");
$redis->redis_cli($_, 'DEL', $WAITS, 'gc-a', 'gc-b') for 0 .. 4;


# A record past its expiry counts for nothing, even on every master: the reads delete it.
$redis->redis_cli($_, 'SET', 'ghost-b', 'ghost-token', 'PX', '60000') for 0 .. 4;
$redis->redis_cli($_, 'HSET', $WAITS, "ghost\t1", ghost_record('ghost-token') =~ s/^\d+ /1 /r)
  for 0 .. 4;
sql($a, "SELECT redlock_acquire('ghost-a', 30000)");
($out, $err) = sql($a, "SELECT redlock_acquire('ghost-b', 30000, 2500)");
is($out, 'f', 'a record past its expiry (on every master) closes no cycle: the wait runs out');
is($err, '', '... with no error') or diag($err);
is(join(' ', map { $redis->redis_cli($_, 'HEXISTS', $WAITS, "ghost\t1") } 0 .. 4), '0 0 0 0 0',
	'... and the reads deleted it on every master');
$redis->redis_cli($_, 'DEL', $WAITS, 'ghost-b') for 0 .. 4;
sql($a, "SELECT redlock_release('ghost-a')");

# A victim that never checks (a ghost that began waiting after it, by its record's
# start): a member that sees the same cycle at two checks in a row reports it itself.
$redis->redis_cli($_, 'SET', 'fb-b', 'fb-token', 'PX', '60000') for 0 .. 4;
$redis->redis_cli($_, 'HSET', $WAITS, "ghost\t7", ghost(7, 'fb-a', 'fb-b', 'fb-token', '9999999999999999'))
  for 0 .. 4;
sql($a, "SELECT redlock_acquire('fb-a', 30000)");
my $t0 = time;
($out, $err) = sql($a, "SELECT redlock_acquire('fb-b', 30000, 20000)");
my $took = time - $t0;
like($err, qr/40P01: deadlock detected.*Process 7 of cluster "ghost" waits for "fb-a", holding "fb-b"/s,
	'a victim that never checks: the other member reports the cycle itself') or diag($err);
cmp_ok($took, '<', 15, sprintf('... at its second check, not at the end of its 20 s wait (%.1f s)', $took));
$redis->redis_cli($_, 'DEL', $WAITS, 'fb-b') for 0 .. 4;
sql($a, "SELECT redlock_release('fb-a')");

# A wait's end deletes its own record only: a late withdraw of an earlier wait (a
# redelivery after a reconnect) leaves the waiter's next record.  The script as shipped,
# run on master 0.
my $withdraw = slurp_file("$FindBin::RealBin/../../src/scripts/deadlock_withdraw.lua");
$redis->redis_cli(0, 'HSET', $WAITS, "ghost\t9", ghost(9, 'wd-a', 'wd-b', 'tok-9'));
is($redis->redis_cli(0, 'EVAL', $withdraw, 1, $WAITS, "ghost\t9", 'deadbeef8'), '0',
	"a withdraw with another wait's id deletes nothing");
is($redis->redis_cli(0, 'HEXISTS', $WAITS, "ghost\t9"), '1', '... the record is still there');
is($redis->redis_cli(0, 'EVAL', $withdraw, 1, $WAITS, "ghost\t9", 'feedface9'), '1',
	"... one with the record's own wait id deletes it");
$redis->redis_cli(0, 'DEL', $WAITS);

# --- who posts a record: only a waiter that could be on a cycle ---

# b's record on each master: its kind and wait id, as "kind/id" (empty where none).
sub b_record
{
	my $prefix = "beta\t" . $b->pid . "\t";
	my @r;
	for my $i (0 .. 4)
	{
		my ($field) = grep { index($_, $prefix) == 0 } split /\n/, $redis->redis_cli($i, 'HKEYS', $WAITS);
		my $v = defined $field ? $redis->redis_cli($i, 'HGET', $WAITS, $field) : '';
		my ($body) = $v =~ /^\d+ (.*)$/s;
		my @f;
		while (defined $body && $body =~ /^(\d+):/)
		{
			push @f, substr($body, length($1) + 1, $1);
			$body = substr($body, length($1) + 1 + $1);
		}
		push @r, @f >= 6 ? "$f[5]/$f[3]" : '';
	}
	return join ',', @r;
}
# Waits until b is in its acquire's wait, then past three of its checks (every 200 ms).
sub b_waits_past_checks
{
	wait_until(10, sub {
		my ($w) = $beta->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE pid = " . $b->pid
			  . " AND query LIKE '%redlock_acquire%' AND state = 'active'");
		return $w eq '1';
	});
	usleep(900_000);
}
sql($b, 'SET redlock.deadlock_timeout = 200');

# An exclusive waiter that holds nothing: nothing posted, however long it waits.
($out) = sql($a, "SELECT redlock_acquire('post-x', 30000)");
is($out, 't', 'alpha holds post-x');
$b->start("SELECT redlock_acquire('post-x', 30000, 4000)");
b_waits_past_checks();
is(records_left(), '0,0,0,0,0',
	'an exclusive waiter that holds nothing posts no record, past three checks: it can be on no cycle');
($out) = $b->finish;
is($out, 'f', '... and its wait runs out');

# One that holds a lock posts on every master, and takes it back at the wait's end.
($out) = sql($b, "SELECT redlock_acquire('post-own', 30000)");
is($out, 't', 'beta holds post-own');
$b->start("SELECT redlock_acquire('post-x', 30000, 4000)");
ok(wait_until(3, sub { records_left() eq '1,1,1,1,1' }),
	'a waiter that holds a lock posts its record on every master');
($out) = $b->finish;
is($out, 'f', '... and its wait runs out');
ok(wait_until(3, sub { records_left() eq '0,0,0,0,0' }), '... and takes its record back');
sql($a, "SELECT redlock_release('post-x')");
sql($b, "SELECT redlock_release('post-own')");

# A key another client holds (a foreign token), turned into a shared hold (the marker
# and a reader that holds it for a minute) while b waits for it.
sub foreign_then_shared
{
	my ($key) = @_;
	$redis->redis_cli($_, 'SET', $key, 'foreign-token', 'PX', '60000') for 0 .. 4;
	return sub {
		for my $i (0 .. 4)
		{
			my ($t) = $redis->redis_cli($i, 'TIME');
			my ($sec) = $t =~ /^(\d+)/;
			my $until = ($sec + 60) * 1000;
			$redis->redis_cli($i, 'HSET', "$key\xffreaders", 'reader-token', $until, '', $until);
			$redis->redis_cli($i, 'SET', $key, 'redlock:shared', 'PX', '60000');
		}
	};
}

# A writer that holds nothing is exempt until it posts an intent; then it posts (kind i).
my $to_shared = foreign_then_shared('post-f');
$b->start("SELECT redlock_acquire('post-f', 30000, 5000)");
b_waits_past_checks();
is(records_left(), '0,0,0,0,0', 'a writer that holds nothing, before any shared holder: no record');
$to_shared->();
ok(wait_until(3, sub { b_record() =~ /^(i\/[0-9a-f]{16},){4}i\/[0-9a-f]{16}$/ }),
	'once it posts its intent (the key went shared) it posts its record, as a writer\'s intent (i): '
	  . b_record());
($out) = $b->finish;
is($out, 'f', '... and its wait runs out');
ok(wait_until(3, sub { records_left() eq '0,0,0,0,0' }), '... and takes its record back');
$redis->redis_cli($_, 'DEL', 'post-f', "post-f\xffreaders", "post-f\xffintent") for 0 .. 4;

# A writer that holds a lock: its record says x, then i under the same wait id.
($out) = sql($b, "SELECT redlock_acquire('post-own', 30000)");
is($out, 't', 'beta holds post-own again');
$to_shared = foreign_then_shared('post-g');
$b->start("SELECT redlock_acquire('post-g', 30000, 5000)");
ok(wait_until(3, sub { b_record() =~ /^(x\/[0-9a-f]{16},){4}x\/[0-9a-f]{16}$/ }),
	'a writer that holds a lock posts its record as x before any shared holder');
my ($id_x) = b_record() =~ /x\/([0-9a-f]{16})/;
$to_shared->();
ok(wait_until(3, sub { b_record() =~ /^(i\/[0-9a-f]{16},){4}i\/[0-9a-f]{16}$/ }),
	'... then as i once it posts its intent');
my ($id_i) = b_record() =~ /i\/([0-9a-f]{16})/;
is($id_i, $id_x, '... under the same wait id');
($out) = $b->finish;
is($out, 'f', '... and its wait runs out');
sql($b, "SELECT redlock_release('post-own')");
ok(wait_until(3, sub { records_left() eq '0,0,0,0,0' }), '... and no record is left');
$redis->redis_cli($_, 'DEL', 'post-g', "post-g\xffreaders", "post-g\xffintent") for 0 .. 4;

$_->quit for ($a, $b, $c);
RedisMasters::no_crash($_) for ($alpha, $beta);
done_testing();
