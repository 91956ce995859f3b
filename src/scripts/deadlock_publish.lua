-- A waiting acquire's wait record (doc/deadlock.md §2), posted or renewed.  KEYS[1]:
-- the waits hash (REDLOCK_WAITS_KEY).  ARGV[1]: the waiter's field (its cluster and
-- pid).  ARGV[2]: the record.  ARGV[3]: how long it lives, in ms.  The field holds the
-- record after its expiry on this master's clock and a space (a hash field has no TTL
-- of its own before Redis 7.4); the hash lives as long as its longest record.
-- Replies: 1.

@include shared_now
local e = now + tonumber(ARGV[3])
redis.call("hset", KEYS[1], ARGV[1], string.format("%.0f", e) .. " " .. ARGV[2])
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[3]) then
	redis.call("pexpire", KEYS[1], ARGV[3]) end
return 1
