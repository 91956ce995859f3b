# What each operation costs the masters, asserted rather than assumed (README: one round
# trip per acquire, release, extend and claim, the holder record included: the acquire
# sends it with SET NX right behind the lock's SET NX, or nothing more with
# redlock.record_holder off; a waiting acquire sends GET and PTTL in the SET's round trip; a fencing token costs two rounds on the first call of a hold and
# nothing on later calls, once the masters know its scripts).  Counted twice: the commands this session sent to each master
# (redlock_nodes().requests), and the commands each master processed (INFO
# commandstats).  Every operation here sends one command per master per round, but the
# acquire and the claim with their holder record (two) and the waiting acquire (four),
# whose commands go out together, pipelined.
#
# Fencing tokens are also counted where a bug would cost a round without changing the
# token (issue 22): counters above the clock floor on every master (a write of the
# largest counter read, rather than one more, is refused and written again), and
# counters above it on a quorum only, those three masters frozen until the other two
# answered the read (a read that stops at one master misses them, and its write is
# refused there).  Both must still take two rounds.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(sha1_hex);

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('trips', $redis, $RedisMasters::PATIENT_CONF);
my $s = session($node);
my ($out, $err);
my @masters = (0 .. $redis->count - 1);
my @figures;

# The counter key: the byte 0xFF, "fence:", then the lock's key.
sub counter_key { return "\xff" . 'fence:' . $_[0]; }

