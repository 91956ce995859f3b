# The release of locks at COMMIT, ROLLBACK, backend exit and redlock_release_all is
# bounded in time when masters are frozen, reaches the masters that answer, and never
# fails what already happened, checked in Redis:
# - 40 transaction locks with a frozen master are released in one round, under one
#   deadline; a release_all cancelled by statement_timeout leaves its locks to the
#   cleanup, which releases them;
# - a backend exiting with 40 locks and a frozen master, or with a majority of masters
#   frozen, exits in bounded time, and the live masters' keys are released;
# - an ERROR after the commit point (no file descriptor left to rebuild the wait set) is a
#   WARNING, not a PANIC, and the transaction stays committed;
# - cleanup waits at most 10 s whatever redlock.timeout says (any user may set 60 s).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('cleanup', $redis, $RedisMasters::ROOMY_CONF);
my @ports = $redis->ports;

my $s = session($node);
my $o = session($node);
my ($out, $err, $secs, $t0);

# --- cleanup of many locks with a frozen master: one round, one deadline ---

($out) = sql($s, "SET redlock.timeout = 200; BEGIN;"
	  . join('', map { "SELECT redlock_xact_acquire('many-$_', 30000);" } 1 .. 40));
$redis->stop(4);
($out, $err, $secs) = sql($s, "COMMIT");
$redis->cont(4);
cmp_ok($secs, '<', 2, "COMMIT of 40 transaction locks with a frozen master took ${secs}s (1.1: 8 s)");
is($redis->holding('many-1', 0) + $redis->holding('many-40', 0), 0, 'their keys are gone');
sql($s, "RESET redlock.timeout");

# A cancelled release_all does not forget the locks it had not released.
($out) = sql($o, "SELECT bool_and(redlock_acquire('ra-' || g, 30000)) FROM generate_series(1, 5) g");
is($out, 't', 'release_all: 5 session locks');
$redis->stop($_) for 0 .. 2;
($out, $err) = sql($o, "SET redlock.timeout = 5000; SET statement_timeout = 300; SELECT redlock_release_all()");
like($err, qr/ERROR:\s+57014/, 'release_all interrupted by statement_timeout');
$redis->cont($_) for 0 .. 2;
sql($o, "RESET statement_timeout; RESET redlock.timeout");
is($redis->holding('ra-1', 0) + $redis->holding('ra-5', 0), 0, 'the interrupted locks were released by the cleanup');
($out) = sql($o, "SELECT count(*) FROM redlock_locks()");
is($out, '0', '... and are gone from the session');

# --- exit with a frozen master is bounded ---

my $x = session($node);
($out) = sql($x, "SET redlock.timeout = 200; SELECT bool_and(redlock_acquire('exit-' || g, 30000)) FROM generate_series(1, 40) g");
is($out, 't', 'exit: 40 session locks');
$redis->stop(4);
$t0 = time;
$x->quit;
# (redis-cli to the frozen master would hang: ask the four live ones only.)
ok( wait_until(
		5,
		sub {
			0 == grep { $redis->redis_cli($_, 'EXISTS', 'exit-1') ne '0'
				  || $redis->redis_cli($_, 'EXISTS', 'exit-40') ne '0' } 0 .. 3;
		}),
	'exit: the keys are gone from the live masters');
my $exit_secs = time - $t0;
cmp_ok($exit_secs, '<', 3, sprintf('exit with 40 locks and a frozen master took %.2f s', $exit_secs));
$redis->cont(4);

# --- exit with a majority of masters frozen: bounded in time ---

my $quitter = session($node);
sql($quitter, "SET redlock.timeout = 500");
($out) = sql($quitter, "SELECT redlock_acquire('exit-frozen', 30000)");
is($out, 't', 'a session acquires exit-frozen');
is($redis->holding('exit-frozen', 5), 5, '... on all 5 masters');
my $quitter_pid = $quitter->pid;
$redis->stop($_) for 2 .. 4;
$t0 = time;
$quitter->quit;
ok( wait_until(
		30,
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid = $quitter_pid") eq '0';
		}),
	'the backend exits with 3 of 5 masters frozen');
