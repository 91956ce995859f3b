# An extension of a valid lock is answered by the end of that validity (doc/redlock.md
# §6; src/lock/lockops.c's invariant): for every kind (an exclusive lock, a permit, a
# shared lock, a set, an auto-extended lock), a redlock_extend whose answers cannot
# decide (2 masters frozen, 1 without the key, 2 extending: 2 of 3 needed) returns
# false with a WARNING when the validity ends, lets the lock go, and never waits out
# redlock.timeout (10 s here) past the validity, where the holder would go on inside
# while another client may take the lock.  Found by the checker's sets-extend under
# load (holders inside 84-155 ms past their validity, stuck in redlock_extend).
#
# The controls: with the same masters, an extension of a lock already run out waits
# for the timeouts as before (nothing is cut short that had no validity to keep), and
# one whose masters answer extends as usual.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql validity wait_until);
use RedisMasters;

my $TTL = 2500;
my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('extend_by', $redis,
	$RedisMasters::PATIENT_CONF . "shared_preload_libraries = 'redlock'\n");
my $s = session($node);
my ($out, $err);

# Freezes masters 0 and 1 and deletes KEYS on master 2, so that an extension finds 2 of
# 3 needed and waits on the frozen ones; runs QUERY; thaws them.  Returns the output,
# the errors, the seconds the query took and the validity (ms) it had before.
sub undecided_extend
{
	my ($resource, $keys, $query) = @_;
	my $v = validity($s, $resource);
	$redis->stop($_) for 0, 1;
	$redis->redis_cli(2, 'DEL', @$keys);
	my $t0 = time;
	my ($out, $err) = sql($s, $query);
	my $took = time - $t0;
	$redis->cont($_) for 0, 1;
	note sprintf("%s: validity %s ms before, the extension took %.0f ms", $resource, $v,
		$took * 1000);
	return ($out, $err, $took, $v);
}

# The checks of one kind: answered by the validity's end (a second of room for a loaded
# machine, against the 10 s timeout), false, the WARNING, the lock let go of.
sub answered_by_validity
{
	my ($kind, $resource, $keys, $acquire, $extend) = @_;
	my ($out, $err) = sql($s, $acquire);
	is($out, 't', "$kind: acquired");
	my ($eout, $eerr, $took, $v) = undecided_extend($resource, $keys, $extend);
	cmp_ok($took * 1000, '<', $v + 1000,
		"$kind: the undecided extension answered by the end of the validity it had ($v ms),"
		  . ' not after redlock.timeout (10 s)');
	is($eout, 'f', "$kind: it returns false (the lock ran out)");
	like($eerr, qr/WARNING.*ran out while it was being extended/s, "$kind: with a WARNING")
	  or diag($eerr);
	is(validity($s, $resource), '', "$kind: the session no longer lists the lock");
	is($redis->holding($keys->[0], 0, 12), 0, "$kind: and its keys are let go of on every master");
	return;
}

answered_by_validity('exclusive', 'ex', ['ex'], "SELECT redlock_acquire('ex', $TTL)",
	"SELECT redlock_extend('ex', $TTL)");
answered_by_validity('permit', 'sem', ['sem#1'], "SELECT redlock_acquire_permit('sem', 3, $TTL)",
	"SELECT redlock_extend('sem', $TTL)");
answered_by_validity('shared', 'sh', ['sh'], "SELECT redlock_acquire_shared('sh', $TTL)",
	"SELECT redlock_extend('sh', $TTL)");
answered_by_validity('set', 'set-a', [ 'set-a', 'set-b' ],
	"SELECT redlock_acquire(ARRAY['set-a', 'set-b'], $TTL)",
	"SELECT redlock_extend(ARRAY['set-a', 'set-b'], $TTL)");

# A set whose locks have different validities: the extension is answered by the
# earliest end (set-c's), not the latest (set-d's 20 s, past redlock.timeout).
($out, $err) = sql($s, "SELECT redlock_acquire(ARRAY['set-c', 'set-d'], $TTL), redlock_extend('set-d', 20000)");
is($out, 't|t', 'set of two validities: acquired, set-d extended to 20 s');
($out, $err, my $set_took, my $set_v) = undecided_extend('set-c', [ 'set-c', 'set-d' ],
	"SELECT redlock_extend(ARRAY['set-c', 'set-d'], 20000)");
cmp_ok($set_took * 1000, '<', $set_v + 1000,
	"set of two validities: the undecided extension answered by the earliest end ($set_v ms)");
is($out, 'f', '... false (set-c ran out)') or diag($err);
sql($s, 'SELECT redlock_release_all()');

# --- auto-extended: the owner waits for the worker, and hears by the lease's end ---

# The worker renews every TTL/3 on the same masters; frozen, its rounds wait 10 s, so
# the lease runs out before it answers; the loss protocol (leasewatch.c) cancels the
# owner's wait then: 57014, not a wait for the worker's timeouts.
sql($s, 'SET redlock.auto_extend = on');
($out, $err) = sql($s, "SELECT redlock_acquire('auto', $TTL)");
is($out, 't', 'auto-extended: acquired');
($out, $err, my $took, my $v) = undecided_extend('auto', ['auto'], "SELECT redlock_extend('auto', $TTL)");
cmp_ok($took * 1000, '<', $v + 1000,
	"auto-extended: the undecided extension answered by the end of the lease's validity ($v ms)");
like($err, qr/57014.*lock on resource "auto" was lost/s, '... cancelled by the loss protocol')
  or diag($err);
sql($s, "SELECT redlock_release('auto')");
sql($s, 'SET redlock.auto_extend = off');

# --- controls ---

# The cap is the validity, not less: with a validity longer than redlock.timeout, the
# same undecided extension waits for the timeout and keeps the lock (08006).
sql($s, 'SET redlock.timeout = 1500');
sql($s, "SELECT redlock_acquire('long', 20000)");
($out, $err, $took) = undecided_extend('long', ['long'], "SELECT redlock_extend('long', 20000)");
cmp_ok($took, '>=', 1.4,
	sprintf('control: with 20 s of validity, the undecided extension waits for redlock.timeout (%.1f s)', $took));
like($err, qr/08006/, '... and cannot tell (08006)') or diag($err);
cmp_ok(validity($s, 'long'), '>', 10000, '... and the lock is kept');
sql($s, "SELECT redlock_release('long')");
sql($s, 'RESET redlock.timeout');

# An extension the masters answer is unchanged.
sql($s, "SELECT redlock_acquire('answered', $TTL)");
($out, $err) = sql($s, "SELECT redlock_extend('answered', $TTL)");
is($out, 't', 'control: an answered extension extends');
unlike($err, qr/WARNING/, '... without a WARNING');
sql($s, "SELECT redlock_release('answered')");

$s->quit;
RedisMasters::no_crash($node);
done_testing();
