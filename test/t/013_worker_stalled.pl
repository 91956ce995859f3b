# REPRODUCTION (branch issue8-checker-worker-stall, not for main): the auto-extend worker
# frozen longer than a lock's validity.  The lock runs out on the masters, another session
# acquires it, and the job that held it is neither cancelled nor refused its commits until
# the worker runs again: README ("Run a job on only one cluster", "What it promises")
# says such a job is cancelled before the validity runs out.  Fails today.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../checker";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Checker;
use RedisMasters;

my $redis = RedisMasters->new(5);
my $node = RedisMasters::redlock_node('stalled', $redis, Checker::node_conf(preload => 1));
Checker::setup($node);
my $r = Checker::run_scenario($node, { plain => $redis }, 'worker-stalled', seconds => 8);
note(Checker::describe($r));
cmp_ok($r->{acquired}, '>', 0, 'locks were acquired');
is($r->{violations}, 0, 'the worker frozen past the validity: no violation')
  or diag(Checker::describe($r));
RedisMasters::no_crash($node);
done_testing();
