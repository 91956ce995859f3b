-- The extension of a lock (spec §6): a new TTL only while the key holds our token
-- (its holder record too), or, where shared holders hold it, only while our shared hold
-- is valid.  KEYS[1]: the lock's key.  ARGV[1]: our token.  ARGV[2]: the TTL in ms.
-- Replies: 1 when extended, else 0.

local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
	redis.pcall("pexpire", @REDLOCK_HOLDER_KEY_LUA@, ARGV[2])
	return redis.call("pexpire", KEYS[1], ARGV[2])
elseif v == "@REDLOCK_SHARED_MARK@" then
	@include shared_extend
else return 0 end
