# test/checker/Checker/Fdw.pm: the checker's scenarios of a guarded row in a third
# cluster, written through postgres_fdw (issue 38, item 5).
#
# postgres_fdw sends the remote COMMIT from its own PRE_COMMIT transaction callback, and
# PostgreSQL calls those callbacks newest first: a commit guard registered before
# postgres_fdw's (a session's first lock call comes before its first foreign-table
# access) used to refuse the local COMMIT only after the remote row had committed.  Here
# the jobs across commands of the lease scenarios (issue 21: psql scripts,
# _lease_job_block in Checker.pm) run on two clusters that share the masters, with
# auto-extended locks of a short TTL whose workers are stalled past every validity, and
# write their guarded rows into the third cluster through postgres_fdw
# (checker_fdw_acquired and checker_fdw_write in checker.sql).  The judge reads the third
# cluster only, so every time it compares is of one clock: a hold's acquisition is the
# time its record was inserted there (after redlock_acquire returned true), a row's is
# its commit (track_commit_timestamp).  A violation is a guarded row committed after the
# next holder of its resource acquired.
#
#   my $c = Checker::Fdw::clusters($redis);      # { jobs => [$j1, $j2], guarded => $g }
#   my $r = Checker::Fdw::run_scenario($c, { plain => $redis }, 'fdw-guard-first',
#                                      seconds => 20);
#   print Checker::Fdw::describe($r);            # $r->{violations}, {refused}, ...
#
# Used by test/t/046_checker_fdw_commit_guard.pl and long.pl (run-long).

package Checker::Fdw;

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More ();
use Time::HiRes qw(time);

use Checker;
use PsqlSession;
use RedisMasters;

