# pg_cron (issue 8, "run a job on only one cluster"): two clusters share five Redis
# masters, each runs Debian's pg_cron 1.4 with the same jobs on the same schedule,
# '* * * * *', for two fires (about two and a half minutes), each run in its own libpq
# session as pg_cron does by default.  Cluster b's scheduler fires 5 s late (a clock
# skew between two hosts, simulated inside the jobs), longer than the short jobs last
# and than the long job's TTL:
# - claim-job (redlock_claim on a resource naming the minute) runs exactly once per
#   minute across both clusters; locked-job, the same work under a lock released at
#   commit, runs on both in the same minute, as the late scheduler finds the lock free;
# - long-job (TTL 2 s, 10 s of work, auto_extend on, wait_ms 0, nothing done if not
#   acquired) never overlaps between clusters, although the late cluster tries more than
#   a TTL after the other took the lock (runs record their interval at the end of their
#   transaction: with auto_extend off, both clusters' runs fail at commit instead);
# - lost-job (the same function, 40 s of work) commits its result in the first minute;
#   in the second, 3 of the 5 masters freeze mid-run: the run is cancelled, pg_cron's
#   cron.job_run_details shows it failed, and its result never appears.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(wait_until);
use RedisMasters;

my $skew_s = 5;       # how late cluster b's scheduler fires
my $ttl_ms = 2000;    # TTL of the long jobs' locks
my @names = qw(cron_a cron_b);
my @jobs = qw(claim-job locked-job long-job lost-job);

my $redis = RedisMasters->new(5);
my %node;
for my $name (@names)
{
	my $lag = $name eq 'cron_b' ? $skew_s : 0;
	# TAP clusters listen on a Unix socket only: pg_cron connects to it (cron.host) with
	# libpq for each run.  Not cron.use_background_workers: in pg_cron 1.4 (Debian 12)
	# its launcher waits on a running worker's messages (fixed in 1.5.0), so a long job
	# holds back the start and the results of every other job.
	$node{$name} = RedisMasters::redlock_node($name, $redis, qq{
redlock.timeout = 300ms
redlock.connect_timeout = 1000ms
shared_preload_libraries = 'pg_cron,redlock'
cron.database_name = 'postgres'
cron.host = '$PostgreSQL::Test::Cluster::test_pghost'
test.scheduler_lag = $lag
});
}

# The recipe: the same tables and jobs on every cluster.  The lines marked "test only"
# are not part of it: scheduler_lag() makes cluster b's runs start late, and long_job
# records the runs that found the lock taken, so that the test sees when they tried.
my $recipe = <<'SQL';
CREATE EXTENSION pg_cron;

CREATE TABLE claim_runs (minute timestamptz, started_at timestamptz);
CREATE TABLE locked_runs (minute timestamptz, started_at timestamptz);
CREATE TABLE long_runs (resource text, acquired boolean, started_at timestamptz, ended_at timestamptz);

-- test only: this cluster's scheduler fires test.scheduler_lag seconds late
CREATE FUNCTION scheduler_lag() RETURNS void LANGUAGE sql
AS $$ SELECT pg_sleep(current_setting('test.scheduler_lag')::float8) $$;

