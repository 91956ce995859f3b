# test/lib/RedisMasters.pm: Redis masters and redlock-ready nodes for the TAP tests.
#
#   my $redis = RedisMasters->new(5);            # 5 masters on free ports, under tmp_check
#   RedisMasters->new(5, redis_args => ['--appendonly', 'yes', '--appendfsync', 'always']);
#   RedisMasters->new(5, tls => { ca => $ca, cert => $crt, key => $key,   # TLS only, on
#       client_cert => $c, client_key => $k });    # the same ports; redis-cli uses --tls
#   my $node  = RedisMasters::redlock_node('main', $redis, $RedisMasters::ROOMY_CONF);
#   $redis->redis_cli(0, 'PTTL', 'k');           # output of redis-cli, chomped
#   $redis->auth($pw);                           # redis-cli authenticates from now on
#   $redis->kill9(1); $redis->stop(2); $redis->cont(2); $redis->restart(1);
#   $redis->freeze_for(4, 300);                  # SIGSTOP now, SIGCONT in 300 ms
#   $redis->holding('k', 5);                     # masters holding k, polled until 5
#   $redis->no_keys_left;                        # a test: DBSIZE is 0 everywhere
#   my @c = $redis->script_calls; ...; $redis->wait_scripts(\@c);   # every master ran it
#   my @c = $redis->calls('set'); ...; $redis->wait_calls(\@c, 'set');
#   $redis->answer_late([2, 3, 4], 1500, $session, $query, 'set');   # a late quorum
#
# Sessions (session, sql, timed_psql, wait_until) are in test/lib/PsqlSession.pm.
#
# Each master is started by test/lib/start-master, as test/lib/servers.sh starts them:
# $ENV{RL_REDIS_SERVER} (default redis-server; valkey-server runs the suite against
# Valkey), driven with $ENV{RL_REDIS_CLI} (default redis-cli; valkey-cli).  Each master
# started must say in INFO server that it is the server and version that
# `RL_REDIS_SERVER --version` names (e.g. Valkey 8.1.1), or the test dies: a run meant
# for Valkey cannot pass against Redis.  RedisMasters::server_identity returns that name.
# Masters are stopped by PID in stop_all, which DESTROY and END call too.

package RedisMasters;

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use PsqlSession qw(wait_until);

my $SERVER = $ENV{RL_REDIS_SERVER} || 'redis-server';
my $CLI = $ENV{RL_REDIS_CLI} || 'redis-cli';
my $START_MASTER = File::Spec->catfile(File::Spec->rel2abs(dirname(__FILE__)), 'start-master');

my @all_masters;
my $identity;

our $DEBUG_CONF = "log_min_messages = debug1\n";

# Room for a loaded 2-core machine (five Redis processes, clusters, prove): README's
# defaults (50 ms per request, 200 ms to connect) are for production latencies, and one
# 50 ms stall of a Redis process would be a spurious 08006.  Tests that are about these
# timeouts set their own.  (010's checker keeps the defaults on purpose.)
our $ROOMY_CONF = "redlock.timeout = 1000ms\nredlock.connect_timeout = 2000ms\n";

# For tests that freeze masters while a call waits for them: 10 s per request, so that a
# frozen master is waited for (its reply comes late), not given up on as hung.
our $PATIENT_CONF = "redlock.timeout = 10000ms\nredlock.connect_timeout = 2000ms\n";

