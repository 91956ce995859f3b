# test/checker/Checker/Schedules.pm: the fault schedules the checker's scenarios share
# (Checker/Scenarios.pm names them in its table): each a sub of a Checker::Faults object
# $f (Checker/Faults.pm) that acts on the masters, the worker or the holders at set times
# of the run, scaled by its length ($f->{seconds}) and TTL ($f->{ttl_ms}).

package Checker::Schedules;

use strict;
use warnings;

use Exporter 'import';

our @EXPORT_OK = qw(_all_restart_delayed _delayed_out _extend_faults _fast_clock
  _fdw_stall_faults _force_releases _lease_prefix_faults _lease_stall_faults _lease_stall_loss_faults _lease_term_faults
  _freeze_plan _long_job_faults _majority_blips _majority_restart _majority_wipe _pause_holders
  _renew_faults _servers_faults _ticking);

# Out of service for longer than the largest TTL in use (spec §8 "delayed restart").
sub _delayed_out
{
	my ($f) = @_;
	return $f->{ttl_ms} / 1000 * 1.2 + 0.3;
}

# For the long-job scenarios, in a loop: a majority (3 masters) frozen for 1.2 x TTL +
# 0.3 s, longer than any lock's validity: the worker's renewals get no quorum, it gives
# the locks up while a third of the TTL is left and cancels their jobs; the other
# sessions acquire once the majority is back and the keys expired.  Then a majority
# frozen 0.5 s (under TTL/3, so a renewal due meanwhile is retried until it succeeds),
# the worker terminated (the postmaster starts it again after 1 s, inside the two thirds
# of the TTL a renewed lock has left), a minority (2 masters) killed for 1.2 x TTL + 0.3 s
# (delayed restart, spec §8), and meanwhile the worker frozen for 0.5 s.  With
# from_first_hold => 1, the schedule counts from the first hold (_lease_start) instead of
# the start of the run: 16 psql clients can take seconds to start on a loaded machine,
# and a first freeze begun late is also cut short (it ends at its set time).
sub _long_job_faults
{
	my ($f, %o) = @_;
	my $out = _delayed_out($f);
	my @majority = ([ 0, 1, 2 ], [ 2, 3, 4 ], [ 1, 3, 4 ], [ 0, 2, 4 ], [ 0, 1, 3 ]);
	my ($t, $k) = (($o{from_first_hold} ? _lease_start($f) : 0) + 1.0, 0);
	while ($t + $out < $f->{seconds})
	{
		my $set = $majority[ $k % @majority ];
		$f->at($t);
		$f->stop(@$set);
		$f->at($t + $out);
		$f->cont(@$set);
		$t += $out + 1.0;
		last if $t + 0.5 > $f->{seconds};
		$set = $majority[ ($k + 1) % @majority ];
		$f->at($t);
		$f->stop(@$set);
		$f->at($t + 0.5);
		$f->cont(@$set);
		push @{ $f->{windows}{'a majority frozen 0.5 s'} }, [ $t, $t + 0.5 ];
		$t += 1.5;
		last if $t > $f->{seconds};
		$f->at($t);
		$f->worker_term;
		$t = $f->now + 1.0;
		last if $t + $out > $f->{seconds};
		my @kill = ($k % 5, ($k + 2) % 5);
		$f->at($t);
		$f->kill(@kill);
		$f->at($t + 1.0);
		$f->worker_stop;
		$f->at($t + 1.5);
		$f->worker_cont;
		$f->at($t + $out);
		$f->start(@kill);
		$t += $out + 1.0;
		$k++;
	}
	return;
}

# Runs the fault schedule PLAN ([time, code] in time order) and, between its actions, TICK
# every PERIOD seconds until the end of the run.
sub _ticking
{
	my ($f, $period, $tick, @plan) = @_;
	for my $p (@plan)
	{
		$f->every($period, $p->[0], $tick);
		last if $f->now >= $f->{seconds};
		$p->[1]->();
	}
	$f->every($period, $f->{seconds}, $tick);
	return;
}