# The three clusters on the masters of REDIS: two job clusters (redlock preloaded, the
# checker's tables, postgres_fdw to the third, checker.cluster naming each) and the
# guarded cluster, whose tables record the holds and the guarded rows with its own clock.
sub clusters
{
	my ($redis) = @_;
	my $guarded = RedisMasters::redlock_node('fdw_guarded', $redis,
		Checker::node_conf() . "track_commit_timestamp = on\n");
	$guarded->safe_psql('postgres', q{
CREATE TABLE checker_fdw_holds (
	hold text PRIMARY KEY,			-- cluster:pid:acquire time (epoch, the job cluster's)
	resource text NOT NULL,
	seen timestamptz NOT NULL DEFAULT clock_timestamp()	-- inserted, after the acquire
);
CREATE TABLE checker_fdw_rows (
	hold text NOT NULL,
	resource text NOT NULL,
	xact integer NOT NULL,
	step integer NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp()	-- inserted; the commit: xmin's
);
});
	my ($host, $port) = ($guarded->host, $guarded->port);
	my @jobs;
	for my $name (qw(fdw_job1 fdw_job2))
	{
		my $node = RedisMasters::redlock_node($name, $redis, Checker::node_conf(preload => 1));
		Checker::setup($node);
		$node->safe_psql('postgres', qq{
ALTER DATABASE postgres SET checker.cluster = '$name';
CREATE EXTENSION postgres_fdw;
CREATE SERVER guarded FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '$host', port '$port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER guarded;
CREATE FOREIGN TABLE checker_fdw_holds (hold text, resource text) SERVER guarded;
CREATE FOREIGN TABLE checker_fdw_rows (hold text, resource text, xact integer, step integer)
	SERVER guarded;
});
		push @jobs, $node;
	}
	return { jobs => \@jobs, guarded => $guarded };
}

# Whether the job clusters' redlock is a test build (redlock.test_commit_guard_first, the
# controls' setting, exists only there).
sub test_build
{
	my ($c) = @_;
	return $c->{jobs}[0]->safe_psql('postgres',
		"SELECT current_setting('redlock.test_commit_guard_first', true) IS NOT NULL") eq 't';
}

# Runs fdw scenario NAME on the clusters C (clusters) with the masters from SETS for
# SECONDS (OVERRIDES replace its options); returns the figures.
sub run_scenario
{
	my ($c, $sets, $name, %overrides) = @_;
	my %s = Checker::scenario($name);
	die "scenario $name is not an fdw scenario" unless delete $s{fdw};
	delete $s{preload};
	my $redis = $sets->{ $s{masters} } or die "scenario $name needs $s{masters} masters";
	for my $node (@{ $c->{jobs} })
	{
		Checker::set_servers($node, $redis->servers_guc)
		  if $node->safe_psql('postgres', 'SHOW redlock.servers') ne $redis->servers_guc;
	}
	return run(%s, %overrides, clusters => $c, redis => $redis);
}

# One run (options as Checker::run's for jobs across commands: name, seconds, clients,
# resources, ttl_ms, wait_ms, job, pgoptions, faults, expect_violations), the clients
# spread over the job clusters.  The fault schedule's Checker::Faults acts on the first
# job cluster and gets the others in {job_nodes} (Faults::worker_stop takes a node).
sub run
{
	my (%o) = @_;
	my $c = $o{clusters};
	my @jobs = @{ $c->{jobs} };
	my $g = $c->{guarded};
	my $name = $o{name};
	my $seconds = $o{seconds} // 10;
	my $clients = $o{clients} // 12;
	my $resources = $o{resources} // 3;
	my $ttl = $o{ttl_ms};
	my $wait = $o{wait_ms} // 200;
	my $job = { %{ $o{job} }, fdw => 1 };
	(my $prefix = "checker-$name-") =~ s/[^A-Za-z0-9+._-]/_/g;

	for my $node (@jobs)
	{
		$node->safe_psql('postgres', qq{
TRUNCATE checker_attempts, checker_violations, checker_guard, checker_holds, checker_jobs,
	checker_writes, checker_losses;
INSERT INTO checker_guard (resource)
	SELECT '$prefix' || g FROM generate_series(1, $resources) g;
SELECT redlock_stats_reset();
});
	}
	$g->safe_psql('postgres', 'TRUNCATE checker_fdw_holds, checker_fdw_rows');
	my $dir = PostgreSQL::Test::Utils::tempdir("checker-$name");
	my $block = sub { Checker::_job_block($prefix, $resources, $ttl, $wait, $job, @_) };
	my $f = Checker::Faults->new(
		node => $jobs[0],
		job_nodes => \@jobs,
		redis => $o{redis},
		seconds => $seconds,
		ttl_ms => $ttl);
	Test::More::note("checker: $name: $clients clients on " . scalar(@jobs)
		  . " clusters, $resources resources, TTL $ttl ms, wait $wait ms, $seconds s");
	Test::More::note("checker: client script (each block, client 1):\n"
		  . $block->('true', undef, 1));
	my %log_offset = map { $_->name => -s $_->logfile } @jobs;
	my ($t0, @h);
	{
		local $ENV{PGOPTIONS} = '-c client_min_messages=error'
		  . join('', map { " -c $_" } @{ $o{pgoptions} // [] });
		local $ENV{PGAPPNAME} = 'checker';
		($t0, @h) = Checker::_start_lease_clients(\@jobs, $dir, $clients, $seconds, $block);
	}
	my $rc = Checker::_faults_then_finish($f, $t0, $name, $o{faults}, @h);
	my ($out, $err) = Checker::_job_client_output($dir, $clients);
	for my $node (@jobs)
	{
		PsqlSession::wait_until(30, sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'checker'")
			  eq '0';
		});
	}

	my %r = (
		name => $name,
		desc => $o{desc} // '',
		expect_violations => $o{expect_violations} // 0,
		seconds => $seconds,
		elapsed => time - $t0,
		clients => $clients,
		resources => $resources,
		ttl_ms => $ttl,
		job => $job,
		pgbench_rc => $rc,
		pgbench_err => $err,
		ran_out => scalar(() = $out =~ /^checker-client: ran out of script$/mg),
		events => $f->{events},
		fault_counts => $f->{counts},
	);
	_job_cluster_figures(\@jobs, \%log_offset, \%r);
	_guarded_figures($c, \%r);
	return \%r;
}

# The figures of the job clusters, summed, into R: attempts and their outcomes, how the
# holds ended (jobs_done, cancelled: 57014, refused: 55P03, job_errors), the worker's
# losses logged, and the local rows that committed (for the orphans: see _guarded_figures).
sub _job_cluster_figures
{
	my ($jobs, $log_offset, $r) = @_;
	$r->{$_} = 0
	  for qw(attempts acquired busy unavailable other_errors jobs_done cancelled refused
	  job_errors losses);
	$r->{local_rows} = {};
	for my $node (@$jobs)
	{
		for my $row (Checker::_rows($node, q{
SELECT outcome, coalesce(sqlstate, ''), coalesce(end_sqlstate, ''),
	coalesce(replace(end_message, E'\n', ' '), ''), count(*)
FROM checker_attempts GROUP BY 1, 2, 3, 4}))
		{
			my ($outcome, $state, $end, $msg, $n) = @$row;
			$r->{attempts} += $n;
			if ($outcome eq 'busy') { $r->{busy} += $n; next; }
			if ($outcome eq 'error')
			{
				$r->{ $state eq '08006' ? 'unavailable' : 'other_errors' } += $n;
				$r->{errors}{"$state $msg"} += $n if $state ne '08006';
				next;
			}
			$r->{acquired} += $n;
			if ($end eq '00000') { $r->{jobs_done} += $n; }
			elsif ($end eq '57014' && $msg =~ /lock on resource ".*" was lost/) { $r->{cancelled} += $n; }
			elsif ($end eq '55P03' && $msg =~ /lock on resource ".*" was lost/) { $r->{refused} += $n; }
			else
			{
				$r->{job_errors} += $n;
				(my $m = $msg) =~ s/"[^"]*"/"..."/g;
				$r->{job_error_kinds}{"$end $m"} += $n;
			}
		}
		my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_offset->{ $node->name });
		$r->{losses} += () = $log =~ /LOG:  redlock lock on resource "[^"\n]*" was lost: /g;
		$r->{local_rows}{ $_->[0] } = 1 for Checker::_rows($node, q{
SELECT current_setting('checker.cluster') || ':' || pid || ':' || extract(epoch FROM t1)
	|| '/' || xact || '/' || step
FROM checker_writes});
	}
	return;
}

