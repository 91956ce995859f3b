# test/checker/Checker.pm: the mutual-exclusion checker under faults.
#
# pgbench drives CLIENTS sessions that loop on CALL checker_attempt(...) (checker.sql) over
# a few resources; meanwhile a fault schedule (kill -9 / restart, SIGSTOP / SIGCONT, added
# latency through delayproxy.pl) runs in this process.  Afterwards the attempts and
# violations tables give the figures.  Used by test/t/010_checker.pl and run-long.
#
#   my $redis = RedisMasters->new(5);
#   my $node  = RedisMasters::redlock_node('checker', $redis, Checker::node_conf());
#   Checker::setup($node);
#   my $r = Checker::run(node => $node, redis => $redis, Checker::scenario('sigstop'),
#                        seconds => 10);
#   print Checker::describe($r);     # $r->{violations}, {acquired}, {attempts}, ...
#
# The fault schedule gets a Checker::Faults object: $f->at(SECONDS) waits until that time
# after the start; $f->kill(I...), $f->start(I...), $f->stop(I...), $f->cont(I...) act on
# masters; $f->delay(MIN, MAX) sets the proxies' delay.  Each action is logged with its
# time, and the time between actions is labelled with the state of the masters ("2 killed",
# "1 stopped", ...), so liveness can be reported per state.

package Checker;

use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More ();
use Time::HiRes qw(time sleep);

use RedisMasters;

my $DIR = File::Spec->rel2abs(dirname(__FILE__));
my @all_proxies;