# For reload-loop (RELOADS 1: pg_reload_conf() every 100 ms) and extend-renew (0).
# One master killed at a time, and 2 frozen only 1.5 s after it is back (empty): every lock
# then stays on a majority of the masters that answer, so a holder that finds its lock lost
# lost it to something else than these faults.
sub _renew_faults
{
	my ($f, $reloads) = @_;
	my $out = _delayed_out($f);
	my @plan;
	for (my $t = 1.0, my $k = 0; $t + 0.6 + $out + 0.3 < $f->{seconds}; $t += 0.6 + $out + 2.0, $k++)
	{
		my ($a, $b, $c, $d) = map { ($k + $_) % 5 } 0, 2, 3, 4;
		push @plan, [ $t, sub { $f->stop($a) } ], [ $t + 0.5, sub { $f->cont($a) } ],
		  [ $t + 0.6, sub { $f->kill($b) } ], [ $t + 0.6 + $out, sub { $f->start($b) } ],
		  [ $t + 0.6 + $out + 1.5, sub { $f->stop($c, $d) } ],
		  [ $t + 0.6 + $out + 1.8, sub { $f->cont($c, $d) } ];
	}
	_ticking($f, 0.1, $reloads ? sub { $f->reload } : sub { }, @plan);
	return;
}

# For the extend scenarios: a majority (3 masters) frozen for 0.4 s, so that extends in
# that window raise 08006 while the frozen masters run them when they wake; then a
# minority killed for 1.2 x the largest TTL + 0.3 s (delayed restart), with a third master
# frozen for 0.4 s meanwhile (no quorum), then one master frozen for 0.5 s.
sub _extend_faults
{
	my ($f) = @_;
	my $out = _delayed_out($f);
	my @majority = ([ 0, 1, 2 ], [ 2, 3, 4 ], [ 1, 3, 4 ], [ 0, 2, 4 ], [ 0, 1, 3 ]);
	my ($t, $k) = (0.8, 0);
	while ($t + 0.6 < $f->{seconds})
	{
		my $set = $majority[ $k % @majority ];
		$f->at($t);
		$f->stop(@$set);
		$f->at($t + 0.4);
		$f->cont(@$set);
		$t += 1.4;
		last if $t + $out + 0.3 > $f->{seconds};
		my @kill = ($k % 5, ($k + 3) % 5);
		my $other = ($k + 1) % 5;
		$f->at($t);
		$f->kill(@kill);
		$f->at($t + 0.6);
		$f->stop($other);
		$f->at($t + 1.0);
		$f->cont($other);
		$f->at($t + $out);
		$f->start(@kill);
		$t += $out + 0.5;
		$f->at($t);
		$f->stop(($k + 2) % 5);
		$f->at($t + 0.5);
		$f->cont(($k + 2) % 5);
		$t += 1.2;
		$k++;
	}
	return;
}

# For the server-list scenarios, starting on masters 0-2.
#
# While a list changes, backends switch one by one (each between two commands), and a
# lock on 2 of masters 0-2 and one on 3 of masters 0-4 need not share a master: {0,1} and
# {2,3,4}.  So a change is safe only when every lock still valid, taken on either list,
# holds all 3 masters common to both, which is so once those masters have been up and
# answering for a TTL (and stay so a moment after).  That rule, whatever the client does.
#
# Safe (UNSAFE 0), in a loop: master 1 frozen for 0.3 s, masters 3 and 4 restarted empty
# (they are not in the list); the list grown to 0-4 a TTL + 0.5 s later; master 4 killed
# and restarted (empty) after 1.2 x TTL + 0.3 s (a lock on 3 of 0-3 holds 2 of 0-2); master 0
# frozen for 0.3 s; the list shrunk to 0-2 a TTL + 0.5 s later; master 2 killed and
# restarted after 1.2 x TTL + 0.3 s.
# Unsafe: master 2 killed, and after 0.8 s restarted empty, and the list grown to 0-4 at
# once: a lock taken on 0 and 1 alone meets a second holder on 2, 3 and 4.
sub _servers_faults
{
	my ($f, $unsafe) = @_;
	my $out = _delayed_out($f);
	my $quiet = $f->{ttl_ms} / 1000 + 0.5;
	my $t = 0.5;
	while ($t + 1.5 < $f->{seconds})
	{
		if ($unsafe)
		{
			$f->at($t);
			$f->kill(3, 4);
			$f->start(3, 4);
			$f->kill(2);
			$f->at($t + 0.8);
			$f->start(2);
			$f->servers(0 .. 4);
			$f->at($t + 1.6);
			$f->servers(0, 1, 2);
			$t += 2.4;
			next;
		}
		$f->at($t);
		$f->stop(1);
		$f->at($t + 0.3);
		$f->cont(1);
		$f->kill(3, 4);
		$f->start(3, 4);
		# One master at a time: the old and the new quorum then always share a master
		# (q_old + q_new > masters in either list), whichever list each backend is on.
		$f->at($t + 0.3 + $quiet);
		$f->servers(0 .. 3);
		$f->at($t + 1.3 + $quiet);
		$f->servers(0 .. 4);
		$t += 1.3 + $quiet + 0.5;
		last if $t + $out + 0.3 + $quiet > $f->{seconds};
		$f->at($t);
		$f->kill(4);
		$f->at($t + $out);
		$f->start(4);
		$f->at($t + $out + 0.2);
		$f->stop(0);
		$f->at($t + $out + 0.5);
		$f->cont(0);
		$f->at($t + $out + 0.5 + $quiet);
		$f->servers(0 .. 3);
		$f->at($t + $out + 1.5 + $quiet);
		$f->servers(0, 1, 2);
		$t += $out + 1.5 + $quiet + 0.5;
		last if $t + $out + 0.5 > $f->{seconds};
		$f->at($t);
		$f->kill(2);
		$f->at($t + $out);
		$f->start(2);
		$t += $out + 0.2;
	}
	return;
}

