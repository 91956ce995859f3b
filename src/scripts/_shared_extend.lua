-- Fragment, where KEYS[1] holds the shared marker: the hold of token ARGV[1], while
-- still valid on this master, now lasts ARGV[2] ms (spec §6 for a shared hold); the key
-- lasts at least as long.  Ends the script: 1 when extended, else 0.

local h = @REDLOCK_READERS_KEY_LUA@
@include shared_now
local mine = tonumber(redis.call("hget", h, ARGV[1]) or "0")
if mine <= now then return 0 end
local e = now + tonumber(ARGV[2]) local s = string.format("%.0f", e)
redis.call("hset", h, ARGV[1], s)
if e > tonumber(redis.call("hget", h, "") or "0") then
	redis.call("hset", h, "", s)
	redis.call("pexpireat", KEYS[1], s) redis.call("pexpireat", h, s) end
return 1
