# Sets of resources, all or nothing, across clusters (issue 27, doc/sets.md): two
# clusters, alpha and beta, share five Redis masters.
# - A set is held on every master; a set sharing one resource is refused with one script
#   call per master and nothing left behind; a set sharing none proceeds; a lone lock on
#   a resource of a held set is refused.
# - All or nothing on each master: where another client holds one key of the set, the
#   script sets none of the set's keys there; a set that a quorum granted is held (the
#   other masters hold none of it); a set a quorum refused leaves nothing anywhere, also
#   where the script had set it (the undo, where two masters set it and where one did).
# - Waiting: a release of the set's first resource wakes a waiter in the other cluster;
#   a key held elsewhere with a short TTL ends the wait when it expires, well before the
#   retry delay.
# - With two masters killed a set is still acquired and excludes; three of five frozen:
#   08006.  A cancelled waiter and an attempt cut short leave no key; an exit releases the
#   set; auto_extend keeps a set past its TTL; fencing tokens rise per resource.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my ($alpha, $beta) = RedisMasters::preloaded_clusters($redis, undef, qw(alpha beta));
my ($a1, $a2, $b1, $b2) = (session($alpha), session($alpha), session($beta), session($beta));
my ($out, $err);

# The masters (indexes) where KEY holds a value other than NOT.
sub masters_with
{
	my ($key) = @_;
	my @v = $redis->redis_all('GET', $key);
	return join(',', grep { $v[$_] ne '' } 0 .. $#v);
}

# --- exclusion: sets that share a resource, sets that do not ---

($out) = sql($a1, "SELECT redlock_acquire(ARRAY['acct-1', 'acct-2'], 30000)");
is($out, 't', 'alpha: the set {acct-1, acct-2} is acquired');
is($redis->holding($_, 5), 5, "$_ is held on every master") for qw(acct-1 acct-2);
my @tokens = map { join(',', $redis->redis_all('GET', $_)) } qw(acct-1 acct-2);
is($tokens[0], $tokens[1], '... with one token, the set\'s, on both keys');

# beta's connections open first: a new session's first call is decided without the
# masters that a quorum does not need, and undoes a refused attempt on those it did not
# hear from.
my @warm = $redis->calls;
($out) = sql($b1, "SELECT redlock_acquire('beta-warm', 30000) AND redlock_release('beta-warm')");
is($out, 't', 'beta: its connections open');
$redis->wait_calls(\@warm);    # its release ran on every master
my @scripts = $redis->settled_calls;
my @sets = $redis->settled_calls('set');
($out) = sql($b1, "SELECT redlock_acquire(ARRAY['acct-3', 'acct-2'], 30000)");
is($out, 'f', 'beta: the set {acct-3, acct-2}, which shares acct-2, is refused');
$redis->wait_calls(\@scripts);
my @scripts_after = $redis->calls;
# One script call per master when every master's refusal was read before the call was
# decided; when the call was decided by a quorum of refusals before the last masters'
# arrived (a loaded machine), the attempt is undone on every master (its two keys): 3.
my $calls = join(',', map { $scripts_after[$_] - $scripts[$_] } 0 .. 4);
like($calls, qr/^(?:1,1,1,1,1|3,3,3,3,3)$/,
	"... by one script call per master, and an undo only if not every refusal was read ($calls)");
my @sets_after = $redis->calls('set');
is(join(',', map { $sets_after[$_] - $sets[$_] } 0 .. 4), '0,0,0,0,0', '... and no SET');
is($redis->holding('acct-3', 0), 0, '... acct-3 is set on no master');
($out) = sql($b1, "SELECT redlock_acquire('acct-1', 30000)");
is($out, 'f', 'beta: a lock on acct-1 alone is refused too');
($out) = sql($b1, "SELECT redlock_acquire(ARRAY['acct-3', 'acct-4'], 30000)");
is($out, 't', 'beta: the set {acct-3, acct-4}, which shares nothing, is acquired beside it');
($out) = sql($b1, "SELECT string_agg(resource, ',' ORDER BY resource), count(DISTINCT set_id) FROM redlock_locks()");
is($out, 'acct-3,acct-4|1', '... and redlock_locks() shows the two locks of one set');

# --- all or nothing on each master ---

# Another client holds acct-6 on masters 0 and 1: those refuse the whole set, masters 2-4
# (a quorum) set all of it.
$redis->redis_cli($_, 'SET', 'acct-6', 'someone-else', 'PX', '60000') for 0, 1;
($out) = sql($a2, "SELECT redlock_acquire(ARRAY['acct-5', 'acct-6'], 30000)");
is($out, 't', 'acct-6 held elsewhere on masters 0 and 1: the set is held on the other three');
is(masters_with('acct-5'), '2,3,4', '... acct-5 is set on masters 2-4 only: masters 0 and 1 set none of the set');
my @v6 = $redis->redis_all('GET', 'acct-6');
is(join(',', @v6[0, 1]), 'someone-else,someone-else', '... and left the other client\'s acct-6 alone');
sql($a2, "SELECT redlock_release(ARRAY['acct-5', 'acct-6'])");
is(masters_with('acct-5'), '', 'its release deletes acct-5 everywhere');
is(join(',', $redis->redis_all('GET', 'acct-6')), 'someone-else,someone-else,,,',
	'... and acct-6 where it was ours only');

# Held elsewhere on three masters: refused; the two masters that set the whole set undo it.
# Masters 0-2 answer 100 ms late, so that the attempt counts the answers of 3 and 4 (they
# set it) before the refusals decide it: every master answered, two of them set it.
$redis->redis_cli($_, 'SET', 'acct-8', 'someone-else', 'PX', '60000') for 0, 1, 2;
($out) = $redis->answer_late([ 0, 1, 2 ], 100, $a2, "SELECT redlock_acquire(ARRAY['acct-7', 'acct-8'], 30000)");
is($out, 'f', 'acct-8 held elsewhere on masters 0-2, which answer late: the set is refused');
is(join(',', $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', 'acct-7')), '0,0,0,0,0',
	'... and masters 3 and 4, which had set all of it, undid it: acct-7 is nowhere');
is(join(',', $redis->redis_all('GET', 'acct-8')), 'someone-else,someone-else,someone-else,,',
	'... acct-8 is the other client\'s where it was, and nowhere else');

# Where one master only set the whole set, it undoes it too.  A session on masters 0-2
# only (a quorum of 2): acct-13 held elsewhere on masters 0 and 1, which answer 100 ms
# late, so that the attempt counts master 2's answer (it set the set) and then both
# refusals: every master answered, one set it.  (With five masters, the third of four
# refusals decides the attempt while the fourth may be unread, and a master that did
# not answer is undone in any case.)
my $three = session($alpha);
sql($three, "SET redlock.servers = '" . join(',', map { "127.0.0.1:$_" } ($redis->ports)[0 .. 2]) . "'");
($out) = sql($three, "SELECT redlock_acquire('acct-14', 30000) AND redlock_release('acct-14')");
is($out, 't', 'a session on masters 0-2 connects to them (a lock taken and released)');
$redis->redis_cli($_, 'SET', 'acct-13', 'someone-else', 'PX', '60000') for 0, 1;
my ($calls_2) = $redis->calls_at([2]);
$redis->stop($_) for 0, 1;
$three->start("SELECT redlock_acquire(ARRAY['acct-12', 'acct-13'], 30000)");
ok(wait_until(10, sub { ($redis->calls_at([2]))[0] > $calls_2 }),
	'master 2 ran the attempt while masters 0 and 1 were frozen');
usleep(100_000);
$redis->cont($_) for 0, 1;
($out) = $three->finish;
is($out, 'f', 'on masters 0-2, acct-13 held elsewhere on masters 0 and 1: the set is refused');
is(join(',', $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', 'acct-12')), '0,0,0,0,0',
	'... and master 2, the one that had set all of it, undid it: acct-12 is nowhere');
is(join(',', $redis->redis_all('GET', 'acct-13')), 'someone-else,someone-else,,,',
	'... acct-13 is the other client\'s where it was, and nowhere else');
$three->quit;

# --- waiting ---

# A release of the set's first resource, in alpha, wakes beta's waiter.
sql($b2, "SET redlock.retry_delay = 60000");
sql($b2, "SET redlock.retry_jitter = 0");
my $b2_pid = $b2->pid;
$b2->start("SELECT redlock_acquire(ARRAY['acct-1', 'acct-9'], 30000, 40000)");
ok(wait_until(10, sub { (sql($b1, "SELECT count(*) FROM redlock_waiters() WHERE resource = 'acct-1'"))[0] eq '1' }),
	"beta: a waiter for the set {acct-1, acct-9} waits on acct-1");
my $t_release = time;
($out) = sql($a1, "SELECT redlock_release(ARRAY['acct-1', 'acct-2'])");
is($out, 't', 'alpha: the set {acct-1, acct-2} is released');
ok(wait_until(15, sub { (sql($a2, "SELECT pid FROM redlock_lock_info('acct-9')"))[0] eq $b2_pid }),
	'beta: the waiter holds the set within 15 s, with a 60 s retry delay: woken by the release');
note sprintf('beta took the set within %.3f s of the release', time - $t_release);
($out) = $b2->finish;
is($out, 't', '... and its acquire returns true');

# A key held elsewhere that expires ends the wait at its PTTL.
sql($a1, "SELECT redlock_acquire('acct-11', 1500)");
my $t0 = time;
($out) = sql($b2, "SELECT redlock_acquire(ARRAY['acct-10', 'acct-11'], 30000, 20000)");
my $waited = time - $t0;
is($out, 't', 'beta: a set waiting for acct-11 (TTL 1.5 s, never released) gets it');
cmp_ok($waited, '<', 10, sprintf('... after %.1f s, with a 60 s retry delay: the wait ended when the key expired', $waited));

# --- masters fail ---

sql($b2, "SELECT redlock_release_all()");
sql($b1, "SELECT redlock_release_all()");
$redis->kill9($_) for 3, 4;
($out) = sql($b1, "SELECT redlock_acquire(ARRAY['acct-20', 'acct-21'], 30000)");
is($out, 't', 'masters 3 and 4 killed: a set is acquired on the other three');
($out) = sql($a1, "SELECT redlock_acquire(ARRAY['acct-21', 'acct-22'], 30000)");
is($out, 'f', '... and excludes a set that shares acct-21');
($out) = sql($b1, "SELECT redlock_release(ARRAY['acct-20', 'acct-21'])");
is($out, 't', '... and is released');
$redis->restart($_) for 3, 4;
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($b1, "SELECT redlock_acquire(ARRAY['acct-20', 'acct-21'], 30000)");
like($err, qr/08006.*resources "acct-20", "acct-21": 2 of 5 Redis masters answered, 3 needed/,
	'three of five frozen: 08006, naming the set');
$redis->cont($_) for 0 .. 2;

# --- a cancelled waiter, an attempt cut short, an exit ---

sql($a1, "SELECT redlock_acquire('acct-31', 60000)");
sql($b2, 'SET redlock.retry_delay = 50');
$b2_pid = $b2->pid;
$b2->start("SELECT redlock_acquire(ARRAY['acct-30', 'acct-31'], 30000, NULL)");
ok(wait_until(10, sub { (sql($b1, "SELECT attempts > 2 FROM redlock_waiters()"))[0] eq 't' }),
	'beta: a waiter for a set retries');
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($b2_pid)");
($out, $err) = $b2->finish;
like($err, qr/57014/, '... until cancelled (57014)');
is($redis->holding('acct-30', 0), 0, '... and leaves acct-30 on no master');

# Masters 0-2 frozen: masters 3 and 4 set the whole set; cancelled while it waits for the
# others, the abort undoes every key.
my $cut = session($beta);
my $cut_pid = $cut->pid;
sql($cut, "SET redlock.timeout = '10s'");
$redis->stop($_) for 0 .. 2;
my @before = $redis->calls_at([ 3, 4 ]);
$cut->start("SELECT redlock_acquire(ARRAY['acct-40', 'acct-41', 'acct-42'], 30000)");
ok(wait_until(10, sub { my @n = $redis->calls_at([ 3, 4 ]); $n[0] > $before[0] && $n[1] > $before[1] }),
	'masters 0-2 frozen: masters 3 and 4 ran the set\'s script');
is(join(',', map { $redis->redis_cli($_, 'EXISTS', 'acct-42') } 3, 4), '1,1', '... and set it');
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($cut_pid)");
$redis->cont($_) for 0 .. 2;
($out, $err) = $cut->finish;
like($err, qr/57014/, '... cancelled while it waits for the others (57014)');
my @left = $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', 'acct-40', 'acct-41', 'acct-42');
is(join(',', @left), '0,0,0,0,0', '... and its abort undid every key of the set, on every master');

my $leaver = session($alpha);
sql($leaver, "SELECT redlock_acquire(ARRAY['acct-50', 'acct-51'], 60000)");
$leaver->quit;
($out) = sql($b1, "SELECT redlock_acquire(ARRAY['acct-51', 'acct-50'], 30000, 10000)");
is($out, 't', "alpha: a holder's exit releases its set for another");
sql($b1, "SELECT redlock_release_all()");

# --- auto_extend and fencing tokens ---

my $job = session($alpha);
sql($job, 'SET redlock.auto_extend = on');
($out) = sql($job, "SELECT redlock_acquire(ARRAY['acct-60', 'acct-61'], 1500)");
is($out, 't', 'alpha: an auto-extended set, TTL 1.5 s');
usleep(4_000_000);
($out) = sql($job, "SELECT string_agg((validity_ms > 0 AND renewals > 0 AND NOT lost)::text, ',') FROM redlock_locks()");
is($out, 'true,true', '... both locks still valid 4 s later, renewed by the worker');
($out) = sql($b1, "SELECT redlock_acquire(ARRAY['acct-61'], 30000)");
is($out, 'f', '... and still exclude');
my ($f1) = sql($job, "SELECT redlock_fencing_token('acct-61')");
sql($job, "SELECT redlock_release(ARRAY['acct-60', 'acct-61'])");
sql($b1, "SELECT redlock_acquire(ARRAY['acct-61', 'acct-62'], 30000)");
my ($f2) = sql($b1, "SELECT redlock_fencing_token('acct-61')");
cmp_ok($f2, '>', $f1, "fencing tokens rise per resource across sets ($f1, then $f2)");
sql($b1, "SELECT redlock_release_all()");
sql($a1, "SELECT redlock_release_all()");

$_->quit for ($a1, $a2, $b1, $b2, $job, $cut);
$redis->redis_cli($_, 'DEL', 'acct-6', 'acct-8', 'acct-13') for 0 .. 4;
# Only the fencing counter of acct-61 is left.
my @dbsize = $redis->wait_all(5, sub { !grep { $_ ne '1' } @_ }, 'DBSIZE');
is(join(',', @dbsize), '1,1,1,1,1', 'every lock key and holder record gone; one fencing counter left on each master');
RedisMasters::no_crash($_) for $alpha, $beta;
done_testing();
