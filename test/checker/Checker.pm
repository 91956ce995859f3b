# test/checker/Checker.pm: the mutual-exclusion checker's engine: it prepares a node and
# runs one scenario on it, the clients in the background and the fault schedule in this
# process.
#
# pgbench drives CLIENTS sessions that loop on CALL checker_attempt(...) (checker.sql) over
# a few resources; meanwhile a fault schedule (kill -9 / restart, SIGSTOP / SIGCONT, added
# latency through delayproxy.pl) runs in this process.  Afterwards the attempts and
# violations tables give the figures.  Used by test/t/010_checker_mutual_exclusion.pl to 015 and 060, and
# long.pl (run-long).  With permits (semaphores, redlock_acquire_permit) the clients run
# CALL checker_permit_attempt(...), whose holders count each other instead of claiming a
# guard row.
#
#   my $redis = RedisMasters->new(5);
#   my $node  = RedisMasters::redlock_node('checker', $redis, Checker::node_conf());
#   Checker::setup($node);
#   my $r = Checker::run(node => $node, redis => $redis, Checker::scenario('sigstop'),
#                        seconds => 10);
#   print Checker::describe($r);     # $r->{violations}, {acquired}, {attempts}, ...
#
# The long-job scenarios (issue 8: locks kept alive by the auto-extend worker) need a node
# made with node_conf(preload => 1), and drive psql clients instead of pgbench (see run).
#
# Here: node_conf, setup, set_servers, the delay proxies, run_scenario and run, the psql
# clients of the long jobs.  The other parts, one job a file:
#   Checker/Scenarios.pm  the scenarios: each one's run() options (scenario, lease_scenarios,
#                         permit_scenarios, set_scenarios, shared_scenarios)
#   Checker/Schedules.pm  the fault schedules the scenarios share
#   Checker/Faults.pm     the fault injector a schedule drives (Checker::Faults)
#   Checker/Report.pm     a run's figures, their description and tables, and the
#                         Test::More checks of a run (describe, check_run, check_fence, ...)
# Their public subs are imported here, so callers name them all Checker::...

package Checker;

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use JSON::PP ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More ();
use Time::HiRes qw(time sleep);

use PsqlSession;
use RedisMasters;

use Checker::Faults;
use Checker::Report qw(check_fence check_permits check_run control_shown describe fence_table_header
  _watch_figures
  fence_table_line job_table_header job_table_line permit_table_header permit_table_line
  table_header table_line _fence_figures _job_figures _lease_figures _permit_figures
  _shared_figures _rows
  _state_windows);
use Checker::Scenarios qw(fdw_scenarios lease_scenarios permit_scenarios scenario
  set_scenarios shared_scenarios);

my $DIR = File::Spec->rel2abs(dirname(__FILE__));
my @all_proxies;

# postgresql.conf lines for a checker node: room for the clients, and short retry delays
# so that a wait_ms of a few tens of ms means a few retries.  With preload => 1, for the
# long-job scenarios: redlock in shared_preload_libraries (the auto-extend worker), and
# commit timestamps, which tell when each of a job's writes committed.
sub node_conf
{
	my (%o) = @_;
	my $conf = "max_connections = 64\nredlock.retry_delay = 5\nredlock.retry_jitter = 10\n";
	$conf .= "shared_preload_libraries = 'redlock'\ntrack_commit_timestamp = on\n"
	  if $o{preload};
	return $conf;
}

# Creates the checker's tables and procedure in NODE's postgres database.
sub setup
{
	my ($node) = @_;
	$node->safe_psql('postgres',
		"SET client_min_messages = warning;\n" . slurp_file("$DIR/checker.sql"));
	return;
}

# Points NODE's redlock.servers at GUC (ALTER SYSTEM + reload) and waits until a new
# session sees it.
sub set_servers
{
	my ($node, $guc) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET redlock.servers = '$guc'; SELECT pg_reload_conf();");
	PsqlSession::wait_until(10,
		sub { $node->safe_psql('postgres', 'SHOW redlock.servers') eq $guc })
	  or die "redlock.servers did not change to $guc";
	return;
}

# Starts a delay proxy in front of 127.0.0.1:TARGET_PORT; returns { port, ctl, handle }.
sub start_proxy
{
	my ($target_port) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir('proxy');
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $p = { port => $port, target => $target_port, ctl => "$dir/delay" };
	_write_file($p->{ctl}, "0:0\n");
	$p->{handle} = IPC::Run::start(
		[
			$^X, "$DIR/delayproxy.pl", '--listen', $port, '--target', $target_port,
			'--control', $p->{ctl}, '--pidfile', "$dir/pid", '--max-seconds', 3600
		],
		'<', \undef, '>', "$dir/log", '2>&1');
	PsqlSession::wait_until(10, sub { -s "$dir/pid" })
	  or die "delay proxy for port $target_port did not start; see $dir/log";
	push @all_proxies, $p;
	return $p;
}

# Sets proxy P's delay, MIN..MAX ms each way.
sub set_delay
{
	my ($p, $min, $max) = @_;
	_write_file($p->{ctl}, "$min:$max\n");
	return;
}

sub stop_proxy
{
	my ($p) = @_;
	return unless $p->{handle};
	$p->{handle}->signal('TERM');
	eval { $p->{handle}->finish; 1 } or $p->{handle}->kill_kill;
	delete $p->{handle};
	return;
}

END
{
	my $rc = $?;
	for my $p (@all_proxies)
	{
		eval { stop_proxy($p) };
	}
	$? = $rc;
}

