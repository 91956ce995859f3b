# The commit guard decides before any other extension's commit work (issue 38).
#
# postgres_fdw sends the remote COMMIT from its own PRE_COMMIT transaction callback, and
# PostgreSQL calls those callbacks newest first.  Our guard used to be registered at a
# session's first lock call, so in a session that touched a foreign table only after
# that call, the remote transaction committed before our check refused the local one:
# the guarded row was written in the other cluster after the lock was lost (7 of 7).
# The guard now moves to the front at the end of every statement (src/sql/xact.c).
#
# Two clusters share five masters: the owner, with postgres_fdw to a table of the other
# (the remote cluster, which is also the rival that takes the lock once the owner's
# validity ran out).  Each case runs in a new owner session that first makes a lock
# call (so that our callback is registered before postgres_fdw's), then writes the
# remote row under a lock that is lost before the commit, and checks that the commit
# fails and the remote row is not there.  Commit paths:
# - an explicit COMMIT (transaction-scoped lock whose validity ran out; and an
#   auto-extended session lock lost while its worker was stalled);
# - an autocommit statement;
# - a procedure's COMMIT (after an INSERT, and after a COPY, which runs no plan);
# - a trigger writing through postgres_fdw, immediate and deferred (fired at commit).
# Controls: with the lock still valid, the same writes commit remotely (the fdw path
# works), and with the guard held back (redlock.test_commit_guard_first = off, test
# builds only) the explicit-COMMIT case does leave its remote row behind: the scenario
# is real, and the guard's place is what prevents it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $owner_node = RedisMasters::redlock_node('owner', $redis,
	$RedisMasters::ROOMY_CONF . "shared_preload_libraries = 'redlock'\n");
my $remote = RedisMasters::redlock_node('remote', $redis, $RedisMasters::ROOMY_CONF);
my ($out, $err);

$remote->safe_psql('postgres', 'CREATE TABLE guarded (job text, step int)');
my $remote_host = $remote->host;
my $remote_port = $remote->port;
$owner_node->safe_psql('postgres', qq{
CREATE EXTENSION postgres_fdw;
CREATE SERVER remote FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '$remote_host', port '$remote_port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER remote;
CREATE FOREIGN TABLE guarded (job text, step int) SERVER remote;
CREATE TABLE local_work (job text, step int);
CREATE FUNCTION copy_to_remote() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO guarded VALUES (NEW.job, NEW.step);
	RETURN NEW;
END \$\$;
CREATE TRIGGER copy_now AFTER INSERT ON local_work
	FOR EACH ROW WHEN (NEW.job NOT LIKE 'deferred%') EXECUTE FUNCTION copy_to_remote();
CREATE CONSTRAINT TRIGGER copy_at_commit AFTER INSERT ON local_work
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (NEW.job LIKE 'deferred%') EXECUTE FUNCTION copy_to_remote();
CREATE PROCEDURE job_with_commit(resource text, ttl int, pause float8)
LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM redlock_xact_acquire(resource, ttl);
	INSERT INTO guarded VALUES (resource, 1);
	PERFORM pg_sleep(pause);
	COMMIT;
END \$\$;
CREATE PROCEDURE copy_with_commit(resource text, ttl int, pause float8)
LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM redlock_xact_acquire(resource, ttl);
	EXECUTE format('COPY guarded FROM PROGRAM %L',
				   format('sleep %s; printf "%s\\t1\\n"', pause, resource));
	COMMIT;
END \$\$;
});

sub remote_rows
{
	my ($job) = @_;
	return $remote->safe_psql('postgres', "SELECT count(*) FROM guarded WHERE job = '$job'");
}

# A new owner session whose first lock call registers our transaction callback before
# postgres_fdw's (which registers at the session's first foreign-table access).
sub fresh_owner
{
	my $s = session($owner_node);
	my ($got) = sql($s, "SELECT redlock_acquire('warm-up', 1000) AND redlock_release('warm-up')");
	is($got, 't', 'a new owner session makes a lock call before touching the foreign table');
	return $s;
}

# The rival (the remote cluster) takes RESOURCE: proof that the owner's lock was gone.
sub rival_takes
{
	my ($resource) = @_;
	my ($got) = $remote->safe_psql('postgres', "SELECT redlock_acquire('$resource', 2000, 3000)");
	$remote->safe_psql('postgres', "SELECT redlock_release('$resource')") if $got eq 't';
	return $got eq 't';
}

my $lost = qr/55P03: transaction-scoped lock on resource "([^"]+)" was lost before commit/;

# --- the fdw path works: a valid lock commits its remote row ---
my $s = fresh_owner();
($out, $err) = sql($s,
	"BEGIN; SELECT redlock_xact_acquire('fdw-ok', 5000); INSERT INTO guarded VALUES ('fdw-ok', 1); COMMIT");
is($err, '', 'a valid transaction-scoped lock: the transaction writing through postgres_fdw commits');
is(remote_rows('fdw-ok'), '1', '... and its remote row is there');
$s->quit;