# Commands this session sent to each master, in master order (redlock_nodes()).
sub requests
{
	my ($rows) = sql($s, 'SELECT node, requests FROM redlock_nodes()');
	my %n = map { split /\|/ } split /\n/, $rows;
	return map { $n{"127.0.0.1:$_"} // 0 } $redis->ports;
}

# Runs QUERY (or, with CODE, CODE->() that runs it) and tests that it sent EXPECT
# commands to every master, and that every master processed EXPECT more calls of CMDS
# (polled: a call returns once a quorum decided); EXPECT 0 checks the masters once.
# Records the figure for the table at the end.  Returns the query's (stdout, stderr).
sub costs
{
	my ($what, $expect, $cmds, $query, $code) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @sent0 = requests();
	my @done0 = $redis->calls(@$cmds);
	my ($o, $e) = $code ? $code->() : sql($s, $query);
	my @sent = requests();
	my @d = map { $sent[$_] - $sent0[$_] } @masters;
	is("@d", join(' ', ($expect) x @masters), "$what: $expect command(s) sent to each master");
	my @done;
	wait_until(
		$expect ? 10 : 0,
		sub {
			@done = $redis->calls(@$cmds);
			return !grep { $done[$_] - $done0[$_] < $expect } @masters;
		});
	@d = map { $done[$_] - $done0[$_] } @masters;
	is("@d", join(' ', ($expect) x @masters),
		"$what: each master processed $expect (" . (@$cmds ? "@$cmds" : 'scripts') . ")");
	push @figures, [ $what, $expect ];
	return ($o, $e);
}

# Open the connections first: handshakes (AUTH, SELECT, SCRIPT LOAD) are not counted,
# but a first call would count nothing else either way.
($out) = sql($s, "SELECT redlock_acquire('warm-up', 1000) AND redlock_release('warm-up')");
is($out, 't', 'warm-up call opens the connections');

# --- acquire, release, extend, claim: one round trip each ---

($out) = costs('acquire (SET NX, and the holder record behind it in the same trip)', 2, ['set'],
	"SELECT redlock_acquire('r', 30000)");
is($out, 't', 'acquire: acquired');
sql($s, 'SET redlock.record_holder = off');
($out) = costs('acquire, redlock.record_holder off (SET NX)', 1, ['set'],
	"SELECT redlock_acquire('r-plain', 30000)");
is($out, 't', 'acquire without the holder record: acquired');
sql($s, "SELECT redlock_release('r-plain')");
sql($s, 'RESET redlock.record_holder');
($out) = costs('extend', 1, [], "SELECT redlock_extend('r', 40000)");
is($out, 't', 'extend: extended');
($out) = costs('release', 1, [], "SELECT redlock_release('r')");
is($out, 't', 'release: released');
($out) = costs('acquire waiting (SET, the holder record, GET, PTTL in one trip)', 4, [qw(set get pttl)],
	"SELECT redlock_acquire('w', 30000, 1000)");
is($out, 't', 'acquire waiting: acquired at once');
sql($s, "SELECT redlock_release('w')");
($out) = costs('claim (SET NX and the holder record)', 2, ['set'], "SELECT redlock_claim('c', 30000)");
is($out, 't', 'claim: claimed');

# --- fencing tokens: two rounds on the first call of a hold, none later ---

sql($s, "SELECT redlock_acquire('f', 30000)");
is($redis->holding('f', 5), 5, 'a lock for fencing tokens is on all 5 masters');
my ($t1) = costs('fencing token, first call', 2, [], "SELECT redlock_fencing_token('f')");
like($t1, qr/^\d{16}$/, "fencing token, first call: a token ($t1)");
# Those 2 were counted on masters that never ran the fencing scripts: the connections
# loaded them in their handshakes (else EVALSHA is answered NOSCRIPT and resent as EVAL,
# 4 commands per master).  The scripts the masters have are README's (doc/wire-format.md).
for my $script ('if redis.call("get", KEYS[1]) ~= ARGV[1] then return -1 end local f = tonumber(redis.call("time")[1]) * 1000000 - 1 local c = redis.call("get", KEYS[2]) if not c then return f end local n = tonumber(c) if not n then return redis.error_reply("fencing counter is not a number") end if n < f then return f end return n',
	'if redis.call("get", KEYS[1]) ~= ARGV[1] then return 0 end local c = tonumber(redis.call("get", KEYS[2]) or "0") if c and c >= tonumber(ARGV[2]) then return -c end redis.call("set", KEYS[2], ARGV[2], "px", ARGV[3]) return 1')
{
	is(join(',', $redis->redis_all('SCRIPT', 'EXISTS', sha1_hex($script))), '1,1,1,1,1',
		'the masters have the fencing script as the wire format gives it');
}
($out) = costs('fencing token, later call', 0, [], "SELECT redlock_fencing_token('f')");
is($out, $t1, 'fencing token, later call: the same token');
sql($s, "SELECT redlock_release('f')");

# Counters above the floor on every master (many tokens within a second, or a master's
# clock ahead): still two rounds, the largest plus one.
my ($now) = $redis->redis_cli(0, 'TIME') =~ /^(\d+)/;
my $ahead = ($now + 3600) * 1_000_000;
$redis->redis_all('SET', counter_key('f-ahead'), $ahead);
sql($s, "SELECT redlock_acquire('f-ahead', 30000)");
is($redis->holding('f-ahead', 5), 5, 'a lock whose counters are ahead of the floor is on all 5 masters');
($out) = costs('fencing token, counters ahead on every master', 2, [],
	"SELECT redlock_fencing_token('f-ahead')");
is($out, $ahead + 1, 'counters ahead on every master: the largest plus one');
sql($s, "SELECT redlock_release('f-ahead')");

# Counters ahead on masters 2-4 only, which are frozen until masters 0 and 1 answered the
# read: the read waits for a quorum, so it sees one of them; two rounds.
$redis->redis_cli($_, 'SET', counter_key('f-quorum'), $ahead) for 2 .. 4;
sql($s, "SELECT redlock_acquire('f-quorum', 30000)");
is($redis->holding('f-quorum', 5), 5, 'a lock whose counters are ahead on masters 2-4 is on all 5');
($out, $err) = costs(
	'fencing token, counters ahead on a quorum answering late', 2, [], undef,
	sub {
		my ($o, $e, $sent) = $redis->answer_late([ 2, 3, 4 ], 300, $s,
			"SELECT redlock_fencing_token('f-quorum')", 'evalsha');
		ok($sent, 'masters 0 and 1 processed the read before masters 2-4 were resumed');
		return ($o, $e);
	});
is($out, $ahead + 1, 'counters ahead on a quorum answering late: the largest plus one');
is($err, '', '... without an error');
sql($s, "SELECT redlock_release('f-quorum')");

note 'commands per master, per operation (one round trip each but where said):';
note sprintf('  %-58s %d', @$_) for @figures;

$s->quit;
$redis->redis_all('DEL', 'c', "c\xffholder", counter_key($_)) for qw(f f-ahead f-quorum);
$redis->no_keys_left;
RedisMasters::no_crash($node);
done_testing();
