-- The forced release of a lock, whoever holds it (redlock_force_release).  KEYS[1]:
-- the key.  ARGV[1]: the fencing counter's lifetime in ms.  ARGV[2]: how long the forced
-- mark lives, in ms.  Deletes the key, its holder record and readers hash, announces
-- the release, leaves the deleted value under the forced mark (so that a watch reports
-- "forced", not "released": watch_read.lua), and moves the resource's fencing counter
-- past every token taken so far (so that the holder's writes are fenced).
-- Replies: the lock's state before, as lock_info.lua's.

@include lock_state
if info ~= "" then local v = redis.call("get", KEYS[1])
	redis.call("del", KEYS[1]) redis.pcall("del", @REDLOCK_HOLDER_KEY_LUA@)
	redis.pcall("set", @REDLOCK_FORCED_KEY_LUA@, v, "px", ARGV[2])
	redis.pcall("del", @REDLOCK_READERS_KEY_LUA@)
	redis.call("publish", "@REDLOCK_RELEASE_CHANNEL_PREFIX@" .. KEYS[1], KEYS[1]) end
local ck = "@REDLOCK_FENCE_KEY_PREFIX@" .. KEYS[1]
local f = tonumber(redis.call("time")[1]) * 1000000 - 1
local c = tonumber(redis.call("get", ck) or "0")
if not c then return redis.error_reply("fencing counter is not a number") end
if c < f then c = f end
redis.call("set", ck, string.format("%.0f", c + 1), "px", ARGV[1])
return info
