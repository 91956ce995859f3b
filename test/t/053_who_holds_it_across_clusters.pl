# Who holds it, across clusters (issue 26): two clusters, alpha and beta, share five Redis
# masters.
# - Beta sees alpha's lock with redlock_lock_info: held by a quorum, alpha's cluster_name,
#   the holder's pid, application_name, database, role and scope, and a TTL that counts
#   down; alpha's own call also counts alpha's waiting backend, beta's counts none.
# - redlock_cluster_locks on beta lists the locks of both clusters and a key another
#   client wrote (value without a holder record) as held by an unknown holder.
# - A holder record is never shown beside another token: a record left with an old token
#   (a holder that released on masters where the record survived) is ignored; a busy
#   attempt leaves the holder's record alone; an extended lock keeps its record.
# - Keys of another client on 2 of 5 masters are not held, nor two tokens on 2 masters
#   each; with uneven TTLs, ttl_ms is the third largest; 2,500 keys take several SCAN
#   steps; max_locks stops the listing.
# - redlock_force_release on beta evicts alpha's auto-extended job: its statement is
#   cancelled within one renewal interval (TTL/3), beta takes the lock, and beta's
#   fencing token is above alpha's, so alpha's late fenced write changes nothing; the
#   fencing counter was raised on every master.  The
#   server log says who forced it and whose lock it was.
# - With 3 of 5 masters frozen, redlock_lock_info cannot tell: 08006.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my ($alpha, $beta) = RedisMasters::preloaded_clusters($redis, undef, qw(alpha beta));

my $job = session($alpha);
sql($job, "SET application_name = 'billing-job'");
my $job_pid = $job->pid;
my $watcher = session($beta);
my $out;
my $err;

# --- beta sees alpha's holder ---

($out) = sql($job, "SELECT redlock_acquire('nightly-billing', 10000)");
is($out, 't', 'alpha: billing-job acquires nightly-billing');
($out) = sql($watcher,
	"SELECT held, masters, cluster, pid, application_name, database, role, scope FROM redlock_lock_info('nightly-billing')");
is($out, "t|5|alpha|$job_pid|billing-job|postgres|" . getpwuid($<) . '|session',
	"beta: held by 5 masters; alpha's cluster name, the job's pid, application_name, database, role, scope");
($out) = sql($watcher,
	"SELECT acquired_at BETWEEN now() - interval '30 s' AND clock_timestamp() FROM redlock_lock_info('nightly-billing')");
is($out, 't', '... and when it was taken: moments ago');
my ($ttl1) = sql($watcher, "SELECT ttl_ms FROM redlock_lock_info('nightly-billing')");
usleep(600_000);
my ($ttl2) = sql($watcher, "SELECT ttl_ms FROM redlock_lock_info('nightly-billing')");
ok($ttl1 > 8000 && $ttl1 <= 10000, "... its TTL is within the 10 s it was taken for ($ttl1 ms)");
ok($ttl2 <= $ttl1 - 500, "... and counts down ($ttl1 ms, then $ttl2 ms 0.6 s later)");

# A busy attempt from beta leaves alpha's record as it was.
($out) = sql($watcher, "SELECT redlock_acquire('nightly-billing', 10000)");
is($out, 'f', 'beta: its attempt finds the lock busy');
($out) = sql($watcher, "SELECT pid, cluster FROM redlock_lock_info('nightly-billing')");
is($out, "$job_pid|alpha", '... and the holder shown is still alpha\'s job');

# A waiter on alpha counts on alpha, for that lock, not on beta.
my $waiter = session($alpha);
$waiter->start("SELECT redlock_acquire('nightly-billing', 10000, 20000)");
ok(wait_until(10, sub { (sql($job, "SELECT waiters FROM redlock_lock_info('nightly-billing')"))[0] eq '1' }),
	"alpha: lock_info counts alpha's waiting backend");
($out) = sql($job, "SELECT waiters FROM redlock_lock_info('another-lock')");
is($out, '0', 'alpha: ... for that lock only');
($out) = sql($watcher, "SELECT waiters FROM redlock_lock_info('nightly-billing')");
is($out, '0', 'beta: no waiter of its own');