sub _write_file
{
	my ($file, $text) = @_;
	open(my $fh, '>', "$file.tmp") or die "cannot write $file: $!";
	print $fh $text;
	close $fh;
	rename("$file.tmp", $file) or die "cannot rename $file.tmp: $!";
	return;
}

# ---- running a named scenario ----

# The LD_PRELOAD shim that sets a process's wall clock off (skewclock.c), built once.
my $SKEW_SHIM;

sub skew_shim
{
	return $SKEW_SHIM if $SKEW_SHIM;
	my $dir = PostgreSQL::Test::Utils::tempdir('skewclock');
	system('cc', '-shared', '-fPIC', '-O2', '-o', "$dir/skewclock.so", "$DIR/skewclock.c",
		'-ldl') == 0
	  or die "could not build $DIR/skewclock.c";
	return $SKEW_SHIM = "$dir/skewclock.so";
}

# Restarts NODE with the backends of an odd process id SKEW_MS off (wall clock), or, with
# SKEW_MS 0, as it was.
sub skew_callers
{
	my ($node, $skew_ms) = @_;
	my %env = $skew_ms
	  ? (LD_PRELOAD => skew_shim(), RL_SKEW_MS => $skew_ms, RL_SKEW_PIDS => 'odd')
	  : ();
	local @ENV{ keys %env } = values %env;
	$node->restart;
	return;
}

# The acquisitions of run R counted while the masters were in STATE (a fault window's
# name, as in R's states), or 0.
sub acquired_in
{
	my ($r, $state) = @_;
	my ($w) = grep { $_->[0] eq $state } @{ $r->{states} };
	return $w ? $w->[2] : 0;
}

