# The mutual-exclusion checker (test/checker/) on the loss protocol of auto-extended locks
# (issue 21, src/shared/lease.c), short version.  16 psql clients run jobs across commands on
# auto-extended locks taken with redlock.cancel_on_loss on, each stopping at its first
# error; a job's transactions record its writes, and the long-job judge decides from what
# committed whether a holder's work committed after the next holder acquired.  The faults:
# (a) the worker terminated while the jobs are idle in their transactions; (b) the worker
# stalled (the watchdogs fire, most locks survive), then a majority frozen (a real loss);
# (c) an ERROR in each job's session before the worker stalls past every validity; (d) jobs
# idle, idle in a transaction and running while the worker stalls and is terminated ((e),
# redlock.key_prefix changed by reload, runs in run-long only).  Zero violations is the only
# pass; each scenario's negative control (redlock.cancel_on_loss off: nothing stops a job
# whose lock was lost) must show violations, or the checker is blind on that path.
# test/checker/run-long runs them longer.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('lost_locks', $redis, Checker::node_conf(preload => 1));
Checker::setup($node);
my %masters = (plain => $redis);
my @table;

# Runs scenario NAME for SECONDS and checks what must hold in every run: the clients ran
# to the end, locks were acquired, and nothing but 08006 failed an acquire.
sub run_ok
{
	my ($name, $seconds) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = Checker::run_scenario($node, \%masters, $name, seconds => $seconds);
	push @table, $r;
	note(Checker::describe($r));
	note("$name: $r->{ran_on} writes (in $r->{holds_ran_on} holds) made after the next holder"
		  . " acquired, committed or not; $r->{lease_writes_logged} writes in all");
	is($r->{pgbench_rc}, 0, "$name: every psql client ran to the end") or diag($r->{pgbench_err});
	is($r->{ran_out}, 0, "$name: no client ran out of script before the end");
	cmp_ok($r->{acquired}, '>', 0, "$name: locks were acquired ($r->{acquired})");
	is($r->{other_errors}, 0, "$name: no acquire failed with anything but 08006")
	  or diag(explain($r->{errors}));
	return $r;
}

# A safe scenario: no violation, no write committed after its lock was lost, and the
# scenario was real: locks were lost (the worker logged a loss, or an owner's release
# found its lock run out) and jobs were stopped by a loss (cancelled or refused commit).
sub safe_ok
{
	my ($name, $seconds) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = run_ok($name, $seconds);
	is($r->{violations}, 0, "$name: no violation (no holder's work committed after the next"
		  . ' holder acquired)')
	  or diag(Checker::describe($r));
	is($r->{writes_after_loss}, 0, "$name: no write committed after its lock was logged lost");
	# A running statement is cancelled before the validity runs out, and a job's next
	# statement after a run-out is cancelled at its start: no write at all, committed or
	# not, after the next holder acquired (ebb0294 let running jobs write on while the
	# worker was stalled: 12 writes in 7 holds in lease-error-then-stall).
	is($r->{holds_ran_on}, 0, "$name: no job wrote after the next holder of its resource"
		  . " acquired, committed or not ($r->{ran_on} writes)");
	# A loss shows as the worker's LOG line, or a release that found its lock run out, or,
	# when the watchdog stopped the job and it released before the run-out (as in
	# lease-error-then-stall, TTL 1500 ms), as the cancel that told the owner its lock was lost.
	cmp_ok($r->{losses} + $r->{release_found_lost} + $r->{cancelled}, '>', 0,
		"$name: locks were lost or cancelled at their run-out ($r->{losses} losses logged by the"
		  . " worker, $r->{release_found_lost} releases found their lock run out,"
		  . " $r->{cancelled} watchdog cancels)");
	cmp_ok($r->{cancelled} + $r->{refused}, '>', 0,
		"$name: jobs were stopped by a loss ($r->{cancelled} cancelled, $r->{refused} commits"
		  . ' refused)');
	is($r->{job_errors}, 0, "$name: no job ended with an error other than a cancel or a"
		  . ' refused commit')
	  or diag(explain($r->{job_error_kinds}));
	return $r;
}

# The negative control of NAME: locks were lost, and the checker sees violations.
sub control_ok
{
	my ($name, $seconds) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = run_ok("unsafe-$name-no-cancel", $seconds);
	cmp_ok($r->{losses} + $r->{release_found_lost}, '>', 0,
		"unsafe-$name-no-cancel: locks were lost ($r->{losses} logged by the worker)");
	cmp_ok($r->{violations}, '>', 0,
		"negative control of $name (cancel_on_loss off): the checker sees violations")
	  or diag(Checker::describe($r));
	return $r;
}

# The short form: (a)-(d), 7 s each, their controls 5 s (the jobs last 3.6-4.8 s; each run
# counts from the moment all 8 clients are connected, and its faults from the first hold).
# (e), the key prefix changed by reload under held locks, is not here: README says to
# change redlock.key_prefix only while no cluster holds locks (a reload reaches backends
# one at a time), so a safe form of it cannot promise 0 violations; run-long runs it for
# its figures, unjudged.
for my $name (qw(lease-worker-term lease-stall-then-loss lease-error-then-stall
	lease-stall-owner-states))
{
	safe_ok($name, 7);
	control_ok($name, 5);
}

my $r = (grep { $_->{name} eq 'lease-worker-term' } @table)[0];
cmp_ok($r->{fault_counts}{'worker restarts'} // 0, '>=', 1,
	'lease-worker-term: the worker was terminated and started again');

diag("\n" . Checker::job_table_header() . join('', map { Checker::job_table_line($_) } @table));
diag(join('', map { sprintf("  %-42s losses logged %d, releases that found the lock run out %d;"
	. " writes after the next holder acquired: %d (%d holds)\n",
	$_->{name}, $_->{losses}, $_->{release_found_lost}, $_->{ran_on}, $_->{holds_ran_on}) } @table));

RedisMasters::no_crash($node);
done_testing();
