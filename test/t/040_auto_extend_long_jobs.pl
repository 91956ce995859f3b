# Long jobs (issue 8): locks kept alive by the background worker (redlock.auto_extend),
# and the work stopped when such a lock is lost (redlock.cancel_on_loss), on two
# clusters that share five masters:
# - a job 10x longer than its TTL keeps exclusive hold while the other cluster tries;
# - a frozen majority: the job's statement is cancelled (or the commit it reaches first
#   refused), naming the lock, before its validity runs out, and nothing the job did
#   after the loss commits;
# - pg_terminate_backend releases at once; SIGKILL of the owner: keys gone within one
#   TTL and nothing renewed after the crash restart;
# - the worker killed (SIGTERM): restarted, renewals resume; the worker frozen past the
#   validity: the owner is told (lost, cancelled);
# - redlock_extend on an auto-extended lock goes through the worker; a full registry is
#   53400; without shared_preload_libraries auto_extend is 55000;
# - redlock_claim: one winner across both clusters, never released, ends with its TTL;
# - many acquire/auto-extend/release cycles leave the registry empty, and nothing is
#   renewed after release.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $cycles = $ENV{RL_AUTO_EXTEND_CYCLES} // 100000;

my $redis = RedisMasters->new(5);
my $conf = "redlock.timeout = 300ms\nredlock.connect_timeout = 1000ms\n";
my $node = RedisMasters::redlock_node('auto', $redis,
	$conf . "shared_preload_libraries = 'redlock'\nredlock.max_auto_extended_locks = 50\n");
my $other = RedisMasters::redlock_node('plain', $redis, $RedisMasters::ROOMY_CONF);
my ($out, $err, $secs);

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
}

sub registered
{
	return $node->safe_psql('postgres', 'SELECT auto_extended_locks FROM redlock_stats()');
}

# --- the worker runs, and shows in pg_stat_activity ---

ok(wait_until(10, sub { worker_pid() ne '' }),
	'the auto-extend worker shows in pg_stat_activity as "redlock auto-extend"');
