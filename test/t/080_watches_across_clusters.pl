# Watches (issue 43 item 1): two clusters, alpha and beta, share five Redis masters; a
# session on alpha watches resources (redlock_watch) and hears NOTIFY "redlock" from
# alpha's notifier, whichever cluster changed the lock.
# - beta's acquire, release, expiry (nobody releasing) and alpha's forced release of
#   beta's lock: "acquired", "released", "acquired" + "expired", "acquired" + "forced",
#   each with beta's cluster and the holder's pid;
# - a token on 2 of 5 masters (an attempt in flight, or another client) is not
#   "acquired"; on a third it is, without a holder (no holder record);
# - with 3 of 5 masters frozen nothing is decided: no event while they are frozen, none
#   after, since the lock did not change; nor with one frozen that is one of the 3 holding
#   it (the 4 others cannot tell); with one frozen that the others do without, beta's
#   acquire and release are heard;
# - a watch made in a transaction that rolls back, or in a rolled-back savepoint, sends
#   nothing; redlock_unwatch stops the events at once, DISCARD ALL drops the watches;
# - the notifier leaves once its database has no watch (so DROP DATABASE finds it gone),
#   and after DROP DATABASE ... WITH (FORCE) it does not come back;
# - every event says when the look that saw it began ("at", Unix epoch seconds).

use strict;
use warnings;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my ($alpha, $beta) = RedisMasters::preloaded_clusters($redis, undef, qw(alpha beta));
my $out;

my $watcher = session($alpha);
my @heard;    # every event the watcher heard, decoded, in order (less its "at")
my $bad_at = 0;    # events whose "at" was not a time of this run
my $t_start = time;

# Runs QUERY in the watcher's session, keeps the notifications psql printed after it
# (those that arrived meanwhile), and returns the query's own first line of output.
sub watcher_sql
{
	my ($query) = @_;
	my ($o) = sql($watcher, $query);
	while ($o =~ /Asynchronous notification "redlock" with payload "(.*)" received from server process with PID \d+\./g)
	{
		my $e = decode_json($1);
		my $at = delete $e->{at};
		$bad_at++ unless defined $at && $at >= $t_start - 1 && $at <= time + 1;
		push @heard, $e;
	}
	return (split /\n/, $o)[0] // '';
}

# Lets the watcher's session hear what arrived (psql prints it after a query).
sub listen_once
{
	watcher_sql('SELECT 1');
	return;
}