# An extended lock keeps its record: it lives as long as the lock.
sql($job, "SELECT redlock_acquire('extended-job', 1500)");
sql($job, "SELECT redlock_extend('extended-job', 10000)");
usleep(2_000_000);
($out) = sql($watcher, "SELECT held, cluster, pid FROM redlock_lock_info('extended-job')");
is($out, "t|alpha|$job_pid", 'a lock extended past its first TTL still shows its holder');
sql($job, "SELECT redlock_release('extended-job')");

# Keys of another client: on 2 masters only, not held; on all 5 with TTLs of 10 to 50 s,
# held for the quorum-th (third) largest.
$redis->redis_cli($_, 'SET', 'partial', 'c0ffee', 'PX', '30000') for 0 .. 1;
($out) = sql($watcher, "SELECT held, masters, ttl_ms IS NULL, scope FROM redlock_lock_info('partial')");
is($out, 'f|2|t|unknown', 'a key on 2 of 5 masters: not held, 2 masters, no TTL');
# Two tokens of one length on two masters each: four masters hold a key, but no quorum
# holds the same token.
$redis->redis_cli($_, 'SET', 'split', $_ < 2 ? 'c0ffee' : 'decade', 'PX', '30000') for 0 .. 3;
($out) = sql($watcher, "SELECT held, masters, ttl_ms IS NULL FROM redlock_lock_info('split')");
is($out, 'f|2|t', 'two tokens on 2 masters each: not held, 2 masters, no TTL');
$redis->redis_cli($_, 'SET', 'uneven', 'c0ffee', 'PX', 10000 * ($_ + 1)) for 0 .. 4;
($out) = sql($watcher, "SELECT held, masters, ttl_ms FROM redlock_lock_info('uneven')");
my ($held, $masters, $ttl) = split /\|/, $out;
is("$held|$masters", 't|5', 'TTLs of 10 to 50 s: held by 5');
ok($ttl > 25000 && $ttl <= 30000, "... for the third largest PTTL, 30 s ($ttl ms)");
$redis->redis_all('DEL', 'partial', 'split', 'uneven');

# --- every lock, cluster-wide ---

($out) = sql($watcher, "SELECT redlock_acquire('beta-own', 30000)");
is($out, 't', 'beta: takes a lock of its own');
# A key as another client writes one (node-redlock: a random value, no holder record).
$redis->redis_all('SET', 'other-client', 'f00dfeed', 'PX', '30000');
($out) = sql($watcher,
	"SELECT string_agg(format('%s:%s:%s:%s', resource, held, coalesce(cluster, '-'), scope), ' ' ORDER BY resource) FROM redlock_cluster_locks()");
is($out, 'beta-own:t:beta:session nightly-billing:t:alpha:session other-client:t:-:unknown',
	"beta: cluster_locks lists alpha's lock, beta's own and the other client's (unknown holder)");

# A record left beside another token is not shown: the other client's key gets a record of
# an old token, as a record that outlived its key would be.
$redis->redis_all('SET', "other-client\xffholder", "0123abcd\t1\tghost\t1\tx\tx\tx\tsession\t0", 'PX', '30000');
($out) = sql($watcher, "SELECT held, cluster IS NULL, scope FROM redlock_lock_info('other-client')");
is($out, 't|t|unknown', "a holder record of another token is not shown as the holder");

# Many keys: the listing goes through every SCAN step (1,000 keys a step) and stops at
# its limit.
$redis->redis_all('EVAL', 'for i = 1, 2500 do redis.call("set", "bulk-" .. i, "x", "px", 60000) end', '0');
($out) = sql($watcher, "SELECT count(*) FROM redlock_cluster_locks(10000) WHERE resource LIKE 'bulk-%'");
is($out, '2500', 'cluster_locks lists 2,500 keys (several SCAN steps a master)');
($out, $err) = sql($watcher, "SELECT count(*) FROM redlock_cluster_locks(100)");
is($out, '100', 'max_locks 100: 100 rows');
like($err, qr/NOTICE:  00000: listed the first 100 locks; more may exist/, '... and a NOTICE says more may exist');
$redis->redis_all('EVAL', 'for i = 1, 2500 do redis.call("del", "bulk-" .. i) end', '0');

