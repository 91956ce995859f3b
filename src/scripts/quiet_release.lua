-- release.lua without the announcement: the undo of an attempt while another
-- client holds the lock on a quorum (waking its waiters would only have them refused
-- again).  KEYS, ARGV and replies as release.lua's (no ARGV[2]).

local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
	local d = redis.call("del", KEYS[1]) redis.pcall("del", @REDLOCK_HOLDER_KEY_LUA@) return d
elseif v == "@REDLOCK_SHARED_MARK@" then
	@include stray_record
	@set publish
	@include shared_release
else
	@include stray_record
	return 0 end
