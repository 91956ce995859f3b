#!/usr/bin/perl
# test/checker/delayproxy.pl: a userspace TCP proxy that adds latency (tc netem does not
# work here).  It listens on 127.0.0.1:LISTEN and forwards every connection to
# 127.0.0.1:TARGET; each chunk read from either side is written to the other side a random
# MIN..MAX ms later, in order (a chunk never overtakes an earlier one).  EOF is forwarded
# the same way.  When the target refuses, the client's connection is closed at once.
#
#   delayproxy.pl --listen 40001 --target 40000 [--delay MIN:MAX] [--control FILE]
#                 [--pidfile FILE] [--max-seconds N]
#
# --control FILE: the delay is re-read from FILE ("MIN:MAX", ms) every 20 ms, so a
# test can slow a running proxy down and speed it up again.  --max-seconds (default 1800)
# bounds the proxy's life; SIGTERM ends it at once.  Perl core modules only.

use strict;
use warnings;

use Errno qw(EAGAIN EWOULDBLOCK EINTR);
use Getopt::Long;
use IO::Select;
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time);

my ($listen_port, $target_port, $control, $pidfile);
my $delay = '0:0';
my $max_seconds = 1800;
GetOptions(
	'listen=i' => \$listen_port,
	'target=i' => \$target_port,
	'delay=s' => \$delay,
	'control=s' => \$control,
	'pidfile=s' => \$pidfile,
	'max-seconds=i' => \$max_seconds)
  && $listen_port
  && $target_port
  or die "usage: $0 --listen PORT --target PORT [--delay MIN:MAX] [--control FILE]"
  . " [--pidfile FILE] [--max-seconds N]\n";

my ($min_ms, $max_ms) = parse_delay($delay) or die "bad --delay \"$delay\"\n";
my $control_read_at = 0;

my $listener = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $listen_port,
	Listen => 128,
	ReuseAddr => 1,
	Blocking => 0) or die "cannot listen on 127.0.0.1:$listen_port: $!\n";

if ($pidfile)
{
	open(my $fh, '>', "$pidfile.tmp") or die "cannot write $pidfile: $!\n";
	print $fh "$$\n";
	close $fh;
	rename("$pidfile.tmp", $pidfile) or die "cannot rename to $pidfile: $!\n";
}

my $running = 1;
$SIG{TERM} = $SIG{INT} = sub { $running = 0 };
$SIG{PIPE} = 'IGNORE';

# One entry per open socket, by fileno: fh, peer (the other socket's fileno), q (chunks
# waiting to be written to this socket: [due time, data or undef for EOF]), last_due.
my %conn;
my $readers = IO::Select->new($listener);
my $deadline = time + $max_seconds;

# "MIN:MAX" (or "N") in ms; returns (min, max) or an empty list.
sub parse_delay
{
	my ($text) = @_;
	return () unless defined $text && $text =~ /^\s*(\d+(?:\.\d+)?)(?:\s*:\s*(\d+(?:\.\d+)?))?\s*$/;
	my ($lo, $hi) = ($1, $2 // $1);
	($lo, $hi) = ($hi, $lo) if $hi < $lo;
	return ($lo, $hi);
}

# Re-reads the control file, at most every 20 ms.
sub reload_control
{
	return unless $control && time >= $control_read_at;
	$control_read_at = time + 0.02;
	open(my $fh, '<', $control) or return;
	my $line = <$fh>;
	close $fh;
	my @d = parse_delay($line);
	($min_ms, $max_ms) = @d if @d;
	return;
}

sub random_delay
{
	return ($min_ms + rand($max_ms - $min_ms)) / 1000.0;
}

# Closes a socket and its peer.
sub close_pair
{
	my ($fd) = @_;
	my $c = $conn{$fd} or return;
	for my $f ($fd, $c->{peer})
	{
		my $e = delete $conn{$f} or next;
		$readers->remove($e->{fh});
		close $e->{fh};
	}
	return;
}

sub accept_one
{
	my $client = $listener->accept or return;
	my $server = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $target_port,
		Timeout => 1);
	unless ($server)
	{
		close $client;
		return;
	}
	for my $s ($client, $server)
	{
		$s->blocking(0);
		setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
	}
	my ($cf, $sf) = (fileno $client, fileno $server);
	$conn{$cf} = { fh => $client, peer => $sf, q => [], last_due => 0 };
	$conn{$sf} = { fh => $server, peer => $cf, q => [], last_due => 0 };
	$readers->add($client, $server);
	return;
}

# Reads what FD has and queues it (or its EOF) for the peer.
sub read_one
{
	my ($fd) = @_;
	my $c = $conn{$fd} or return;
	my $peer = $conn{ $c->{peer} } or return close_pair($fd);
	my $n = sysread($c->{fh}, my $buf, 65536);
	if (!defined $n)
	{
		return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
		return close_pair($fd);
	}
	my $due = time + random_delay();
	$due = $peer->{last_due} if $due < $peer->{last_due};
	$peer->{last_due} = $due;
	if ($n == 0)
	{
		$readers->remove($c->{fh});
		$c->{eof_read} = 1;
		push @{ $peer->{q} }, [ $due, undef ];
	}
	else
	{
		push @{ $peer->{q} }, [ $due, $buf ];
	}
	return;
}

# Writes every due chunk queued for FD.
sub flush_one
{
	my ($fd, $now) = @_;
	my $c = $conn{$fd} or return;
	while (@{ $c->{q} } && $c->{q}[0][0] <= $now)
	{
		my $item = $c->{q}[0];
		if (!defined $item->[1])
		{
			shift @{ $c->{q} };
			shutdown($c->{fh}, 1);
			$c->{eof_sent} = 1;
			my $peer = $conn{ $c->{peer} };
			close_pair($fd) if $peer && $peer->{eof_sent};
			return;
		}
		my $n = syswrite($c->{fh}, $item->[1]);
		if (!defined $n)
		{
			return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
			return close_pair($fd);
		}
		substr($item->[1], 0, $n, '');
		return if length $item->[1];
		shift @{ $c->{q} };
	}
	return;
}

while ($running && time < $deadline)
{
	reload_control();
	my $now = time;
	my $timeout = 0.05;
	my $writers = IO::Select->new;
	for my $c (values %conn)
	{
		next unless @{ $c->{q} };
		my $wait = $c->{q}[0][0] - $now;
		if ($wait <= 0) { $writers->add($c->{fh}); }
		elsif ($wait < $timeout) { $timeout = $wait; }
	}
	my ($r, $w) = IO::Select->select($readers, $writers, undef, $timeout);
	for my $fh (@{ $r // [] })
	{
		if ($fh == $listener) { accept_one(); }
		else { read_one(fileno $fh); }
	}
	$now = time;
	flush_one($_, $now) for keys %conn;
}

close_pair($_) for keys %conn;
unlink $pidfile if $pidfile;
exit 0;