# Runs scenario NAME on NODE for SECONDS (run_scenario, the masters from SETS) and checks
# what every run must pass (check_run); a negative control that did not show every
# violation it looks for (control_shown) runs again, up to $o{runs} runs in all (default
# 1).  Notes the description; returns the figures.  For the short TAP files.
sub run_checked
{
	my ($node, $sets, $name, $seconds, %o) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = run_scenario($node, $sets, $name, seconds => $seconds);
	for (my $run = 2;
		($r->{expect_violations} || $r->{expect_watch_unexplained}) && !control_shown($r)
		  && $run <= ($o{runs} // 1);
		$run++)
	{
		Test::More::note("$name: not every violation the control looks for in this run"
			  . ($r->{acquired} ? '' : ' (nothing acquired: a loaded machine outran the TTL)')
			  . "; run $run of at most $o{runs}");
		$r = run_scenario($node, $sets, $name, seconds => $seconds);
	}
	Test::More::note(describe($r));
	check_run($r);
	return $r;
}

# The short run of a kind of lock whose scenarios are named KIND-plain, KIND-kill,
# KIND-sigstop, KIND-latency, KIND-majority-restart-aof, KIND-extend and the controls
# unsafe-KIND-no-extend, unsafe-KIND-short-ttl, unsafe-KIND-majority-restart (sets,
# shared): each run checked (run_checked) for the seconds its faults need, holds
# acquired while 2 masters were down and while one was frozen, extensions made and
# work done past the TTL on them; then the table.  ONLY: a hash of the scenario names
# to run (empty: all).  For test/t/016 and 017.
sub run_kind_suite
{
	my ($node, $sets, $kind, $only) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @table;
	my $one = sub {
		my ($name, $seconds, %o) = @_;
		return if %$only && !$only->{$name};
		my $r = run_checked($node, $sets, $name, $seconds, %o);
		push @table, $r;
		return $r;
	};
	$one->("$kind-plain", 4);
	if (my $r = $one->("$kind-kill", 6))
	{
		Test::More::cmp_ok(acquired_in($r, '2 killed'), '>', 0,
			"$kind-kill: holds were acquired while 2 of 5 masters were down");
	}
	if (my $r = $one->("$kind-sigstop", 5))
	{
		Test::More::cmp_ok(acquired_in($r, '1 stopped'), '>', 0,
			"$kind-sigstop: holds were acquired while a master was frozen");
	}
	$one->("$kind-latency", 4);
	$one->("$kind-majority-restart-aof", 6);
	if (my $r = $one->("$kind-extend", 5))
	{
		Test::More::cmp_ok($r->{extends}, '>', 0, "$kind-extend: holds were extended ($r->{extends})");
		Test::More::cmp_ok($r->{acquired} - $r->{gave_up}, '>', 0,
			"$kind-extend: holders worked past their TTL on the extension ("
			  . ($r->{acquired} - $r->{gave_up}) . ", $r->{gave_up} gave up)");
	}
	$one->("unsafe-$kind-no-extend", 3);
	$one->("unsafe-$kind-short-ttl", 3, runs => 3);
	$one->("unsafe-$kind-majority-restart", 6, runs => 2);
	Test::More::diag("\n" . table_header() . join('', map { table_line($_) } @table));
	return;
}

# Runs scenario NAME on NODE with the masters it asks for, from SETS ({ plain => $redis,
# aof => $redis_aof }); starts and stops its delay proxies and points redlock.servers at
# them (or at the masters).  OVERRIDES replace run() options (seconds, clients, ...).
sub run_scenario
{
	my ($node, $sets, $name, %overrides) = @_;
	my %s = scenario($name);
	my $redis = $sets->{ $s{masters} } or die "scenario $name needs $s{masters} masters";
	die "scenario $name needs a node made with node_conf(preload => 1)"
	  if delete $s{preload}
	  && $node->safe_psql('postgres', 'SHOW shared_preload_libraries') !~ /\bredlock\b/;
	my @ports = $redis->ports;
	my @proxies;
	my $guc = $redis->servers_guc;
	if (my $n = delete $s{proxies})
	{
		@proxies = map { start_proxy($ports[$_]) } 0 .. $n - 1;
		$guc = join(',',
			(map { "127.0.0.1:$_->{port}" } @proxies),
			(map { "127.0.0.1:$_" } @ports[ $n .. $#ports ]));
	}
	elsif (my $set = $s{servers})
	{
		$guc = servers_of($redis, @$set);
	}
	set_servers($node, $guc) if $node->safe_psql('postgres', 'SHOW redlock.servers') ne $guc;
	my $restore = delete $s{restart_masters_after};
	my $settings = delete $s{node_settings} // {};
	node_settings($node, $settings);
	skew_callers($node, $s{skew_callers_ms}) if $s{skew_callers_ms};

	# Redis settings for this run only (CONFIG SET on every master, again after each
	# restart), put back afterwards.
	my %saved;
	if (my $conf = $s{redis_config})
	{
		for my $k (sort keys %$conf)
		{
			(undef, $saved{$k}) = split /\n/, $redis->redis_cli(0, 'CONFIG', 'GET', $k);
			$redis->redis_all('CONFIG', 'SET', $k, $conf->{$k});
		}
	}
	my $r = eval { run(node => $node, redis => $redis, %s, %overrides, proxies => \@proxies) };
	my $error = $@;
	stop_proxy($_) for @proxies;
	skew_callers($node, 0) if $s{skew_callers_ms};
	$redis->restart($_) for $restore ? 0 .. $redis->count - 1 : ();
	$redis->redis_all('CONFIG', 'SET', $_, $saved{$_} // '') for sort keys %saved;
	node_settings($node, { map { $_ => undef } keys %$settings });
	die $error unless $r;
	return $r;
}

# Sets NODE's settings from SETTINGS (name => value; undef: back to postgresql.conf's)
# with ALTER SYSTEM and a reload, and waits until a new session sees them: a scenario's
# settings for its run only (run_scenario's node_settings).
sub node_settings
{
	my ($node, $settings) = @_;
	return unless %$settings;
	$node->safe_psql('postgres', join('',
		map { defined $settings->{$_} ? "ALTER SYSTEM SET $_ = '$settings->{$_}';" : "ALTER SYSTEM RESET $_;" }
		  sort keys %$settings) . 'SELECT pg_reload_conf();');
	my $sql = join(' || ', map { "current_setting('$_')" } sort keys %$settings);
	# A reset's target is postgresql.conf's value, which a session sees once the
	# postmaster has read the file again.
	Time::HiRes::usleep(300_000);
	my $want = $node->safe_psql('postgres', "BEGIN; " . join('', map { defined $settings->{$_} ? "SET LOCAL $_ = '$settings->{$_}';" : '' } sort keys %$settings) . "SELECT $sql; COMMIT;");
	PsqlSession::wait_until(10, sub { $node->safe_psql('postgres', "SELECT $sql") eq $want })
	  or die "settings did not take effect: " . join(', ', sort keys %$settings);
	return;
}

# The redlock.servers value naming masters I... of REDIS.
sub servers_of
{
	my ($redis, @i) = @_;
	my @ports = $redis->ports;
	return join(',', map { "127.0.0.1:$ports[$_]" } @i);
}

# ---- a watcher (issue 43) ----

# With WATCH (a scenario's watch: { servers => [master indexes], the watcher's own
# redlock.servers, default the clients'; resources => how many it watches, default the
# clients' RESOURCES }), a session on NODE that watches PREFIX 1.. from before the
# clients start; undef without.
sub _watch_start
{
	my ($node, $redis, $watch, $prefix, $resources) = @_;
	return undef unless $watch;
	my $s = PsqlSession::session($node);
	PsqlSession::sql($s, "SET redlock.servers = '" . servers_of($redis, @{ $watch->{servers} }) . "'")
	  if $watch->{servers};
	my $n = $watch->{resources} // $resources;
	my (undef, $err) = PsqlSession::sql($s,
		"SELECT redlock_watch('$prefix' || g) FROM generate_series(1, $n) g");
	die "checker: the watcher's redlock_watch failed: $err" if $err =~ /ERROR/;
	sleep 0.3;    # the notifier's first look, its baseline
	return $s;
}

# Ends WATCHER's watches once the last events are in, and returns what it heard: a list
# of decoded payloads, in order.
sub _watch_finish
{
	my ($watcher) = @_;
	return [] unless $watcher;
	sleep 0.3;
	my ($out) = PsqlSession::sql($watcher, 'SELECT redlock_unwatch_all()');
	my @heard;
	push @heard, JSON::PP::decode_json($1)
	  while $out =~ /Asynchronous notification "redlock" with payload "(.*)" received from server process/g;
	$watcher->quit;
	return \@heard;
}

# ---- long-job clients ----

# The psql lines of one long-job attempt, a block of a client's script: stop (\q) once the
# run's time (DEADLINE, a timestamptz) is up, else pick a resource, run the job, and end
# it with checker_job_end whatever the job's CALL raised (psql goes on after an error).
sub _job_block
{
	my ($prefix, $resources, $ttl, $wait, $job, $swallow, $deadline) = @_;
	return _lease_job_block(@_) if $job->{roles};
	$deadline //= 'DEADLINE';
	return _permit_job_block($prefix, $resources, $ttl, $wait, $job, $deadline)
	  if $job->{permits};
	return "SELECT clock_timestamp() < '$deadline'::timestamptz AS go,"
	  . " 1 + floor(random() * $resources)::int AS r \\gset\n"
	  . "\\if :go\n"
	  . "CALL checker_job('$prefix' || :r, $ttl, $wait, $job->{xacts}, $job->{steps},"
	  . " $job->{step_ms}, $swallow);\n"
	  . "CALL checker_job_end(:'SQLSTATE', :'LAST_ERROR_MESSAGE');\n"
	  . "\\else\n\\q\n\\endif\n";
}

# The psql lines of one long job on an auto-extended permit (a semaphore of
# $job->{permits}): as _job_block, with checker_permit_job and checker_permit_job_end
# (checker.sql); no client swallows a cancel.  A loss declared after the job's work, while
# checker_permit_job_end runs, cancels that instead (the permit is still held until its
# release): then it runs again, with how the job ended, so that the hold is recorded and
# its claim deleted.
sub _permit_job_block
{
	my ($prefix, $resources, $ttl, $wait, $job, $deadline) = @_;
	return "SELECT clock_timestamp() < '$deadline'::timestamptz AS go,"
	  . " 1 + floor(random() * $resources)::int AS r \\gset\n"
	  . "\\if :go\n"
	  . "CALL checker_permit_job('$prefix' || :r, $job->{permits}, $ttl, $wait, $job->{xacts},"
	  . " $job->{steps}, $job->{step_ms});\n"
	  . "\\set job_state :SQLSTATE\n\\set job_message :LAST_ERROR_MESSAGE\n"
	  . "CALL checker_permit_job_end(:'job_state', :'job_message');\n"
	  . "\\if :ERROR\n"
	  . "CALL checker_permit_job_end(:'job_state', :'job_message');\n"
	  . "\\endif\n"
	  . "\\else\n\\q\n\\endif\n";
}

# Starts CLIENTS psql processes on NODE, each running a script of BLOCK (a sub of
# swallow, deadline) until SECONDS from now; the odd-numbered clients swallow cancels.
# Returns the start time and the IPC::Run handles.
sub _start_job_clients
{
	my ($node, $dir, $clients, $seconds, $work_ms, $block) = @_;
	# Blocks enough for 50 attempts a second (a busy attempt waits wait_ms; one that
	# meets a frozen majority takes about redlock.timeout); a script that runs out
	# says so on its output.
	my $n = int($seconds * 50) + 20;
	my $deadline =
	  $node->safe_psql('postgres', "SELECT clock_timestamp() + interval '$seconds s'");
	my $t0 = time;
	my @h;
	for my $c (1 .. $clients)
	{
		my $file = "$dir/client$c.sql";
		my $b = $block->($c % 2 ? 'true' : 'false', $deadline, $c);
		_write_file($file, ($b x $n) . "\\echo checker-client: ran out of script\n");
		push @h, IPC::Run::start(
			[
				'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-h', $node->host,
				'-p', $node->port, '-d', 'postgres', '-f', $file
			],
			'<', \undef, '>', "$dir/client$c.out", '2>', "$dir/client$c.err",
			IPC::Run::timeout($seconds + $work_ms / 1000 + 120));
	}
	return ($t0, @h);
}

# What the long-job clients printed: (stdout, stderr) of all of them.
sub _job_client_output
{
	my ($dir, $clients) = @_;
	my ($out, $err) = ('', '');
	for my $c (1 .. $clients)
	{
		$out .= PostgreSQL::Test::Utils::slurp_file("$dir/client$c.out");
		$err .= PostgreSQL::Test::Utils::slurp_file("$dir/client$c.err");
	}
	return ($out, $err);
}

# ---- clients of jobs across commands (the lease scenarios of issue 21) ----

# The psql lines of one hold of a job across commands (its roles: see the lease scenarios
# in Checker/Scenarios.pm): stop (\q) once the run's time (DEADLINE) is up; else take a
# lock, and if it was taken, run the job of CLIENT's role, each command skipped once one
# failed (E: the first error's SQLSTATE, M: its message), every COMMIT sent (it ends an
# aborted transaction); then checker_job_end with the first error, or 00000.
sub _lease_job_block
{
	my ($prefix, $resources, $ttl, $wait, $job, $swallow, $deadline, $client) = @_;
	my @roles = @{ $job->{roles} };
	my $role = $roles[ (($client // 1) - 1) % @roles ];
	my $step_s = $job->{step_ms} / 1000;
	my $capture = "\\if :ERROR\n\\set E :LAST_ERROR_SQLSTATE\n\\set M :LAST_ERROR_MESSAGE\n\\endif\n";
	my $cmd = sub { return "\\if :{?E}\n\\else\n$_[0]\n$capture\\endif\n"; };
	my $idle = sub { return "\\if :{?E}\n\\else\n\\! sleep $_[0]\n\\endif\n"; };
	my $s = "\\unset E\n\\unset M\n\\unset go\n\\unset held\n"
	  . "SELECT clock_timestamp() < :'deadline'::timestamptz AS go,"
	  . " 1 + floor(random() * $resources)::int AS r \\gset\n"
	  . "\\if :go\n"
	  . "CALL checker_lease_take('$prefix' || :r, $ttl, $wait);\n"
	  . "SELECT EXISTS (SELECT 1 FROM checker_jobs WHERE pid = pg_backend_pid()) AS held \\gset\n"
	  . "\\if :held\n";
	# fdw (Checker/Fdw.pm): the hold is recorded in the third cluster, and the job's
	# writes go there through postgres_fdw.
	$s .= $cmd->('SELECT checker_fdw_acquired();') if $job->{fdw};
	my $write = $job->{fdw} ? 'checker_fdw_write' : 'checker_lease_write';
	$s .= "SELECT 1/0;\n" if $job->{error_first};
	for my $x (1 .. $job->{xacts})
	{
		$s .= $cmd->('BEGIN;');
		for my $i (1 .. $job->{steps})
		{
			$s .= $cmd->("SELECT $write($x, $i);");
			if ($role eq 'running')
			{
				$s .= $cmd->("SELECT pg_sleep($step_s);");
			}
			elsif ($role eq 'idle-xact')
			{
				$s .= $idle->($step_s);
			}
		}
		$s .= "COMMIT;\n$capture";
		$s .= $idle->($step_s * $job->{steps}) if $role eq 'idle';
	}
	$s .= "\\endif\n"
	  . "\\if :{?E}\n\\else\n\\set E 00000\n\\set M ''\n\\endif\n"
	  . "CALL checker_job_end(:'E', :'M');\n"
	  . "\\else\n\\q\n\\endif\n";
	$s = "-- $role\n$s" unless defined $client;
	return $s;
}

# Starts CLIENTS psql processes on NODE for jobs across commands, each running a script of
# BLOCK (a sub of swallow, deadline, client number), and opens them all at once: each
# script first waits (a shell loop) for the file "go" in DIR, which is written only once
# every client is connected, and reads the run's end (a timestamptz, SECONDS after the
# gate opened) from it into the psql variable deadline.  So the run's time counts from the
# moment every client can take a lock, however long 16 connections took to open on a
# loaded machine (they took up to 13 s at load 15 on 2 CPUs), and the fault schedules,
# counted from the first hold, land while jobs hold locks.  Returns the time the gate
# opened and the IPC::Run handles.
sub _start_lease_clients
{
	my ($node, $dir, $clients, $seconds, $block) = @_;
	# NODE may be a list of nodes (the fdw scenarios): client c connects to node
	# (c - 1) % nodes, and the gate opens once every client of every node is connected.
	my @nodes = ref $node eq 'ARRAY' ? @$node : ($node);
	# A hold takes at least wait_ms (busy) or a job's steps; blocks enough for 8 a second,
	# a script that runs out says so on its output.
	my $n = int($seconds * 8) + 20;
	my $start = time;
	my $gate = "\\! while [ ! -e '$dir/go' ]; do sleep 0.05; done\n"
	  . "\\set deadline `cat '$dir/go'`\n";
	my @h;
	for my $c (1 .. $clients)
	{
		my $file = "$dir/client$c.sql";
		my $on = $nodes[ ($c - 1) % @nodes ];
		my $b = $block->($c % 2 ? 'true' : 'false', undef, $c);
		_write_file($file, $gate . ($b x $n) . "\\echo checker-client: ran out of script\n");
		push @h, IPC::Run::start(
			[
				'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-h', $on->host,
				'-p', $on->port, '-d', 'postgres', '-f', $file
			],
			'<', \undef, '>', "$dir/client$c.out", '2>', "$dir/client$c.err",
			IPC::Run::timeout($seconds + 180));
	}
	my @s = map { my $n = $_; local $ENV{PGAPPNAME} = 'checker-gate'; PsqlSession::session($n) }
	  @nodes;
	my $all = PsqlSession::wait_until(120, sub {
		my $in = 0;
		$in += ($_->query("SELECT count(*) FROM pg_stat_activity"
			  . " WHERE application_name = 'checker'"))[0] for @s;
		return $in == $clients; });
	if (!$all)
	{
		$_->kill_kill for @h;
		die "checker: the $clients psql clients did not all connect within 120 s";
	}
	Test::More::note(sprintf('checker: the %d psql clients connected in %.1f s', $clients,
		time - $start));
	my ($deadline) = $s[0]->query("SELECT clock_timestamp() + interval '$seconds s'");
	my $t0 = time;
	$_->quit for @s;
	_write_file("$dir/go", $deadline);
	return ($t0, @h);
}

# ---- one run ----

# Runs the fault schedule FAULTS (a sub of F, or undef) of run NAME from T0, the time the
# clients started, then puts everything back and waits for the clients H...: returns the
# worst exit status among them (a client killed by a signal: 128 + the signal, as a shell
# says).  Kills the clients and dies when the schedule failed or a client did not finish.
sub _faults_then_finish
{
	my ($f, $t0, $name, $faults, @h) = @_;
	$f->{t0} = $t0;
	my $ok = eval { $faults->($f) if $faults; 1 };
	my $fault_error = $@;
	$f->heal;
	if (!$ok)
	{
		$_->kill_kill for @h;
		die "fault schedule of $name failed: $fault_error";
	}
	my $rc = 0;
	for my $h (@h)
	{
		eval { $h->finish; 1 } or do { $_->kill_kill for @h; die "the clients did not finish: $@"; };
		my $status = $h->full_result(0);
		my $hrc = $status & 127 ? 128 + ($status & 127) : $status >> 8;
		$rc = $hrc if $hrc > $rc;
	}
	return $rc;
}

# Runs one scenario; returns a hash of figures (see the end).  Options:
#   node, redis (RedisMasters), proxies (list, for delay), name, desc, seconds (10),
#   clients (16), resources (4), ttl_ms (1000), wait_ms (20), work_ms (5), faults (sub).
# A lock held across commands (checker_take/step/done in checker.sql) when steps is set:
#   steps (N), step_ms (work per step), ext_ttls ([TTL or undef per step]: redlock_extend
#   before that step), honest (1: work a step only with validity for it; 0: work on
#   whatever extend and redlock_locks() say), margin_ms (100), discard ('after': give
#   the guard back, then DISCARD ALL instead of redlock_release; 'early': DISCARD ALL
#   right after taking the guard, a negative control).
#   idle_ms: the client sleeps (idle backend) after each attempt; pgoptions: more -c
#   settings for the clients' sessions; fault_ttl_ms: the TTL the fault schedule is told
#   (default the largest TTL in use).
#   fence ('fenced' or 'unfenced'): each holder takes its fencing token and writes it to
#   checker_fence at the end of its work, with or without the fence condition (see
#   checker.sql and _fence_figures).
#   pairs (1, or 'unsafe' for the negative control): each attempt takes two resources one
#   after the other in the order drawn, waiting wait_ms for each (checker_pair_attempt in
#   checker.sql): clients drawing opposite orders deadlock, and the victim (40P01, outcome
#   'deadlock', counted in deadlocks) keeps its first lock through its work; 'unsafe'
#   lets go of it at once and works on.  expect_deadlocks: check_pairs demands some.
#   sets (1): each attempt takes a set of two resources, all or nothing, with
#   redlock_acquire(text[]) (checker_set_attempt in checker.sql), and claims the guard of
#   each: a guard already held is a violation.  set_extend_ttl_ms: the holder extends
#   the set to that TTL halfway through its work, and gives up if that fails.
#   shared (1): each attempt takes its resource shared (redlock_acquire_shared) three
#   times in four, else exclusively (checker_shared_attempt in checker.sql): a shared
#   holder counts itself in the guard's readers and must find no exclusive holder; an
#   exclusive holder must find neither.  A writer waits 2 x work_ms + 1 s (long enough
#   to post its intent and see the readers drain), a reader wait_ms.
#   expect_readers_together: check_shared demands 2 or more readers inside at once at
#   some moment.  shared_extend_ttl_ms: extend halfway through
#   the work to that TTL, and give up if that fails.
#   permits (k): the resources are semaphores of k permits, taken with
#   redlock_acquire_permit (checker_permit_attempt in checker.sql): each holder claims
#   by counting the others inside (k or more: a violation; another holder of its slot:
#   a violation); with job, the jobs hold auto-extended permits (checker_permit_job).
# A long job (checker_job / checker_job_end in checker.sql) when job is set:
#   job => { xacts, steps, step_ms }: each hold works xacts transactions of steps writes
#   step_ms apart; the odd-numbered clients swallow a cancel and try to commit.  The
#   clients are psql scripts (psql goes on after an error; pgbench 15 would end the
#   client), and the node must have the library preloaded with track_commit_timestamp.
sub run
{
	my (%o) = @_;
	my $node = $o{node} or die 'run: no node';
	my $name = $o{name} // 'run';
	my $seconds = $o{seconds} // 10;
	my $clients = $o{clients} // 16;
	my $resources = $o{resources} // 4;
	my $ttl = $o{ttl_ms} // 1000;
	my $wait = $o{wait_ms} // 20;
	my $work = $o{work_ms} // 5;
	my $steps = $o{steps} // 0;
	my $step_ms = $o{step_ms} // 100;
	my @ext = @{ $o{ext_ttls} // [] };
	my $honest = $o{honest} // 1;
	my $margin = $o{margin_ms} // 100;
	my $idle = $o{idle_ms} // 0;
	my $fault_ttl = $o{fault_ttl_ms} // (sort { $b <=> $a } $ttl, grep { defined } @ext)[0];
	my $job = $o{job};
	my $fence = $o{fence};
	my $permits = $o{permits};
	$job = { %$job, permits => $permits } if $job && $permits;
	(my $prefix = "checker-$name-") =~ s/[^A-Za-z0-9+._-]/_/g;

	$node->safe_psql('postgres', qq{
TRUNCATE checker_attempts, checker_violations, checker_guard, checker_holds, checker_jobs,
	checker_writes, checker_losses, checker_fence, checker_permit_claims, checker_watch_events;
INSERT INTO checker_guard (resource)
	SELECT '$prefix' || g FROM generate_series(1, $resources) g;
INSERT INTO checker_fence (resource) SELECT resource FROM checker_guard;
});
	$node->safe_psql('postgres', 'SELECT redlock_stats_reset()') if $job;
	my $dir = PostgreSQL::Test::Utils::tempdir("checker-$name");
	my $script = "$dir/attempt.pgbench";
	my $text = "\\set r random(1, $resources)\n";
	if ($job)
	{
		$work = $job->{xacts} * $job->{steps} * $job->{step_ms};
		$text = _job_block($prefix, $resources, $ttl, $wait, $job, 'SWALLOW');
	}
	elsif ($steps)
	{
		$work = $steps * $step_ms;
		my $h = $honest ? 'true' : 'false';
		my $discard = $o{discard} // '';
		$text .= "CALL checker_take('$prefix' || :r, $ttl, $wait);\n";
		$text .= "DISCARD ALL;\n" if $discard eq 'early';
		$text .= "CALL checker_step('$prefix' || :r, $step_ms, "
		  . ($ext[$_] // 'NULL') . ", $h, $margin);\n"
		  for 0 .. $steps - 1;
		$text .= $discard eq 'after'
		  ? "CALL checker_done('$prefix' || :r, false);\nDISCARD ALL;\n"
		  : "CALL checker_done('$prefix' || :r);\n";
	}
	elsif ($permits)
	{
		$text .= "CALL checker_permit_attempt('$prefix' || :r, $permits, $ttl, $wait, $work);\n";
	}
	elsif ($o{shared})
	{
		# A writer waits long enough to post its intent and see the readers drain
		# (doc/shared.md §3): twice the work and a second.
		my $writer_wait = 2 * $work + 1000;
		$text .= "\\set m random(1, 4)\n"
		  . "\\set w case when :m > 1 then $wait else $writer_wait end\n"
		  . "CALL checker_shared_attempt('$prefix' || :r, :m > 1, $ttl, :w, $work"
		  . ($o{shared_extend_ttl_ms} ? ", $o{shared_extend_ttl_ms}" : '') . ");\n";
	}
	elsif ($o{pairs})
	{
		# Two resources, in the order drawn: clients drawing opposite orders deadlock.
		$text .= "\\set s random(1, $resources - 1)\n"
		  . "\\set s case when :s >= :r then :s + 1 else :s end\n"
		  . "CALL checker_pair_attempt('$prefix', :r, :s, $ttl, $wait, $work, "
		  . ($o{pairs} eq 'unsafe' ? 'true' : 'false') . ");\n";
	}
	elsif ($o{sets})
	{
		# A second resource, another than :r, both from 1..resources.
		$text .= "\\set s random(1, $resources - 1)\n"
		  . "\\set s case when :s >= :r then :s + 1 else :s end\n"
		  . "CALL checker_set_attempt('$prefix', :r, :s, $ttl, $wait, $work"
		  . ($o{set_extend_ttl_ms} ? ", $o{set_extend_ttl_ms}" : '') . ");\n";
	}
	else
	{
		$text .= "CALL checker_attempt('$prefix' || :r, $ttl, $wait, $work"
		  . ($fence ? ", '$fence'" : '') . ");\n";
	}
	$text .= "\\sleep $idle ms\n" if $idle;
	_write_file($script, $text) unless $job;

	my @cmd = (
		'pgbench', '-n', '-h', $node->host, '-p', $node->port, '-c', $clients,
		'-j', 2, '-T', $seconds, '-f', $script, 'postgres');
	my ($out, $err) = ('', '');
	my $f = Checker::Faults->new(
		node => $node,
		redis => $o{redis},
		proxies => $o{proxies} // [],
		redis_config => $o{redis_config},
		servers => $o{servers},
		seconds => $seconds,
		ttl_ms => $fault_ttl);
	Test::More::note("checker: $name: $clients clients, $resources resources, TTL $ttl ms,"
		  . " wait $wait ms, work $work ms, $seconds s");
	Test::More::note("checker: " . ($job ? 'client script (each block)' : 'pgbench script')
		  . ":\n$text");
	my $watcher = _watch_start($node, $o{redis}, $o{watch}, $prefix, $resources);
	my $log_offset = -s $node->logfile;
	my @h;
	my $t0;
	{
		local $ENV{PGOPTIONS} = '-c client_min_messages=error'
		  . join('', map { " -c $_" } @{ $o{pgoptions} // [] });
		local $ENV{PGAPPNAME} = 'checker';
		if ($job && $job->{roles})
		{
			($t0, @h) = _start_lease_clients($node, $dir, $clients, $seconds,
				sub { _job_block($prefix, $resources, $ttl, $wait, $job, @_) });
		}
		elsif ($job)
		{
			($t0, @h) = _start_job_clients($node, $dir, $clients, $seconds, $work,
				sub { _job_block($prefix, $resources, $ttl, $wait, $job, @_) });
		}
		else
		{
			$t0 = time;
			@h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
				IPC::Run::timeout($seconds + 120));
		}
	}
	my $rc = _faults_then_finish($f, $t0, $name, $o{faults}, @h);
	($out, $err) = _job_client_output($dir, $clients) if $job;
	my $ran_out = () = $out =~ /^checker-client: ran out of script$/mg;
	my $elapsed = time - $t0;

	# Let the last CALLs finish writing their rows.
	PsqlSession::wait_until(
		30,
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'checker'")
			  eq '0';
		});

	my $heard = _watch_finish($watcher);

	# The WARNINGs the backends logged meanwhile, by kind (resource names and counts
	# blanked out).
	my %warnings;
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $log_offset);
	for my $w ($log =~ /WARNING:  (.*)/g)
	{
		$w =~ s/"[^"]*"/"..."/g;
		$w =~ s/\b\d+ of \d+\b/N of M/g;
		$warnings{$w}++;
	}

	my %r = (
		warnings => \%warnings,
		name => $name,
		desc => $o{desc} // '',
		masters => $o{masters} // 'plain',
		expect_violations => $o{expect_violations} // 0,
		watch => $o{watch},
		expect_watch_unexplained => $o{expect_watch_unexplained} // 0,
		expect_no_08006 => $o{expect_no_08006} // 0,
		expect_no_gave_up => $o{expect_no_gave_up} // 0,
		violations_by_design => $o{violations_by_design},
		expect_min_nodes => $o{expect_min_nodes},
		fence => $fence,
		permits => $permits,
		sets => $o{sets},
		pairs => $o{pairs},
		expect_deadlocks => $o{expect_deadlocks} // 0,
		shared => $o{shared},
		expect_readers_together => $o{expect_readers_together} // 0,
		expect_inversions => $o{expect_inversions} // 0,
		skew_callers_ms => $o{skew_callers_ms} // 0,
		expect_stale_landed => $o{expect_stale_landed} // 0,
		expect_stale_refused => $o{expect_stale_refused} // 0,
		seconds => $seconds,
		elapsed => $elapsed,
		clients => $clients,
		resources => $resources,
		ttl_ms => $ttl,
		wait_ms => $wait,
		work_ms => $work,
		steps => $steps,
		step_ms => $step_ms,
		ext_ttls => \@ext,
		honest => $honest,
		margin_ms => $margin,
		idle_ms => $idle,
		pgoptions => $o{pgoptions} // [],
		job => $job,
		ran_out => $ran_out,
		fault_counts => $f->{counts},
		pgbench_rc => $rc,
		pgbench_err => $err,
		pgbench_out => $out,
		events => $f->{events},
		errors => {},
	);
	$r{$_} = 0 for qw(attempts acquired busy unavailable other_errors deadlocks);

	for my $row (_rows($node, q{
SELECT outcome, coalesce(sqlstate, ''), count(*), min(replace(message, E'\n', ' '))
FROM checker_attempts GROUP BY 1, 2 ORDER BY 1, 2}))
	{
		my ($outcome, $state, $n, $msg) = @$row;
		$r{attempts} += $n;
		if ($outcome eq 'acquired') { $r{acquired} += $n; }
		elsif ($outcome eq 'busy') { $r{busy} += $n; }
		elsif ($outcome eq 'deadlock') { $r{deadlocks} += $n; }
		elsif ($state eq '08006') { $r{unavailable} += $n; }
		else { $r{other_errors} += $n; }
		$r{errors}{$state} = { n => $n, message => $msg } if $outcome eq 'error';
	}
	($r{overran}, $r{release_false}, $r{release_error}, $r{min_nodes}) = @{
		(
			_rows($node, q{
SELECT count(*) FILTER (WHERE overran), count(*) FILTER (WHERE NOT released),
	count(*) FILTER (WHERE released IS NULL), coalesce(min(nodes), 0)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	};
	(
		$r{extends}, $r{extend_false}, $r{extend_errors}, $r{extend_other_errors},
		$r{gave_up}, $r{steps_done}
	  )
	  = @{
		(
			_rows($node, q{
SELECT coalesce(sum(extends), 0), coalesce(sum(extend_false), 0),
	coalesce(sum(extend_errors), 0), coalesce(sum(extend_other_errors), 0),
	count(*) FILTER (WHERE gave_up), coalesce(sum(steps), 0)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };

	# Per 1-second bucket, and per state window.
	my @acq_times;
	my (@per_sec_acq, @per_sec_unav);
	for my $row (_rows($node, qq{
SELECT extract(epoch FROM t1) - $t0, outcome, coalesce(sqlstate, '') FROM checker_attempts}))
	{
		my ($t, $outcome, $state) = @$row;
		my $b = $t < 0 ? 0 : int($t);
		if ($outcome eq 'acquired')
		{
			$per_sec_acq[$b]++;
			push @acq_times, $t;
		}
		$per_sec_unav[$b]++ if $state eq '08006';
	}
	my $nsec = int($seconds + 0.999);
	$r{per_sec_acq} = [ map { $per_sec_acq[$_] // 0 } 0 .. $nsec - 1 ];
	$r{per_sec_unav} = [ map { $per_sec_unav[$_] // 0 } 0 .. $nsec - 1 ];
	$r{states} = _state_windows($f->{events}, $seconds, \@acq_times);

	$r{violation_rows} = [
		map {
			{
				at => $_->[0],
				resource => $_->[1],
				pid => $_->[2],
				what => $_->[3],
				other_pid => $_->[4],
				other_inside_ms => $_->[5],
				other_validity_left_ms => $_->[6],
				since_acquired_ms => $_->[7],
				nodes => $_->[8],
				validity_ms => $_->[9],
				slot => $_->[10],
				others => $_->[11],
			}
		} _rows($node, qq{
SELECT round((extract(epoch FROM at) - $t0)::numeric, 3), resource, pid, what,
	coalesce(other_pid::text, '-'),
	coalesce(round((extract(epoch FROM at - other_since) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM other_valid_until - at) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM at - acquired_at) * 1000)::numeric, 1)::text, '?'),
	coalesce(nodes::text, '?'), coalesce(validity_ms::text, '?'), coalesce(slot::text, ''),
	coalesce(others, '')
FROM checker_violations ORDER BY at})
	];
	$r{violations} = scalar @{ $r{violation_rows} };
	_permit_figures($node, \%r) if $permits;
	_shared_figures($node, \%r) if $o{shared};
	_job_figures($node, $log, $t0, $f, \%r) if $job;
	_lease_figures($node, $log, \%r) if $job && $job->{roles};
	_fence_figures($node, $t0, \%r) if $fence;
	_watch_figures($node, $heard, $t0, \%r) if $o{watch};
	# Why holders gave up (held-lock runs): counts by reason, and the first few with times.
	$r{gave_up_rows} = [
		_rows($node, qq{
SELECT round((extract(epoch FROM gave_up_at) - $t0)::numeric, 3), resource, pid,
	regexp_replace(gave_up_why, '[0-9]+ ms', 'N ms'), gave_up_why,
	round((extract(epoch FROM gave_up_at - t1) * 1000)::numeric)
FROM checker_attempts WHERE gave_up ORDER BY gave_up_at})
	];
	$r{gave_up_why}{ $_->[3] }++ for @{ $r{gave_up_rows} };
	$r{acq_per_s} = $r{acquired} / $seconds;
	$r{busy_pct} = $r{attempts} ? 100 * $r{busy} / $r{attempts} : 0;
	$r{unavailable_pct} = $r{attempts} ? 100 * $r{unavailable} / $r{attempts} : 0;
	return \%r;
}

1;
