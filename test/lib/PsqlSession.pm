# test/lib/PsqlSession.pm: talking to a cluster through psql, for the TAP tests.
#
#   use PsqlSession qw(session sql timed_psql validity wait_until);
#   my $s = session($node);                      # a psql of our own on NODE
#   my ($out, $err, $secs) = sql($s, $query);    # this query's stdout and stderr only
#   $s->start($query); ...; ($out, $err, $secs) = $s->finish;   # without waiting
#   $s->pid; $s->quit;                           # its backend's PID; end it
#   my ($out, $err, $secs) = timed_psql($node, $query);   # in a new psql
#   wait_until($seconds, sub { ... });           # poll until true
#   validity($s, 'job');                         # redlock_locks().validity_ms in $s
#
# A session is psql -XAtq -f - driven through IPC::Run, with our own buffers, so that each
# query's stdout and stderr can be told apart without reaching into
# PostgreSQL::Test::BackgroundPsql; errors are verbose, so that SQLSTATEs show.  Each
# query is followed by a banner printed to both streams; what came before the banners is
# that query's output.  NODE is a PostgreSQL::Test::Cluster, or anything with a connstr
# method (042 goes through PgBouncer).

package PsqlSession;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Utils ();
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT_OK = qw(session sql timed_psql validity wait_until);

# A psql session of our own on NODE's database DBNAME (default postgres); see new below.
# Options: extra_params (more psql arguments, e.g. -U).
sub session
{
	my ($node, $dbname, %opts) = @_;
	return PsqlSession->new($node, $dbname // 'postgres', %opts);
}

# Runs QUERY in SESSION (see session()); returns (stdout, stderr, seconds), stderr
# holding what this query printed only.
sub sql
{
	my ($session, $query) = @_;
	return $session->query($query);
}

# Runs QUERY in a new psql on NODE (errors do not stop it); returns (stdout, stderr,
# seconds).  Verbose errors, so SQLSTATEs show.
sub timed_psql
{
	my ($node, $query) = @_;
	my ($out, $err) = ('', '');
	my $t0 = time;
	$node->psql('postgres', "\\set VERBOSITY verbose\n$query",
		stdout => \$out, stderr => \$err, on_error_stop => 0);
	return ($out, $err, time - $t0);
}

# The remaining validity (ms) that SESSION believes it has on RESOURCE: its
# redlock_locks().validity_ms ('' when it lists no such lock).
sub validity
{
	my ($session, $resource) = @_;
	my ($v) = sql($session, "SELECT validity_ms FROM redlock_locks() WHERE resource = '$resource'");
	return $v;
}

# Calls CODE every 50 ms until it returns true or SECONDS pass; returns its last result.
sub wait_until
{
	my ($seconds, $code) = @_;
	my $deadline = time + $seconds;
	while (1)
	{
		my $r = $code->();
		return $r if $r || time > $deadline;
		usleep(50_000);
	}
}

# --- a session: the object session() returns

# Starts psql on NODE's database DBNAME, with verbose errors.
sub new
{
	my ($class, $node, $dbname, %opts) = @_;
	my $self = bless { in => '', out => '', err => '', n => 0, pending => undef }, $class;
	$self->{timer} = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
	$self->{run} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=0',
			'-d', $node->connstr($dbname), @{ $opts{extra_params} // [] }, '-f', '-'
		],
		'<', \$self->{in}, '>', \$self->{out}, '2>', \$self->{err}, $self->{timer});
	$self->query('\set VERBOSITY verbose');
	return $self;
}

# Sends QUERY without waiting for it (psql has read it when this returns).
sub start
{
	my ($self, $query) = @_;
	die "a query is still running in this session" if defined $self->{pending};
	my $n = ++$self->{n};
	$self->{pending} = { banner => "rm-session-banner-$n", t0 => time };
	note "session query $n: $query";
	$self->{in} .= "$query\n;\n\\echo rm-session-banner-$n\n\\warn rm-session-banner-$n\n";
	$self->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	$self->{run}->pump_nb while length $self->{in} && !$self->{timer}->is_expired;
	return;
}

# Waits for the query sent by start; returns (stdout, stderr, seconds since start).
sub finish
{
	my ($self) = @_;
	my $p = $self->{pending} or die "no query running in this session";
	my $banner = qr/(?:\r?\n)?$p->{banner}\r?\n/;
	$self->{run}->pump
	  until ($self->{out} =~ $banner && $self->{err} =~ $banner)
	  || $self->{timer}->is_expired;
	die "psql session: query timed out" if $self->{timer}->is_expired;
	my $secs = time - $p->{t0};
	my ($out) = $self->{out} =~ /^(.*?)$banner/s;
	my ($err) = $self->{err} =~ /^(.*?)$banner/s;
	$self->{out} =~ s/^.*?$banner//s;
	$self->{err} =~ s/^.*?$banner//s;
	$self->{pending} = undef;
	chomp $err;
	note "session result: stdout <<$out>> stderr <<$err>>" if $out ne '' || $err ne '';
	return ($out, $err, $secs);
}

# Runs QUERY; returns (stdout, stderr, seconds).
sub query
{
	my ($self, $query) = @_;
	$self->start($query);
	return $self->finish;
}

# This session's backend PID.
sub pid
{
	my ($self) = @_;
	($self->{pid}) = $self->query('SELECT pg_backend_pid()') unless $self->{pid};
	return $self->{pid};
}

# Ends psql (and so its backend).
sub quit
{
	my ($self) = @_;
	return unless $self->{run};
	$self->{in} .= "\\q\n";
	$self->{timer}->start(30);
	eval { $self->{run}->finish; };
	$self->{run} = undef;
	return;
}

sub DESTROY
{
	my ($self) = @_;
	local ($., $@, $!, $^E, $?);
	$self->{run}->kill_kill if $self->{run};
}

1;