# Waits up to SECONDS for an event of RESOURCE named EVENT heard since index FROM;
# returns it (undef when none came).
sub heard
{
	my ($from, $resource, $event, $seconds) = @_;
	my $found;
	wait_until(
		$seconds // 10,
		sub {
			listen_once();
			($found) = grep { $_->{resource} eq $resource && $_->{event} eq $event }
			  @heard[ $from .. $#heard ];
			return defined $found;
		});
	return $found;
}

# The events of RESOURCE heard since index FROM, as "event" words, after a quiet wait.
sub heard_words
{
	my ($from, $resource, $wait_ms) = @_;
	usleep(($wait_ms // 500) * 1000);
	listen_once();
	return join(' ', map { $_->{event} } grep { $_->{resource} eq $resource } @heard[ $from .. $#heard ]);
}

sub notifier_count
{
	my ($n) = $alpha->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'redlock notifier'");
	return $n;
}

# --- a watch; the notifier starts and takes its baseline ---

$out = watcher_sql("SELECT redlock_watch('leader')");
is($out, '', 'alpha: redlock_watch(leader) in its own transaction');
ok(wait_until(10, sub { notifier_count() == 1 }), "alpha: the database's notifier runs");
usleep(300_000);    # its first look (the baseline) is over

# --- beta's acquire and release ---

my $b1 = session($beta);
my $b1_pid = $b1->pid;
my $mark = @heard;
($out) = sql($b1, "SELECT redlock_acquire('leader', 10000)");
is($out, 't', 'beta: acquires leader');
my $e = heard($mark, 'leader', 'acquired');
ok($e, 'alpha hears "acquired"');
is_deeply($e, { resource => 'leader', event => 'acquired', cluster => 'beta', pid => $b1_pid },
	'... naming beta and the holder\'s pid') if $e;

$mark = @heard;
($out) = sql($b1, "SELECT redlock_release('leader')");
is($out, 't', 'beta: releases leader');
$e = heard($mark, 'leader', 'released');
is_deeply($e, { resource => 'leader', event => 'released', cluster => 'beta', pid => $b1_pid },
	'alpha hears "released", naming the holder that released');

# --- an expiry, nobody releasing ---

$mark = @heard;
($out) = sql($b1, "SELECT redlock_acquire('leader', 600)");
is($out, 't', 'beta: acquires leader for 600 ms and does not release it');
ok(heard($mark, 'leader', 'acquired'), 'alpha hears "acquired"');
$e = heard($mark, 'leader', 'expired');
is_deeply($e, { resource => 'leader', event => 'expired', cluster => 'beta', pid => $b1_pid },
	'alpha hears "expired" once the TTL ran out, without a release');
is(heard_words($mark, 'leader', 200), 'acquired expired', '... and nothing else: acquired, then expired');
sql($b1, "SELECT redlock_release_all()");

# --- a forced release ---

$mark = @heard;
($out) = sql($b1, "SELECT redlock_acquire('leader', 30000)");
is($out, 't', 'beta: acquires leader for 30 s');
ok(heard($mark, 'leader', 'acquired'), 'alpha hears "acquired"');
$mark = @heard;
($out) = $alpha->safe_psql('postgres', "SELECT redlock_force_release('leader')");
is($out, '5', 'alpha: an operator forces the release');
$e = heard($mark, 'leader', 'forced');
is_deeply($e, { resource => 'leader', event => 'forced', cluster => 'beta', pid => $b1_pid },
	'alpha hears "forced", naming the evicted holder');
is(heard_words($mark, 'leader', 300), 'forced', '... not "released"');
sql($b1, "SELECT redlock_release_all()");

# --- only a quorum's token is "acquired" ---

my $prefix = watcher_sql('SHOW redlock.key_prefix');
my $key = "${prefix}leader";
$mark = @heard;
$redis->redis_cli($_, 'SET', $key, 'other-client-token', 'PX', '30000') for 0 .. 1;
is(heard_words($mark, 'leader', 500), '', 'a token on 2 of 5 masters: no event');
$redis->redis_cli(2, 'SET', $key, 'other-client-token', 'PX', '30000');
$e = heard($mark, 'leader', 'acquired');
is_deeply($e, { resource => 'leader', event => 'acquired' },
	'on a third master: "acquired", with no holder (no holder record)');

# --- a master not heard from: nothing concluded where it could tip the answer ---

$mark = @heard;
$redis->stop(0);    # one of the three masters holding that token
usleep(1_500_000);
listen_once();
$redis->cont(0);
is(heard_words($mark, 'leader', 400), '',
	'master 0, one of the 3 holding the token, frozen 1.5 s: no event (the 4 others cannot tell it released)');

# --- a majority frozen: nothing decided ---

$mark = @heard;
$redis->stop($_) for 0 .. 2;
usleep(3_000_000);    # past redlock.quorum_timeout (2 s): the frozen masters' connections are given up
listen_once();
$redis->cont($_) for 0 .. 2;
is(heard_words($mark, 'leader', 400), '', '3 of 5 masters frozen, then back: no event (nothing changed on a quorum)');
$redis->redis_cli($_, 'DEL', $key) for 0 .. 4;
ok(heard($mark, 'leader', 'released'), 'its keys deleted: "released"');

# --- a master frozen that the others do without ---

$mark = @heard;
$redis->stop(4);
sql($b1, "SELECT redlock_acquire('leader', 10000)");
ok(heard($mark, 'leader', 'acquired'), "master 4 frozen: beta's acquire is heard (the 4 others settle it)");
sql($b1, "SELECT redlock_release('leader')");
ok(heard($mark, 'leader', 'released'), '... and its release');
$redis->cont(4);
is(heard_words($mark, 'leader', 300), 'acquired released', '... and nothing else');

# --- watches in rolled-back transactions and savepoints ---

my $w2 = session($alpha);
sql($w2, 'BEGIN');
sql($w2, "SELECT redlock_watch('rolled-back')");
sql($w2, 'ROLLBACK');
sql($w2, 'BEGIN');
sql($w2, 'SAVEPOINT s');
sql($w2, "SELECT redlock_watch('savepoint-rolled-back')");
sql($w2, 'ROLLBACK TO SAVEPOINT s');
sql($w2, "SELECT redlock_watch('kept')");
sql($w2, 'COMMIT');
usleep(300_000);
$mark = @heard;
sql($b1, "SELECT redlock_acquire(r, 10000) FROM unnest(ARRAY['rolled-back', 'savepoint-rolled-back', 'kept']) r");
ok(heard($mark, 'kept', 'acquired'), "the committed watch's lock: \"acquired\" (every listener hears it)");
is(heard_words($mark, 'rolled-back', 300) . '|' . heard_words($mark, 'savepoint-rolled-back', 0), '|',
	'the watches rolled back, with their transaction or savepoint: no event');
sql($b1, "SELECT redlock_release_all()");
# A watch made in a savepoint released into one that then rolls back goes with it.
sql($w2, 'BEGIN');
sql($w2, 'SAVEPOINT a');
sql($w2, 'SAVEPOINT b');
sql($w2, "SELECT redlock_watch('released-then-rolled-back')");
sql($w2, 'RELEASE SAVEPOINT b');
sql($w2, 'ROLLBACK TO SAVEPOINT a');
sql($w2, 'COMMIT');
($out) = sql($w2, "SELECT redlock_unwatch('released-then-rolled-back')");
is($out, 'f', 'a watch released into a savepoint that then rolled back is gone (unwatch finds none)');

# --- two sessions watching one resource: one's unwatch leaves the other's ---

sql($w2, "SELECT redlock_watch('leader')");
sql($w2, "SELECT redlock_unwatch('leader')");
$mark = @heard;
sql($b1, "SELECT redlock_acquire('leader', 10000)");
ok(heard($mark, 'leader', 'acquired'),
	'another session watched leader and unwatched it: alpha, still watching, hears "acquired"');
sql($b1, "SELECT redlock_release_all()");

# --- unwatch ---

$out = watcher_sql("SELECT redlock_unwatch('leader')");
is($out, 't', "alpha: redlock_unwatch(leader) returns true");
$mark = @heard;
sql($b1, "SELECT redlock_acquire('leader', 10000)");
is(heard_words($mark, 'leader', 500), '', 'no event for leader after the unwatch');
sql($b1, "SELECT redlock_release_all()");

# --- the notifier leaves with the last watch ---

sql($w2, "SELECT redlock_watch('discarded')");
sql($w2, 'DISCARD ALL');    # a pooler's reset: drops the watch, as its UNLISTEN * the LISTEN
($out) = sql($w2, 'SELECT redlock_unwatch_all()');
is((split /\n/, $out)[0], '0',
	"the other session's DISCARD ALL dropped both its watches (redlock_unwatch_all then finds 0)");
ok(wait_until(10, sub { notifier_count() == 0 }), 'the notifier leaves once its database has no watch');
watcher_sql("SELECT redlock_watch('leader')");
ok(wait_until(10, sub { notifier_count() == 1 }), '... and a new watch starts it again');
$watcher->quit;
ok(wait_until(10, sub { notifier_count() == 0 }), "the watching session's exit ends its watch, and the notifier");

# --- a database dropped under its notifier ---

$alpha->safe_psql('postgres', 'CREATE DATABASE watched');
$alpha->safe_psql('watched', 'CREATE EXTENSION redlock');
my $w3 = session($alpha, 'watched');
sql($w3, "SELECT redlock_watch('in-a-dropped-database')");
ok(wait_until(10, sub { notifier_count() == 1 }), "a watch in database watched starts its notifier");
my $log_at = -s $alpha->logfile;
$alpha->safe_psql('postgres', 'DROP DATABASE watched WITH (FORCE)');
ok(wait_until(10, sub { notifier_count() == 0 }), 'DROP DATABASE ... WITH (FORCE) ends the watcher and the notifier');
sleep 3;
my $fatals = () = slurp_file($alpha->logfile, $log_at) =~ /FATAL:  database \d+ does not exist/g;
is($fatals, 0, '... which, restarted, leaves without connecting to the dropped database (no FATAL loop)');
is(notifier_count(), 0, '... and stays gone');

is($bad_at, 0, "every event's \"at\" is a moment of this run (when the look that saw it began)");
$_->quit for $b1, $w2;
eval { $w3->quit };
RedisMasters::no_crash($_) for $alpha, $beta;
done_testing();