# postgresql.conf lines for a checker node: room for the clients, and short retry delays
# so that a wait_ms of a few tens of ms means a few retries.
sub node_conf
{
	return "max_connections = 64\nredlock.retry_delay = 5\nredlock.retry_jitter = 10\n";
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
	RedisMasters::wait_until(10,
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
	RedisMasters::wait_until(10, sub { -s "$dir/pid" })
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

# ---- scenarios ----
#
# Each is a list of run() options: a description, masters (plain, or aof: appendonly yes,
# appendfsync always), the TTL / wait / work of every attempt, whether it must see
# violations (a negative control), and the fault schedule, which scales with the run's
# length ($f->{seconds}) and TTL ($f->{ttl_ms}).

# Out of service for longer than the largest TTL in use (spec §8 "delayed restart").
sub _delayed_out
{
	my ($f) = @_;
	return $f->{ttl_ms} / 1000 * 1.2 + 0.3;
}

my %SCENARIOS = (
	'baseline' => {
		desc => 'no fault',
		masters => 'plain',
	},
	'kill-minority-delayed' => {
		desc => 'kill -9 of 1 or 2 masters (rolling), each kept down 1.2 x TTL + 0.3 s '
		  . '(§8 delayed restart), no persistence',
		masters => 'plain',
		faults => sub {
			my ($f) = @_;
			my @sets = ([ 0, 1 ], [2], [ 3, 4 ], [1], [ 0, 4 ], [ 2, 3 ]);
			my $out = _delayed_out($f);
			my ($t, $k) = (1.0, 0);
			while ($t + $out + 0.3 < $f->{seconds})
			{
				my $set = $sets[ $k++ % @sets ];
				$f->at($t);
				$f->kill(@$set);
				$f->at($t + $out);
				$f->start(@$set);
				$t += $out + 1.0;
			}
		},
	},
	'sigstop' => {
		desc => 'SIGSTOP of 1 or 2 masters for 0.2-1 s (> redlock.timeout 50 ms), then SIGCONT',
		masters => 'plain',
		faults => sub {
			my ($f) = @_;
			my @plan = ([ [2], 0.5 ], [ [0], 1.0 ], [ [ 1, 3 ], 0.3 ], [ [4], 0.2 ],
				[ [ 0, 2 ], 0.8 ], [ [3], 0.6 ]);
			my ($t, $k) = (1.0, 0);
			while (1)
			{
				my ($set, $secs) = @{ $plan[ $k++ % @plan ] };
				last if $t + $secs + 0.3 > $f->{seconds};
				$f->at($t);
				$f->stop(@$set);
				$f->at($t + $secs);
				$f->cont(@$set);
				$t += $secs + 0.7;
			}
		},
	},
	'minority-delayed+sigstop' => {
		desc => 'kill -9 of 2 masters kept down 1.2 x TTL + 0.3 s, then of 1; SIGSTOP of '
		  . '1 master for 0.5 s, of 2 for 0.3 s',
		masters => 'plain',
		faults => sub {
			my ($f) = @_;
			my $out = _delayed_out($f);
			$f->at(1.0);
			$f->kill(0, 1);
			$f->at(1.0 + $out);
			$f->start(0, 1);
			my $t = 1.5 + $out + 0.3;
			$f->at($t);
			$f->kill(3);
			$f->at($t + $out);
			$f->start(3);
			$t += $out + 0.5;
			$f->at($t);
			$f->stop(2);
			$f->at($t + 0.5);
			$f->cont(2);
			$f->at($t + 1.0);
			$f->stop(1, 4);
			$f->at($t + 1.3);
			$f->cont(1, 4);
		},
	},
	'latency' => {
		desc => 'delay proxies in front of 3 masters: 1-15 ms each way, then 10-40 ms '
		  . '(round trips around the 50 ms timeout), then 30-60 ms (3 masters time out)',
		masters => 'plain',
		proxies => 3,
		faults => sub {
			my ($f) = @_;
			my $s = $f->{seconds};
			$f->at(0.15 * $s);
			$f->delay(1, 15);
			$f->at(0.4 * $s);
			$f->delay(10, 40);
			$f->at(0.65 * $s);
			$f->delay(30, 60);
			$f->at(0.85 * $s);
			$f->delay(0, 0);
		},
	},
	'kill-minority-aof' => {
		desc => 'kill -9 of 2 masters (rolling) restarted at once, appendfsync always',
		masters => 'aof',
		faults => sub {
			my ($f) = @_;
			my @sets = ([ 0, 1 ], [ 2, 3 ], [ 4, 0 ], [ 1, 2 ], [ 3, 4 ]);
			my ($t, $k) = (1.0, 0);
			while ($t + 0.5 < $f->{seconds})
			{
				my $set = $sets[ $k++ % @sets ];
				$f->at($t);
				$f->kill(@$set);
				$f->start(@$set);
				$t += 0.8;
			}
		},
	},
	'kill-majority-aof' => {
		desc => 'kill -9 of 3 of 5 masters restarted at once while locks are held, '
		  . 'appendfsync always (the unsafe-majority-restart control, with persistence)',
		masters => 'aof',
		ttl_ms => 10000,
		work_ms => 1000,
		faults => sub { _majority_restart(@_) },
	},
	'unsafe-majority-restart' => {
		desc => 'NEGATIVE CONTROL: kill -9 of 3 of 5 masters restarted at once without '
		  . 'persistence while locks are held',
		masters => 'plain',
		ttl_ms => 10000,
		work_ms => 1000,
		expect_violations => 1,
		faults => sub { _majority_restart(@_) },
	},
	'unsafe-short-ttl' => {
		desc => 'NEGATIVE CONTROL: TTL 20 ms shorter than the 60 ms critical section',
		masters => 'plain',
		ttl_ms => 20,
		work_ms => 60,
		expect_violations => 1,
	},
);

# Masters 0, 1 and 2 killed at once and restarted at once, every 2.5 s.
sub _majority_restart
{
	my ($f) = @_;
	my $t = 1.5;
	while ($t + 0.8 < $f->{seconds})
	{
		$f->at($t);
		$f->kill(0, 1, 2);
		$f->start(0, 1, 2);
		$t += 2.5;
	}
	return;
}

# The run() options of scenario NAME.
sub scenario
{
	my ($name) = @_;
	my $s = $SCENARIOS{$name} or die "no scenario \"$name\"";
	return (name => $name, %$s);
}

# Runs scenario NAME on NODE with the masters it asks for, from SETS ({ plain => $redis,
# aof => $redis_aof }); starts and stops its delay proxies and points redlock.servers at
# them (or at the masters).  OVERRIDES replace run() options (seconds, clients, ...).
sub run_scenario
{
	my ($node, $sets, $name, %overrides) = @_;
	my %s = scenario($name);
	my $redis = $sets->{ $s{masters} } or die "scenario $name needs $s{masters} masters";
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
	set_servers($node, $guc) if $node->safe_psql('postgres', 'SHOW redlock.servers') ne $guc;
	my $r = eval { run(node => $node, redis => $redis, %s, %overrides, proxies => \@proxies) };
	my $error = $@;
	stop_proxy($_) for @proxies;
	die $error unless $r;
	return $r;
}

# ---- one run ----

# Runs one scenario; returns a hash of figures (see the end).  Options:
#   node, redis (RedisMasters), proxies (list, for delay), name, desc, seconds (10),
#   clients (16), resources (4), ttl_ms (1000), wait_ms (20), work_ms (5), faults (sub).
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
	(my $prefix = "checker-$name-") =~ s/[^A-Za-z0-9+._-]/_/g;

	$node->safe_psql('postgres', qq{
TRUNCATE checker_attempts, checker_violations, checker_guard;
INSERT INTO checker_guard (resource)
	SELECT '$prefix' || g FROM generate_series(1, $resources) g;
});
	my $dir = PostgreSQL::Test::Utils::tempdir("checker-$name");
	my $script = "$dir/attempt.pgbench";
	_write_file($script, "\\set r random(1, $resources)\n"
		  . "CALL checker_attempt('$prefix' || :r, $ttl, $wait, $work);\n");

	my @cmd = (
		'pgbench', '-n', '-h', $node->host, '-p', $node->port, '-c', $clients,
		'-j', 2, '-T', $seconds, '-f', $script, 'postgres');
	my ($out, $err) = ('', '');
	my $f = Checker::Faults->new(
		redis => $o{redis},
		proxies => $o{proxies} // [],
		seconds => $seconds,
		ttl_ms => $ttl);
	Test::More::note("checker: $name: $clients clients, $resources resources, TTL $ttl ms,"
		  . " wait $wait ms, work $work ms, $seconds s");
	my $log_offset = -s $node->logfile;
	my $t0 = time;
	$f->{t0} = $t0;
	my $h;
	{
		local $ENV{PGOPTIONS} = '-c client_min_messages=error';
		local $ENV{PGAPPNAME} = 'checker';
		$h = IPC::Run::start(\@cmd, '<', \undef, '>', \$out, '2>', \$err,
			IPC::Run::timeout($seconds + 120));
	}
	my $ok = eval { $o{faults}->($f) if $o{faults}; 1 };
	my $fault_error = $@;
	$f->heal;
	if (!$ok)
	{
		$h->kill_kill;
		die "fault schedule of $name failed: $fault_error";
	}
	eval { $h->finish; 1 } or do { $h->kill_kill; die "pgbench did not finish: $@"; };
	# A pgbench killed by a signal is a failure too: 128 + the signal, as a shell says.
	my $status = $h->full_result(0);
	my $rc = $status & 127 ? 128 + ($status & 127) : $status >> 8;
	my $elapsed = time - $t0;

	# Let the last CALLs finish writing their rows.
	RedisMasters::wait_until(
		30,
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'checker'")
			  eq '0';
		});

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
		seconds => $seconds,
		elapsed => $elapsed,
		clients => $clients,
		resources => $resources,
		ttl_ms => $ttl,
		wait_ms => $wait,
		work_ms => $work,
		pgbench_rc => $rc,
		pgbench_err => $err,
		pgbench_out => $out,
		events => $f->{events},
		errors => {},
	);
	$r{$_} = 0 for qw(attempts acquired busy unavailable other_errors);

	for my $row (_rows($node, q{
SELECT outcome, coalesce(sqlstate, ''), count(*), min(message)
FROM checker_attempts GROUP BY 1, 2 ORDER BY 1, 2}))
	{
		my ($outcome, $state, $n, $msg) = @$row;
		$r{attempts} += $n;
		if ($outcome eq 'acquired') { $r{acquired} += $n; }
		elsif ($outcome eq 'busy') { $r{busy} += $n; }
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
			}
		} _rows($node, qq{
SELECT round((extract(epoch FROM at) - $t0)::numeric, 3), resource, pid, what,
	coalesce(other_pid::text, '-'),
	coalesce(round((extract(epoch FROM at - other_since) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM other_valid_until - at) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM at - acquired_at) * 1000)::numeric, 1)::text, '?'),
	coalesce(nodes::text, '?'), coalesce(validity_ms::text, '?')
