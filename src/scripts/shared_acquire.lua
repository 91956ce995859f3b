-- The acquire of a shared hold (doc/shared.md), run by the set's loop as a set of one
-- key.  KEYS[1]: the resource's key.  ARGV[1]: the token.  ARGV[2]: the TTL in ms
-- (ARGV[3] and ARGV[4], a set's, unused).  Refused where the key holds anything but the
-- shared marker (an exclusive holder) or a waiting writer's intent is there.  Otherwise
-- the key holds the marker, our hold's expiry (in the master's clock) is in the readers
-- hash, and the key and hash expire with the latest hold.  Replies: 1 when held, else 0.

local v = redis.call("get", KEYS[1])
if v and v ~= "@REDLOCK_SHARED_MARK@" then return 0 end
if redis.call("exists", @REDLOCK_INTENT_KEY_LUA@) == 1 then return 0 end
local h = @REDLOCK_READERS_KEY_LUA@
@include shared_now
if not v then redis.call("del", h)
	redis.call("set", KEYS[1], "@REDLOCK_SHARED_MARK@") end
local e = now + tonumber(ARGV[2]) local s = string.format("%.0f", e)
redis.call("hset", h, ARGV[1], s)
if not v or e > tonumber(redis.call("hget", h, "") or "0") then
	redis.call("hset", h, "", s)
	redis.call("pexpireat", KEYS[1], s) redis.call("pexpireat", h, s) end
return 1