# In a loop: up to 2 holders paused (SIGSTOP) for longer than any validity, then continued.
sub _pause_holders
{
	my ($f) = @_;
	my $pause = _delayed_out($f) + 0.3;
	for (my $t = 1.0; $t + $pause + 0.3 < $f->{seconds}; $t += $pause + 0.7)
	{
		$f->at($t);
		$f->pause_holders(2);
		$f->at($t + $pause);
		$f->resume_holders;
	}
	return;
}

# From 1 s on, every 2 s, an operator evicts a stuck holder (SIGSTOPped, its lock
# force-released); 1.2 s after the release (which may take a while on a loaded machine),
# within its validity, the holder continues: the next holder has written by then.
sub _force_releases
{
	my ($f) = @_;
	for (my $t = 1.0; $t + 1.6 < $f->{seconds}; $t += 2.0)
	{
		$f->at($t);
		$f->force_release_holders(1);
		$f->at($f->now + 1.2);
		$f->resume_holders;
	}
	return;
}

# The clocks of masters I... run FACTOR times too fast for the whole run.
sub _fast_clock
{
	my ($f, $factor, @i) = @_;
	$f->fast_clock($factor, @i);
	$f->every(0.02, $f->{seconds}, sub { $f->fast_clock_tick });
	return;
}

# SIGSTOP, in turn, of the masters of each [ [masters], seconds ] of PLAN for its
# seconds, then SIGCONT; 0.7 s apart, from 1 s on, in a loop until the run ends.
sub _freeze_plan
{
	my ($f, @plan) = @_;
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
	return;
}

# blip-majority: 3 of 5 masters frozen for 0.2-0.6 s at a time, another majority each time.
sub _majority_blips
{
	my ($f) = @_;
	_freeze_plan($f, [ [ 0, 1, 2 ], 0.4 ], [ [ 1, 3, 4 ], 0.2 ], [ [ 0, 2, 4 ], 0.6 ],
		[ [ 0, 1, 3 ], 0.3 ]);
	return;
}

# Masters 0, 1 and 2 killed at once and restarted at once, every PERIOD s (2.5).
sub _majority_restart
{
	my ($f, $period) = @_;
	$period //= 2.5;
	my $t = 1.5;
	while ($t + 0.8 < $f->{seconds})
	{
		$f->at($t);
		$f->kill(0, 1, 2);
		# At once: one after another, a loaded machine took 1.2 s, past the controls'
		# window (a holder still working; a token within the same second).
		$f->start_at_once(0, 1, 2);
		$t += $period;
	}
	return;
}

# As _majority_restart, with the data lost at once and no downtime (FLUSHALL).
sub _majority_wipe
{
	my ($f) = @_;
	for (my $t = 1.5; $t + 0.8 < $f->{seconds}; $t += 2.5)
	{
		$f->at($t);
		$f->wipe(0, 1, 2);
	}
	return;
}

# Every master killed at once (first at 3 s, once holders have taken tokens) and started
# again, empty, after 1.2 x TTL + 0.3 s and at least 1.2 s (README's delayed restart:
# longer than the TTL and than 1 s), then up for 2 s from when the last one answers,
# and again.  With master_step_ms, each restart sets every master's wall clock
# that much further off (skewclock.c in LD_PRELOAD): a clock stepped back.
sub _all_restart_delayed
{
	my ($f, %o) = @_;
	my $out = _delayed_out($f);
	$out = 1.2 if $out < 1.2;
	my @all = 0 .. $f->{redis}->count - 1;
	my ($t, $k) = (3.0, 0);
	while ($t + $out + 0.5 < $f->{seconds})
	{
		$f->at($t);
		$f->kill(@all);
		$f->at($t + $out);
		$k++;
		my %env = $o{master_step_ms}
		  ? (LD_PRELOAD => Checker::skew_shim(), RL_SKEW_MS => $k * $o{master_step_ms}, RL_SKEW_PIDS => '')
		  : ();
		local @ENV{ keys %env } = values %env;
		$f->start_at_once(@all);
		$f->_mark("masters' clocks now $env{RL_SKEW_MS} ms off") if %env;
		$t = $f->now + 2.0;
	}
	return;
}