-- A short job run once per fire across all clusters: the first cluster to claim the
-- fire (named by its minute, in UTC) does the work; the claim is never released, it
-- ends with its TTL, so a scheduler that fires later for the same minute finds it taken.
CREATE FUNCTION claim_job() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  fire timestamptz := date_trunc('minute', now());  -- now(): when pg_cron started this run
BEGIN
  PERFORM scheduler_lag();                           -- test only
  IF NOT redlock_claim('claim-job:' || to_char(fire AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI'),
                       50000) THEN
    RETURN;                                          -- another cluster runs this fire
  END IF;
  INSERT INTO claim_runs VALUES (fire, clock_timestamp());   -- the work
END $$;

-- The same short job under a lock released at commit: mutual exclusion only.
CREATE FUNCTION locked_job() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM scheduler_lag();                           -- test only
  IF redlock_xact_acquire('locked-job', 50000, 0) THEN
    INSERT INTO locked_runs VALUES (date_trunc('minute', now()), clock_timestamp());
  END IF;
END $$;

-- A job longer than its lock's TTL: the redlock background worker renews the lock every
-- TTL/3 while the job runs (auto_extend), and cancels the job if the lock is lost.  The
-- lock is transaction-scoped: pg_cron runs the command in one transaction, and the lock
-- is released just after it commits.  The result is written at the end, in the same
-- transaction, so a run cancelled on a lost lock leaves nothing behind.
CREATE FUNCTION long_job(resource text, ttl_ms integer, work_s float8) RETURNS void
LANGUAGE plpgsql SET redlock.auto_extend = on AS $$
DECLARE
  started timestamptz;
BEGIN
  PERFORM scheduler_lag();                           -- test only
  IF NOT redlock_xact_acquire(resource, ttl_ms, 0) THEN
    INSERT INTO long_runs VALUES (resource, false, clock_timestamp(), NULL);  -- test only
    RETURN;                                          -- another cluster runs it
  END IF;
  started := clock_timestamp();
  PERFORM pg_sleep(work_s);                          -- the work
  INSERT INTO long_runs VALUES (resource, true, started, clock_timestamp());  -- its result
END $$;
SQL

$node{$_}->safe_psql('postgres', $recipe) for @names;
for my $name (@names)
{
	ok( wait_until(
			10,
			sub {
				$node{$name}->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_cron launcher'")
				  eq '1';
			}),
		"$name: the pg_cron launcher runs");
}

# Schedule away from a minute's end, so that both launchers see the jobs before the
# first fire; pg_cron runs a newly scheduled job from the next minute on.
my $sec = time - 60 * int(time / 60);
usleep((62 - $sec) * 1_000_000) if $sec > 48;
my $m1 = 60 * int(time / 60) + 60;    # the first fire (epoch seconds)
my $m2 = $m1 + 60;
my %command = (
	'claim-job' => 'SELECT claim_job()',
	'locked-job' => 'SELECT locked_job()',
	'long-job' => "SELECT long_job('long-job', $ttl_ms, 10)",
	'lost-job' => "SELECT long_job('lost-job', $ttl_ms, 40)");
my %jobid;
for my $name (@names)
{
	for my $job (@jobs)
	{
		$jobid{$name}{$job} = $node{$name}->safe_psql('postgres',
			"SELECT cron.schedule('$job', '* * * * *', \$cmd\$$command{$job}\$cmd\$)");
	}
}
note sprintf('scheduled at %s; fires expected at %s and %s (UTC)',
	hms(time), hms($m1), hms($m2));

sub hms
{
	my ($t) = @_;
	my @t = gmtime($t);
	return sprintf('%02d:%02d:%02d', @t[ 2, 1, 0 ]);
}

# The runs of JOB on cluster NAME, from cron.job_run_details: hashes with status,
# start and end (epoch seconds), minute (of the start), message, and done: the status
# is final and the run's backend has exited.
sub runs
{
	my ($name, $job) = @_;
	my $out = $node{$name}->safe_psql('postgres', qq{
SELECT d.status, coalesce(extract(epoch FROM d.start_time)::text, ''),
       coalesce(extract(epoch FROM d.end_time)::text, ''),
       (d.status IN ('succeeded', 'failed')
        AND NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = d.job_pid))::int,
       coalesce(translate(d.return_message, E'\\n|', '  '), '')
  FROM cron.job_run_details d WHERE d.jobid = $jobid{$name}{$job} ORDER BY d.runid});
	my @runs;
	for my $line (split /\n/, $out)
	{
		my ($status, $start, $end, $done, $msg) = split /\|/, $line, 5;
		push @runs,
		  {
			cluster => $name,
			job => $job,
			status => $status,
			start => $start,
			end => $end,
			done => $done,
			message => $msg,
			minute => $start eq '' ? -1 : 60 * int($start / 60),
		  };
	}
	return @runs;
}

# The run of JOB on NAME that started in MINUTE, or undef.
sub run_in
{
	my ($name, $job, $minute) = @_;
	my ($run) = grep { $_->{minute} == $minute } runs($name, $job);
	return $run;
}

