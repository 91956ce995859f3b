# Semaphores across clusters (issue 27): two clusters, alpha and beta, share five Redis
# masters and a 3-permit semaphore 'exports' (doc/semaphores.md).
# - Three holders in two clusters get the three slots exports#1..#3, each held on every
#   master; a fourth is refused at once, with one round trip: per master, one SET per slot
#   and one per slot's holder record, and one script call (the check for a slot past the
#   permits); nothing to undo.
# - A waiter in beta is woken by a release in alpha (the slot's release announces the
#   semaphore's key), long before any retry delay would have let it try again; two slots
#   released while beta's worker is frozen wake two waiters; a holder's exit frees its
#   permit.
# - With two masters killed the bound holds: three holders, the fourth refused; with three
#   of five frozen, 08006.
# - A cancelled waiter leaves no key of its own on any slot; redlock.auto_extend keeps a
#   permit past its TTL; fencing tokens rise per slot.
# - Beta giving 4 permits takes slot 4 while alpha's 3 are held: alpha's next attempt
#   refuses with 55000 (the bound is broken), and takes nothing.

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

# The slot a session holds of 'exports' (its key's last digits), or ''.
sub slot_of
{
	my ($s) = @_;
	my ($k) = sql($s, "SELECT substring(key FROM '#([0-9]+)\$') FROM redlock_locks() WHERE resource = 'exports'");
	return $k;
}

# --- three holders in two clusters, one slot each ---

for my $s ($a1, $a2, $b1)
{
	($out) = sql($s, "SELECT redlock_acquire_permit('exports', 3, 120000)");
	is($out, 't', 'a permit of 3 taken');
}
my @slots = sort map { slot_of($_) } ($a1, $a2, $b1);
is("@slots", '1 2 3', 'the three holders hold slots 1, 2 and 3');
is($redis->holding("exports#$_", 5), 5, "slot $_ is held on every master") for 1 .. 3;

# Settled first: each holder's acquire gave back, at once but without waiting, the slots
# it won beyond its one, and those script calls may still be on their way.
my @sets = $redis->settled_calls('set');
my @scripts = $redis->settled_calls;
($out) = sql($b2, "SELECT redlock_acquire_permit('exports', 3, 120000)");
is($out, 'f', 'beta: a fourth holder is refused');
# The script call is the last command of the attempt's pipeline: once every master has
# processed one, it has processed the SETs before it (a quorum decides the acquire, so
# the last masters may still be reading the pipeline when it returns; CI, 2026-11-29).
$redis->wait_calls(\@scripts);
my @sets_after = $redis->calls('set');
is(join(',', map { $sets_after[$_] - $sets[$_] } 0 .. 4), '6,6,6,6,6',
	'... by one attempt: per master, a SET for each slot and for each slot\'s holder record');
# One script call per master when every master's refusal was read before the call was
# decided; when a quorum of refusals decided it before the last masters' arrived (b2 is
# a new session, whose first call goes out behind the handshake, on a loaded machine),
# the attempt is undone on every master, one script per slot: 4 (MONITOR, 2026-11-29:
# the three undo scripts 4 ms after the check).
my @scripts_after = $redis->settled_calls;
my $calls = join(',', map { $scripts_after[$_] - $scripts[$_] } 0 .. 4);
like($calls, qr/^(?:1,1,1,1,1|4,4,4,4,4)$/,
	"... and one script call (a slot past the permits?), and an undo only if not every refusal was read ($calls)");

# --- a release in alpha wakes beta's waiter ---

sql($b2, "SET redlock.retry_delay = 60000");
sql($b2, "SET redlock.retry_jitter = 0");
my $b2_pid = $b2->pid;
$b2->start("SELECT redlock_acquire_permit('exports', 3, 120000, 40000), clock_timestamp()");
ok(wait_until(10, sub { (sql($b1, "SELECT count(*) FROM redlock_waiters() WHERE resource = 'exports'"))[0] eq '1' }),
	"beta: its waiter shows as waiting for 'exports'");
