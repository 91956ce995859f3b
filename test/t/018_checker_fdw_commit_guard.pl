# The mutual-exclusion checker (test/checker/) on a guarded row in another cluster,
# written through postgres_fdw (issue 38, item 5), short version.  Jobs across commands
# on two clusters that share the masters hold auto-extended locks (TTL 600 ms) and write
# their guarded rows into a table of a third cluster through postgres_fdw, first used
# after each session's first lock call (so that the guard used to be passed behind
# postgres_fdw's remote COMMIT); the worker of each job cluster is stalled past every
# validity in turn.  The judge reads the third cluster alone: a guarded row committed
# after the next holder of its resource acquired (its record there, inserted after its
# acquire returned, by the same clock as the row's commit timestamp) is a violation.
# Zero is the only pass; the negative control (the guard held back where it was first
# registered: redlock.test_commit_guard_first = off, test builds only) must see some,
# and rows whose local transaction was refused after they had committed remotely.
# test/checker/run-long runs both longer.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use Checker::Fdw;
use RedisMasters;

my $redis = RedisMasters->new(5);
my $c = Checker::Fdw::clusters($redis);
my %masters = (plain => $redis);
my @table;

# Runs fdw scenario NAME for SECONDS and checks what must hold in every run: the clients
# ran to the end, locks were lost, guarded rows committed in the third cluster, and
# nothing but 08006 failed an acquire.
sub run_ok
{
	my ($name, $seconds) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = Checker::Fdw::run_scenario($c, \%masters, $name, seconds => $seconds);
	push @table, $r;
	note(Checker::Fdw::describe($r));
	is($r->{pgbench_rc}, 0, "$name: every psql client ran to the end") or diag($r->{pgbench_err});
	is($r->{ran_out}, 0, "$name: no client ran out of script before the end");
	is($r->{other_errors}, 0, "$name: no acquire failed with anything but 08006")
	  or diag(explain($r->{errors}));
	cmp_ok($r->{rows}, '>', 0,
		"$name: guarded rows committed in the third cluster ($r->{rows}, $r->{holds_recorded} holds)");
	# A loss shows as the worker's LOG line (when it wakes), or as the owner's cancel or
	# refused commit at the run-out while the worker is stalled.
	cmp_ok($r->{losses} + $r->{cancelled} + $r->{refused}, '>', 0,
		"$name: locks were lost ($r->{losses} losses logged by the workers, $r->{cancelled}"
		  . " jobs cancelled, $r->{refused} commits refused)");
	is($r->{job_errors}, 0, "$name: no job ended with an error other than a cancel or a"
		  . ' refused commit')
	  or diag(explain($r->{job_error_kinds}));
	return $r;
}

my $r = run_ok('fdw-guard-first', 20);
is($r->{violations}, 0, 'fdw-guard-first: no guarded row committed after the next holder'
	  . ' of its resource acquired')
  or diag(Checker::Fdw::describe($r));
is($r->{orphans}, 0, 'fdw-guard-first: no guarded row committed whose local transaction was'
	  . ' refused');
cmp_ok($r->{refused}, '>', 0, "fdw-guard-first: COMMITs after a loss were refused ($r->{refused};"
	  . " $r->{cancelled} jobs cancelled): the path was taken");

SKIP:
{
	skip 'redlock.test_commit_guard_first exists in test builds only', 2
	  unless Checker::Fdw::test_build($c);
	# Up to 3 runs: a violation needs a loss while a job idles before its COMMIT and the
	# next holder recorded in the third cluster before that COMMIT.
	for my $run (1 .. 3)
	{
		$r = run_ok('unsafe-fdw-guard-held-back', 10);
		last if $r->{violations} > 0;
		note("unsafe-fdw-guard-held-back: no violation in run $run");
	}
	cmp_ok($r->{violations}, '>', 0, 'negative control (the guard held back): guarded rows'
		  . " committed after the next holder acquired ($r->{violations} rows,"
		  . " $r->{violation_holds} holds)")
	  or diag(Checker::Fdw::describe($r));
	cmp_ok($r->{orphans}, '>', 0, 'negative control: guarded rows committed remotely whose'
		  . " local transaction was refused ($r->{orphans})");
}

diag("\n" . Checker::Fdw::table(@table));
RedisMasters::no_crash($_) for @{ $c->{jobs} }, $c->{guarded};
done_testing();