($out) = sql($job, "SELECT redlock_release('nightly-billing')");
is($out, 't', 'alpha: billing-job releases');
($out, $err) = $waiter->finish;
is($out, 't', "alpha: the waiter gets it");
($out) = sql($watcher, "SELECT pid FROM redlock_lock_info('nightly-billing')");
is($out, $waiter->pid, "beta: the holder shown is the waiter now");
sql($waiter, "SELECT redlock_release('nightly-billing')");
is(join(',', $redis->redis_all('EXISTS', "nightly-billing\xffholder")), '0,0,0,0,0',
	'released: the holder record is gone from every master with the key');

# --- force release evicts alpha's auto-extended, fenced job ---

$alpha->safe_psql('postgres', 'CREATE TABLE guarded (id int PRIMARY KEY, fence bigint NOT NULL, writer text)');
$alpha->safe_psql('postgres', "INSERT INTO guarded VALUES (1, 0, 'nobody')");
sql($job, 'SET redlock.auto_extend = on');
($out) = sql($job, "SELECT redlock_acquire('fenced-job', 3000)");
is($out, 't', 'alpha: the job acquires fenced-job, auto-extended, TTL 3 s');
my ($alpha_token) = sql($job, "SELECT redlock_fencing_token('fenced-job')");
like($alpha_token, qr/^\d+$/, "... and takes fencing token $alpha_token");
$job->start('SELECT pg_sleep(30)');
usleep(1_500_000);     # the worker has renewed it by now
my @counters = $redis->redis_all('GET', "\xfffence:fenced-job");
my $t0 = time;
($out) = sql($watcher, "SELECT redlock_force_release('fenced-job')");
is($out, '5', 'beta: force release deletes the key on all 5 masters');
my @raised = $redis->redis_all('GET', "\xfffence:fenced-job");
is(scalar(grep { $raised[$_] > $counters[$_] && $raised[$_] > $alpha_token } 0 .. 4), 5,
	"... and raises the fencing counter on every master above alpha's token (@counters -> @raised)");
($out, $err) = $job->finish;
my $evicted_after = time - $t0;
like($err, qr/57014.*canceling statement because lock on resource "fenced-job" was lost/s,
	"alpha: the job's statement is cancelled (57014, lock lost)");
cmp_ok($evicted_after, '<', 2.5,
	sprintf('... within one renewal interval of 1 s plus a round (%.2f s)', $evicted_after));
($out) = sql($watcher, "SELECT redlock_acquire('fenced-job', 30000)");
is($out, 't', 'beta: acquires fenced-job');
my ($beta_token) = sql($watcher, "SELECT redlock_fencing_token('fenced-job')");
cmp_ok($beta_token, '>', $alpha_token, "beta's token ($beta_token) is above the evicted job's ($alpha_token)");
($out) = sql($job, "UPDATE guarded SET fence = $beta_token, writer = 'beta' WHERE id = 1 AND fence <= $beta_token RETURNING writer");
is($out, 'beta', "beta's fenced write lands");
($out) = sql($job, "UPDATE guarded SET fence = $alpha_token, writer = 'alpha' WHERE id = 1 AND fence <= $alpha_token RETURNING writer");
is($out, '', "alpha's late fenced write changes nothing");
ok($beta->wait_for_log(qr/LOG:  redlock: lock on resource "fenced-job" force-released by role "\S+" \(pid \d+\) on 5 of 5 masters\n.*DETAIL:  Before: 5 masters held the key of cluster "alpha", pid $job_pid, application "billing-job"/),
	"beta's log says who forced it and whose lock it was");
sql($job, "SELECT redlock_release('fenced-job')");
($out) = sql($watcher, "SELECT held, masters, cluster FROM redlock_lock_info('fenced-job')");
is($out, 't|5|beta', "alpha lets go of its hold: beta's lock stays on all 5 masters");

# --- fewer than a quorum of masters: cannot tell ---

$redis->stop($_) for 0 .. 2;
($out, $err) = sql($watcher, "SELECT held FROM redlock_lock_info('fenced-job')");
like($err, qr/ERROR:  08006: could not read the lock on resource "fenced-job": 2 of 5 Redis masters answered, 3 needed/,
	'3 of 5 masters frozen: lock_info raises 08006');
$redis->cont($_) for 0 .. 2;

RedisMasters::no_crash($_) for ($alpha, $beta);
done_testing();