my $a1_slot = slot_of($a1);
my $t_release = time;
($out) = sql($a1, "SELECT redlock_release('exports')");
is($out, 't', "alpha: a holder releases (slot $a1_slot)");
# Its next retry would come after 60 s, its wait's last attempt after 40 s: holding the
# slot within 15 s means the release woke it.
ok(wait_until(15, sub { (sql($a2, "SELECT pid FROM redlock_lock_info('exports#$a1_slot')"))[0] eq $b2_pid }),
	"beta: the waiter holds the slot within 15 s, with a 60 s retry delay and a 40 s wait: woken by the release");
note sprintf('beta took the permit within %.3f s of the release', time - $t_release);
($out, $err) = $b2->finish;
like($out, qr/^t\|/, '... and its acquire returns true');
is(slot_of($b2), $a1_slot, "... the slot alpha gave back ($a1_slot)");

# Two slots released while beta's worker is frozen reach it together: two releases, two
# waiters woken (each the oldest not woken yet), although they come within microseconds.
# Woken: a waiter holds a slot or has made another attempt; with a 60 s retry delay and a
# 30 s wait, nothing else brings an attempt within 15 s (the second waiter, queued behind
# the first, had made none).  Both holding within 15 s is not asserted: the two woken
# waiters race for the two free slots; the one that wins most masters takes both slots
# and gives one back, and the worker can count that give-back's announcement as one more
# of the slot's release it counted already (within 100 ms), waking nobody; the loser then
# gets its slot at its wait's last attempt (2 runs of 12 of this scene, 2026-11-28).
my ($p1, $p2, $w1, $w2) = (session($alpha), session($alpha), session($beta), session($beta));
sql($_, "SELECT redlock_acquire_permit('pair', 2, 60000)") for ($p1, $p2);
my %waiter_pid;
for my $w ($w1, $w2)
{
	sql($w, "SET redlock.retry_delay = 60000");
	sql($w, "SET redlock.retry_jitter = 0");
	$waiter_pid{$w} = $w->pid;
	$w->start("SELECT redlock_acquire_permit('pair', 2, 60000, 30000)");
	usleep(200_000);
}
ok(wait_until(10, sub { (sql($b1, "SELECT count(*) FROM redlock_waiters() WHERE resource = 'pair'"))[0] eq '2' }),
	"beta: two waiters for 'pair'");
ok(wait_until(10, sub { !grep { (split /\s+/)[1] ne '1' } $redis->redis_all('PUBSUB', 'NUMSUB', 'redlock:released:pair') }),
	"... and beta's worker subscribed to its channel on every master");
usleep(500_000);	# for the worker to read the confirmations (and catch up) before it freezes

