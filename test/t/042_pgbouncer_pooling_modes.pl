# PgBouncer (Debian's) in front of a cluster, in transaction and in session pooling:
# - transaction pooling: redlock_xact_acquire (and redlock_xact_acquire_permit, the set
#   form redlock_xact_acquire(text[]) and redlock_xact_acquire_shared) works
#   through it (two clients exclude each other, the commit releases);
# - transaction pooling: a session lock is a hazard, shown: it stays with the server
#   backend after its client disconnects, and the next client that gets that backend
#   sees it as its own and can release it;
# - session pooling: the pool's DISCARD ALL (server_reset_query) releases what a client
#   left, so the next client's backend holds nothing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('bounced', $redis, $RedisMasters::ROOMY_CONF);
my ($out, $err);

# --- PgBouncer: three pools on one listener, as postgres (trust over loopback) ---

my $dir = PostgreSQL::Test::Utils::tempdir_short();
my $bport = PostgreSQL::Test::Cluster::get_free_port();
my ($pghost, $pgport) = ($node->host, $node->port);
PostgreSQL::Test::Utils::append_to_file("$dir/users.txt", qq{"postgres" ""\n});
PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", qq{
[databases]
; transaction pooling, two server connections
txn = host=$pghost port=$pgport dbname=postgres pool_size=2
; transaction pooling, one server connection: every client gets the same backend
single = host=$pghost port=$pgport dbname=postgres pool_size=1
; session pooling, one server connection, reset with DISCARD ALL between clients
sess = host=$pghost port=$pgport dbname=postgres pool_size=1 pool_mode=session

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
server_reset_query = DISCARD ALL
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
});
my $bouncer = IPC::Run::start([ '/usr/sbin/pgbouncer', "$dir/pgbouncer.ini" ],
	'>', "$dir/stdout", '2>', "$dir/stderr");
ok(wait_until(10, sub { -s "$dir/pgbouncer.pid" }), 'pgbouncer started')
  or BAIL_OUT('pgbouncer did not start: ' . slurp_file("$dir/stderr"));

# A psql session through PgBouncer to pool DB (PsqlSession takes anything
# with a connstr method).
{

	package Bouncer;
	sub connstr { my ($self, $db) = @_; return "host=127.0.0.1 port=$self->{port} dbname=$db"; }
}
my $via = bless { port => $bport }, 'Bouncer';
sub bounced { my ($db) = @_; return session($via, $db); }

# --- transaction pooling: transaction-scoped locks work ---

my $a = bounced('txn');
my $b = bounced('txn');
sql($a, 'BEGIN');
($out) = sql($a, "SELECT redlock_xact_acquire('bounced-xact', 30000)");
is($out, 't', 'transaction pooling: redlock_xact_acquire in a transaction');
($out) = sql($b, "SELECT redlock_xact_acquire('bounced-xact', 30000)");
is($out, 'f', '... another client through the same pool is refused');
is($redis->holding('bounced-xact', 5), 5, '... the key is on all 5 masters');
sql($a, 'COMMIT');
is($redis->holding('bounced-xact', 0), 0, '... the commit releases it');
($out) = sql($b, "BEGIN; SELECT redlock_xact_acquire('bounced-xact', 30000); COMMIT");
is($out, 't', '... and the other client takes it in its own transaction');

# A semaphore's permit (1.5), transaction-scoped: one permit of one, through the pool.
sql($a, 'BEGIN');
($out) = sql($a, "SELECT redlock_xact_acquire_permit('bounced-permit', 1, 30000)");
is($out, 't', 'transaction pooling: redlock_xact_acquire_permit in a transaction');
($out) = sql($b, "SELECT redlock_xact_acquire_permit('bounced-permit', 1, 30000)");
is($out, 'f', '... the only permit: another client through the pool is refused');
is($redis->holding('bounced-permit#1', 5), 5, '... its slot is on all 5 masters');
sql($a, 'COMMIT');
is($redis->holding('bounced-permit#1', 0), 0, '... the commit releases it');

# A set of resources (1.6), transaction-scoped: all or nothing, through the pool.
sql($a, 'BEGIN');
($out) = sql($a, "SELECT redlock_xact_acquire(ARRAY['bounced-set-1', 'bounced-set-2'], 30000)");
is($out, 't', 'transaction pooling: redlock_xact_acquire(text[]) in a transaction');
($out) = sql($b, "SELECT redlock_xact_acquire(ARRAY['bounced-set-2', 'bounced-set-3'], 30000)");
is($out, 'f', '... a set sharing a resource, through the pool, is refused');
is($redis->holding('bounced-set-3', 0), 0, '... and sets nothing');
is($redis->holding("bounced-set-$_", 5), 5, "... bounced-set-$_ is on all 5 masters") for 1, 2;
sql($a, 'COMMIT');
is($redis->holding("bounced-set-$_", 0), 0, "... the commit releases bounced-set-$_") for 1, 2;

# A shared lock (1.7), transaction-scoped: two readers through the pool, no writer.
sql($a, 'BEGIN');
($out) = sql($a, "SELECT redlock_xact_acquire_shared('bounced-shared', 30000)");
is($out, 't', 'transaction pooling: redlock_xact_acquire_shared in a transaction');
sql($b, 'BEGIN');
($out) = sql($b, "SELECT redlock_xact_acquire_shared('bounced-shared', 30000)");
is($out, 't', '... another client through the pool shares it');
sql($b, 'COMMIT');
is($redis->holding('bounced-shared', 5), 5, '... its commit leaves the first one\'s hold on all 5 masters');
($out) = sql($b, "BEGIN; SELECT redlock_xact_acquire('bounced-shared', 30000); COMMIT");
is($out, 'f', '... an exclusive acquire through the pool is refused');
sql($a, 'COMMIT');
is($redis->holding('bounced-shared', 0), 0, '... the last commit releases it');
$a->quit;
$b->quit;

# --- transaction pooling: a session lock stays with the server backend ---

my $first = bounced('single');
($out) = sql($first, "SELECT redlock_acquire('bounced-session', 30000)");
is($out, 't', 'transaction pooling: a client takes a session lock (autocommit)');
$first->quit;
sleep 1;
is($redis->holding('bounced-session', 5), 5,
	'... its client disconnected, and the lock is still held on every master (hazard)');
my $second = bounced('single');
($out) = sql($second, "SELECT resource FROM redlock_locks()");
is($out, 'bounced-session', '... the next client, on the same server backend, sees it as its own');
($out) = sql($second, "SELECT redlock_release('bounced-session')");
is($out, 't', '... and can release it');
$second->quit;

# --- session pooling: DISCARD ALL between clients releases what a client left ---

my $left = bounced('sess');
($out) = sql($left, "SELECT redlock_acquire('bounced-reset', 30000)");
is($out, 't', 'session pooling: a client takes a session lock');
$left->quit;
is($redis->holding('bounced-reset', 0, 10), 0,
	'... and disconnects without releasing: the pool\'s DISCARD ALL released it on the masters');
my $next = bounced('sess');
($out) = sql($next, 'SELECT count(*) FROM redlock_locks()');
is($out, '0', '... the next client on that backend holds nothing');
$next->quit;

kill 'TERM', slurp_file("$dir/pgbouncer.pid") =~ s/\s+//gr;
$bouncer->finish;
$redis->no_keys_left;
RedisMasters::no_crash($node);
done_testing();