sub all_runs
{
	return map { my $name = $_; map { runs($name, $_) } @jobs } @names;
}

# --- the first fire: every run ends before the second ---

usleep(($m1 - time) * 1_000_000) if time < $m1;
ok( wait_until(
		$m2 - time,
		sub {
			my @r = grep { $_->{minute} == $m1 } all_runs();
			return @r == 2 * @jobs && !grep { !$_->{done} } @r;
		}),
	'first fire: every job ran on both clusters and ended before the next fire');

# --- the second fire: when every other run has ended, lost-job still runs on one
# cluster (the other found its lock taken); then a majority of the masters freezes ---

usleep(($m2 - time) * 1_000_000) if time < $m2;
my $holder;
ok( wait_until(
		$m2 + 35 - time,
		sub {
			for my $name (@names)
			{
				for my $job (qw(claim-job locked-job long-job))
				{
					my $run = run_in($name, $job, $m2);
					return 0 unless $run && $run->{done};
				}
			}
			my @lost = map { run_in($_, 'lost-job', $m2) } @names;
			return 0 if grep { !defined } @lost;
			my @running = grep { !$_->{done} } @lost;
			return 0 unless @running == 1;
			$holder = $running[0]{cluster};
			return 1;
		}),
	'second fire: the other jobs have ended; lost-job runs on one cluster');
$holder //= 'cron_a';
note sprintf('%s holds lost-job at %s', $holder, hms(time));
is($redis->holding('lost-job', 5), 5, "... holding its lock on all 5 masters");

my $frozen_at = time;
$redis->stop($_) for 0 .. 2;
my $lost;
wait_until(
	20,
	sub {
		$lost = run_in($holder, 'lost-job', $m2);
		return $lost && $lost->{done};
	});
my $ended_after = time - $frozen_at;
$redis->cont($_) for 0 .. 2;
note sprintf('lost-job on %s ended %.1f s after the freeze: %s: %s',
	$holder, $ended_after, $lost->{status}, $lost->{message});
is($lost->{status}, 'failed',
	'3 of 5 masters frozen mid-run: cron.job_run_details shows the run failed');
like($lost->{message}, qr/ERROR:\s+canceling statement because lock on resource "lost-job" was lost/,
	'... cancelled, naming the lost lock (return_message)');
like(slurp_file($node{$holder}->logfile),
	qr/LOG:\s+redlock lock on resource "lost-job" was lost/,
	"... after $holder\'s redlock worker lost the lock (server log)");
is(join(',', map { $redis->redis_cli($_, 'PING') } 0 .. 2), 'PONG,PONG,PONG',
	'the frozen masters answer again');

# --- every run ends; the jobs are unscheduled (pg_cron would kill a running one) ---

ok(wait_until(60, sub { !grep { !$_->{done} } all_runs() }), 'every run ended');
for my $name (@names)
{
	$node{$name}->safe_psql('postgres', "SELECT cron.unschedule($jobid{$name}{$_})")
	  for @jobs;
}
my @runs = all_runs();
is( join('; ',
		map { "$_->{cluster} $_->{job} at " . hms($_->{start}) . ": $_->{status}: $_->{message}" }
		  grep {
			$_->{status} ne 'succeeded'
			  && !($_->{cluster} eq $holder && $_->{job} eq 'lost-job' && $_->{minute} == $m2)
		} @runs),
	'',
	'every other run succeeded');

# Rows of QUERY on each cluster: lists of fields, the cluster's name first.
sub rows
{
	my ($query) = @_;
	my @rows;
	for my $name (@names)
	{
		my $out = $node{$name}->safe_psql('postgres', $query);
		push @rows, [ $name, split /\|/, $_, -1 ] for split /\n/, $out;
	}
	return @rows;
}

# --- 1. claim-job: exactly once per minute fired ---

my (%fired, %claimed, %locked);
$fired{ $_->{minute} }{ $_->{cluster} } = 1 for grep { $_->{job} eq 'claim-job' } @runs;
push @{ $claimed{ $_->[1] } }, $_->[0]
  for rows('SELECT extract(epoch FROM minute)::bigint FROM claim_runs');