# Each waiter's attempts so far (pid => attempts), from redlock_waiters().
sub pair_attempts
{
	my ($rows) = sql($b1, "SELECT pid, attempts FROM redlock_waiters() WHERE resource = 'pair'");
	return map { split /\|/ } grep { /\|/ } split /\n/, $rows // '';
}
my %attempts_before = pair_attempts();
note 'attempts before the releases (pid => attempts): ' . join(', ', map { "$_ => $attempts_before{$_}" } sort keys %attempts_before);
my ($wpid) = $beta->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
kill 'STOP', $wpid;
sql($_, "SELECT redlock_release('pair')") for ($p1, $p2);
usleep(300_000);
kill 'CONT', $wpid;
my $t_thaw = time;
ok(wait_until(15, sub {
			my ($holders) = sql($a1, "SELECT string_agg(pid::text, ',') FROM (SELECT pid FROM redlock_lock_info('pair#1') WHERE held UNION ALL SELECT pid FROM redlock_lock_info('pair#2') WHERE held) h");
			my %holds = map { $_ => 1 } split /,/, $holders // '';
			my %now = pair_attempts();
			return !grep { !$holds{$_} && ($now{$_} // -1) <= ($attempts_before{$_} // 0) } values %waiter_pid;
		}),
	"beta: both waiters woken within 15 s (retry delay 60 s): each holds a slot or tried again; the two releases woke two");
for my $w ($w1, $w2)
{
	($out) = $w->finish;
	is($out, 't', '... and its acquire returns true');
	sql($w, "SELECT redlock_release('pair')");
}
note sprintf('both waiters held a slot within %.1f s of the thaw', time - $t_thaw);
$_->quit for ($p1, $p2, $w1, $w2);

# One slot released twice within the worker's 100 ms window (released, taken back at
# once, released again), while beta's worker is frozen so that it reads all ten
# announcements together: two releases, so two waiters woken.  The worker used to take
# the second release's announcements for late ones of the first and wake nobody (the
# give-back of a slot taken twice in the scene above does that): a master announces one
# release once, so a master announcing again is another release.
# Alpha holds the 1-permit semaphore RESOURCE; two sessions of beta wait for it (60 s
# retry delay, 20 s wait), beta's worker subscribed: returns alpha's session, the two
# waiters and their pids (session => pid).
sub two_waiters
{
	my ($resource) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($q, @v) = (session($alpha), session($beta), session($beta));
	my %pid;
	sql($q, "SELECT redlock_acquire_permit('$resource', 1, 60000)");
	for my $v (@v)
	{
		sql($v, "SET redlock.retry_delay = 60000");
		sql($v, "SET redlock.retry_jitter = 0");
		$pid{$v} = $v->pid;
		$v->start("SELECT redlock_acquire_permit('$resource', 1, 60000, 20000)");
		usleep(200_000);
	}
	ok(wait_until(10, sub { (sql($b1, "SELECT count(*) FROM redlock_waiters() WHERE resource = '$resource'"))[0] eq '2' }),
		"beta: two waiters for the 1-permit '$resource'");
	ok(wait_until(10, sub { !grep { (split /\s+/)[1] ne '1' } $redis->redis_all('PUBSUB', 'NUMSUB', "redlock:released:$resource") }),
		"... and beta's worker subscribed to its channel on every master");
	usleep(500_000);
	return ($q, @v, \%pid);
}
my ($q1, $v1, $v2, $pids) = two_waiters('twice');
my %twice_pid = %$pids;
sub twice_attempts
{
	my ($rows) = sql($b1, "SELECT pid, attempts FROM redlock_waiters() WHERE resource = 'twice'");
	return map { split /\|/ } grep { /\|/ } split /\n/, $rows // '';
}
my %twice_before = twice_attempts();
($wpid) = $beta->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
kill 'STOP', $wpid;
($out, $err) = sql($q1, "SELECT redlock_release('twice') AND redlock_acquire_permit('twice', 1, 60000) AND redlock_release('twice')");
is($out, 't', "alpha releases the slot, takes it back and releases it again, beta's worker frozen");
usleep(300_000);
kill 'CONT', $wpid;
ok(wait_until(10, sub {
			my ($holders) = sql($a1, "SELECT string_agg(pid::text, ',') FROM redlock_lock_info('twice#1') WHERE held");
			my %now = twice_attempts();
			my $holder = $holders // '';
			return !grep { $_ ne $holder && ($now{$_} // -1) <= ($twice_before{$_} // 0) } values %twice_pid;
		}),
	"... both of beta's waiters woken within 10 s (retry delay 60 s): one holds the slot, the other tried again");
my ($twice_holder) = sql($a1, "SELECT pid FROM redlock_lock_info('twice#1') WHERE held");
my @got;
sql($b1, "SELECT pg_cancel_backend($twice_pid{$_})")
  for grep { $twice_pid{$_} ne ($twice_holder // '') } ($v1, $v2);
for my $v ($v1, $v2)
{
	($out) = $v->finish;
	push @got, $out // '';
}
sql($_, "SELECT redlock_release_all()") for ($v1, $v2);
is(join(',', sort @got), ',t', "... one acquire returns true, the other waiter is still waiting (cancelled here)");
$_->quit for ($q1, $v1, $v2);

# And one release of a slot, with every master announcing it, wakes one waiter: the
# second waiter makes no attempt (the worker reads the five announcements together).
($q1, $v1, $v2, $pids) = two_waiters('once');
my %once_pid = %$pids;
my ($second_attempts) = sql($b1, "SELECT attempts FROM redlock_waiters() WHERE pid = $once_pid{$v2}");
my ($wakeups_before) = sql($b1, 'SELECT wakeups FROM redlock_stats()');
($wpid) = $beta->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
kill 'STOP', $wpid;
sql($q1, "SELECT redlock_release('once')");
usleep(300_000);
kill 'CONT', $wpid;
($out) = $v1->finish;
is($out, 't', "alpha released 'once' once: beta's first waiter gets it");
usleep(1_000_000);
my ($wakeups_after) = sql($b1, 'SELECT wakeups FROM redlock_stats()');
is($wakeups_after - $wakeups_before, 1, '... one wake-up for one release, though five masters announced it');
is((sql($b1, "SELECT attempts FROM redlock_waiters() WHERE pid = $once_pid{$v2}"))[0], $second_attempts,
	'... and the second waiter was not woken (no attempt)');
sql($b1, "SELECT pg_cancel_backend($once_pid{$v2})");
$v2->finish;
sql($_, "SELECT redlock_release_all()") for ($v1, $v2);
$_->quit for ($q1, $v1, $v2);

# A holder's exit frees its permit.
my $a2_slot = slot_of($a2);
$a2->quit;
($out) = sql($a1, "SELECT redlock_acquire_permit('exports', 3, 120000, 10000)");
is($out, 't', "alpha: a holder's exit frees its permit for another");
is(slot_of($a1), $a2_slot, "... its slot ($a2_slot)");

# --- masters fail ---

$redis->kill9($_) for 3, 4;
($out) = sql($b1, "SELECT redlock_release('exports')");
is($out, 't', 'masters 3 and 4 killed: a holder still releases (3 of 5 answer)');
my $a3 = session($alpha);
($out) = sql($a3, "SELECT redlock_acquire_permit('exports', 3, 120000)");
is($out, 't', '... and another takes its permit');
my $b3 = session($beta);
($out) = sql($b3, "SELECT redlock_acquire_permit('exports', 3, 120000)");
is($out, 'f', '... the bound holds: a fourth holder is refused');
$redis->restart($_) for 3, 4;
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($b3, "SELECT redlock_acquire_permit('exports', 3, 120000)");
like($err, qr/08006.*2 of 5 Redis masters answered, 3 needed/, 'three of five frozen: 08006');
$redis->cont($_) for 0 .. 2;

# --- a cancelled waiter leaves nothing ---

sql($b3, 'SET redlock.retry_delay = 50');
my $b3_pid = $b3->pid;
$b3->start("SELECT redlock_acquire_permit('exports', 3, 120000, NULL)");
ok(wait_until(10, sub { (sql($b1, "SELECT attempts > 2 FROM redlock_waiters() WHERE resource = 'exports'"))[0] eq 't' }),
	'beta: a waiter retries');
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($b3_pid)");
($out, $err) = $b3->finish;
like($err, qr/57014/, '... until cancelled (57014)');
for my $slot (1 .. 3)
{
	my @values = $redis->redis_all('GET', "exports#$slot");
	my %distinct = map { $_ => 1 } grep { $_ ne '' } @values;
	is(scalar(keys %distinct), 1, "slot $slot: one holder's token on the masters, no key of the cancelled waiter");
}

# --- auto_extend keeps a permit past its TTL ---

sql($_, "SELECT redlock_release('exports')") for ($a1, $b2, $a3);
$redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', 'exports#1', 'exports#2', 'exports#3');
# --- an attempt cut short leaves no slot set ---

# Masters 0-2 frozen: masters 3 and 4 grant every free slot to the attempt, which waits
# for the others; cancelled then, its abort must undo every slot, not only the one a
# finished attempt would have kept.
my $cut = session($beta);
my $cut_pid = $cut->pid;
sql($cut, "SET redlock.timeout = '10s'");	# room for the cancel to land while it waits
$redis->stop($_) for 0 .. 2;
my @before = $redis->calls_at([ 3, 4 ], 'set');
$cut->start("SELECT redlock_acquire_permit('exports', 3, 120000)");
ok(wait_until(10, sub { my @n = $redis->calls_at([ 3, 4 ], 'set'); $n[0] > $before[0] && $n[1] > $before[1] }),
	'masters 0-2 frozen: masters 3 and 4 have the attempt\'s SETs');
$beta->safe_psql('postgres', "SELECT pg_cancel_backend($cut_pid)");
$redis->cont($_) for 0 .. 2;
($out, $err) = $cut->finish;
like($err, qr/57014/, '... cancelled while it waits for the others (57014)');
my @set = $redis->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'EXISTS', 'exports#1', 'exports#2', 'exports#3');
is(join(',', @set), '0,0,0,0,0', '... and its abort undid every slot it had set, on every master');

my $job = session($alpha);
sql($job, 'SET redlock.auto_extend = on');
($out) = sql($job, "SELECT redlock_acquire_permit('exports', 3, 1500)");
is($out, 't', 'alpha: an auto-extended permit, TTL 1.5 s');
usleep(4_000_000);
($out) = sql($job, "SELECT validity_ms > 0, renewals > 0, lost FROM redlock_locks() WHERE resource = 'exports'");
is($out, 't|t|f', '... still valid 4 s later, renewed by the worker');
my $job_slot = slot_of($job);
($out) = sql($b1, "SELECT held, cluster FROM redlock_lock_info('exports#$job_slot')");
is($out, 't|alpha', "... and beta sees slot $job_slot held by alpha");

# --- fencing tokens rise per slot ---

my ($t1) = sql($job, "SELECT redlock_fencing_token('exports')");
sql($job, "SELECT redlock_release('exports')");
my $f = session($beta);
sql($f, "SELECT redlock_acquire_permit('exports', 3, 120000)");
is(slot_of($f), $job_slot, "beta: takes the slot alpha's job gave back");
my ($t2) = sql($f, "SELECT redlock_fencing_token('exports')");
ok($t2 > $t1, "... with a fencing token above alpha's on that slot ($t2 > $t1)");
sql($f, "SELECT redlock_release('exports')");

# --- a caller giving more permits breaks the bound: refused ---

my @holders = map { session($alpha) } 1 .. 3;
sql($_, "SELECT redlock_acquire_permit('exports', 3, 120000)") for @holders;
my $big = session($beta);
($out) = sql($big, "SELECT redlock_acquire_permit('exports', 4, 120000)");
is($out, 't', 'beta: a caller giving 4 permits takes a fourth slot');
is(slot_of($big), '4', '... slot 4');
sql($holders[0], "SELECT redlock_release('exports')");
($out, $err) = sql($holders[0], "SELECT redlock_acquire_permit('exports', 3, 120000)");
like($err, qr/55000: semaphore "exports" has a holder beyond its 3 permits/,
	'alpha: its next attempt with 3 permits refuses: a slot past its permits is held (55000)');
($out) = sql($holders[0], "SELECT count(*) FROM redlock_locks()");
is($out, '0', '... and takes nothing');
sql($_, "SELECT redlock_release('exports')") for (@holders[1, 2], $big);
$_->quit for (@holders, $big, $a1, $a3, $b1, $b2, $b3, $job, $f);

# Only the fencing counter of the slot fenced above is left.
my @left = $redis->wait_all(5, sub { !grep { $_ ne '1' } @_ }, 'DBSIZE');
is(join(',', @left), '1,1,1,1,1', "every slot and holder record gone; one fencing counter left on each master");

RedisMasters::no_crash($_) for ($alpha, $beta);
done_testing();
