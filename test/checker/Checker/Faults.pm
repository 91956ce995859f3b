# test/checker/Checker/Faults.pm: the checker's fault injector, Checker::Faults: the object
# a scenario's fault schedule (Checker/Schedules.pm) drives while the clients run.
#
# $f->at(SECONDS) waits until that time after the start; $f->kill(I...), $f->start(I...),
# $f->stop(I...), $f->cont(I...) act on masters; $f->delay(MIN, MAX) sets the proxies'
# delay; $f->worker_term, worker_stop and worker_cont act on the auto-extend worker.  Each
# action is logged with its time, and the time between actions is labelled with the state
# of the masters ("2 killed", "1 stopped", ...), so liveness can be reported per state.
# Checker::run makes one per run and puts everything back with $f->heal.  Loaded by
# Checker.pm, which also loads RedisMasters; delay and servers call back its set_delay,
# set_servers and servers_of.

package Checker::Faults;

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use Test::More ();
use Time::HiRes qw(time sleep);

sub new
{
	my ($class, %o) = @_;
	return bless {
		%o,
		t0 => time,
		events => [],
		down => {},
		stopped => {},
		slow => '',
		counts => {},
		servers_label => $o{servers} ? _servers_label(@{ $o{servers} }) : '',
	}, $class;
}

sub _servers_label { return 'servers ' . join(',', @_); }

# Seconds since the start of the run.
sub now
{
	my ($self) = @_;
	return time - $self->{t0};
}

# Sleeps until T seconds after the start (at most until the end of the run).
sub at
{
	my ($self, $t) = @_;
	$t = $self->{seconds} if $t > $self->{seconds};
	my $d = $self->{t0} + $t - time;
	sleep($d) if $d > 0;
	return;
}

sub _list { return join(',', @_); }