# --- an explicit COMMIT ---
$s = fresh_owner();
sql($s, "BEGIN; SELECT redlock_xact_acquire('fdw-commit', 300)");
sql($s, "INSERT INTO guarded VALUES ('fdw-commit', 1)");
sql($s, 'SELECT pg_sleep(0.6)');
ok(rival_takes('fdw-commit'), 'explicit COMMIT: the 300 ms lock ran out and the rival took it');
($out, $err) = sql($s, 'COMMIT');
like($err, $lost, "... the owner's COMMIT fails (55P03)");
is(remote_rows('fdw-commit'), '0', '... and no remote row was committed before the refusal');
$s->quit;

# --- an autocommit statement ---
$s = fresh_owner();
($out, $err) = sql($s,
	"INSERT INTO guarded SELECT 'fdw-auto', 1 FROM (SELECT redlock_xact_acquire('fdw-auto', 300)) l, pg_sleep(0.6)");
like($err, $lost, 'an autocommit statement whose lock ran out while it wrote through postgres_fdw fails');
is(remote_rows('fdw-auto'), '0', '... and no remote row was committed');
$s->quit;

# --- a procedure's COMMIT ---
$s = fresh_owner();
($out, $err) = sql($s, "CALL job_with_commit('fdw-proc', 300, 0.6)");
like($err, $lost, "a procedure's COMMIT after its lock ran out fails");
is(remote_rows('fdw-proc'), '0', '... and no remote row was committed');
$s->quit;

# COPY into a foreign table is a utility statement that runs no plan: the last statement
# before the procedure's COMMIT.
$s = fresh_owner();
($out, $err) = sql($s, "CALL copy_with_commit('fdw-copy', 300, 0.6)");
like($err, $lost, "a procedure's COMMIT after a COPY into the foreign table outlasted its lock fails");
is(remote_rows('fdw-copy'), '0', '... and no remote row was committed');
$s->quit;

# --- a trigger writing through postgres_fdw ---
$s = fresh_owner();
sql($s, "BEGIN; SELECT redlock_xact_acquire('fdw-trigger', 300)");
sql($s, "INSERT INTO local_work VALUES ('fdw-trigger', 1)");
sql($s, 'SELECT pg_sleep(0.6)');
($out, $err) = sql($s, 'COMMIT');
like($err, $lost, 'a trigger wrote through postgres_fdw, the lock ran out: COMMIT fails');
is(remote_rows('fdw-trigger'), '0', '... and no remote row was committed');
$s->quit;

$s = fresh_owner();
sql($s, "BEGIN; SELECT redlock_xact_acquire('deferred-trigger', 300)");
sql($s, "INSERT INTO local_work VALUES ('deferred-trigger', 1)");
sql($s, 'SELECT pg_sleep(0.6)');
($out, $err) = sql($s, 'COMMIT');
like($err, $lost,
	'a deferred trigger that first touches postgres_fdw at COMMIT, the lock ran out: COMMIT fails');
is(remote_rows('deferred-trigger'), '0', '... and no remote row was committed');
$s->quit;

# --- an auto-extended session lock lost while its worker was stalled ---
my $worker = $owner_node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
$s = fresh_owner();
sql($s, 'SET redlock.auto_extend = on');
($out) = sql($s, "SELECT redlock_acquire('fdw-auto-extended', 800)");
is($out, 't', 'an auto-extended session lock (800 ms TTL)');
sql($s, "BEGIN; INSERT INTO guarded VALUES ('fdw-auto-extended', 1)");
kill 'STOP', $worker;
ok(rival_takes('fdw-auto-extended'),
	'... the worker stalled while the owner was idle in its transaction: the rival took it');
kill 'CONT', $worker;
($out, $err) = sql($s, 'COMMIT');
like($err, qr/(?:55P03|57014): .*lock on resource "fdw-auto-extended" was lost/,
	"... the owner's COMMIT fails");
is(remote_rows('fdw-auto-extended'), '0', '... and no remote row was committed');
sql($s, "SELECT redlock_release('fdw-auto-extended')");
$s->quit;

# --- the control: the guard held back, as before issue 38 ---
$s = fresh_owner();
($out, $err) = sql($s, 'SET redlock.test_commit_guard_first = off');
is($err, '', 'control: the guard is held back where it was first registered (test builds only)');
sql($s, "BEGIN; SELECT redlock_xact_acquire('fdw-control', 300)");
sql($s, "INSERT INTO guarded VALUES ('fdw-control', 1)");
sql($s, 'SELECT pg_sleep(0.6)');
($out, $err) = sql($s, 'COMMIT');
like($err, $lost, "... the owner's COMMIT still fails");
is(remote_rows('fdw-control'), '1',
	'... but postgres_fdw had committed the remote row first: what the guard\'s place prevents');
$s->quit;

RedisMasters::no_crash($_) for $owner_node, $remote;
done_testing();