# The judge, on the guarded cluster alone (one clock), into R:
#   holds_recorded, rows (committed guarded rows);
#   violations: guarded rows committed after the next holder of their resource acquired
#     (the first hold of that resource recorded after theirs: its record was inserted
#     after its redlock_acquire returned, so it acquired before that), and violation_holds,
#     the holds with such rows; written_after: those of them also inserted after it;
#     late_max_ms: how long after it the latest of them committed;
#   orphans: guarded rows committed whose local twin (checker_writes, the same
#     transaction on the job cluster) did not commit: the remote COMMIT went out before
#     the local one was refused;
#   unrecorded: guarded rows of a hold with no record (the record's commit was refused).
sub _guarded_figures
{
	my ($c, $r) = @_;
	my $g = $c->{guarded};
	($r->{holds_recorded}, $r->{rows}) = @{ (Checker::_rows($g, q{
SELECT (SELECT count(*) FROM checker_fdw_holds), (SELECT count(*) FROM checker_fdw_rows)}))[0] };
	my @v = Checker::_rows($g, q{
SELECT w.hold, w.resource, w.xact, w.step,
	round((extract(epoch FROM pg_xact_commit_timestamp(w.xmin) - nb.seen) * 1000)::numeric, 1),
	w.at > nb.seen
FROM checker_fdw_rows w
JOIN checker_fdw_holds a ON a.hold = w.hold
CROSS JOIN LATERAL (SELECT min(b.seen) AS seen FROM checker_fdw_holds b
	WHERE b.resource = a.resource AND b.seen > a.seen) nb
WHERE pg_xact_commit_timestamp(w.xmin) > nb.seen
ORDER BY 5 DESC});
	$r->{violations} = scalar @v;
	$r->{violation_rows} = \@v;
	my %holds = map { $_->[0] => 1 } @v;
	$r->{violation_holds} = scalar keys %holds;
	$r->{written_after} = grep { $_->[5] eq 't' } @v;
	$r->{late_max_ms} = @v ? $v[0][4] : 0;
	($r->{unrecorded}) = @{ (Checker::_rows($g, q{
SELECT count(*) FROM checker_fdw_rows w
WHERE NOT EXISTS (SELECT 1 FROM checker_fdw_holds a WHERE a.hold = w.hold)}))[0] };
	$r->{orphans} = 0;
	for my $row (Checker::_rows($g, q{
SELECT hold || '/' || xact || '/' || step FROM checker_fdw_rows}))
	{
		$r->{orphans}++ unless $r->{local_rows}{ $row->[0] };
	}
	delete $r->{local_rows};
	return;
}

