# The mutual-exclusion checker (test/checker/) on the background worker's path (issue 8),
# short version: 16 psql clients run long jobs over 4 resources, each holding a lock
# acquired with redlock.auto_extend on and a TTL (3 s) more than three times shorter than
# its work (10 s of committed writes), on a node with the library preloaded; meanwhile a majority
# of masters is frozen longer than any validity (the worker gives the locks up and cancels
# the jobs; half of the jobs swallow the cancel and try to commit), a majority is frozen
# for less than TTL/3 (renewals retried), the worker is terminated and frozen, and a
# minority is killed (delayed restart).  Zero violations is the only pass, and no write
# may commit after its lock was lost.  The negative control (redlock.cancel_on_loss off:
# the jobs work on after the loss) must show violations, or the checker is blind on this
# path.  test/checker/run-long runs both longer.

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
my $node = RedisMasters::redlock_node('long_jobs', $redis, Checker::node_conf(preload => 1));
Checker::setup($node);
my %masters = (plain => $redis);

my @table;

# Runs scenario NAME for SECONDS; checks what must hold in every run: the clients ran to
# the end, locks were acquired and renewed, the worker gave some up, every cancel named
# the lost lock, and nothing but 08006 failed an acquire.
sub run_ok
{
	my ($name, $seconds) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = Checker::run_scenario($node, \%masters, $name, seconds => $seconds);
	push @table, $r;
	note(Checker::describe($r));
	is($r->{pgbench_rc}, 0, "$name: every psql client ran to the end") or diag($r->{pgbench_err});
	is($r->{ran_out}, 0, "$name: no client ran out of script before the end");
	cmp_ok($r->{acquired}, '>', 0, "$name: locks were acquired");
	is($r->{other_errors}, 0, "$name: no acquire failed with anything but 08006")
	  or diag(explain($r->{errors}));
	cmp_ok($r->{renewals}, '>', 0, "$name: the worker renewed locks ($r->{renewals} renewals)");
	cmp_ok($r->{losses}, '>', 0, "$name: the worker gave locks up ($r->{losses} losses logged)");
	is($r->{job_errors}, 0, "$name: no job ended with an error other than a cancel or a refused commit")
	  or diag(explain($r->{job_error_kinds}));
	is($r->{cancelled_other}, 0, "$name: every cancel named the lost lock");
	return $r;
}

# --- long jobs under faults: zero violations, nothing committed after a loss ---

my $r = run_ok('long-job', 14);
is($r->{violations}, 0, 'long-job: no violation') or diag(Checker::describe($r));
is($r->{writes_after_loss}, 0,
	'long-job: no write committed after the worker lost its lock (the transaction running'
	  . ' at the loss did not commit)')
  or diag(Checker::describe($r));
cmp_ok($r->{jobs_done}, '>', 0,
	"long-job: jobs ran their $r->{work_ms} ms to the end on a $r->{ttl_ms} ms TTL ($r->{jobs_done} jobs)");
cmp_ok($r->{done_renewals_min}, '>=', 3,
	'long-job: each such job was renewed at least 3 times (the lock outlived its TTL'
	  . ' only through renewals)');
cmp_ok($r->{renewals_failed}, '>', 0, 'long-job: renewals failed while a majority was frozen');
is($r->{losses_in}{'a majority frozen 0.5 s'}, 0,
	'long-job: no lock was lost to a majority frozen for less than TTL/3 (its renewal was'
	  . ' retried until the majority was back)');
my $validity = int($r->{ttl_ms} * 0.99 - 2);
cmp_ok($r->{loss_after_renewal_max_ms} // 0, '<', $validity,
	'long-job: every loss was declared, and its job cancelled, before the validity could run'
	  . " out (at most $r->{loss_after_renewal_max_ms} ms after the last renewal; the"
	  . " validity is $validity ms)");
is($r->{losses_unrenewed}, 0,
	'long-job: no validity ran out before the worker could renew it (the worker restarted'
	  . ' after SIGTERM and was frozen 0.5 s)');
cmp_ok($r->{cancelled} + $r->{refused}, '>', 0,
	"long-job: jobs were stopped by a loss ($r->{cancelled} cancelled, $r->{refused} commits"
	  . ' refused)');
is($r->{refused}, $r->{swallowed},
	"long-job: every job that swallowed a cancel had its commit refused ($r->{swallowed})");
cmp_ok($r->{fault_counts}{'worker restarts'} // 0, '>=', 1,
	'long-job: the worker was terminated and started again');
cmp_ok($r->{fault_counts}{'worker frozen'} // 0, '>=', 1, 'long-job: the worker was frozen');
note("long-job: $r->{excused} claims found a holder whose lock was lost and whose later work"
	  . " did not commit (excused)");

# --- negative control: cancel_on_loss off, the jobs work on after the loss ---

$r = run_ok('unsafe-long-job-no-cancel', 7);
cmp_ok($r->{violations}, '>', 0,
	'negative control (cancel_on_loss off): the checker sees violations')
  or diag(Checker::describe($r));
is($r->{cancelled} + $r->{refused}, 0, 'negative control: no job was cancelled or refused');

diag("\n" . Checker::job_table_header() . join('', map { Checker::job_table_line($_) } @table));

RedisMasters::no_crash($node);
done_testing();