push @{ $locked{ $_->[1] } }, $_->[0]
  for rows('SELECT extract(epoch FROM minute)::bigint FROM locked_runs');
my @both = grep { keys %{ $fired{$_} } == 2 } sort keys %fired;
cmp_ok(scalar @both, '>=', 2, 'claim-job fired on both clusters in ' . scalar(@both) . ' minutes');

# "12:01:00 cron_a; 12:02:00 cron_a": the clusters with a row, for each minute named.
sub by_minute
{
	my ($rows, @minutes) = @_;
	return join('; ', map { hms($_) . ' ' . join('+', @{ $rows->{$_} // [] }) } @minutes);
}
my @not_once = grep { @{ $claimed{$_} // [] } != 1 } sort keys %fired;
push @not_once, grep { !$fired{$_} } sort keys %claimed;
is(by_minute(\%claimed, @not_once), '',
	'claim-job: exactly one row for every minute fired (' . by_minute(\%claimed, sort keys %fired) . ')');
cmp_ok(scalar(grep { @{ $locked{$_} // [] } == 2 } @both), '>=', 1,
	'locked-job, under a lock released at commit, ran on both clusters in a minute ('
	  . by_minute(\%locked, @both) . ')');

# --- 2. long-job: never overlapping, though the other cluster tried past the TTL ---

my @long = map { { cluster => $_->[0], acquired => $_->[1], start => $_->[2], end => $_->[3] } }
  rows(q{SELECT acquired::int, extract(epoch FROM started_at), coalesce(extract(epoch FROM ended_at)::text, '')
           FROM long_runs WHERE resource = 'long-job'});
my @held = grep { $_->{acquired} } @long;
my @refused = grep { !$_->{acquired} } @long;
note join("\n", 'long-job runs:',
	map { "  $_->{cluster} " . hms($_->{start}) . ($_->{acquired} ? ' - ' . hms($_->{end}) : ' refused') }
	  sort { $a->{start} <=> $b->{start} } @long);
cmp_ok(scalar @held, '>=', 1, 'long-job ran ' . scalar(@held) . ' times (10 s each, TTL 2 s)');
my @overlaps;
for my $x (@held)
{
	for my $y (grep { $_->{cluster} gt $x->{cluster} } @held)
	{
		push @overlaps, sprintf('%s %s-%s and %s %s-%s',
			$x->{cluster}, hms($x->{start}), hms($x->{end}),
			$y->{cluster}, hms($y->{start}), hms($y->{end}))
		  if $x->{start} < $y->{end} && $y->{start} < $x->{end};
	}
}
is(join('; ', @overlaps), '', 'no two runs of long-job on different clusters overlap');
my @late = grep {
	my $r = $_;
	grep {
		$_->{cluster} ne $r->{cluster}
		  && $_->{start} + $ttl_ms / 1000 <= $r->{start}
		  && $r->{start} <= $_->{end}
	} @held
} @refused;
cmp_ok(scalar @late, '>=', 1,
	'... although the other cluster was refused the lock more than a TTL after it was taken');

# --- 3. lost-job: committed when undisturbed, never after the masters froze ---

my @lost_rows = map { { cluster => $_->[0], acquired => $_->[1], start => $_->[2] } }
  rows(q{SELECT acquired::int, extract(epoch FROM started_at) FROM long_runs WHERE resource = 'lost-job'});
is(scalar(grep { $_->{acquired} && $_->{start} >= $m1 && $_->{start} < $m2 } @lost_rows), 1,
	'lost-job: the undisturbed first run committed its result');
is(scalar(grep { $_->{acquired} && $_->{start} >= $m2 } @lost_rows), 0,
	'... the run whose masters froze committed nothing');
is(scalar(grep { !$_->{acquired} && $_->{start} >= $m2 && $_->{cluster} ne $holder } @lost_rows), 1,
	'... while the other cluster had found its lock taken');

RedisMasters::no_crash($node{$_}) for @names;
done_testing();