FROM checker_violations ORDER BY at})
	];
	$r{violations} = scalar @{ $r{violation_rows} };
	$r{acq_per_s} = $r{acquired} / $seconds;
	$r{busy_pct} = $r{attempts} ? 100 * $r{busy} / $r{attempts} : 0;
	$r{unavailable_pct} = $r{attempts} ? 100 * $r{unavailable} / $r{attempts} : 0;
	return \%r;
}

# Rows of QUERY's result as lists of fields (psql unaligned, | separated).
sub _rows
{
	my ($node, $query) = @_;
	my $out = $node->safe_psql('postgres', $query);
	return map { [ split /\|/, $_, -1 ] } grep { length } split /\n/, $out;
}

# From EVENTS ([t, text, state] in time order), SECONDS and the acquisition times: per state
# label, [label, seconds spent, acquisitions, acq/s], in order of first appearance.
sub _state_windows
{
	my ($events, $seconds, $acq_times) = @_;
	my @bounds = ([ 0, 'all up' ]);
	push @bounds, [ $_->[0], $_->[2] ] for @$events;
	my (%secs, %acq, @order);
	my @sorted = sort { $a <=> $b } @$acq_times;
	my $i = 0;
	for my $k (0 .. $#bounds)
	{
		my ($from, $label) = @{ $bounds[$k] };
		my $to = $k < $#bounds ? $bounds[ $k + 1 ][0] : $seconds;
		$to = $seconds if $to > $seconds;
		next if $to <= $from;
		push @order, $label unless exists $secs{$label};
		$secs{$label} += $to - $from;
		$acq{$label} //= 0;
		$i++ while $i < @sorted && $sorted[$i] < $from;
		while ($i < @sorted && $sorted[$i] < $to)
		{
			$acq{$label}++;
			$i++;
		}
	}
	return [ map { [ $_, $secs{$_}, $acq{$_}, $acq{$_} / $secs{$_} ] } @order ];
}

# ---- reports ----

my $HEADER = sprintf("%-26s %8s %8s %10s %8s %7s %7s\n",
	'scenario', 'attempts', 'acquired', 'violations', 'acq/s', 'busy', 'unavail');

# The header of the figures table.
sub table_header
{
	return $HEADER . ('-' x (length($HEADER) - 1)) . "\n";
}

# One line of the figures table.
sub table_line
{
	my ($r) = @_;
	return sprintf("%-26s %8d %8d %10d %8.1f %6.1f%% %6.1f%%\n",
		$r->{name}, $r->{attempts}, $r->{acquired}, $r->{violations}, $r->{acq_per_s},
		$r->{busy_pct}, $r->{unavailable_pct});
}

# A full description of one run: settings, figures, errors, violations with their timing,
# the fault log, liveness per state and per second.
sub describe
{
	my ($r) = @_;
	my $s = "== $r->{name}: $r->{desc}\n";
	$s .= sprintf(
		"   %d clients, %d resources, TTL %d ms, wait %d ms, work %d ms, %d s, %s masters\n",
		$r->{clients}, $r->{resources}, $r->{ttl_ms}, $r->{wait_ms}, $r->{work_ms},
		$r->{seconds}, $r->{masters});
	$s .= sprintf(
		"   attempts %d: acquired %d (%.1f/s), busy %d (%.1f%%), unavailable 08006 %d (%.1f%%),"
		  . " other errors %d\n",
		$r->{attempts}, $r->{acquired}, $r->{acq_per_s}, $r->{busy}, $r->{busy_pct},
		$r->{unavailable}, $r->{unavailable_pct}, $r->{other_errors});
	for my $state (sort keys %{ $r->{errors} })
	{
		$s .= sprintf("   error %s x %d, e.g. \"%s\"\n",
			$state, $r->{errors}{$state}{n}, $r->{errors}{$state}{message} // '');
	}
	$s .= sprintf(
		"   holders whose validity ran out before the work was done: %d; release false: %d,"
		  . " release error: %d; fewest masters in an acquisition: %d\n",
		$r->{overran}, $r->{release_false}, $r->{release_error}, $r->{min_nodes});
	$s .= "   pgbench exit status $r->{pgbench_rc}\n";
	for my $w (sort { $r->{warnings}{$b} <=> $r->{warnings}{$a} } keys %{ $r->{warnings} })
	{
		$s .= sprintf("   server log WARNING x %d: %s\n", $r->{warnings}{$w}, $w);
	}
	if ($r->{pgbench_rc} != 0)
	{
		my @lines = split /\n/, $r->{pgbench_err};
		$s .= "   pgbench stderr: $_\n" for @lines[ 0 .. ($#lines < 9 ? $#lines : 9) ];
	}
	$s .= sprintf("   VIOLATIONS: %d%s\n",
		$r->{violations}, $r->{expect_violations} ? ' (negative control: expected > 0)' : '');
	my $shown = 0;
	for my $v (@{ $r->{violation_rows} })
	{
		last if ++$shown > 20;
		my $last = _last_event($r->{events}, $v->{at});
		$s .= sprintf(
			"     +%.3f s %s: pid %s %s found pid %s inside for %s ms (its validity %s ms"
			  . " left); ours acquired %s ms before with %s masters, validity %s ms%s\n",
			$v->{at}, $v->{resource}, $v->{pid}, $v->{what}, $v->{other_pid},
			$v->{other_inside_ms}, $v->{other_validity_left_ms}, $v->{since_acquired_ms},
			$v->{nodes}, $v->{validity_ms},
			$last ? sprintf('; last fault +%.3f s %s', @$last[ 0, 1 ]) : '');
	}
	$s .= "     ... and " . ($r->{violations} - 20) . " more\n" if $r->{violations} > 20;
	if (@{ $r->{events} })
	{
		$s .= "   faults:";
		$s .= sprintf(" +%.2f %s;", $_->[0], $_->[1]) for @{ $r->{events} };
		$s .= "\n";
	}
	$s .= "   liveness by state:";
	$s .= sprintf(" %s %.1f acq/s (%.1f s);", $_->[0], $_->[3], $_->[1]) for @{ $r->{states} };
	$s .= "\n";
	$s .= "   acquisitions per second: @{ $r->{per_sec_acq} }\n";
	$s .= "   08006 errors per second: @{ $r->{per_sec_unav} }\n"
	  if grep { $_ } @{ $r->{per_sec_unav} };
	return $s;
}

sub _last_event
{
	my ($events, $t) = @_;
	my $last;
	for my $e (@$events)
	{
		last if $e->[0] > $t;
		$last = $e;
	}
	return $last;
}

# ---- the fault injector ----

package Checker::Faults;

use strict;
use warnings;

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
	}, $class;
}

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
	return @parts ? join(' + ', @parts) : 'all up';
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
	delete $self->{down}{$_} for @i;
	$self->_mark('master ' . _list(@i) . ' up again');
	return;
}

sub stop
{
	my ($self, @i) = @_;
	my @pids = map { $self->{redis}{pids}[$_] // die "master $_ is not running" } @i;
	CORE::kill('STOP', @pids);
	$self->{stopped}{$_} = 1 for @i;
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

# Puts everything back: masters continued and started, proxies without delay.
sub heal
{
	my ($self) = @_;
	$self->cont(sort keys %{ $self->{stopped} }) if %{ $self->{stopped} };
	$self->start(sort keys %{ $self->{down} }) if %{ $self->{down} };
	$self->delay(0, 0) if $self->{slow};
	return;
}

1;
