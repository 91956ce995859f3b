-- The second round of a fencing token (doc/redlock.md §9).  KEYS[1]: the lock's key.
-- KEYS[2]: the fencing counter.  ARGV[1]: our token.  ARGV[2]: the new number.
-- ARGV[3]: the counter's lifetime in ms.  Replies: 0 when the key does not hold our
-- token, -c when the counter c is already at or past ARGV[2], 1 when written.

@set not_held 0
@include token_held
local c = tonumber(redis.call("get", KEYS[2]) or "0")
if c and c >= tonumber(ARGV[2]) then return -c end
redis.call("set", KEYS[2], ARGV[2], "px", ARGV[3])
return 1
