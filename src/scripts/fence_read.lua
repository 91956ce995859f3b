-- The first round of a fencing token (doc/redlock.md §9).  KEYS[1]: the lock's key.
-- KEYS[2]: the resource's fencing counter.  ARGV[1]: our token.  Replies: -1 when the
-- key does not hold our token; else the counter, but at least the master's time in
-- microseconds less one; an error when the counter is not a number.

@set not_held -1
@include token_held
local f = tonumber(redis.call("time")[1]) * 1000000 - 1
local c = redis.call("get", KEYS[2])
if not c then return f end
local n = tonumber(c)
if not n then return redis.error_reply("fencing counter is not a number") end
if n < f then return f end
return n