# Starts N masters (default 5) on free ports and waits until each answers PING.
# Option redis_args: more redis-server arguments (they override the defaults, e.g. to
# turn on AOF persistence); used at every (re)start.  Option tls: the masters serve TLS
# only (tls-port, no plain port), with certificate cert and key key, trusting ca for
# client certificates (required unless tls->{auth_clients} is 'no'; tls->{protocols},
# e.g. 'TLSv1.2', limits the versions); redis_cli then
# connects with TLS, trusting ca and presenting client_cert and client_key.
sub new
{
	my ($class, $n, %opts) = @_;
	$n //= 5;
	my $self = bless {
		# Absolute: redis-server changes to --dir before it opens --logfile.
		dir => File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir('redis')),
		ports => [],
		pids => [],
		redis_args => $opts{redis_args} // [],
		tls => $opts{tls},
	}, $class;
	for my $i (0 .. $n - 1)
	{
		$self->{ports}[$i] = PostgreSQL::Test::Cluster::get_free_port();
		$self->_start($i);
	}
	push @all_masters, $self;
	note "$n masters (" . server_identity() . ", $SERVER) on ports @{ $self->{ports} }";
	return $self;
}

# The masters' ports, in order.
sub ports
{
	my ($self) = @_;
	return @{ $self->{ports} };
}

# Number of masters.
sub count
{
	my ($self) = @_;
	return scalar @{ $self->{ports} };
}

# The redlock.servers value naming every master.
sub servers_guc
{
	my ($self) = @_;
	return join(',', map { "127.0.0.1:$_" } $self->ports);
}

# What RL_REDIS_SERVER is, from its --version line: "Redis 7.0.15", "Valkey 8.1.1"
# (start-master --identity).
sub server_identity
{
	return $identity if defined $identity;
	my ($ok, $out) = _start_master('--identity');
	$ok or die $out;
	return $identity = $out;
}

# Runs test/lib/start-master with ARGS; returns (true when it succeeded, its output): the
# PID of the master started, or why it failed.  (A pipe, not IPC::Run, whose run() took
# 0.4 s longer now and then in the checker's children that start masters at once.)
sub _start_master
{
	my (@args) = @_;
	open(my $fh, '-|', $START_MASTER, @args) or die "cannot run $START_MASTER: $!";
	my $out = do { local $/; <$fh> } // '';
	my $ok = close($fh);
	chomp $out;
	$out = "$START_MASTER exited with status " . ($? >> 8) if !$ok && $out eq '';
	return ($ok, $out);
}

# Starts master I on its port with test/lib/start-master; dies unless it answers PING
# within 10 s and says in INFO server that it is the server RL_REDIS_SERVER names.
sub _start
{
	my ($self, $i) = @_;
	my $tls = $self->{tls};
	my (@opts, @args);
	if ($tls)
	{
		@opts = ('--tls-cert', $tls->{cert}, '--tls-key', $tls->{key}, '--tls-ca', $tls->{ca});
		push @opts, '--tls-client-cert', $tls->{client_cert} if defined $tls->{client_cert};
		push @opts, '--tls-client-key', $tls->{client_key} if defined $tls->{client_key};
		@args = ('--tls-auth-clients', $tls->{auth_clients} // 'yes',
			$tls->{protocols} ? ('--tls-protocols', $tls->{protocols}) : ());
	}
	push @opts, '--password', $self->{password} if defined $self->{password};
	push @opts, '--expect', server_identity();
	my ($ok, $out);
	# A master killed a moment ago may still hold its port: _wait_gone sees its main
	# thread a zombie while its other threads, which share the listening socket, are
	# still exiting (a CI run's 013 found the port answering 1 ms after SIGKILL).  Up to
	# 3 s for it to be free again.
	for (my $try = 0; $try < 30; $try++)
	{
		($ok, $out) = _start_master(@opts, $self->{ports}[$i], "$self->{dir}/redis$i",
			@args, @{ $self->{redis_args} });
		last if $ok || $out !~ /^port \d+ is in use$/;
		usleep(100_000);
	}
	$ok && $out =~ /^(\d+)$/ or die $out;
	$self->{pids}[$i] = $1;
	return;
}

# PID in FILE (Checker.pm reads those of masters it started in child processes).
sub _read_pid
{
	my ($file) = @_;
	open(my $fh, '<', $file) or return undef;
	my $pid = <$fh>;
	close $fh;
	return undef unless defined $pid && $pid =~ /^(\d+)/;
	return $1;
}

