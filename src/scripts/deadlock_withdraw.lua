-- A wait's end (doc/deadlock.md §2): deletes the waiter's record, but only the record
-- of that wait, so that a late delivery cannot delete the waiter's next one.  KEYS[1]:
-- the waits hash.  ARGV[1]: the waiter's field.  ARGV[2]: the wait's id.  Replies: 1
-- when the record went, else 0.

local v = redis.call("hget", KEYS[1], ARGV[1])
if v and string.find(v, ":" .. ARGV[2], 1, true) then
	redis.call("hdel", KEYS[1], ARGV[1]) return 1 end
return 0