# ---- the lease scenarios of issue 21 ----

# Opens the fault session and waits until a job holds a lock (starting 16 psql clients can
# take seconds on a loaded machine); returns the time then, which the schedules count from.
sub _lease_start
{
	my ($f) = @_;
	$f->worker_pid;
	PsqlSession::wait_until($f->{seconds},
		sub { ($f->{psql}->query('SELECT count(*) > 0 FROM checker_jobs'))[0] eq 't' });
	my $b = $f->now;
	$f->_mark(sprintf('first hold (schedule counted from +%.2f s)', $b)) if $b > 1;
	return $b;
}

# The worker terminated every 4 s from 1.5 s (Faults::worker_term waits until it is back).
sub _lease_term_faults
{
	my ($f) = @_;
	my $b = _lease_start($f);
	for (my $t = $b + 0.5; $t + 1.5 < $f->{seconds}; $t += 4)
	{
		$f->at($t);
		$f->worker_term;
	}
	return;
}

# The worker stalled for 1.2 x TTL + 0.3 s (every lock it keeps runs out), then continued;
# with TERM, also terminated 1.5 s later; in a loop.
sub _lease_stall_faults
{
	my ($f, $term) = @_;
	my $out = _delayed_out($f);
	my $t = _lease_start($f) + 0.5;
	while ($t + $out < $f->{seconds})
	{
		$f->at($t);
		$f->worker_stop;
		$f->at($f->now + $out);
		$f->worker_cont;
		$t = $f->now + 1.5;
		if ($term && $t + 1.5 < $f->{seconds})
		{
			$f->at($t);
			$f->worker_term;
			$t = $f->now + 1.5;
		}
	}
	return;
}

# The worker stalled 0.35, 0.45 or 0.5 s (around what a lock renewed TTL/3 ago has left,
# so the watchdogs fire and the worker mostly renews in time), then 0.6 s later a majority
# frozen for 1.2 x TTL + 0.3 s (every lock lost for real); in a loop.
sub _lease_stall_loss_faults
{
	my ($f) = @_;
	my $out = _delayed_out($f);
	my @stalls = (0.35, 0.45, 0.5);
	my @majority = ([ 0, 1, 2 ], [ 2, 3, 4 ], [ 1, 3, 4 ], [ 0, 2, 4 ], [ 0, 1, 3 ]);
	my ($t, $k) = (_lease_start($f) + 0.5, 0);
	while ($t + 0.6 + $out < $f->{seconds})
	{
		$f->at($t);
		$f->worker_stop;
		$f->at($f->now + $stalls[ $k % @stalls ]);
		$f->worker_cont;
		my $set = $majority[ $k % @majority ];
		$f->at($f->now + 0.6);
		$f->stop(@$set);
		$f->at($f->now + $out);
		$f->cont(@$set);
		$t = $f->now + 1.0;
		$k++;
	}
	return;
}

# The fdw scenarios (Checker/Fdw.pm): the worker of each job cluster in turn ($f->{job_nodes})
# SIGSTOPped for 1.2 x TTL + 0.3 s (every lock it keeps runs out; a job idle in its
# transaction meets the loss at its next command, its COMMIT among them), then continued;
# 0.7 s apart, in a loop.  The other cluster's jobs go on meanwhile and take the resources.
sub _fdw_stall_faults
{
	my ($f) = @_;
	my @nodes = @{ $f->{job_nodes} };
	my $out = _delayed_out($f);
	my ($t, $k) = (_lease_start($f) + 0.5, 0);
	while ($t + $out < $f->{seconds})
	{
		my $node = $nodes[ $k++ % @nodes ];
		$f->at($t);
		$f->worker_stop($node);
		$f->at($f->now + $out);
		$f->worker_cont($node);
		$t = $f->now + 0.7;
	}
	return;
}

# redlock.key_prefix changed to a new prefix every 2 s from 1.5 s, put back at the end.
sub _lease_prefix_faults
{
	my ($f) = @_;
	$f->{prefix_psql}{ $f->{node}->name } //= PsqlSession::session($f->{node});
	my $k = 0;
	for (my $t = _lease_start($f) + 0.5; $t < $f->{seconds} - 0.5; $t += 2)
	{
		$f->at($t);
		$f->key_prefix('checker-pfx' . ++$k . ':');
	}
	$f->at($f->{seconds});
	$f->key_prefix(undef);
	return;
}

1;
