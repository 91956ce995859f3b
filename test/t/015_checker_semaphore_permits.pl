# The mutual-exclusion checker (test/checker/) on semaphores (redlock_acquire_permit,
# 1.5), short version: 16 pgbench clients contend for 2 semaphores of 3 permits, and each
# holder, inside its critical section, counts the holders inside in one committed
# transaction under an advisory lock on the semaphore (checker_permit_claim): 3 others
# already inside is a violation (holder 4), and so is another holder of its slot (each
# slot, resource#1..#3, is an exclusive lock).  Under no fault, a minority killed (delayed
# restart), masters frozen with SIGSTOP, latency on 3 masters, a majority restarted from
# its AOF, and for long jobs on auto-extended permits a majority frozen past the validity
# (the jobs cancelled), the only pass is zero violations, with 2 or more holders of a
# semaphore inside at once at some moment (a semaphore that let one holder in at a time,
# a lock, fails) and never more than 3.  The negative controls (a TTL shorter than the
# work; a majority restarted without persistence) must show violations, the count more
# than 3 holders inside, or the checker is blind.  test/checker/run-long runs them longer.
#
# RL_CHECKER_PERMITS=name,name runs only those scenarios (for a look at one).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use RedisMasters;

my %masters = (
	plain => RedisMasters->new(5),
	aof => RedisMasters->new(5, redis_args => [ '--appendonly', 'yes', '--appendfsync', 'always' ]),
);
my $node = RedisMasters::redlock_node('checker', $masters{plain}, Checker::node_conf());
Checker::setup($node);
my $preloaded;    # for permits-auto-extend, made when it runs
my %only = map { $_ => 1 } split /,/, $ENV{RL_CHECKER_PERMITS} // '';

my @table;

# Runs scenario NAME for SECONDS and checks what must hold in every run
# (Checker::check_run: the clients ran to the end, permits were acquired, no error but
# 08006, no violation or some for a negative control; Checker::check_permits: 2 or more
# holders inside at once at some moment, never more than 3 (a control: more than 3), no
# two holders of a slot).  A negative control that saw nothing runs again, up to RUNS
# times.  Returns the figures, or undef when skipped.
sub scenario_ok
{
	my ($name, $seconds, %o) = @_;
	return if %only && !$only{$name};
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my %s = Checker::scenario($name);
	my $on = $node;
	if ($s{preload})
	{
		$preloaded //= RedisMasters::redlock_node('checker_preloaded', $masters{plain},
			Checker::node_conf(preload => 1));
		Checker::setup($preloaded);
		$on = $preloaded;
	}
	my $r = Checker::run_checked($on, \%masters, $name, $seconds, %o);
	push @table, $r;
	return $r;
}

# --- no fault ---

scenario_ok('permits-plain', 5);

# --- a minority killed, each kept down past the TTL (spec §8 delayed restart) ---

if (my $r = scenario_ok('permits-kill', 8))
{
	cmp_ok(Checker::acquired_in($r, '2 killed'), '>', 0,
		'permits-kill: permits were acquired while 2 of 5 masters were down');
}

# --- masters frozen with SIGSTOP, 1 or 2 at a time ---

if (my $r = scenario_ok('permits-sigstop', 7))
{
	cmp_ok(Checker::acquired_in($r, '1 stopped'), '>', 0,
		'permits-sigstop: permits were acquired while a master was frozen');
}

# --- latency on 3 masters, around and past the request timeout ---

scenario_ok('permits-latency', 6);

# --- a majority killed and restarted at once, appendfsync always ---

scenario_ok('permits-majority-restart-aof', 7);

# --- negative controls ---

scenario_ok('unsafe-permits-short-ttl', 3, runs => 3);
scenario_ok('unsafe-permits-majority-restart', 7, runs => 2);

# --- long jobs on auto-extended permits, a majority frozen past the validity ---

if (my $r = scenario_ok('permits-auto-extend', 12))
{
	is($r->{writes_after_loss}, 0,
		'permits-auto-extend: no write committed after the worker lost its permit')
	  or diag(Checker::describe($r));
	cmp_ok($r->{committed_overlap_max}, '<=', $r->{permits},
		"permits-auto-extend: never more than $r->{permits} holds' committed work spanned an"
		  . " acquisition (most: $r->{committed_overlap_max})");
	cmp_ok($r->{jobs_done}, '>', 0,
		"permits-auto-extend: jobs ran their $r->{work_ms} ms to the end on a $r->{ttl_ms} ms"
		  . " TTL ($r->{jobs_done} jobs)");
	cmp_ok($r->{done_renewals_min}, '>=', 3,
		'permits-auto-extend: each such job was renewed at least 3 times');
	cmp_ok($r->{losses}, '>', 0,
		"permits-auto-extend: the worker gave permits up ($r->{losses} losses logged)");
	cmp_ok($r->{cancelled}, '>', 0,
		"permits-auto-extend: jobs were cancelled on the loss ($r->{cancelled})");
	is($r->{cancelled_other}, 0, 'permits-auto-extend: every cancel named the lost permit');
	is($r->{job_errors}, 0,
		'permits-auto-extend: no job ended with an error other than the cancel')
	  or diag(explain($r->{job_error_kinds}));
	is($r->{ran_out}, 0, 'permits-auto-extend: no client ran out of script before the end');
}

diag("\n" . Checker::permit_table_header() . join('', map { Checker::permit_table_line($_) } @table));

RedisMasters::no_crash($_) for grep { defined } $node, $preloaded;
done_testing();
