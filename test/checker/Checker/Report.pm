# test/checker/Checker/Report.pm: what a checker run shows: the figures Checker::run
# reads from the node after the run (fencing tokens, long jobs, jobs across commands,
# liveness per state of the masters), their description and tables, and the Test::More
# checks every run must pass (check_run, check_fence, check_permits).
#
# Checker.pm imports describe, the tables' subs and the checks: callers name them
# Checker::describe, Checker::check_run, ...

package Checker::Report;

use strict;
use warnings;

use Exporter 'import';
use Test::More ();

our @EXPORT_OK = qw(check_fence check_permits check_run check_shared control_shown describe fence_table_header
  fence_table_line job_table_header job_table_line permit_table_header permit_table_line
  table_header table_line _fence_figures _job_figures _lease_figures _permit_figures
  _shared_figures _rows
  _state_windows _watch_figures);

# ---- figures ----

# The figures of a run on shared locks (run's shared), into R: acquisitions by mode
# (shared_acquired, exclusive_acquired), the most shared holders inside at once
# (max_readers: counted at each shared claim, the claimant included) and how many
# shared claims found other readers inside (claims_shared).
sub _shared_figures
{
	my ($node, $r) = @_;
	($r->{shared_acquired}, $r->{exclusive_acquired}, $r->{max_readers}, $r->{claims_shared})
	  = @{
		(
			_rows($node, q{
SELECT count(*) FILTER (WHERE mode = 'shared'), count(*) FILTER (WHERE mode = 'exclusive'),
	coalesce(max(inside) FILTER (WHERE mode = 'shared'), 0),
	count(*) FILTER (WHERE mode = 'shared' AND inside >= 2)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };
	return;
}

# The figures of a run on semaphores (run's permits: k), into R, from the claims
# (checker_permit_claim in checker.sql), each of which counted the holders inside: the
# most holders inside at once (max_inside: the claimant included; the count rises only
# at a claim, so its largest value at a claim is the largest of the run), how many claims
# found others inside (claims_shared) and how many by number inside (inside_hist), the
# slots the holds took (slot_hist) and those whose slot could not be read from
# redlock_locks().key (slot_unknown); the violations by kind: claim (k or more others
# inside: holder k + 1), slot (another holder of our slot), unclaim; and how many
# masters accepted each permit (permit_nodes_hist).
sub _permit_figures
{
	my ($node, $r) = @_;
	($r->{max_inside}, $r->{claims}, $r->{claims_shared}, $r->{slot_unknown}) = @{
		(
			_rows($node, q{
SELECT coalesce(max(inside), 0), count(inside), count(*) FILTER (WHERE inside >= 2),
	count(*) FILTER (WHERE slot IS NULL)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	};
	$r->{inside_hist} = { map { @$_ } _rows($node, q{
SELECT inside, count(*) FROM checker_attempts WHERE outcome = 'acquired' AND inside IS NOT NULL
GROUP BY 1}) };
	$r->{slot_hist} = { map { @$_ } _rows($node, q{
SELECT coalesce(slot::text, '?'), count(*) FROM checker_attempts WHERE outcome = 'acquired'
GROUP BY 1}) };
	$r->{permit_nodes_hist} = { map { @$_ } _rows($node, q{
SELECT coalesce(nodes::text, '?'), count(*) FROM checker_attempts WHERE outcome = 'acquired'
GROUP BY 1}) };
	my %v = map { @$_ } _rows($node, 'SELECT what, count(*) FROM checker_violations GROUP BY 1');
	$r->{"${_}_violations"} = $v{$_} // 0 for qw(claim slot unclaim);
	return;
}

# The committed work of a run of jobs on auto-extended permits, into R (from
# _job_figures): a hold B of a semaphore of k permits is a violation when k or more
# other holds of it, acquired before B, committed writes after B acquired (k + 1
# holders' committed work overlapping; for k = 1 this is the rule for locks below),
# unless B's claim already counted it (a 'claim' violation of the same hold).
# committed_overlap_max: the most holds whose committed work spanned an acquisition,
# the acquiring hold included.
sub _permit_job_overlaps
{
	my ($node, $t0, $r) = @_;
	my $k = $r->{permits};
	my @rows = _rows($node, qq{
WITH holds AS (
	SELECT resource, pid, t1, max(pg_xact_commit_timestamp(xmin)) AS last_commit
	FROM checker_writes GROUP BY 1, 2, 3),
b AS (SELECT DISTINCT resource, pid, t1 FROM checker_attempts WHERE outcome = 'acquired')
SELECT round((extract(epoch FROM b.t1) - $t0)::numeric, 3), b.resource, b.pid, count(a.pid),
	coalesce(string_agg(format('pid %s committed up to %s ms after', a.pid,
		round((extract(epoch FROM a.last_commit - b.t1) * 1000)::numeric, 1)), ', '
		ORDER BY a.t1), ''),
	EXISTS (SELECT 1 FROM checker_violations v WHERE v.what = 'claim'
		AND v.resource = b.resource AND v.pid = b.pid AND v.acquired_at = b.t1)
FROM b LEFT JOIN holds a ON a.resource = b.resource AND NOT (a.pid = b.pid AND a.t1 = b.t1)
	AND a.t1 <= b.t1 AND a.last_commit > b.t1
GROUP BY b.resource, b.pid, b.t1
ORDER BY 1});
	my $max = 0;
	$r->{overlaps} = 0;
	for my $row (@rows)
	{
		$max = $row->[3] + 1 if $row->[3] + 1 > $max;
		next if $row->[3] < $k;
		$r->{overlaps}++;
		push @{ $r->{overlap_rows} },
		  sprintf('+%.3f s %s: pid %s acquired while %s other holds went on to commit: %s',
			@$row[ 0 .. 4 ]);
		next if $row->[5] eq 't';
		push @{ $r->{violation_rows} },
		  {
			at => $row->[0],
			resource => $row->[1],
			pid => $row->[2],
			what => "overlap: $row->[3] other holds committed after it acquired;",
			other_pid => '-',
			other_inside_ms => '?',
			other_validity_left_ms => '?',
			since_acquired_ms => '0',
			nodes => '?',
			validity_ms => '?',
			slot => '',
			others => $row->[4],
		  };
	}
	$r->{committed_overlap_max} = $max;
	$r->{violation_rows} = [ sort { $a->{at} <=> $b->{at} } @{ $r->{violation_rows} } ];
	$r->{violations} = scalar @{ $r->{violation_rows} };
	return;
}

# The figures of a run of jobs across commands, into R: from the LOG lines of
# checker_lease_write (which no rollback takes back), the writes a job made after the
# next holder of its resource had acquired, committed or not (ran_on), and how many
# holds did (holds_ran_on).  Committed ones are the judge's overlaps; the others are work
# the loss protocol should have stopped when the owner could be reached (a running
# statement), or did not let commit.
sub _lease_figures
{
	my ($node, $log, $r) = @_;
	my %next;    # "resource/pid/t1" => the next hold's t1
	my %holds;
	push @{ $holds{ $_->[0] } }, $_
	  for _rows($node, q{
SELECT resource, pid, extract(epoch FROM t1)::text FROM checker_attempts WHERE outcome = 'acquired'
ORDER BY resource, t1});
	for my $res (keys %holds)
	{
		my @h = @{ $holds{$res} };
		$next{"$res/$h[$_][1]/$h[$_][2]"} = $h[ $_ + 1 ][2] for 0 .. $#h - 1;
	}
	my ($ran_on, %holds_ran_on) = (0);
	while ($log =~ /checker-write: (\d+) (\S+) (\S+) (\S+)$/mg)
	{
		my ($pid, $t1, $at, $res) = ($1, $2, $3, $4);
		my $n = $next{"$res/$pid/$t1"};
		next unless defined $n && $at > $n;
		$ran_on++;
		$holds_ran_on{"$res/$pid/$t1"} = 1;
	}
	$r->{ran_on} = $ran_on;
	$r->{holds_ran_on} = scalar keys %holds_ran_on;
	$r->{lease_writes_logged} = () = $log =~ /checker-write: /g;
	# Losses the owners met: a release that found its lock run out (the watchdog or the
	# commit check stopped the job and the job released before the worker, stalled or
	# restarting, could log the loss).
	$r->{release_found_lost} = 0;
	$r->{release_found_lost} += $_
	  for map { $r->{warnings}{$_} }
	  grep { /^lock on resource "\.\.\." had (?:expired|been lost) before it was released/ }
	  keys %{ $r->{warnings} // {} };
	return;
}

# The figures of a fenced run, into R.  A token is granted when redlock_fencing_token
# returns; the scheme promises (README "Fencing tokens") that a token granted after
# another one of the same resource was granted is larger.  So:
#   inversions: holds B for which a hold A of the same resource got its token before B
#     asked for one (A's token_t1 < B's token_t0) and A's token >= B's;
#   token_dups: tokens that two holds of the same resource both got;
#   stale_landed: writes that landed although a write with a larger token had landed
#     before (the fence condition refuses them; the unfenced control lets them in);
#   stale_refused: writes the fence condition refused; late_writes: writes made after
#     the writer's own validity had run out (paused holders).
sub _fence_figures
{
	my ($node, $t0, $r) = @_;
	(
		$r->{tokens}, $r->{token_errors}, $r->{writes}, $r->{stale_refused},
		$r->{stale_landed}, $r->{late_writes}, $r->{late_refused}
	  )
	  = @{
		(
			_rows($node, q{
SELECT count(token), count(token_sqlstate), count(write_at),
	count(*) FILTER (WHERE NOT write_applied),
	count(*) FILTER (WHERE write_applied AND write_prev > token),
	count(*) FILTER (WHERE write_at > valid_until),
	count(*) FILTER (WHERE write_at > valid_until AND NOT write_applied)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };
	$r->{token_error_states} = {
		map { $_->[0] => $_->[1] } _rows($node, q{
SELECT token_sqlstate, count(*) FROM checker_attempts
WHERE token_sqlstate IS NOT NULL GROUP BY 1})
	};
	# One sweep over the token calls' starts and ends in time order (a start before an end
	# at the same time: "before" is strict), keeping per resource the largest token
	# granted so far; each start compares its token with that.  Times read by backends
	# whose clock was set off (skew_callers_ms: those of an odd pid) are put back first.
	my $back = -($r->{skew_callers_ms} // 0) / 1000;
	my @holds = _rows($node, qq{
SELECT resource, pid, token,
	extract(epoch FROM token_t0) - $t0 + CASE WHEN pid % 2 = 1 THEN $back ELSE 0 END,
	extract(epoch FROM token_t1) - $t0 + CASE WHEN pid % 2 = 1 THEN $back ELSE 0 END
FROM checker_attempts WHERE token IS NOT NULL});
	my %largest;
	my @inversions;
	for my $e (sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] }
		(map { [ $_->[3], 0, $_ ] } @holds), (map { [ $_->[4], 1, $_ ] } @holds))
	{
		my ($t, $is_end, $h) = @$e;
		my $m = $largest{ $h->[0] };
		if ($is_end)
		{
			$largest{ $h->[0] } = $h if !$m || $h->[2] > $m->[2];
		}
		elsif ($m && $m->[2] >= $h->[2])
		{
			push @inversions, [ $t, @$h[ 0 .. 2 ], $m->[1], $m->[2], 1000 * ($t - $m->[4]) ];
		}
	}
	$r->{inversion_rows} = \@inversions;
	$r->{inversions} = @inversions;

	# Around the first restart of every master (a run with skew_callers_ms): tokens
	# granted before the kill, and asked for after the masters were up again.
	my ($kill) = map { $_->[0] } grep { $_->[1] =~ /^kill -9 master/ } @{ $r->{events} // [] };
	my ($up) = map { $_->[0] } grep { $_->[1] =~ / up again$/ } @{ $r->{events} // [] };
	if (defined $kill && defined $up)
	{
		$r->{tokens_before_restart} = grep { $_->[4] < $kill } @holds;
		$r->{tokens_after_restart} = grep { $_->[3] > $up } @holds;
	}
	my @dups = _rows($node, q{
SELECT resource, token FROM checker_attempts WHERE token IS NOT NULL
GROUP BY 1, 2 HAVING count(*) > 1});
	$r->{token_dups} = @dups;
	return;
}

# The figures of a long-job run, into R; its violations replace those of the guard alone.
#
# A job's guard stays claimed from its claim to checker_job_end, also after a cancel, and
# a job that swallowed the cancel is still inside, writing, when another session takes
# the lock (run out on the masters) and claims the guard.  Such a claim conflict is
# harmless only if the work of the first holder after its loss never became visible.
# So a conflict (a claim that found the guard held) is a violation unless all of these
# hold:
#   - the worker had logged the loss of the other holder's lock (LOG "redlock lock on
#     resource ... was lost", owner PID) before the claim;
#   - none of the other holder's writes of that hold committed after the loss
#     (pg_xact_commit_timestamp; the log has millisecond resolution, so a commit within
#     1 ms after the logged time counts as before it);
#   - none of them committed after this session acquired.
# And whatever the guard saw, a hold whose write committed after the next holder of the
# same resource acquired is a violation (committed work of two holders overlapping),
# counted once per pair of holds.
sub _job_figures
{
	my ($node, $log, $t0, $f, $r) = @_;

	# The worker's LOG lines of losses, with the DETAIL naming the owner.
	my @losses;
	while ($log =~ /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+) \[(\d+)\] (?:\S+ )?LOG:  redlock lock on resource "([^"\n]*)" was lost: ([^\n]*)\n(?:[^\n]*\n)*?[^\n]*\[\2\] (?:\S+ )?DETAIL:  Owner PID (\d+); ([^\n]*)$/mg)
	{
		push @losses, [ $1, $3, $5, $4, $6 ];
	}
	# A permit's loss names its slot (resource#N): its holds are the semaphore's.
	if ($r->{permits})
	{
		$_->[1] =~ s/#\d+$// for @losses;
	}
	my $logged = () = $log =~ /LOG:  redlock lock on resource "[^"\n]*" was lost: /g;
	die "checker: $logged losses in the server log, but only " . scalar(@losses)
	  . ' with the DETAIL naming the owner'
	  if $logged != @losses;
	if (@losses)
	{
		my $q = sub { (my $v = shift) =~ s/'/''/g; return "'$v'"; };
		$node->safe_psql('postgres',
			'INSERT INTO checker_losses (at, resource, owner_pid, reason, detail) VALUES '
			  . join(',',
				map { '(' . join(', ', $q->($_->[0]) . '::timestamptz', $q->($_->[1]), $_->[2],
						$q->($_->[3]), $q->($_->[4])) . ')' } @losses));
	}
	$r->{losses} = scalar @losses;
	for my $l (@losses)
	{
		(my $why = $l->[3]) =~ s/\d+/N/g;
		$r->{loss_reasons}{$why}++;
		(my $what = $l->[4]) =~ s/\.$//;
		$r->{loss_details}{$what}++;
	}

	# How the jobs ended.
	$r->{$_} = 0 for qw(jobs_done cancelled cancelled_other refused job_errors);
	for my $row (_rows($node, q{
SELECT coalesce(end_sqlstate, '?'), replace(coalesce(end_message, ''), E'\n', ' '), count(*)
FROM checker_attempts WHERE outcome = 'acquired' GROUP BY 1, 2}))
	{
		my ($state, $msg, $n) = @$row;
		if ($state eq '00000') { $r->{jobs_done} += $n; }
		elsif ($state eq '57014' && $msg =~ /^canceling statement because lock on resource ".*" was lost$/)
		{
			$r->{cancelled} += $n;
		}
		elsif ($state eq '57014') { $r->{cancelled_other} += $n; }
		elsif ($state eq '55P03' && $msg =~ /^lock on resource ".*" was lost during this transaction$/)
		{
			$r->{refused} += $n;
		}
		else
		{
			$r->{job_errors} += $n;
			(my $m = $msg) =~ s/"[^"]*"/"..."/g;
			$r->{job_error_kinds}{"$state $m"} += $n;
		}
	}
	$r->{swallowed} = () = $log =~ /WARNING:  checker: a job swallowed a cancel/g;
	(
		$r->{lost_holds}, $r->{renewals_max}, $r->{renewals_sum}, $r->{taken_over},
		$r->{done_renewals_min}
	  )
	  = @{
		(
			_rows($node, q{
SELECT count(*) FILTER (WHERE lost), coalesce(max(renewals), 0), coalesce(sum(renewals), 0),
	count(*) FILTER (WHERE taken_over),
	coalesce(min(renewals) FILTER (WHERE end_sqlstate = '00000'), 0)
FROM checker_attempts WHERE outcome = 'acquired'}))[0]
	  };
	($r->{renewals}, $r->{renewals_failed}, $r->{locks_lost}) = @{
		(_rows($node, 'SELECT renewals, renewals_failed, locks_lost FROM redlock_stats()'))[0] };
	$r->{worker_gaps} = $f->{worker_gaps} // [];
	$r->{nodes_hist} = { map { @$_ } _rows($node, q{
SELECT nodes, count(*) FROM checker_attempts WHERE outcome = 'acquired' GROUP BY 1}) };

	# Each loss: how long after the lock's last renewal (or its acquisition) the worker
	# gave it up.  The validity a renewal gives is TTL x 0.99 - 2 ms from the renewal's
	# start, a little before last_renewal: so this is a slight underestimate.
	$r->{loss_rows} = [
		_rows($node, qq{
SELECT round((extract(epoch FROM l.at) - $t0)::numeric, 3), l.resource, l.owner_pid,
	coalesce(round((extract(epoch FROM l.at - coalesce(a.last_renewal, a.t1)) * 1000)::numeric)::text, '?'),
	coalesce(a.renewals::text, '?'), coalesce(a.end_sqlstate, '?'), coalesce(a.nodes::text, '?'),
	l.reason
FROM checker_losses l
LEFT JOIN LATERAL (SELECT * FROM checker_attempts a WHERE a.pid = l.owner_pid
	AND a.resource = l.resource AND a.outcome = 'acquired' AND a.t1 < l.at
	ORDER BY a.t1 DESC LIMIT 1) a ON true
ORDER BY l.at})
	];
	my @since = grep { $_ ne '?' } map { $_->[3] } @{ $r->{loss_rows} };
	# Losses during a window of the fault schedule (or within TTL/3 after it).
	for my $w (sort keys %{ $f->{windows} // {} })
	{
		$r->{losses_in}{$w} = grep {
			my $l = $_;
			grep { $l->[0] >= $_->[0] && $l->[0] <= $_->[1] + $r->{ttl_ms} / 3000 }
			  @{ $f->{windows}{$w} }
		} @{ $r->{loss_rows} };
	}
	$r->{losses_unrenewed} = grep { $_->[7] =~ /validity time ran out before it could be renewed/ }
	  @{ $r->{loss_rows} };
	$r->{loss_after_renewal_max_ms} = @since ? (sort { $b <=> $a } @since)[0] : undef;

	# Writes committed after their hold's loss (the transaction running at the loss must
	# not commit; with cancel_on_loss off, the job is not told and works on).
	($r->{writes_after_loss}, $r->{holds_writes_after_loss}) = @{
		(
			_rows($node, q{
SELECT count(*), count(DISTINCT (w.pid, w.t1))
FROM checker_writes w JOIN checker_losses l ON l.owner_pid = w.pid AND l.resource = w.resource
	AND l.at > w.t1
WHERE pg_xact_commit_timestamp(w.xmin) >= l.at + interval '1 ms'}))[0]
	};
	($r->{writes}, $r->{writes_swallowed}) = @{
		(_rows($node, 'SELECT count(*), count(*) FILTER (WHERE swallowed) FROM checker_writes'))[0] };

	# Permits: the claims counted the holders inside (a claim that found k others is a
	# violation already, with no excuse: no job swallows a cancel), and the committed work
	# is judged by _permit_job_overlaps.
	if ($r->{permits})
	{
		$r->{conflicts} = $r->{claim_violations} // 0;
		$r->{excused} = 0;
		$r->{excused_rows} = [];
		_permit_job_overlaps($node, $t0, $r);
		return;
	}

	# Claim conflicts, excused or not (see above).
	my (@violations, @excused, %pair);
	for my $row (_rows($node, qq{
WITH c AS (
	SELECT v.*,
		(SELECT min(l.at) FROM checker_losses l WHERE l.owner_pid = v.other_pid
			AND l.resource = v.resource AND l.at > v.other_acquired_at AND l.at < v.at) AS lost_at,
		(SELECT max(pg_xact_commit_timestamp(w.xmin)) FROM checker_writes w
			WHERE w.pid = v.other_pid AND w.resource = v.resource
			AND w.t1 = v.other_acquired_at) AS last_commit
	FROM checker_violations v)
SELECT round((extract(epoch FROM at) - $t0)::numeric, 3), resource, pid, what,
	coalesce(other_pid::text, '-'),
	coalesce(round((extract(epoch FROM at - other_since) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM other_valid_until - at) * 1000)::numeric, 1)::text, '?'),
	coalesce(round((extract(epoch FROM at - acquired_at) * 1000)::numeric, 1)::text, '?'),
	coalesce(nodes::text, '?'), coalesce(validity_ms::text, '?'),
	coalesce(round((extract(epoch FROM at - lost_at) * 1000)::numeric, 1)::text, '-'),
	coalesce(round((extract(epoch FROM last_commit - lost_at) * 1000)::numeric, 1)::text, '-'),
	coalesce(lost_at IS NOT NULL AND (last_commit IS NULL
		OR (last_commit < lost_at + interval '1 ms' AND last_commit < acquired_at)), false),
	resource || '/' || extract(epoch FROM other_acquired_at) || '/' || extract(epoch FROM acquired_at)
FROM c ORDER BY at}))
	{
		my %v = (
			at => $row->[0],
			resource => $row->[1],
			pid => $row->[2],
			what => $row->[3],
			other_pid => $row->[4],
			other_inside_ms => $row->[5],
			other_validity_left_ms => $row->[6],
			since_acquired_ms => $row->[7],
			nodes => $row->[8],
			validity_ms => $row->[9],
			other_lost_ms_before => $row->[10],
			other_commit_after_loss_ms => $row->[11],
		);
		if ($row->[12] eq 't')
		{
			push @excused, \%v;
		}
		else
		{
			push @violations, \%v;
			$pair{ $row->[13] } = 1;
		}
	}

	# Committed work overlapping the next holder's.
	for my $row (_rows($node, qq{
WITH holds AS (
	SELECT pid, resource, t1 FROM checker_attempts WHERE outcome = 'acquired'
	UNION SELECT pid, resource, t1 FROM checker_writes),
seq AS (
	SELECT *, lead(pid) OVER w AS next_pid, lead(t1) OVER w AS next_t1
	FROM holds WINDOW w AS (PARTITION BY resource ORDER BY t1))
SELECT round((extract(epoch FROM min(pg_xact_commit_timestamp(w.xmin))) - $t0)::numeric, 3),
	s.resource, s.next_pid, s.pid, count(*),
	round((extract(epoch FROM max(pg_xact_commit_timestamp(w.xmin)) - s.next_t1) * 1000)::numeric, 1),
	s.resource || '/' || extract(epoch FROM s.t1) || '/' || extract(epoch FROM s.next_t1)
FROM seq s JOIN checker_writes w ON w.pid = s.pid AND w.resource = s.resource AND w.t1 = s.t1
WHERE s.next_t1 IS NOT NULL AND pg_xact_commit_timestamp(w.xmin) > s.next_t1
GROUP BY s.resource, s.pid, s.t1, s.next_pid, s.next_t1
ORDER BY 1}))
	{
		$r->{overlaps}++;
		push @{ $r->{overlap_rows} },
		  sprintf('+%.3f s %s: %s writes of pid %s committed up to %s ms after pid %s acquired',
			$row->[0], $row->[1], $row->[4], $row->[3], $row->[5], $row->[2]);
		next if $pair{ $row->[6] };
		push @violations,
		  {
			at => $row->[0],
			resource => $row->[1],
			pid => $row->[2],
			what => "overlap: $row->[4] writes of the previous holder committed up to $row->[5] ms"
			  . ' after it acquired;',
			other_pid => $row->[3],
			other_inside_ms => '?',
			other_validity_left_ms => '?',
			since_acquired_ms => '?',
			nodes => '?',
			validity_ms => '?',
		  };
	}
	$r->{overlaps} //= 0;
	$r->{conflicts} = scalar(grep { $_->{what} eq 'claim' } @violations) + @excused;
	$r->{excused_rows} = \@excused;
	$r->{excused} = scalar @excused;
	$r->{violation_rows} = [ sort { $a->{at} <=> $b->{at} } @violations ];
	$r->{violations} = scalar @violations;
	return;
}

# Rows of QUERY's result as lists of fields (psql unaligned, | separated).
# A watcher's events (HEARD: decoded payloads) matched to the run's holds (issue 43): each
# "acquired" must name a client (the holder record's pid) whose attempt on that resource
# was acquired with a quorum, and the look that saw it (its "at") must have begun while
# that hold can have been on the masters: from 200 ms before the attempt began (a look
# begins before it reads) to 200 ms after its work ended (the release's round trip).
# An "acquired" no such hold explains is unexplained: a watch that reported a lock no
# quorum held for any client.  Into R: watch_events, watch_by_event, watch_acquired,
# watch_unexplained and the first few unexplained rows.
sub _watch_figures
{
	my ($node, $heard, $t0, $r) = @_;
	my @rows = map {
		sprintf("(%s, %s, %s, to_timestamp(%.6f))",
			_sql_text($_->{resource}), _sql_text($_->{event}),
			defined $_->{pid} ? int($_->{pid}) : 'NULL', $_->{at} // 0)
	} @$heard;
	$node->safe_psql('postgres',
		'INSERT INTO checker_watch_events VALUES ' . join(', ', @rows)) if @rows;
	$r->{watch_events} = scalar @$heard;
	$r->{watch_by_event}{ $_->{event} }++ for @$heard;
	$r->{watch_acquired} = $r->{watch_by_event}{acquired} // 0;
	my $work = $r->{work_ms};
	$r->{watch_unexplained_rows} = [
		_rows($node, qq{
SELECT round((extract(epoch FROM e.at) - $t0)::numeric, 3), e.resource, coalesce(e.pid::text, '-'),
	(SELECT string_agg(a.outcome || ' ' || round((extract(epoch FROM a.t0) - $t0)::numeric, 3), ', ')
	   FROM checker_attempts a WHERE a.pid = e.pid AND a.resource = e.resource
	    AND a.t0 BETWEEN e.at - interval '1 s' AND e.at + interval '1 s')
FROM checker_watch_events e
WHERE e.event = 'acquired' AND NOT EXISTS (
	SELECT 1 FROM checker_attempts a
	 WHERE a.pid = e.pid AND a.resource = e.resource AND a.outcome = 'acquired'
	   AND e.at BETWEEN a.t0 - interval '200 ms' AND a.t1 + interval '$work ms' + interval '200 ms')
ORDER BY e.at})
	];
	$r->{watch_unexplained} = scalar @{ $r->{watch_unexplained_rows} };
	return;
}

# TEXT as an SQL string literal.
sub _sql_text
{
	my ($text) = @_;
	(my $q = $text // '') =~ s/'/''/g;
	return "'$q'";
}

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

my $HEADER = sprintf("%-26s %8s %8s %10s %8s %7s %7s %6s %7s %7s\n",
	'scenario', 'attempts', 'acquired', 'violations', 'acq/s', 'busy', 'unavail', '08006',
	'extends', 'gaveup');

# The header of the figures table.
sub table_header
{
	return $HEADER . ('-' x (length($HEADER) - 1)) . "\n";
}

# One line of the figures table.
sub table_line
{
	my ($r) = @_;
	return sprintf("%-26s %8d %8d %10d %8.1f %6.1f%% %6.1f%% %6d %7s %7s\n",
		$r->{name}, $r->{attempts}, $r->{acquired}, $r->{violations}, $r->{acq_per_s},
		$r->{busy_pct}, $r->{unavailable_pct}, $r->{unavailable},
		$r->{steps} ? $r->{extends} : '-', $r->{steps} ? $r->{gave_up} : '-');
}

# A full description of one run: settings, figures, errors, violations with their timing,
# the fault log, liveness per state and per second.
sub describe
{
	my ($r) = @_;
	my $s = "== $r->{name}: $r->{desc}\n";
	if ($r->{watch})
	{
		$s .= sprintf("   watcher: %d events (%s); acquired heard %d of %d holds; unexplained %d\n",
			$r->{watch_events},
			join(', ', map { "$_ x $r->{watch_by_event}{$_}" } sort keys %{ $r->{watch_by_event} // {} }),
			$r->{watch_acquired}, $r->{acquired}, $r->{watch_unexplained});
		$s .= sprintf("     +%s s %s: pid %s; its attempts near then: %s\n", @$_[ 0 .. 2 ], $_->[3] || 'none')
		  for grep { defined } @{ $r->{watch_unexplained_rows} }[ 0 .. 4 ];
	}
	$s .= sprintf(
		"   %d clients, %d resources, TTL %d ms, wait %d ms, work %d ms, %d s, %s masters\n",
		$r->{clients}, $r->{resources}, $r->{ttl_ms}, $r->{wait_ms}, $r->{work_ms},
		$r->{seconds}, $r->{masters});
	$s .= sprintf(
		"   attempts %d: acquired %d (%.1f/s), busy %d (%.1f%%), unavailable 08006 %d (%.1f%%),"
		  . " other errors %d\n",
		$r->{attempts}, $r->{acquired}, $r->{acq_per_s}, $r->{busy}, $r->{busy_pct},
		$r->{unavailable}, $r->{unavailable_pct}, $r->{other_errors});
	$s .= sprintf("   pairs: deadlock victims (40P01) %d, pairs held %d, waits that ran out %d\n",
		$r->{deadlocks}, $r->{acquired}, $r->{busy})
	  if $r->{pairs};
	for my $state (sort keys %{ $r->{errors} })
	{
		$s .= sprintf("   error %s x %d, e.g. \"%s\"\n",
			$state, $r->{errors}{$state}{n}, $r->{errors}{$state}{message} // '');
	}
	$s .= sprintf(
		"   holders whose validity ran out before the work was done: %d; release false: %d,"
		  . " release error: %d; fewest masters in an acquisition: %d\n",
		$r->{overran}, $r->{release_false}, $r->{release_error}, $r->{min_nodes});
	if ($r->{steps})
	{
		$s .= sprintf(
			"   held across commands: %d steps of %d ms, extend before each step to [%s] ms,"
			  . " %s holders (margin %d ms)\n",
			$r->{steps}, $r->{step_ms},
			join(',', map { $_ // '-' } @{ $r->{ext_ttls} }[ 0 .. $r->{steps} - 1 ]),
			$r->{honest} ? 'honest' : 'DISHONEST', $r->{margin_ms} // 100);
		$s .= sprintf(
			"   extends %d: false %d, 08006 %d, other errors %d; holders that gave up"
			  . " early %d; steps worked %d\n",
			$r->{extends}, $r->{extend_false}, $r->{extend_errors},
			$r->{extend_other_errors}, $r->{gave_up}, $r->{steps_done});
	}
	if (@{ $r->{gave_up_rows} // [] })
	{
		$s .= "   gave up: "
		  . join(', ', map { "$_ x $r->{gave_up_why}{$_}" } sort keys %{ $r->{gave_up_why} })
		  . "\n";
		my $n = @{ $r->{gave_up_rows} } < 5 ? @{ $r->{gave_up_rows} } : 5;
		for my $g (@{ $r->{gave_up_rows} }[ 0 .. $n - 1 ])
		{
			my $last = _last_event($r->{events}, $g->[0]);
			$s .= sprintf("     +%.3f s %s: pid %s gave up (%s) %s ms after acquiring%s\n",
				$g->[0], $g->[1], $g->[2], $g->[4], $g->[5],
				$last ? sprintf('; last fault +%.3f s %s', @$last[ 0, 1 ]) : '');
		}
	}
	$s .= _describe_job($r) if $r->{job};
	$s .= "   clients idle $r->{idle_ms} ms between attempts\n" if $r->{idle_ms};
	$s .= "   client settings: @{ $r->{pgoptions} }\n" if @{ $r->{pgoptions} // [] };
	$s .= "   fault counts: "
	  . join(', ', map { "$_ x $r->{fault_counts}{$_}" } sort keys %{ $r->{fault_counts} })
	  . "\n"
	  if %{ $r->{fault_counts} // {} };
	$s .= ($r->{job} ? '   psql clients: exit status' : '   pgbench exit status')
	  . " $r->{pgbench_rc}\n";
	$s .= "   clients that ran out of script before the end: $r->{ran_out}\n" if $r->{ran_out};
	for my $w (sort { $r->{warnings}{$b} <=> $r->{warnings}{$a} } keys %{ $r->{warnings} })
	{
		$s .= sprintf("   server log WARNING x %d: %s\n", $r->{warnings}{$w}, $w);
	}
	if ($r->{pgbench_rc} != 0)
	{
		my @lines = split /\n/, $r->{pgbench_err};
		$s .= "   pgbench stderr: $_\n" for @lines[ 0 .. ($#lines < 9 ? $#lines : 9) ];
	}
	$s .= _describe_fence($r) if $r->{fence};
	$s .= _describe_permits($r) if $r->{permits};
	$s .= sprintf(
		"   shared locks: %d shared and %d exclusive acquisitions; most shared holders"
		  . " inside at once %d; %d shared claims found other readers inside\n",
		$r->{shared_acquired}, $r->{exclusive_acquired}, $r->{max_readers},
		$r->{claims_shared})
	  if $r->{shared};
	$s .= sprintf("   VIOLATIONS: %d%s\n", $r->{violations},
		$r->{expect_violations} ? ' (negative control: expected > 0)'
		: $r->{violations_by_design} ? " (not judged: $r->{violations_by_design})"
		:                              '');
	my $shown = 0;
	for my $v (@{ $r->{violation_rows} })
	{
		last if ++$shown > 20;
		my $last = _last_event($r->{events}, $v->{at});
		$s .= sprintf(
			"     +%.3f s %s: pid %s %s found pid %s inside for %s ms (its validity %s ms"
			  . " left); ours acquired %s ms before with %s masters, validity %s ms%s%s\n",
			$v->{at}, $v->{resource}, $v->{pid}, $v->{what}, $v->{other_pid},
			$v->{other_inside_ms}, $v->{other_validity_left_ms}, $v->{since_acquired_ms},
			$v->{nodes}, $v->{validity_ms},
			($v->{others} // '') ne ''
			? sprintf('; our slot %s; inside: %s', ($v->{slot} // '') eq '' ? '?' : $v->{slot},
				$v->{others})
			: '',
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

# The fencing lines of describe.
sub _describe_fence
{
	my ($r) = @_;
	my $s = sprintf(
		"   fencing (%s writes): tokens %d, token errors %d%s; writes %d, refused by the"
		  . " fence %d, stale writes that landed %d; writes after the writer's validity %d"
		  . " (refused %d)\n",
		$r->{fence}, $r->{tokens}, $r->{token_errors},
		%{ $r->{token_error_states} }
		? ' (' . join(', ', map { "$_ x $r->{token_error_states}{$_}" }
			  sort keys %{ $r->{token_error_states} }) . ')'
		: '',
		$r->{writes}, $r->{stale_refused}, $r->{stale_landed}, $r->{late_writes},
		$r->{late_refused});
	$s .= sprintf("   tokens granted before the first restart of the masters %d, asked for after"
		  . " it %d\n", $r->{tokens_before_restart}, $r->{tokens_after_restart})
	  if defined $r->{tokens_before_restart};
	$s .= sprintf("   TOKEN INVERSIONS: %d, equal tokens: %d%s\n",
		$r->{inversions}, $r->{token_dups},
		$r->{expect_inversions} ? ' (negative control: expected > 0)' : '');
	my $n = @{ $r->{inversion_rows} } < 10 ? @{ $r->{inversion_rows} } : 10;
	$s .= sprintf("     +%.3f s %s: pid %s got token %s, %.1f ms after pid %s got %s\n",
		@$_[ 0 .. 3, 6, 4, 5 ])
	  for @{ $r->{inversion_rows} }[ 0 .. $n - 1 ];
	return $s;
}

# The permit lines of describe.
sub _describe_permits
{
	my ($r) = @_;
	my $h = sub {
		my ($hist) = @_;
		return join(', ', map { "$_ x $hist->{$_}" }
			  sort { ($a =~ /^\d+$/ ? $a : 1e9) <=> ($b =~ /^\d+$/ ? $b : 1e9) } keys %$hist) || '-';
	};
	my $s = sprintf(
		"   semaphores of %d permits (redlock_acquire_permit): most holders inside at once %d;"
		  . " claims %d, %d of them with others inside; holders inside at a claim (the"
		  . " claimant included): %s\n",
		$r->{permits}, $r->{max_inside}, $r->{claims}, $r->{claims_shared},
		$h->($r->{inside_hist}));
	$s .= sprintf("   masters that accepted each permit: %s\n",
		join(', ', map { "$_ x $r->{permit_nodes_hist}{$_}" }
			  sort { $b cmp $a } keys %{ $r->{permit_nodes_hist} }));
	$s .= sprintf(
		"   slots taken: %s%s; violations: %d claims found %d or more others inside, %d found"
		  . " their slot held, %d unclaims failed\n",
		$h->($r->{slot_hist}),
		$r->{slot_unknown} ? " ($r->{slot_unknown} holds whose slot was not read)" : '',
		$r->{claim_violations}, $r->{permits}, $r->{slot_violations}, $r->{unclaim_violations});
	$s .= sprintf(
		"   committed work: at most %d holds' writes spanned an acquisition (the acquiring hold"
		  . " included); acquisitions that %d or more others' later commits spanned: %d\n",
		$r->{committed_overlap_max}, $r->{permits}, $r->{overlaps})
	  if $r->{job};
	return $s;
}

# The header of the permits table.
sub permit_table_header
{
	my $h = sprintf("%-30s %8s %8s %10s %6s %5s %7s %7s %8s %7s\n", 'scenario', 'attempts',
		'acquired', 'violations', 'count', 'slot', 'permits', 'max in', 'shared', 'unavail');
	return $h . ('-' x (length($h) - 1)) . "\n";
}

# One line of the permits table: violations (count: a claim found k or more others
# inside; slot: a claim found its slot held), the semaphore's permits, the most holders
# inside at once, the claims that found others inside, the attempts that raised 08006.
sub permit_table_line
{
	my ($r) = @_;
	return sprintf("%-30s %8d %8d %10d %6d %5d %7d %7d %8d %6.1f%%\n", $r->{name},
		$r->{attempts}, $r->{acquired}, $r->{violations}, $r->{claim_violations},
		$r->{slot_violations}, $r->{permits}, $r->{max_inside}, $r->{claims_shared},
		$r->{unavailable_pct});
}

# The header of the fencing table.
sub fence_table_header
{
	my $h = sprintf("%-28s %8s %10s %7s %10s %6s %8s %6s %5s %6s\n", 'scenario', 'acquired',
		'violations', 'tokens', 'inversions', 'equal', 'refused', 'stale', 'late', 'nodes');
	return $h . ('-' x (length($h) - 1)) . "\n";
}

# One line of the fencing table: token inversions (equal tokens taken one after the
# other count there too), tokens two holds both got, writes refused by the fence, stale
# writes that landed, writes made after the writer's validity, fewest masters in an
# acquisition.
sub fence_table_line
{
	my ($r) = @_;
	return sprintf("%-28s %8d %10d %7d %10d %6d %8d %6d %5d %6d\n", $r->{name},
		$r->{acquired}, $r->{violations}, $r->{tokens}, $r->{inversions}, $r->{token_dups},
		$r->{stale_refused}, $r->{stale_landed}, $r->{late_writes}, $r->{min_nodes});
}

# The Test::More checks every scenario run R must pass (TAP 011 and 013): the clients ran
# to the end, locks were acquired, no error but 08006; no violation, or some for a
# negative control (none judged where the scenario measures them by design); a fenced
# run's checks (check_fence).
sub check_run
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	Test::More::is($r->{pgbench_rc}, 0, "$name: pgbench ran to the end (no client aborted)")
	  or Test::More::diag($r->{pgbench_err});
	Test::More::cmp_ok($r->{acquired}, '>', 0, "$name: locks were acquired");
	Test::More::is($r->{other_errors}, 0, "$name: no error other than 08006")
	  or Test::More::diag(Test::More::explain($r->{errors}));
	if ($r->{expect_violations})
	{
		Test::More::cmp_ok($r->{violations}, '>', 0,
			"$name (negative control): the checker sees violations")
		  or Test::More::diag(describe($r));
	}
	elsif (!$r->{violations_by_design})
	{
		Test::More::is($r->{violations}, 0, "$name: no violation")
		  or Test::More::diag(describe($r));
	}
	check_fence($r) if $r->{fence};
	check_permits($r) if $r->{permits};
	check_shared($r) if $r->{shared};
	check_watch($r) if $r->{watch};
	check_pairs($r) if $r->{pairs};
	return;
}

# The Test::More checks of a run on pairs of locks R (deadlock detection, issue 43): the
# cycles that opposite orders make were found (deadlocks, each a victim's 40P01) while
# holds went on; the no-violation check above covers the victims' first locks, which
# they keep through their work.
sub check_pairs
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	return unless $r->{expect_deadlocks};
	Test::More::cmp_ok($r->{deadlocks}, '>', 0,
		"$name: deadlocks were found ($r->{deadlocks} victims, $r->{acquired} pairs held,"
		  . " $r->{busy} waits ran out)");
	return;
}

# The Test::More checks of a run with a watcher R (issue 43): it heard acquisitions, and
# each "acquired" it heard was a hold a client had then (_watch_figures); a negative
# control: some were not.
sub check_watch
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	Test::More::cmp_ok($r->{watch_acquired}, '>', 0,
		"$name: the watcher heard acquisitions ($r->{watch_acquired} of $r->{acquired} holds)");
	if ($r->{expect_watch_unexplained})
	{
		Test::More::cmp_ok($r->{watch_unexplained}, '>', 0,
			"$name (negative control): the watch reported \"acquired\" for holds no client had")
		  or Test::More::diag(describe($r));
	}
	else
	{
		Test::More::is($r->{watch_unexplained}, 0,
			"$name: every \"acquired\" the watch reported was a hold a client had then")
		  or Test::More::diag(describe($r));
	}
	return;
}

# The Test::More checks of a run on shared locks R (check_run, and run-long): both
# modes were acquired; and, where the scenario expects it (expect_readers_together: short
# work, so that readers overlap whatever the writers do), at some moment 2 or more shared
# holders were inside at once (a shared lock that let one holder in at a time, a plain
# lock, fails here).  With long work the waiting writers' intents can keep readers apart
# for a whole run, as designed (doc/shared.md §3).
sub check_shared
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	Test::More::cmp_ok($r->{exclusive_acquired}, '>', 0, "$name: exclusive holds were acquired");
	if ($r->{expect_readers_together})
	{
		Test::More::cmp_ok($r->{max_readers}, '>=', 2,
			"$name: 2 or more shared holders were inside at once at some moment"
			  . " ($r->{claims_shared} shared claims found others inside)");
	}
	return;
}

# Whether a negative control's run R showed all its checks look for: violations, and on
# semaphores holder k + 1 seen by the count (claims that found k others inside, more than
# k inside at once), not only two holders of one slot.  run_checked runs a control again
# until this holds: under load a short run of unsafe-permits-short-ttl once showed slot
# violations but never 4 inside (CI, two TAP files at a time).
sub control_shown
{
	my ($r) = @_;
	return $r->{watch_unexplained} > 0 if $r->{expect_watch_unexplained};
	return 0 unless $r->{violations} > 0;
	return 1 unless $r->{permits};
	return $r->{claim_violations} > 0 && $r->{max_inside} > $r->{permits};
}

# The Test::More checks of a run on semaphores R (check_run, and run-long): every holder's
# slot was read; at some moment 2 or more holders of a semaphore were inside at once (a
# semaphore that let one holder in at a time, a lock, fails here); never more than k
# inside, never two on one slot; a negative control: claims that found k others inside
# (the count check saw holder k + 1), and more than k inside at some moment.
sub check_permits
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($name, $k) = ($r->{name}, $r->{permits});
	Test::More::is($r->{slot_unknown}, 0, "$name: every holder's slot was read from redlock_locks().key");
	Test::More::cmp_ok($r->{max_inside}, '>=', 2,
		"$name: 2 or more holders of a semaphore were inside at once at some moment"
		  . " ($r->{claims_shared} claims found others inside)");
	if ($r->{expect_violations})
	{
		Test::More::cmp_ok($r->{claim_violations}, '>', 0,
			"$name (negative control): claims found $k others inside (holder $k + 1)");
		Test::More::cmp_ok($r->{max_inside}, '>', $k,
			"$name (negative control): more than $k holders inside at once")
		  or Test::More::diag(describe($r));
	}
	else
	{
		Test::More::cmp_ok($r->{max_inside}, '<=', $k,
			"$name: never more than $k holders of a semaphore inside at once")
		  or Test::More::diag(describe($r));
		Test::More::is($r->{slot_violations}, 0, "$name: never two holders of one slot at once");
	}
	return;
}

# The Test::More checks of a fenced run R (check_run, and run-long): tokens were taken;
# no inversion and no equal tokens (a negative control: some inversion); no stale write
# landed (the unfenced control: some did); where holders were paused, some of their late
# writes were refused; with expect_min_nodes, every acquisition had that many masters.
sub check_fence
{
	my ($r) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = $r->{name};
	Test::More::cmp_ok($r->{tokens}, '>', 0, "$name: fencing tokens were taken");
	if ($r->{skew_callers_ms})
	{
		Test::More::cmp_ok($r->{tokens_before_restart} // 0, '>', 0,
			"$name: tokens were granted before the masters were restarted");
		Test::More::cmp_ok($r->{tokens_after_restart} // 0, '>', 0,
			"$name: tokens were asked for after the masters were up again");
	}
	if ($r->{expect_inversions})
	{
		Test::More::cmp_ok($r->{inversions} + $r->{token_dups}, '>', 0,
			"$name (negative control): the checker sees token inversions");
	}
	else
	{
		Test::More::is($r->{inversions}, 0,
			"$name: every token is larger than every token granted before it was asked for");
		Test::More::is($r->{token_dups}, 0, "$name: no two holds got the same token");
	}
	if ($r->{expect_stale_landed})
	{
		Test::More::cmp_ok($r->{stale_landed}, '>', 0,
			"$name (negative control): without the fence, stale writes land");
	}
	else
	{
		Test::More::is($r->{stale_landed}, 0, "$name: no stale write landed");
	}
	Test::More::cmp_ok($r->{stale_refused}, '>', 0,
		"$name: paused holders wrote late and the fence refused them")
	  if $r->{expect_stale_refused};
	Test::More::cmp_ok($r->{min_nodes}, '>=', $r->{expect_min_nodes},
		"$name: every acquisition had at least $r->{expect_min_nodes} masters")
	  if $r->{expect_min_nodes};
	return;
}

# The long-job lines of describe.
sub _describe_job
{
	my ($r) = @_;
	my $j = $r->{job};
	my $validity = int($r->{ttl_ms} * 0.99 - 2);
	my $s = sprintf(
		"   long jobs: %d transactions of %d writes %d ms apart (%d ms of work, %.1f x the TTL),"
		  . " auto-extended; %s\n",
		$j->{xacts}, $j->{steps}, $j->{step_ms}, $r->{work_ms}, $r->{work_ms} / $r->{ttl_ms},
		$r->{permits} ? 'permits; no client swallows a cancel'
		: 'odd-numbered clients swallow a cancel and try to commit');
	$s .= sprintf(
		"   jobs: %d done, %d cancelled on loss (57014), %d commits refused (55P03; %d cancels"
		  . " swallowed), %d other cancels, %d other errors%s\n",
		$r->{jobs_done}, $r->{cancelled}, $r->{refused}, $r->{swallowed}, $r->{cancelled_other},
		$r->{job_errors},
		$r->{job_errors}
		? ' (' . join('; ', map { "$_ x $r->{job_error_kinds}{$_}" } sort keys %{ $r->{job_error_kinds} }) . ')'
		: '');
	$s .= sprintf(
		"   worker: %d renewals, %d failed (retried), %d locks lost; renewals per hold up to %d,"
		  . " at least %d in a job that ran to its end; restarted after SIGTERM in %s\n",
		$r->{renewals}, $r->{renewals_failed}, $r->{locks_lost}, $r->{renewals_max},
		$r->{done_renewals_min},
		@{ $r->{worker_gaps} } ? join(', ', map { sprintf('%.2f s', $_) } @{ $r->{worker_gaps} }) : '-');
	$s .= sprintf("   losses logged by the worker: %d (%s; %s)%s\n",
		$r->{losses},
		join(', ', map { "$_ x $r->{loss_reasons}{$_}" } sort keys %{ $r->{loss_reasons} // {} }),
		join(', ', map { "$_ x $r->{loss_details}{$_}" } sort keys %{ $r->{loss_details} // {} }),
		defined $r->{loss_after_renewal_max_ms}
		? "; given up at most $r->{loss_after_renewal_max_ms} ms after the lock's last renewal"
		  . " (validity $validity ms)"
		: '');
	$s .= "   losses during $_ (or TTL/3 after): $r->{losses_in}{$_}\n"
	  for sort keys %{ $r->{losses_in} // {} };
	$s .= "   masters that accepted each acquisition: "
	  . join(', ', map { "$_ x $r->{nodes_hist}{$_}" } sort { $b <=> $a } keys %{ $r->{nodes_hist} })
	  . "\n";
	for my $l (@{ $r->{loss_rows} })
	{
		my $last = _last_event($r->{events}, $l->[0]);
		$s .= sprintf("     +%.3f s %s: owner %s, %s ms after its last renewal (%s renewals),"
			  . " its job ended %s; acquired on %s masters%s\n", @$l[ 0 .. 6 ],
			$last ? sprintf('; last fault +%.3f s %s', @$last[ 0, 1 ]) : '');
	}
	$s .= sprintf(
		"   writes: %d committed (%d of them written after a swallowed cancel); committed after"
		  . " their hold's loss: %d (in %d holds)\n",
		$r->{writes}, $r->{writes_swallowed}, $r->{writes_after_loss},
		$r->{holds_writes_after_loss});
	$s .= sprintf(
		"   guard: %d claims found it held: %d excused (the holder found had lost its lock"
		  . " before, and none of its work committed after the loss); holds whose committed"
		  . " work overlapped the next holder's: %d; guards found taken over at the end: %d\n",
		$r->{conflicts}, $r->{excused}, $r->{overlaps}, $r->{taken_over})
	  unless $r->{permits};    # their claims and committed work: _describe_permits
	$s .= "     overlap: $_\n" for @{ $r->{overlap_rows} // [] };
	for my $v (@{ $r->{excused_rows} })
	{
		my $c = $v->{other_commit_after_loss_ms};
		$s .= sprintf(
			"     excused: +%.3f s %s: pid %s found pid %s inside for %s ms, its lock lost %s ms"
			  . " before; %s\n",
			$v->{at}, $v->{resource}, $v->{pid}, $v->{other_pid}, $v->{other_inside_ms},
			$v->{other_lost_ms_before},
			$c eq '-' ? 'none of its writes committed'
			: $c < 0 ? sprintf('its last write committed %.1f ms before the loss', -$c)
			: "its last write committed $c ms after the loss (within the log's resolution)");
	}
	return $s;
}

# A line of the long-job figures table (header: job_table_header).
sub job_table_header
{
	my $h = sprintf("%-26s %8s %8s %10s %5s %9s %7s %8s %7s %5s %7s %9s\n",
		'scenario', 'attempts', 'acquired', 'violations', 'done', 'cancelled', 'refused',
		'renewals', 'failed', 'lost', 'excused', 'wr.after');
	return $h . ('-' x (length($h) - 1)) . "\n";
}

sub job_table_line
{
	my ($r) = @_;
	return sprintf("%-26s %8d %8d %10d %5d %9d %7d %8d %7d %5d %7d %9d\n",
		$r->{name}, $r->{attempts}, $r->{acquired}, $r->{violations}, $r->{jobs_done},
		$r->{cancelled}, $r->{refused}, $r->{renewals}, $r->{renewals_failed},
		$r->{locks_lost}, $r->{excused}, $r->{writes_after_loss});
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

1;