# The state label: which masters are killed, stopped, slow.
sub _state
{
	my ($self) = @_;
	my @parts;
	my @down = sort keys %{ $self->{down} };
	my @stopped = sort keys %{ $self->{stopped} };
	push @parts, scalar(@down) . ' killed' if @down;
	push @parts, scalar(@stopped) . ' stopped' if @stopped;
	push @parts, $self->{slow} if $self->{slow};
	push @parts, 'worker stopped' if $self->{worker_stopped};
	push @parts, scalar(@{ $self->{fast} }) . " fast ($self->{fast_factor}x)"
	  if @{ $self->{fast} // [] };
	push @parts, scalar(keys %{ $self->{paused} }) . ' holders paused'
	  if %{ $self->{paused} // {} };
	push @parts, 'worker down' if $self->{worker_down};
	my $state = @parts ? join(' + ', @parts) : 'all up';
	$state = "$self->{servers_label}: $state" if $self->{servers_label};
	return $state;
}

# Logs TEXT at time T (seconds since start, default now) with the state after it.
sub _mark
{
	my ($self, $text, $t) = @_;
	$t //= $self->now;
	push @{ $self->{events} }, [ $t, $text, $self->_state ];
	Test::More::note(sprintf('checker: +%.3f s %s', $t, $text));
	return;
}

# SIGKILLs masters I... at the same moment, then waits until they are gone.
sub kill
{
	my ($self, @i) = @_;
	my $redis = $self->{redis};
	my @pids = grep { defined } map { $redis->{pids}[$_] } @i;
	my $t = $self->now;
	CORE::kill('KILL', @pids);
	$redis->kill9($_) for @i;    # waits, and forgets the pids
	$self->{down}{$_} = 1 for @i;
	delete $self->{stopped}{$_} for @i;
	$self->_mark('kill -9 master ' . _list(@i), $t);
	return;
}

# Starts masters I... again (empty, or from their AOF); logged once they answer.
sub start
{
	my ($self, @i) = @_;
	$self->{redis}->restart($_) for @i;
	$self->_configure(@i);
	delete $self->{down}{$_} for @i;
	$self->_mark('master ' . _list(@i) . ' up again');
	return;
}

# The scenario's Redis settings (redis_config) on masters I..., which start without them.
sub _configure
{
	my ($self, @i) = @_;
	my $conf = $self->{redis_config} // {};
	for my $i (@i)
	{
		$self->{redis}->redis_cli($i, 'CONFIG', 'SET', $_, $conf->{$_}) for sort keys %$conf;
	}
	return;
}

# Runs CODE->(I) for each master I... in a child process of its own, all at the same
# moment, and waits for them all; dies with "master I WHAT" when one fails.
sub _on_masters_at_once
{
	my ($self, $what, $code, @i) = @_;
	require POSIX;
	my %kids;
	for my $i (@i)
	{
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			# _exit: no END block or destructor of the parent's objects in the child.
			my $ok = eval { $code->($i); 1 };
			POSIX::_exit($ok ? 0 : 1);
		}
		$kids{$pid} = $i;
	}
	for my $pid (keys %kids)
	{
		waitpid($pid, 0);
		die "master $kids{$pid} $what" if $?;
	}
	return;
}

# Starts masters I... again at the same moment (start does them one after another, which
# a loaded machine stretches to seconds); logged once all answer.
sub start_at_once
{
	my ($self, @i) = @_;
	my $redis = $self->{redis};
	$self->_on_masters_at_once('did not start again', sub { $redis->_start($_[0]) }, @i);
	$redis->{pids}[$_] = RedisMasters::_read_pid("$redis->{dir}/redis$_/redis.pid") for @i;
	$self->_configure(@i);
	delete $self->{down}{$_} for @i;
	$self->_mark('master ' . _list(@i) . ' up again');
	return;
}

# Empties masters I... at once (FLUSHALL): the data loss of a restart without
# persistence, without the seconds a restart takes on a loaded machine.
sub wipe
{
	my ($self, @i) = @_;
	my $redis = $self->{redis};
	my $t = $self->now;
	$self->_on_masters_at_once('was not emptied (FLUSHALL)',
		sub { $redis->redis_cli($_[0], 'FLUSHALL') }, @i);
	$self->_mark('FLUSHALL master ' . _list(@i), $t);
	return;
}

sub stop
{
	my ($self, @i) = @_;
	my @pids = map { $self->{redis}{pids}[$_] // die "master $_ is not running" } @i;
	CORE::kill('STOP', @pids);
	$self->{stopped}{$_} = 1 for @i;
	$self->{counts}{'masters frozen'} += @i;
	$self->_mark('SIGSTOP master ' . _list(@i));
	return;
}

sub cont
{
	my ($self, @i) = @_;
	my @pids = map { $self->{redis}{pids}[$_] // die "master $_ is not running" } @i;
	CORE::kill('CONT', @pids);
	delete $self->{stopped}{$_} for @i;
	$self->_mark('SIGCONT master ' . _list(@i));
	return;
}

# Sets every proxy's delay to MIN..MAX ms each way (0, 0: none).
sub delay
{
	my ($self, $min, $max) = @_;
	Checker::set_delay($_, $min, $max) for @{ $self->{proxies} };
	my $n = @{ $self->{proxies} };
	$self->{slow} = $max > 0 ? "$n slow $min-${max}ms" : '';
	$self->_mark($max > 0 ? "delay $min-$max ms each way on $n masters" : 'delay off');
	return;
}

# Points redlock.servers at masters I... (ALTER SYSTEM + pg_reload_conf()), logged once a
# new session sees it.  Backends take it in between two commands.
sub servers
{
	my ($self, @i) = @_;
	Checker::set_servers($self->{node}, Checker::servers_of($self->{redis}, @i));
	$self->{servers_label} = _servers_label(@i);
	$self->{counts}{'server list changes'}++;
	$self->_mark('redlock.servers = masters ' . _list(@i));
	return;
}

# One pg_reload_conf() (the configuration files unchanged).
sub reload
{
	my ($self) = @_;
	$self->{psql} //= PsqlSession::session($self->{node});
	my ($out, $err) = $self->{psql}->query('SELECT pg_reload_conf()');
	die "pg_reload_conf() failed: $err" unless $out eq 't';
	$self->{counts}{'pg_reload_conf()'}++;
	return;
}

# Sends one Redis command to master I over a fresh connection, waiting at most 0.5 s for
# its reply; skips a master that is killed or stopped.  Returns the reply line or undef.
# Each command sent is counted in the run's fault counts.
sub redis
{
	my ($self, $i, @args) = @_;
	my $reply = $self->_redis_command($i, @args);
	$self->{counts}{ join(' ', @args) }++ if defined $reply;
	return $reply;
}

sub _redis_command
{
	my ($self, $i, @args) = @_;
	return undef if $self->{down}{$i} || $self->{stopped}{$i};
	my $port = ($self->{redis}->ports)[$i];
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
		Proto => 'tcp', Timeout => 0.5) or return undef;
	my $cmd = '*' . @args . "\r\n" . join('', map { '$' . length($_) . "\r\n$_\r\n" } @args);
	print $sock $cmd;
	my $sel = IO::Select->new($sock);
	my $reply;
	$reply = <$sock> if $sel->can_read(0.5);
	close $sock;
	return $reply;
}

# SIGSTOPs up to N backends that are inside their critical section (checker_guard), as a
# GC pause, swapping or a stopped VM would pause a lock holder; resume_holders continues
# them.  Waits up to 0.5 s for a holder to be inside.  Returns how many it paused.
sub pause_holders
{
	my ($self, $n) = @_;
	my @pids;
	PsqlSession::wait_until(
		0.5,
		sub {
			@pids = grep { length } split /\n/, $self->{node}->safe_psql('postgres',
				"SELECT holder FROM checker_guard WHERE holder IS NOT NULL"
				  . " ORDER BY random() LIMIT $n");
		}) or return 0;
	CORE::kill('STOP', @pids);
	$self->{paused}{$_} = 1 for @pids;
	$self->{counts}{'holders paused'} += @pids;
	$self->_mark('SIGSTOP holder backend ' . _list(@pids));
	return scalar @pids;
}

# An operator evicts a stuck holder: SIGSTOPs up to N backends inside their critical
# section (checker_guard), then force-releases their resources (redlock_force_release,
# from a session of the node's superuser); resume_holders continues them, to work on
# with their old token.  Returns how many it evicted.
sub force_release_holders
{
	my ($self, $n) = @_;
	my @rows = grep { length } split /\n/, $self->{node}->safe_psql('postgres',
		"SELECT holder || ' ' || resource FROM checker_guard WHERE holder IS NOT NULL"
		  . " ORDER BY random() LIMIT $n");
	return 0 unless @rows;
	for my $row (@rows)
	{
		my ($pid, $resource) = split / /, $row, 2;
		CORE::kill('STOP', $pid);
		$self->{paused}{$pid} = 1;
		$self->{node}->safe_psql('postgres', "SELECT redlock_force_release('$resource')");
	}
	$self->{counts}{'stuck holders force-released'} += @rows;
	$self->_mark('SIGSTOP and force release of ' . _list(@rows));
	return scalar @rows;
}

sub resume_holders
{
	my ($self) = @_;
	my @pids = sort keys %{ $self->{paused} // {} } or return;
	CORE::kill('CONT', @pids);
	$self->{paused} = {};
	$self->_mark('SIGCONT holder backend ' . _list(@pids));
	return;
}

# A clock that runs FACTOR times too fast on masters I..., as seen from outside: every
# fast_clock_tick takes (FACTOR - 1) x the real time since the last tick off the PTTL of
# every checker key on those masters (deleting a key whose PTTL it reaches), which is what
# such a clock does to expiry.  Fencing counter keys (0xFF fence:...) are left alone: they
# live 30 days, which a fast clock shortens by hours at most in a run.
my $FAST_CLOCK_LUA = <<'LUA';
local n = 0
for _, k in ipairs(redis.call('keys', ARGV[1])) do
	local p = redis.call('pttl', k)
	if p > 0 then
		if p <= tonumber(ARGV[2]) then redis.call('del', k)
		else redis.call('pexpire', k, p - tonumber(ARGV[2])) end
		n = n + 1
	end
end
return n
LUA

sub fast_clock
{
	my ($self, $factor, @i) = @_;
	$self->{fast} = [@i];
	$self->{fast_factor} = $factor;
	$self->{fast_last} = time;
	$self->{fast_owed_ms} = 0;
	$self->_mark("clock of master " . _list(@i) . " runs ${factor}x");
	return;
}

sub fast_clock_tick
{
	my ($self) = @_;
	my $now = time;
	$self->{fast_owed_ms} += ($self->{fast_factor} - 1) * ($now - $self->{fast_last}) * 1000;
	$self->{fast_last} = $now;
	my $ms = int($self->{fast_owed_ms});
	return if $ms < 1;
	$self->{fast_owed_ms} -= $ms;
	for my $i (@{ $self->{fast} })
	{
		my $reply = $self->_redis_command($i, 'EVAL', $FAST_CLOCK_LUA, 0, 'checker-*', $ms)
		  // next;
		die "fast clock on master $i: $reply" unless $reply =~ /^:(\d+)/;
		$self->{counts}{'keys shortened by a fast clock'} += $1;
	}
	$self->{counts}{'fast clock ticks'}++;
	return;
}

# Calls CODE every PERIOD seconds until T seconds after the start (or the end of the run).
sub every
{
	my ($self, $period, $t, $code) = @_;
	$t = $self->{seconds} if $t > $self->{seconds};
	while ($self->now + $period < $t)
	{
		my $next = $self->now + $period;
		$code->();
		$self->at($next);
	}
	$self->at($t);
	return;
}

# The PID of the auto-extend worker of NODE (default the run's node; pg_stat_activity),
# or '' while none runs.
sub worker_pid
{
	my ($self, $node) = @_;
	# One session a node for the run: a new connection can take seconds on a loaded machine.
	my $psql;
	if (!$node || $node == $self->{node})
	{
		$psql = $self->{psql} //= PsqlSession::session($self->{node});
	}
	else
	{
		$psql = $self->{node_psql}{ $node->name } //= PsqlSession::session($node);
	}
	my ($out, $err) = $psql->query(
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'redlock auto-extend'");
	die "could not look up the auto-extend worker: $err" if $err;
	return $out;
}

# SIGTERMs the auto-extend worker, then waits (up to 10 s) until the postmaster has
# started another; logs both, and keeps the gap in {worker_gaps} (seconds).
sub worker_term
{
	my ($self) = @_;
	my $pid = $self->worker_pid or die 'no auto-extend worker runs';
	my $t = $self->now;
	CORE::kill('TERM', $pid);
	$self->{worker_down} = 1;
	$self->_mark("SIGTERM worker (pid $pid)", $t);
	my $new;
	PsqlSession::wait_until(10, sub { $new = $self->worker_pid; $new ne '' && $new ne $pid })
	  or die "the auto-extend worker (pid $pid) was not started again";
	delete $self->{worker_down};
	my $gap = $self->now - $t;
	push @{ $self->{worker_gaps} }, $gap;
	$self->{counts}{'worker restarts'}++;
	$self->_mark(sprintf('worker back (pid %d), %.2f s after SIGTERM', $new, $gap));
	return;
}

# Freezes the auto-extend worker (SIGSTOP) of NODE (default the run's node); worker_cont
# resumes it.  Runs with several nodes (the fdw scenarios) may freeze each one's worker.
sub worker_stop
{
	my ($self, $node) = @_;
	my $pid = $self->worker_pid($node) or die 'no auto-extend worker runs';
	CORE::kill('STOP', $pid);
	my $on = _worker_key($self, $node);
	$self->{worker_stopped}{$on} = $pid;
	$self->{counts}{'worker frozen'}++;
	$self->_mark("SIGSTOP worker (pid $pid" . ($on eq '' ? '' : " on $on") . ')');
	return;
}

sub worker_cont
{
	my ($self, $node) = @_;
	my $on = _worker_key($self, $node);
	my $pid = delete $self->{worker_stopped}{$on} or return;
	delete $self->{worker_stopped} unless %{ $self->{worker_stopped} };
	CORE::kill('CONT', $pid);
	$self->_mark("SIGCONT worker (pid $pid" . ($on eq '' ? '' : " on $on") . ')');
	return;
}

# The key of NODE's worker in {worker_stopped}: '' for the run's node, else its name.
sub _worker_key
{
	my ($self, $node) = @_;
	return !$node || $node == $self->{node} ? '' : $node->name;
}

# Puts everything back: masters continued and started, proxies without delay, the
# worker continued.
sub heal
{
	my ($self) = @_;
	for my $on (sort keys %{ $self->{worker_stopped} // {} })
	{
		my $pid = delete $self->{worker_stopped}{$on};
		CORE::kill('CONT', $pid);
		$self->_mark("SIGCONT worker (pid $pid" . ($on eq '' ? '' : " on $on") . ')');
	}
	delete $self->{worker_stopped};
	$self->resume_holders;
	if (@{ $self->{fast} // [] })
	{
		$self->{fast} = [];
		$self->_mark('clocks right again');
	}
	$self->cont(sort keys %{ $self->{stopped} }) if %{ $self->{stopped} };
	$self->start(sort keys %{ $self->{down} }) if %{ $self->{down} };
	$self->delay(0, 0) if $self->{slow};
	if ($self->{psql})
	{
		$self->{psql}->quit;
		delete $self->{psql};
	}
	$_->quit for values %{ delete $self->{node_psql} // {} };
	return;
}

# Sets redlock.key_prefix to PREFIX (undef: RESET) by ALTER SYSTEM and pg_reload_conf() on
# the node (and on every node of {nodes}, for more clusters), then waits until a new session
# of each sees it.  Backends take it in between two commands.
sub key_prefix
{
	my ($self, $prefix) = @_;
	my $set = defined $prefix
	  ? "ALTER SYSTEM SET redlock.key_prefix = '$prefix'"
	  : 'ALTER SYSTEM RESET redlock.key_prefix';
	for my $node (@{ $self->{nodes} // [ $self->{node} ] })
	{
		# A session kept for the run (a new connection can take seconds on a loaded
		# machine); it reads the new value at its next command once the postmaster
		# has passed the reload on.
		my $psql = $self->{prefix_psql}{ $node->name } //= PsqlSession::session($node);
		my ($out, $err) = $psql->query($set);
		($out, $err) = $psql->query('SELECT pg_reload_conf()') unless $err;
		die "could not change redlock.key_prefix: $err" if $err;
		PsqlSession::wait_until(10,
			sub { ($psql->query('SHOW redlock.key_prefix'))[0] eq ($prefix // '') })
		  or die 'redlock.key_prefix did not change to ' . ($prefix // "''");
		if (!defined $prefix)
		{
			$psql->quit;
			delete $self->{prefix_psql}{ $node->name };
		}
	}
	$self->{counts}{'key prefix changes'}++;
	$self->_mark('redlock.key_prefix = ' . ($prefix // "''"));
	return;
}

1;
