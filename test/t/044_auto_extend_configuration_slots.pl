# The configurations auto-extended locks are taken under (src/shared/lockconfig.c): the cluster
# keeps at most 16 at once, each with its server list parsed, so that
# - locks taken under 16 distinct configurations (here: redlock.database 0-15, one
#   session each) all get one, and the 17th distinct one is 53400 with no key set;
# - a server list written otherwise (spaces) but naming the same masters in the same
#   order is the same configuration, and shares its slot;
# - the same masters in another order are another configuration;
# - a slot whose last lock went is taken again by another configuration;
# - a server list longer than 8 KB as text is no limit (it was one before 1.4), and the
#   worker renews the lock taken under it;
# - a username or password longer than 255 bytes is 54000, before anything is sent.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use PsqlSession qw(session sql wait_until);
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('slots', $redis,
	$RedisMasters::ROOMY_CONF . "shared_preload_libraries = 'redlock'\nmax_connections = 40\n");
my $guc = $redis->servers_guc;
my @ports = $redis->ports;
my ($out, $err);

# One session per configuration, each holding one auto-extended lock.
my %held;
sub take
{
	my ($name, $settings) = @_;
	my $s = session($node);
	my ($o, $e) = sql($s, "SET redlock.auto_extend = on; $settings; SELECT redlock_acquire('$name', 30000)");
	$held{$name} = $s if $o eq 't';
	return ($o, $e, $s);
}

for my $db (0 .. 15)
{
	($out, $err) = take("slot-db$db", "SET redlock.database = $db");
	last if $out ne 't';
}
is(scalar(keys %held), 16,
	'16 auto-extended locks under 16 distinct configurations (redlock.database 0-15): all taken');
($out) = $node->safe_psql('postgres', 'SELECT auto_extended_locks FROM redlock_stats()');
is($out, '16', '... all in the registry');

# The same masters, the same order, written with spaces: the slot of database 0.
my $spaced = join(', ', map { "127.0.0.1:$_" } @ports);
($out, $err) = take('slot-spaced', "SET redlock.servers = '$spaced'");
is($out, 't', 'the server list written with spaces is the same configuration: its lock is taken')
  or diag($err);

# The same masters in another order: a 17th configuration.
my $reordered = join(',', map { "127.0.0.1:$_" } reverse @ports);
($out, $err) = take('slot-reordered', "SET redlock.servers = '$reordered'");
like($err, qr/ERROR:\s+53400: too many redlock configurations in use by auto-extended locks/,
	'the same masters in another order are a 17th configuration: 53400');
like($err, qr/DETAIL:\s+Auto-extended locks are held under 16 distinct/, '... saying how many');
is($redis->holding('slot-reordered', 0), 0, '... and no key is set');

# A slot whose locks are all gone is free for another configuration.
for my $name ('slot-db7')
{
	# An extend goes through the worker, which then keeps the slot's configuration: the
	# slot's next configuration must replace it.
	($out) = sql($held{$name}, "SELECT redlock_extend('$name', 30000)");
	is($out, 't', "$name extended through the worker");
	($out) = sql($held{$name}, "SELECT redlock_release('$name')");
	is($out, 't', "$name released");
	$held{$name}->quit;
	delete $held{$name};
}
($out, $err) = take('slot-reordered2', "SET redlock.servers = '$reordered'");
is($out, 't', '... and its slot serves the configuration refused before') or diag($err);

# Every lock is still renewed by the worker under its own configuration.
ok( wait_until(
		20,
		sub {
			(sql($held{'slot-db15'}, "SELECT renewals > 0 FROM redlock_locks() WHERE resource = 'slot-db15'"))[0] eq 't'
			  && (sql($held{'slot-reordered2'}, "SELECT renewals > 0 FROM redlock_locks() WHERE resource = 'slot-reordered2'"))[0] eq 't';
		}),
	'the worker renews the locks of database 15 and of the reordered list');

$_->quit for values %held;
%held = ();
ok(wait_until(10, sub { $node->safe_psql('postgres', 'SELECT auto_extended_locks FROM redlock_stats()') eq '0' }),
	'the sessions gone, the registry is empty');

# A server list of more than 8 KB as text (spaces after each comma), five masters parsed.
my $padding = ' ' x 2100;
my $long = join(",$padding", map { "127.0.0.1:$_" } @ports);
cmp_ok(length($long), '>', 8192, sprintf('a server list of %d bytes', length($long)));
my $s;
($out, $err, $s) = take('slot-long', "SET redlock.servers = '$long'");
is($out, 't', '... takes an auto-extended lock (no 54000)') or diag($err);
ok(wait_until(20, sub { (sql($s, "SELECT renewals > 0 FROM redlock_locks() WHERE resource = 'slot-long'"))[0] eq 't' }),
	'... which the worker renews');
is($redis->holding('slot-long', 5), 5, '... on all five masters');
$s->quit;
%held = ();

# Credentials longer than a slot keeps: 54000 before anything is sent.
my $p = session($node);
my $long_user = 'u' x 256;
($out, $err) = sql($p, "SET redlock.auto_extend = on; SET redlock.username = '$long_user'; SELECT redlock_acquire('slot-user', 30000)");
like($err, qr/ERROR:\s+54000: redlock configuration is too long for auto-extended locks/,
	'a 256-byte redlock.username: 54000');
like($err, qr/DETAIL:\s+Auto-extended locks allow 255 bytes of redlock.username and of redlock.password/,
	'... naming the limit');
is($redis->holding('slot-user', 0), 0, '... and no key is set');
$p->quit;

RedisMasters::no_crash($node);
done_testing();
