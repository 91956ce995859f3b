# Transaction scope and aborts, checked in Redis: a session lock taken in a transaction or
# savepoint that rolls back is released at the rollback; an xact lock is released right
# after COMMIT or ROLLBACK; a session lock taken in a committed transaction stays; a
# backend that exits inside an open transaction releases its transaction-scoped locks.
# Every acquire's result is checked, and its keys seen on all masters, before a test
# that they are gone.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('scopes', $redis, $RedisMasters::ROOMY_CONF . $RedisMasters::DEBUG_CONF);
my $s = session($node);
my $other = session($node);

my ($out, $err);

# Runs CALL (an acquire) in session S: a test that it returned true and, unless NOKEYS,
# that all 5 masters hold KEY, so that "gone" afterwards means released.
sub acquired
{
	my ($s, $call, $key, $nokeys) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($o, $e) = sql($s, "SELECT $call");
	is($o, 't', "$call returns true") or diag($e);
	is($redis->holding($key, 5), 5, "... and all 5 masters hold \"$key\"") unless $nokeys;
	return;
}

# --- session lock in a transaction that rolls back ---

sql($s, "BEGIN");
($out) = sql($s, "SELECT redlock_acquire('rolled-back', 60000)");
is($out, 't', 'session lock acquired inside a transaction');
is($redis->holding('rolled-back', 5), 5, 'keys exist inside the transaction');
($out, $err) = sql($s, "ROLLBACK");
is($err, '', 'ROLLBACK without warnings');
is($redis->holding('rolled-back', 0), 0, 'keys are gone from every master after ROLLBACK');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'the lock is no longer listed');
($out) = sql($other, "SELECT redlock_acquire('rolled-back', 60000)");
is($out, 't', 'another session can take it at once');
sql($other, "SELECT redlock_release_all()");

# The same when the transaction aborts by an error.
sql($s, "BEGIN");
acquired($s, "redlock_acquire('errored', 60000)", 'errored');
($out, $err) = sql($s, "SELECT 1/0");
like($err, qr/division by zero/, 'the transaction fails');
is($redis->holding('errored', 0), 0, 'keys gone once the error aborted the transaction');
sql($s, "ROLLBACK");
is($redis->holding('errored', 0), 0, 'and still gone after ROLLBACK');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'the lock is no longer listed');

# --- session lock in a rolled-back savepoint ---

sql($s, "BEGIN");
acquired($s, "redlock_acquire('outer', 60000)", 'outer');
sql($s, "SAVEPOINT sp");
($out) = sql($s, "SELECT redlock_acquire('in-savepoint', 60000)");
is($out, 't', 'session lock acquired inside a savepoint');
sql($s, "ROLLBACK TO SAVEPOINT sp");
is($redis->holding('in-savepoint', 0), 0, 'keys gone right after ROLLBACK TO SAVEPOINT');
is($redis->holding('outer', 5), 5, 'the lock taken before the savepoint stays');
($out) = sql($s, "SELECT string_agg(resource, ',') FROM redlock_locks()");
is($out, 'outer', 'only the outer lock is listed');

# A savepoint that is released (subcommit) keeps its lock at COMMIT.
sql($s, "SAVEPOINT sp2");
acquired($s, "redlock_acquire('in-released-savepoint', 60000)", 'in-released-savepoint');
sql($s, "RELEASE SAVEPOINT sp2");
($out, $err) = sql($s, "COMMIT");
is($err, '', 'COMMIT without warnings');
is($redis->holding('outer', 5), 5, 'session lock taken in a committed transaction stays');
is($redis->holding('in-released-savepoint', 5), 5,
	'session lock taken in a released savepoint of a committed transaction stays');
($out) = sql($s,
	"SELECT string_agg(resource || ':' || scope, ',' ORDER BY resource) FROM redlock_locks()");
is($out, 'in-released-savepoint:session,outer:session', 'both listed as session locks');
($out) = sql($s, "SELECT redlock_release_all()");
is($out, '2', 'release_all releases both');
is($redis->holding('outer', 0) + $redis->holding('in-released-savepoint', 0), 0, 'their keys are gone');