$exit_secs = time - $t0;
cmp_ok($exit_secs, '<', 5, "... within bounded time (took ${exit_secs}s; redlock.timeout 500 ms)");
is(join(',', map { $redis->redis_cli($_, 'EXISTS', 'exit-frozen') } 0, 1), '0,0',
	'the live masters released its key at exit');
$redis->cont($_) for 2 .. 4;
$redis->redis_all('DEL', 'exit-frozen');

# --- an ERROR after the commit point is a WARNING, not a PANIC ---
# The backend may open no more files (prlimit), and a master's connection closes, so the
# cleanup after COMMIT must rebuild its wait set: epoll_create fails with EMFILE there.

my $f = session($node);
my $pid = $f->pid;
# A transaction with an xid (the PANIC needs one), whose WAL file and table are already
# open in this backend, so that only our cleanup needs a new descriptor.
sql($f, "CREATE TABLE after_commit (i int); INSERT INTO after_commit VALUES (0);");
($out) = sql($f, "BEGIN; INSERT INTO after_commit VALUES (1);"
	  . " SELECT redlock_xact_acquire('after-commit', 30000);");
is($out, 't', 'after commit: a transaction lock in a writing transaction');
# A descriptor's number must be below the limit: 3 refuses every new one.
system('prlimit', "--pid=$pid", "--nofile=3:") == 0 or die "prlimit failed";
$redis->kill9(0);
# The backend sees the connection closed (and so reopens it, which needs descriptors)
# only once the kernel has delivered the FIN or RST of the killed master to its socket:
# until then the release goes out on the old connection and finds it closed only when
# the other masters' replies have decided the call, with no wait set to rebuild.  On a
# loaded machine that delivery can lag behind the kill, so wait for it: no connection
# to master 0's port is still ESTABLISHED (state 01 in /proc/net/tcp).
my $port0 = sprintf('%04X', $ports[0]);
ok( wait_until(
		5,
		sub {
			open(my $tcp, '<', '/proc/net/tcp') or return 1;
			my $established = grep { (split)[2] =~ /:$port0$/ && (split)[3] eq '01' } <$tcp>;
			close $tcp;
			return !$established;
		}),
	'after commit: the backend\'s connection to the killed master is closed');
($out, $err) = sql($f, "COMMIT");
like($err, qr/WARNING:.*could not release redlock locks after commit/,
	'after commit: the failure is reported as a WARNING');
unlike($err, qr/PANIC|cannot abort transaction/, 'after commit: no PANIC');
($out) = $node->safe_psql('postgres', 'SELECT count(*) FROM after_commit');
is($out, '2', 'after commit: the server still serves, and the transaction committed');
$f->quit;
$redis->restart(0);

# --- cleanup is bounded whatever redlock.timeout says (any user may set 60 s) ---

my $b = session($node);
($out) = sql($b, "SET redlock.timeout = 60000; BEGIN; SELECT redlock_xact_acquire('bounded', 30000)");
is($out, 't', 'bounded cleanup: a transaction-scoped lock with redlock.timeout = 60 s');
$redis->stop($_) for 0 .. 2;
($out, $err, $secs) = sql($b, 'ROLLBACK');
$redis->cont($_) for 0 .. 2;
cmp_ok($secs, '<', 30,
	sprintf('bounded cleanup: the abort released with a majority frozen in %.1f s, not 60 s'
		  . ' (cleanup waits at most 10 s)', $secs));
like($err, qr/WARNING:[\s\S]*timed out after/, '... warning that the frozen masters did not answer');
$b->quit;

$s->quit;
$o->quit;
RedisMasters::no_crash($node);
done_testing();
