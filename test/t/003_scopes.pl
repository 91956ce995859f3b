# Transaction scope and aborts, checked in Redis: a session lock taken in a transaction or
# savepoint that rolls back is released at the rollback; an xact lock is released right
# after COMMIT or ROLLBACK; a session lock taken in a committed transaction stays.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('scopes', $redis, $RedisMasters::DEBUG_CONF);
my $s = $node->background_psql('postgres', on_error_stop => 0);
my $other = $node->background_psql('postgres', on_error_stop => 0);

# Number of masters where KEY exists, polled until it is EXPECT (see RedisMasters::holding).
sub holders
{
	my ($key, $expect) = @_;
	return $redis->holding($key, $expect);
}

my ($out, $err);

# --- session lock in a transaction that rolls back ---

sql($s, "BEGIN");
($out) = sql($s, "SELECT redlock_acquire('rolled-back', 60000)");
is($out, 't', 'session lock acquired inside a transaction');
is(holders('rolled-back', 5), 5, 'keys exist inside the transaction');
($out, $err) = sql($s, "ROLLBACK");
is($err, '', 'ROLLBACK without warnings');
is(holders('rolled-back', 0), 0, 'keys are gone from every master after ROLLBACK');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'the lock is no longer listed');
($out) = sql($other, "SELECT redlock_acquire('rolled-back', 60000)");
is($out, 't', 'another session can take it at once');
sql($other, "SELECT redlock_release_all()");

# The same when the transaction aborts by an error.
sql($s, "BEGIN");
sql($s, "SELECT redlock_acquire('errored', 60000)");
($out, $err) = sql($s, "SELECT 1/0");
like($err, qr/division by zero/, 'the transaction fails');
is(holders('errored', 0), 0, 'keys gone once the error aborted the transaction');
sql($s, "ROLLBACK");
is(holders('errored', 0), 0, 'and still gone after ROLLBACK');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'the lock is no longer listed');

# --- session lock in a rolled-back savepoint ---

sql($s, "BEGIN");
sql($s, "SELECT redlock_acquire('outer', 60000)");
sql($s, "SAVEPOINT sp");
($out) = sql($s, "SELECT redlock_acquire('in-savepoint', 60000)");
is($out, 't', 'session lock acquired inside a savepoint');
sql($s, "ROLLBACK TO SAVEPOINT sp");
is(holders('in-savepoint', 0), 0, 'keys gone right after ROLLBACK TO SAVEPOINT');
is(holders('outer', 5), 5, 'the lock taken before the savepoint stays');
($out) = sql($s, "SELECT string_agg(resource, ',') FROM redlock_locks()");
is($out, 'outer', 'only the outer lock is listed');

# A savepoint that is released (subcommit) keeps its lock at COMMIT.
sql($s, "SAVEPOINT sp2");
sql($s, "SELECT redlock_acquire('in-released-savepoint', 60000)");
sql($s, "RELEASE SAVEPOINT sp2");
($out, $err) = sql($s, "COMMIT");
is($err, '', 'COMMIT without warnings');
is(holders('outer', 5), 5, 'session lock taken in a committed transaction stays');
is(holders('in-released-savepoint', 5), 5,
	'session lock taken in a released savepoint of a committed transaction stays');
($out) = sql($s,
	"SELECT string_agg(resource || ':' || scope, ',' ORDER BY resource) FROM redlock_locks()");
is($out, 'in-released-savepoint:session,outer:session', 'both listed as session locks');
($out) = sql($s, "SELECT redlock_release_all()");
is($out, '2', 'release_all releases both');
is(holders('outer', 0) + holders('in-released-savepoint', 0), 0, 'their keys are gone');

# A session lock acquired (stacked) again in an aborted transaction keeps the first hold.
sql($s, "SELECT redlock_acquire('stacked', 60000)");
sql($s, "BEGIN");
sql($s, "SELECT redlock_acquire('stacked', 60000)");
sql($s, "ROLLBACK");
($out) = sql($s, "SELECT session_holds FROM redlock_locks() WHERE resource = 'stacked'");
is($out, '1', 'the hold taken before the aborted transaction survives it');
is(holders('stacked', 5), 5, 'and its keys stay');
sql($s, "SELECT redlock_release('stacked')");
is(holders('stacked', 0), 0, 'released');

# --- xact locks ---

sql($s, "BEGIN");
($out) = sql($s, "SELECT redlock_xact_acquire('xact-commit', 60000)");
is($out, 't', 'xact lock acquired');
is(holders('xact-commit', 5), 5, 'its keys exist during the transaction');
($out) = sql($s, "SELECT scope, xact_holds, session_holds FROM redlock_locks()");
is($out, 'transaction|1|0', 'listed as a transaction-scoped lock');
($out) = sql($other, "SELECT redlock_acquire('xact-commit', 60000)");
is($out, 'f', 'another session cannot take it during the transaction');
($out, $err) = sql($s, "COMMIT");
is($err, '', 'COMMIT without warnings');
is(holders('xact-commit', 0), 0, 'xact lock keys gone right after COMMIT');
($out) = sql($s, "SELECT count(*) FROM redlock_locks()");
is($out, '0', 'nothing listed after COMMIT');
($out) = sql($other, "SELECT redlock_acquire('xact-commit', 60000)");
is($out, 't', 'another session takes it after COMMIT');
sql($other, "SELECT redlock_release_all()");

sql($s, "BEGIN");
sql($s, "SELECT redlock_xact_acquire('xact-rollback', 60000)");
sql($s, "ROLLBACK");
is(holders('xact-rollback', 0), 0, 'xact lock keys gone right after ROLLBACK');

# Outside a transaction block, an xact lock lasts the statement's implicit transaction.
($out) = sql($s, "SELECT redlock_xact_acquire('xact-implicit', 60000)");
is($out, 't', 'xact lock in an implicit transaction');
is(holders('xact-implicit', 0), 0, 'gone once the statement finished');

# An xact lock taken in a savepoint rolled back is released there and then.
sql($s, "BEGIN");
sql($s, "SAVEPOINT sp");
sql($s, "SELECT redlock_xact_acquire('xact-savepoint', 60000)");
sql($s, "ROLLBACK TO SAVEPOINT sp");
is(holders('xact-savepoint', 0), 0, 'xact lock keys gone after ROLLBACK TO SAVEPOINT');
sql($s, "COMMIT");

is(join(',', $redis->wait_all(3, sub { !grep { $_ ne '0' } @_ }, 'DBSIZE')),
	'0,0,0,0,0', 'no keys left on any master');

$s->quit;
$other->quit;
RedisMasters::no_crash($node);
done_testing();