# A session lock acquired (stacked) again in an aborted transaction keeps the first hold.
acquired($s, "redlock_acquire('stacked', 60000)", 'stacked');
sql($s, "BEGIN");
acquired($s, "redlock_acquire('stacked', 60000)", 'stacked');
sql($s, "ROLLBACK");
($out) = sql($s, "SELECT session_holds FROM redlock_locks() WHERE resource = 'stacked'");
is($out, '1', 'the hold taken before the aborted transaction survives it');
is($redis->holding('stacked', 5), 5, 'and its keys stay');
sql($s, "SELECT redlock_release('stacked')");
is($redis->holding('stacked', 0), 0, 'released');

# --- xact locks ---

sql($s, "BEGIN");
($out) = sql($s, "SELECT redlock_xact_acquire('xact-commit', 60000)");
is($out, 't', 'xact lock acquired');
is($redis->holding('xact-commit', 5), 5, 'its keys exist during the transaction');
($out) = sql($s, "SELECT scope, xact_holds, session_holds FROM redlock_locks()");
is($out, 'transaction|1|0', 'listed as a transaction-scoped lock');
($out) = sql($other, "SELECT redlock_acquire('xact-commit', 60000)");
is($out, 'f', 'another session cannot take it during the transaction');
($out, $err) = sql($s, "COMMIT");
is($err, '', 'COMMIT without warnings');
is($redis->holding('xact-commit', 0), 0, 'xact lock keys gone right after COMMIT');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'nothing listed after COMMIT');
($out) = sql($other, "SELECT redlock_acquire('xact-commit', 60000)");
is($out, 't', 'another session takes it after COMMIT');
sql($other, "SELECT redlock_release_all()");

sql($s, "BEGIN");
acquired($s, "redlock_xact_acquire('xact-rollback', 60000)", 'xact-rollback');
sql($s, "ROLLBACK");
is($redis->holding('xact-rollback', 0), 0, 'xact lock keys gone right after ROLLBACK');

# Outside a transaction block, an xact lock lasts the statement's implicit transaction.
($out) = sql($s, "SELECT redlock_xact_acquire('xact-implicit', 60000)");
is($out, 't', 'xact lock in an implicit transaction');
is($redis->holding('xact-implicit', 0), 0, 'gone once the statement finished');

# An xact lock taken in a savepoint rolled back is released there and then.
sql($s, "BEGIN");
sql($s, "SAVEPOINT sp");
acquired($s, "redlock_xact_acquire('xact-savepoint', 60000)", 'xact-savepoint');
sql($s, "ROLLBACK TO SAVEPOINT sp");
is($redis->holding('xact-savepoint', 0), 0, 'xact lock keys gone after ROLLBACK TO SAVEPOINT');
sql($s, "COMMIT");

# --- the backend exits inside an open transaction: its transaction-scoped locks (and
# the session lock taken in that transaction) are released at exit, not left to the TTL ---

my $quitter = session($node);
my $quitter_pid = $quitter->pid;
sql($quitter, "BEGIN");
acquired($quitter, "redlock_xact_acquire('exit-xact', 60000)", 'exit-xact');
acquired($quitter, "redlock_acquire('exit-xact-session', 60000)", 'exit-xact-session');
$quitter->quit;    # psql disconnects: the backend aborts the transaction and exits
ok( wait_until(
		10,
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $quitter_pid") eq '0';
		}),
	'the backend that quit inside its transaction exited');
is($redis->holding('exit-xact', 0), 0,
	'its transaction-scoped lock is gone from every master (TTL was 60 s)');
is($redis->holding('exit-xact-session', 0), 0,
	'... and so is the session lock taken in the unfinished transaction');
($out) = sql($other, "SELECT redlock_acquire('exit-xact', 60000)");
is($out, 't', 'another session takes it at once');
sql($other, "SELECT redlock_release_all()");

$redis->no_keys_left;

$s->quit;
$other->quit;
RedisMasters::no_crash($node);
done_testing();
