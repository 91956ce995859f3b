-- Fragment: ends the script with @not_held@ unless KEYS[1] holds our token ARGV[1]:
-- every fencing round first checks that the lock is still ours (doc/redlock.md §9).

if redis.call("get", KEYS[1]) ~= ARGV[1] then return @not_held@ end