# A few lines on run R.
sub describe
{
	my ($r) = @_;
	my $s = sprintf("%s: %s\n  %.1f s, %d clients on 2 clusters, %d resources, TTL %d ms\n",
		$r->{name}, $r->{desc}, $r->{elapsed}, $r->{clients}, $r->{resources}, $r->{ttl_ms});
	$s .= sprintf("  attempts %d: acquired %d, busy %d, 08006 %d, other errors %d\n",
		@$r{qw(attempts acquired busy unavailable other_errors)});
	$s .= sprintf("  holds: done %d, cancelled %d, commits refused %d, other errors %d;"
		  . " losses logged by the workers %d\n", @$r{qw(jobs_done cancelled refused job_errors losses)});
	$s .= sprintf("  third cluster: %d holds recorded, %d guarded rows committed, %d of them"
		  . " with their local transaction refused (orphans), %d of unrecorded holds\n",
		@$r{qw(holds_recorded rows orphans unrecorded)});
	$s .= sprintf("  VIOLATIONS: %d guarded rows (%d holds) committed after the next holder"
		  . " acquired (%d also written after it; the latest %s ms after)\n",
		@$r{qw(violations violation_holds written_after late_max_ms)});
	$s .= "  faults: " . join(', ', map { "$_ $r->{fault_counts}{$_}" } sort keys %{ $r->{fault_counts} })
	  . "\n";
	$s .= "  job errors: " . join('; ', map { "$_ x$r->{job_error_kinds}{$_}" }
		  sort keys %{ $r->{job_error_kinds} }) . "\n"
	  if $r->{job_error_kinds};
	$s .= "  acquire errors: " . join('; ', map { "$_ x$r->{errors}{$_}" } sort keys %{ $r->{errors} })
	  . "\n"
	  if $r->{errors};
	$s .= "  first violations (hold, resource, xact, step, ms after the next acquire):\n"
	  . join('', map { "    @$_[0..4]\n" } @{ $r->{violation_rows} }[ 0 .. ($r->{violations} > 5 ? 4 : $r->{violations} - 1) ])
	  if $r->{violations};
	return $s;
}

# The table of the fdw runs R...
sub table
{
	my (@r) = @_;
	my $s = sprintf("%-28s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n",
		qw(scenario acq done cancel refused losses rows orphan viol vholds));
	$s .= sprintf("%-28s %6d %6d %6d %6d %6d %6d %6d %6d %6d\n", $_->{name},
		@$_{qw(acquired jobs_done cancelled refused losses rows orphans violations violation_holds)})
	  for @r;
	return $s;
}

1;