# True while PID exists and is not a zombie.
sub _alive
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/stat") or return 0;
	my $stat = <$fh>;
	close $fh;
	return 0 unless defined $stat;
	my ($state) = $stat =~ /\)\s+(\S)/;
	return defined $state && $state ne 'Z';
}

sub _wait_gone
{
	my ($pid) = @_;
	for (1 .. 100)
	{
		return 1 unless _alive($pid);
		usleep(100_000);
	}
	return 0;
}

# PID of master I while it runs (undef once killed).
sub pid
{
	my ($self, $i) = @_;
	return $self->{pids}[$i];
}

# From now on, redis_cli authenticates with PASSWORD (after requirepass was set).
sub auth
{
	my ($self, $password) = @_;
	$self->{password} = $password;
	return;
}

# Runs redis-cli against master I; returns its output (stdout and stderr), chomped.
sub redis_cli
{
	my ($self, $i, @args) = @_;
	my $port = $self->{ports}[$i];
	my ($out, $err) = ('', '');
	my @auth = defined $self->{password}
	  ? ('--no-auth-warning', '-a', $self->{password}) : ();
	my $tls = $self->{tls};
	my @tls = $tls
	  ? ('--tls', '--cacert', $tls->{ca}, '--cert', $tls->{client_cert}, '--key', $tls->{client_key})
	  : ();
	IPC::Run::run([ $CLI, '-h', '127.0.0.1', '-p', $port, @tls, @auth, @args ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(30));
	$out .= $err;
	chomp $out;
	return $out;
}

# The same command on every master: a list of outputs.
sub redis_all
{
	my ($self, @args) = @_;
	return map { $self->redis_cli($_, @args) } 0 .. $self->count - 1;
}

# Number of masters where KEY exists, once it equals EXPECT or after SECONDS (default 3).
# Calls return once a majority decided, so the other masters may apply the same
# request a moment later (or, on a loaded machine, much later): poll rather than race.
# A request never sent still shows, as its keys live for their whole TTL.
sub holding
{
	my ($self, $key, $expect, $seconds) = @_;
	my $n;
	my $t0 = time;
	wait_until(
		$seconds // 3,
		sub {
			$n = grep { $_ eq '1' } $self->redis_all('EXISTS', $key);
			return !defined $expect || $n == $expect;
		});
	my $waited = time - $t0;
	note sprintf("EXISTS %s: %d masters, after %.3f s", $key, $n, $waited)
	  if $waited > 0.1;
	return $n;
}

# A test: no key is left on any master (DBSIZE polled for up to 5 s, as the slower
# masters may apply a release a moment after the call returned).
sub no_keys_left
{
	my ($self, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @n = $self->wait_all(5, sub { !grep { $_ ne '0' } @_ }, 'DBSIZE');
	my $ok = is(join(',', @n), join(',', ('0') x $self->count),
		$what // 'no keys left on any master');
	diag('keys left on master 0: ' . join(' ', map { s/([^ -~])/sprintf('\\x%02x', ord $1)/ger }
		split /\n/, $self->redis_cli(0, 'KEYS', '*'))) unless $ok;
	return $ok;
}

# Calls of the commands CMDS (lower case; default the script commands EVAL and EVALSHA)
# that each master has processed so far, including refused ones: a list.  Compare with
# wait_calls to know that every master has processed a request (whatever its result)
# before checking that it left someone else's key alone.
sub calls
{
	my ($self, @cmds) = @_;
	return $self->calls_at([ 0 .. $self->count - 1 ], @cmds);
}

# The same for the masters listed in MASTERS (a list ref of indexes) only: a frozen
# master would not answer INFO.
sub calls_at
{
	my ($self, $masters, @cmds) = @_;
	@cmds = qw(eval evalsha eval_ro evalsha_ro) unless @cmds;
	my $names = join('|', map { quotemeta } @cmds);
	my @n;
	for my $i (@$masters)
	{
		my $info = $self->redis_cli($i, 'INFO', 'commandstats');
		my $n = 0;
		while ($info =~ /^cmdstat_(?:$names):calls=(\d+)(?:.*?rejected_calls=(\d+))?/mg)
		{
			$n += $1 + ($2 // 0);
		}
		push @n, $n;
	}
	return @n;
}

# Waits up to 10 s until every master has processed more calls of CMDS (as for calls)
# than in BEFORE (a list from calls); true when they all have.
sub wait_calls
{
	my ($self, $before, @cmds) = @_;
	my @now;
	my $ok = wait_until(
		10,
		sub {
			@now = $self->calls(@cmds);
			return !grep { $now[$_] <= $before->[$_] } 0 .. $#now;
		});
	note "calls of @{[ @cmds ? \"@cmds\" : 'scripts' ]} per master: before @$before, now @now";
	return $ok;
}

# Calls of CMDS (as for calls) once every master has processed none for 0.5 s (at most
# 10 s): a list.  For a count taken before a step, while earlier steps may still have
# commands on their way (what a call decided at quorum did not wait for: a slot given
# back, an undo).
sub settled_calls
{
	my ($self, @cmds) = @_;
	my @last = $self->calls(@cmds);
	my $since = time;
	my $t0 = time;
	while (time - $since < 0.5 && time - $t0 < 10)
	{
		usleep(50_000);
		my @now = $self->calls(@cmds);
		next if join(',', @now) eq join(',', @last);
		@last = @now;
		$since = time;
	}
	return @last;
}

# The same for the release and extend scripts.
sub script_calls { my ($self) = @_; return $self->calls; }
sub wait_scripts { my ($self, $before) = @_; return $self->wait_calls($before); }

# Polls the outputs of a redis-cli command on every master until CODE, given the list of
# outputs, returns true, or SECONDS pass; returns the last outputs.
sub wait_all
{
	my ($self, $seconds, $code, @args) = @_;
	my @out;
	wait_until(
		$seconds,
		sub {
			@out = $self->redis_all(@args);
			return $code->(@out);
		});
	return @out;
}

# Runs QUERY in SESSION while the masters FROZEN (a list ref of indexes) are frozen with
# SIGSTOP, and resumes them once every other master has processed more calls of CMDS (as
# for calls) than before, so that the query's request is out, and MS milliseconds more
# have passed: their replies then come at least MS ms after the request went out.
# Returns (stdout, stderr, sent), sent false when the other masters had not processed
# the request within 30 s.
sub answer_late
{
	my ($self, $frozen, $ms, $session, $query, @cmds) = @_;
	my %is_frozen = map { $_ => 1 } @$frozen;
	my @others = grep { !$is_frozen{$_} } 0 .. $self->count - 1;
	my @before = $self->calls_at(\@others, @cmds);
	$self->stop($_) for @$frozen;
	$session->start($query);
	my $sent = wait_until(
		30,
		sub {
			my @now = $self->calls_at(\@others, @cmds);
			return !grep { $now[$_] <= $before[$_] } 0 .. $#now;
		});
	usleep($ms * 1000);
	$self->cont($_) for @$frozen;
	my ($out, $err) = $session->finish;
	return ($out, $err, $sent);
}

# Kills master I with SIGKILL and waits until it is gone.
sub kill9
{
	my ($self, $i) = @_;
	my $pid = $self->{pids}[$i] or return;
	note "SIGKILL Redis master $i (port $self->{ports}[$i], pid $pid)";
	kill 'KILL', $pid;
	_wait_gone($pid) or die "Redis master $i (pid $pid) survived SIGKILL";
	$self->{pids}[$i] = undef;
	return;
}

# Freezes master I with SIGSTOP: it keeps its socket but answers nothing.
sub stop
{
	my ($self, $i) = @_;
	my $pid = $self->{pids}[$i] or die "Redis master $i is not running";
	note "SIGSTOP Redis master $i (port $self->{ports}[$i], pid $pid)";
	kill 'STOP', $pid;
	return;
}

# Resumes master I after stop.
sub cont
{
	my ($self, $i) = @_;
	my $pid = $self->{pids}[$i] or die "Redis master $i is not running";
	note "SIGCONT Redis master $i (port $self->{ports}[$i], pid $pid)";
	kill 'CONT', $pid;
	return;
}

# Freezes master I now and resumes it after MS milliseconds, from a child process;
# returns the child's PID (waitpid it).
sub freeze_for
{
	my ($self, $i, $ms) = @_;
	my $pid = $self->{pids}[$i] or die "Redis master $i is not running";
	$self->stop($i);
	my $child = fork() // die "fork: $!";
	if ($child == 0)
	{
		usleep($ms * 1000);
		kill 'CONT', $pid;
		POSIX::_exit(0);
	}
	return $child;
}

# Kills master I if it runs, and starts it again on the same port (empty: no persistence).
sub restart
{
	my ($self, $i) = @_;
	if (my $pid = $self->{pids}[$i])
	{
		kill 'CONT', $pid;
		$self->kill9($i);
	}
	note "starting Redis master $i again on port $self->{ports}[$i]";
	$self->_start($i);
	return;
}

# Stops every master, by PID.
sub stop_all
{
	my ($self) = @_;
	for my $i (0 .. $#{ $self->{pids} })
	{
		my $pid = $self->{pids}[$i] or next;
		kill 'CONT', $pid;
		kill 'KILL', $pid;
		_wait_gone($pid);
		$self->{pids}[$i] = undef;
	}
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($., $@, $!, $^E, $?);
	$self->stop_all;
}

END
{
	my $rc = $?;
	$_->stop_all for @all_masters;
	$? = $rc;
}

# A started node with redlock.servers naming REDIS's masters, restart_after_crash on, and
# the extension created in the postgres database.  EXTRA_CONF is appended to
# postgresql.conf; $RedisMasters::DEBUG_CONF keeps redlock's per-request DEBUG1 lines
# (each master's outcome) in the server log.
sub redlock_node
{
	my ($name, $redis, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	my $guc = $redis->servers_guc;
	$node->append_conf('postgresql.conf', qq{
redlock.servers = '$guc'
# The masters were just started without AOF: with the quarantine on they would be
# left out of every quorum for its length (070 turns it on).
redlock.restart_quarantine = 0
restart_after_crash = on
log_statement = none
lc_messages = 'C'
});
	$node->append_conf('postgresql.conf', $extra_conf) if defined $extra_conf;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION redlock');
	return $node;
}

# Clusters named NAMES (cluster_name too) on REDIS's masters, the library preloaded (so
# the worker runs and the counters and the patience are cluster-wide), ROOMY_CONF's
# timeouts plus EXTRA_CONF (may be undef); returns their nodes, started, in NAMES' order.
sub preloaded_clusters
{
	my ($redis, $extra_conf, @names) = @_;
	return map {
		redlock_node($_, $redis,
			$ROOMY_CONF . "shared_preload_libraries = 'redlock'\ncluster_name = '$_'\n" . ($extra_conf // ''))
	} @names;
}

# Passes when NODE's server log shows no backend that died of a signal other than
# SIGKILL (which tests send on purpose).
sub no_crash
{
	my ($node) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;

	# Let the backends of closed sessions finish exiting (releasing their locks) first.
	wait_until(
		20,
		sub {
			my $n = $node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
				  . " AND pid <> pg_backend_pid()");
			return $n eq '0';
		});
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
	my @crashes = $log =~ /^(.*terminated by signal (?!9:).*\n(?:.*DETAIL:.*\n)?)/mg;
	is(join('', @crashes), '', 'no backend crashed (server log)');
	return;
}

1;