($out) = $node->safe_psql('postgres',
	"SELECT wait_event_type FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
is($out, 'Extension', '... waiting on wait event type Extension');

# --- without shared_preload_libraries: 55000 with a hint ---

my $p = session($other);
($out, $err) = sql($p, "SET redlock.auto_extend = on; SELECT redlock_acquire('no-preload', 2000)");
like($err, qr/ERROR:\s+55000: redlock.auto_extend requires redlock to be loaded via shared_preload_libraries/,
	'auto_extend without the library preloaded: 55000');
like($err, qr/HINT:\s+Add redlock to shared_preload_libraries/, '... with a hint');
is($redis->holding('no-preload', 0), 0, '... and no key was set');
sql($p, 'RESET redlock.auto_extend');

# --- a job 10x longer than its TTL keeps exclusive hold across two clusters ---

my $job = session($node);
($out) = sql($job, "SET redlock.auto_extend = on; SELECT redlock_acquire('long-job', 1000)");
is($out, 't', 'the job acquires with a 1 s TTL and auto_extend on');
$job->start('SELECT pg_sleep(10)');
my ($tries, $won) = (0, 0);
my $t0 = time;
while (time - $t0 < 9.5)
{
	($out) = sql($p, "SELECT redlock_acquire('long-job', 1000)");
	$tries++;
	$won++ if $out eq 't';
	sql($p, "SELECT redlock_release('long-job')") if $out eq 't';
	usleep(100_000);
}
is($won, 0, "the other cluster never acquired it during the 10 s job ($tries tries)");
$job->finish;
($out) = sql($job,
	"SELECT auto_extended, lost, renewals >= 20, last_renewal > now() - interval '1 s', validity_ms > 0"
	  . " FROM redlock_locks() WHERE resource = 'long-job'");
is($out, 't|f|t|t|t', 'redlock_locks(): auto-extended, not lost, renewed every TTL/3, still valid');
($out) = sql($job, "SELECT redlock_release('long-job')");
is($out, 't', 'the job releases it');
is($redis->holding('long-job', 0), 0, '... its keys are gone');
is(registered(), '0', '... and the registry is empty');
($out) = sql($p, "SELECT redlock_acquire('long-job', 1000), redlock_release('long-job')");
is($out, 't|t', 'the other cluster acquires it now');

# --- redlock_extend on an auto-extended lock: through the worker ---

($out) = sql($job, "SELECT redlock_acquire('ext', 2000), redlock_extend('ext', 20000)");
is($out, 't|t', 'redlock_extend to 20 s on an auto-extended lock returns true');
my @pttl = $redis->redis_all('PTTL', 'ext');
is(scalar(grep { $_ > 15000 } @pttl), 5, '... and every master has the 20 s TTL (' . "@pttl" . ')');
($out) = sql($job, "SELECT ttl_ms FROM redlock_locks() WHERE resource = 'ext'");
is($out, '20000', '... which redlock_locks() shows');
sql($job, "SELECT redlock_release('ext')");

# --- a shorter TTL asked of an auto-extended lock cuts its validity at once: any master
# may apply it, answered or not (spec §3 step 4; shared/lease.c) ---

($out) = sql($job, "SELECT redlock_acquire('cut', 30000)");
is($out, 't', 'an auto-extended lock with a 30 s TTL');
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($job, "SELECT redlock_extend('cut', 1000)");
isnt($out, 't', 'redlock_extend to 1 s with masters 0-2 frozen: not extended');
($out) = sql($job, "SELECT coalesce(max(validity_ms), 0) FROM redlock_locks() WHERE resource = 'cut'");
cmp_ok($out, '<=', 1000, '... and the validity is cut to what 1 s allows (masters 3 and 4 may have applied it)');
$redis->cont($_) for 0 .. 2;
sql($job, "SELECT redlock_release('cut')");

# --- a majority frozen briefly (shorter than TTL/3): renewals are retried, the job survives ---

sub cluster_stat
{
	return $node->safe_psql('postgres', "SELECT $_[0] FROM redlock_stats()");
}

($out) = sql($job, "SELECT redlock_acquire('brief-freeze', 6000)");
is($out, 't', 'a job acquires with a 6 s TTL and auto_extend on');
my $failed_before = cluster_stat('renewals_failed');
$node->safe_psql('postgres', 'CREATE TABLE job_done ()');
$job->start(q{DO $$ BEGIN WHILE NOT EXISTS (SELECT FROM job_done) LOOP PERFORM pg_sleep(0.1); END LOOP; END $$});
# Each round freezes the majority once a renewal was seen (the cluster's renewal counter
# moved) and resumes it once a renewal failed (renewals_failed moved): the next renewal,
# due TTL/3 = 2 s after the last, fails and is retried every 200 ms, and the majority is
# back long before only TTL/3 of validity is left (2 s after that).  Timed by the
# counters rather than by sleeps, so that a loaded machine cannot make a freeze miss
# the renewal (sleeps did, at a load average of 10).
my $failures_seen = 0;
for my $round (1 .. 3)
{
	my $seen = cluster_stat('renewals');
	wait_until(5, sub { cluster_stat('renewals') > $seen });
	my $failed = cluster_stat('renewals_failed');
	$redis->stop($_) for 0 .. 2;
	$failures_seen++ if wait_until(3, sub { cluster_stat('renewals_failed') > $failed });
	$redis->cont($_) for 0 .. 2;
}
$node->safe_psql('postgres', 'INSERT INTO job_done DEFAULT VALUES');
($out, $err) = $job->finish;
is($err, '', 'a majority frozen three times during a job, each until a renewal failed: the job is not cancelled');
is($failures_seen, 3, '... a renewal failed in each freeze');
($out) = sql($job, "SELECT lost, validity_ms > 0 FROM redlock_locks() WHERE resource = 'brief-freeze'");
is($out, 'f|t', '... the lock is neither lost nor run out');
cmp_ok(cluster_stat('renewals_failed'), '>', $failed_before,
	'... renewals did fail meanwhile, and were retried');
is($redis->holding('brief-freeze', 5), 5, '... and all 5 masters hold it again');
sql($job, "SELECT redlock_release('brief-freeze')");

# --- a frozen majority: cancelled in time, naming the lock; nothing after the loss commits ---

$node->safe_psql('postgres', 'CREATE TABLE steps (step int, at timestamptz)');
$node->safe_psql('postgres', q{
CREATE PROCEDURE job(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    INSERT INTO steps VALUES (i, clock_timestamp());
    COMMIT;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$});
($out) = sql($job, "SELECT redlock_acquire('frozen-job', 3000)");
is($out, 't', 'a job acquires with a 3 s TTL and auto_extend on');
$job->start('CALL job(100)');
usleep(1_500_000);
my ($freeze_at) = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
my $frozen_t = time;
$redis->stop($_) for 0 .. 2;
($out, $err, $secs) = $job->finish;
my $cancel_after = time - $frozen_t;
$redis->cont($_) for 0 .. 2;
# The loss reaches the job one of two ways (README, "Long jobs"): the watchdog cancels the
# running statement (57014), or, when the procedure's COMMIT comes between the worker
# giving the lock up and the watchdog's next tick, the commit check refuses that commit
# (55P03).  Either stops the job; which one comes first is a race.  Both must come
# before the validity could run out, and leave nothing committed after it.
like($err, qr/ERROR:\s+(?:57014: canceling statement because lock on resource "frozen-job" was lost|55P03: lock on resource "frozen-job" was lost during this transaction)/,
	'the job is stopped with an error naming the lost lock (57014 cancel, or 55P03 at its COMMIT)');
note('stopped by ' . ($err =~ /ERROR:\s+(57014|55P03)/ ? $1 : 'neither'));
like($err, qr/DETAIL:\s+The redlock background worker could not keep it alive: fewer than a quorum/,
	'... saying why');
# Issue 40: the detail names the masters that did not answer, not only how many.
my @frozen = map { "127\\.0\\.0\\.1:$_" } ($redis->ports)[0 .. 2];
like($err, qr/no answer from (?:$frozen[0]|$frozen[1]|$frozen[2])(?:, (?:$frozen[0]|$frozen[1]|$frozen[2])){2}/,
	'... and names the three frozen masters');
cmp_ok($cancel_after, '<', 3.0,
	sprintf('... %.2f s after the majority froze, before the 3 s validity could run out', $cancel_after));
($out) = $node->safe_psql('postgres',
	"SELECT count(*) FILTER (WHERE at > '$freeze_at'::timestamptz + interval '3 s') FROM steps");
is($out, '0', 'no step committed after the validity could have run out');
($out) = sql($job, "SELECT lost, validity_ms FROM redlock_locks() WHERE resource = 'frozen-job'");
is($out, 't|0', 'redlock_locks() shows the lock lost, with no validity');
($out, $err) = sql($job, "SELECT redlock_extend('frozen-job')");
is($out, 'f', 'redlock_extend of the lost lock returns false');
($out) = sql($job, "SELECT count(*) FROM redlock_locks() WHERE resource = 'frozen-job'");
is($out, '0', '... and forgets it');
like(slurp_file($node->logfile), qr/LOG:\s+redlock lock on resource "frozen-job" was lost: fewer than a quorum/,
	'the worker logged the loss at LOG with the resource');

# A transaction-scoped lock: the transaction in progress does not commit.
($out) = sql($job, "BEGIN; SELECT redlock_xact_acquire('frozen-xact', 3000)");
is($out, 't', 'a transaction takes an auto-extended transaction-scoped lock');
sql($job, "INSERT INTO steps VALUES (-1, clock_timestamp())");
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($job, 'SELECT pg_sleep(6)');
$redis->cont($_) for 0 .. 2;
like($err, qr/57014: canceling statement because lock on resource "frozen-xact" was lost/,
	'its statement is cancelled');
unlike($err, qr/had been lost before it was released/,
	'... and its release at the abort does not report the loss a second time');
sql($job, 'COMMIT');
($out) = $node->safe_psql('postgres', 'SELECT count(*) FROM steps WHERE step = -1');
is($out, '0', '... and its work did not commit');

# cancel_on_loss off: not cancelled, but the release warns.
($out) = sql($job, "SET redlock.cancel_on_loss = off; SELECT redlock_acquire('quiet', 3000)");
is($out, 't', 'a lock taken with cancel_on_loss off');
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($job, 'SELECT pg_sleep(4)');
$redis->cont($_) for 0 .. 2;
is($err, '', '... its statement is not cancelled when the lock is lost');
($out) = sql($job, "SELECT lost FROM redlock_locks() WHERE resource = 'quiet'");
is($out, 't', '... but redlock_locks() shows it lost');
($out, $err) = sql($job, "SELECT redlock_acquire('quiet', 3000)");
is($out, 't', '... a re-acquire acquires it afresh');
like($err, qr/WARNING:\s+01000: lock on resource "quiet" had been lost before it was acquired again/,
	'... warning that it had been lost');
($out) = sql($job, "SELECT lost, auto_extended, session_holds FROM redlock_locks() WHERE resource = 'quiet'");
is($out, 'f|t|2', '... auto-extended again, keeping the earlier hold');
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($job, 'SELECT pg_sleep(4)');
$redis->cont($_) for 0 .. 2;
($out, $err) = sql($job, "SELECT redlock_release('quiet'), redlock_release('quiet')");
like($err, qr/WARNING:\s+01000: lock on resource "quiet" had been lost before it was released/,
	'lost again: its last release warns');
sql($job, 'RESET redlock.cancel_on_loss');

# --- pg_terminate_backend releases at once ---

my $victim = session($node);
($out) = sql($victim, "SET redlock.auto_extend = on; SELECT redlock_acquire('terminated', 60000)");
is($redis->holding('terminated', 5), 5, 'a 60 s auto-extended lock is on all 5 masters');
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $victim->pid . ')');
is($redis->holding('terminated', 0, 3), 0, 'pg_terminate_backend of its owner: keys gone at once');
ok(wait_until(5, sub { registered() eq '0' }), '... and the registry is empty');

# --- the worker killed (SIGTERM): restarted, renewals resume ---

($out) = sql($job, "SELECT redlock_acquire('survives-worker', 3000)");
my $wpid = worker_pid();
kill 'TERM', $wpid;
ok(wait_until(10, sub { my $n = worker_pid(); $n ne '' && $n ne $wpid }),
	'the worker, terminated, is started again by the postmaster');
($out) = sql($job, 'SELECT renewals FROM redlock_locks() WHERE resource = \'survives-worker\'');
my $before = $out;
usleep(3_000_000);
($out) = sql($job,
	"SELECT renewals > $before, lost, validity_ms > 0 FROM redlock_locks() WHERE resource = 'survives-worker'");
is($out, 't|f|t', '... renewals resumed and the lock is still valid (TTL 3 s, 3 s later)');
is($redis->holding('survives-worker', 5), 5, '... on all 5 masters');

# The worker frozen past the validity: when it runs again, the owner is told.
$wpid = worker_pid();
kill 'STOP', $wpid;
$job->start('SELECT pg_sleep(8)');
usleep(4_000_000);
kill 'CONT', $wpid;
($out, $err) = $job->finish;
like($err, qr/57014: canceling statement because lock on resource "survives-worker" was lost/,
	'the worker frozen past the validity: the owner is cancelled');
like($err, qr/validity time (?:ran out before it could be renewed|was running out without a renewal)/,
	'... saying why (the owner\'s own watchdog, or the worker once it runs again)');
# The worker, running again, must not cancel the owner a second time: that would hit
# its next statement, here the release (seen in 2 of 2 runs before the fix).
usleep(200_000);
($out, $err) = sql($job, "SELECT redlock_release('survives-worker')");
unlike($err, qr/57014/, '... and its next statement, the release, is not cancelled again');
($out) = sql($job, "SELECT count(*) FROM redlock_locks()");
is($out, '0', '... which forgets the lock');

# The worker frozen while an owner asks for a new TTL: a clear 08006, the lock kept.
($out) = sql($job, "SELECT redlock_acquire('silent', 30000)");
$wpid = worker_pid();
kill 'STOP', $wpid;
($out, $err, $secs) = sql($job, "SELECT redlock_extend('silent', 40000)");
kill 'CONT', $wpid;
like($err, qr/ERROR:\s+08006: could not extend lock on resource "silent": the redlock background worker did not answer/,
	sprintf('redlock_extend while the worker is frozen: 08006 naming the worker (after %.1f s)', $secs));
($out) = sql($job, "SELECT lost, validity_ms > 20000 FROM redlock_locks() WHERE resource = 'silent'");
is($out, 'f|t', '... and the lock is kept');
sql($job, "SELECT redlock_release('silent')");

# --- redlock_extend of a full registry, and the registry's limit ---

($out, $err) = sql($job, "SELECT count(*) FILTER (WHERE redlock_acquire('many-' || i, 30000)) FROM generate_series(1, 51) i");
like($err, qr/ERROR:\s+53400: too many auto-extended redlock locks/,
	'the 51st auto-extended lock with redlock.max_auto_extended_locks = 50: 53400');
like($err, qr/HINT:\s+Raise redlock.max_auto_extended_locks/, '... with a hint');
is($redis->holding('many-51', 0), 0, '... set no key');
is(registered(), '0', '... and the aborted statement left the registry empty');
is($redis->holding('many-1', 0), 0, '... and released the 50 it had taken');

# --- redlock_claim: one winner across both clusters, never released, ends with its TTL ---

my ($first) = sql($job, "SELECT redlock_claim('fire:12:00', 2000)");
my ($second) = sql($p, "SELECT redlock_claim('fire:12:00', 2000)");
is("$first$second", 'tf', 'redlock_claim: the first cluster wins, the second does not');
($out) = sql($job, "SELECT redlock_release('fire:12:00'), count(*) FROM redlock_locks()");
is($out, 'f|0', '... the claim is not a held lock: release says so, redlock_locks() is empty');
# A claim of its own, with a TTL that no loaded machine outlasts before the look.
($out) = sql($job, "SELECT redlock_claim('fire:12:01', 60000)");
my $claimer = $job->pid;
$job->quit;
wait_until(10, sub {
	$node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $claimer") eq '0' });
$job = session($node);
is($redis->holding('fire:12:01', 5), 5, '... and a claim outlives the session that claimed it');
$redis->redis_all('DEL', 'fire:12:01', "fire:12:01\xffholder");   # the claim and its holder record
is($redis->holding('fire:12:00', 0, 4), 0, '... until its TTL runs out');
($out) = sql($p, "SELECT redlock_claim('fire:12:00', 2000)");
is($out, 't', '... after which it can be claimed again');

# --- the owner SIGKILLed: crash restart, keys gone within one TTL, nothing renewed ---

($out) = sql($job, "SET redlock.auto_extend = on; SELECT redlock_acquire('killed', 2000)");
is($out, 't', 'an auto-extended lock with a 2 s TTL');
# Timed by the polls that still found a key, from when each began: a key seen by a poll
# begun at t lived past t, whatever the load made the poll cost.
my $owner = $job->pid;
my $killed_at = time;
my $last_seen = $killed_at;
kill 'KILL', $owner;
ok( wait_until(
		8,
		sub {
			my $t = time;
			my $n = grep { $_ eq '1' } $redis->redis_all('EXISTS', 'killed');
			$last_seen = $t if $n > 0;
			return $n == 0;
		}),
	'the owner SIGKILLed: its keys are gone');
cmp_ok($last_seen - $killed_at, '<', 3,
	sprintf('... within one TTL: the last poll that found one began %.2f s after the kill',
		$last_seen - $killed_at));
$node->poll_query_until('postgres', 'SELECT true') or die 'the cluster did not come back';
ok(wait_until(10, sub { worker_pid() ne '' }), 'after the crash restart the worker runs again');
is(registered(), '0', '... with nothing to extend');
($out) = $node->safe_psql('postgres', 'SELECT renewals FROM redlock_stats()');
usleep(1_500_000);
is($node->safe_psql('postgres', 'SELECT renewals FROM redlock_stats()'), $out, '... and it renews nothing');

# --- cycles leave the registry empty, and nothing is renewed after release ---

# In statements of 10,000 cycles: each stays well within the session's query timeout
# on a loaded machine (100,000 in one statement took over 60 s at a load average of 9).
$job = session($node);
sql($job, 'SET redlock.auto_extend = on');
my $cycle_secs = 0;
$err = '';
for (my $from = 1; $from <= $cycles && $err eq ''; $from += 10000)
{
	my $to = $from + 9999 < $cycles ? $from + 9999 : $cycles;
	($out, $err, $secs) = sql($job, qq{
DO \$\$
BEGIN
  FOR i IN $from .. $to LOOP
    IF NOT redlock_acquire('cycle-' || i % 10, 5000) OR NOT redlock_release('cycle-' || i % 10) THEN
      RAISE EXCEPTION 'cycle % failed', i;
    END IF;
  END LOOP;
END \$\$});
	$cycle_secs += $secs;
}
is($err, '', "$cycles acquire/auto-extend/release cycles ran");
note sprintf('%d cycles in %.1f s', $cycles, $cycle_secs);
is(registered(), '0', '... and left the registry empty');
($out) = $node->safe_psql('postgres', 'SELECT renewals FROM redlock_stats()');
usleep(2_000_000);
is($node->safe_psql('postgres', 'SELECT renewals FROM redlock_stats()'), $out,
	'... and nothing is renewed after release');
$redis->no_keys_left;

$p->quit;
$job->quit;
RedisMasters::no_crash($_) for $node, $other;
done_testing();
