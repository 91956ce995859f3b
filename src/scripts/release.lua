-- The release of a lock (spec §2), and an attempt's undo (spec §3 step 5).
-- KEYS[1]: the lock's key.  ARGV[1]: our token.  ARGV[2] (optional): the key whose
-- release channel announces it (a permit announces on its semaphore's), else KEYS[1].
-- Deletes the key only while it holds our token, with its holder record, and announces
-- the release (the message is the key deleted, so that two slots' releases are two
-- wake-ups).  Where the key holds the shared marker, our shared hold ends instead, and
-- the key goes, announced, with the last one: one release for every kind of hold.
-- Where the key is not ours, a holder record of our token is deleted (a stray record).
-- Replies: 1 when the key (or a valid shared hold) was ours and is gone, else 0.

local v = redis.call("get", KEYS[1])
if v == ARGV[1] then
	local n = redis.call("del", KEYS[1])
	redis.pcall("del", @REDLOCK_HOLDER_KEY_LUA@)
	local a = ARGV[2] or KEYS[1]
	redis.call("publish", "@REDLOCK_RELEASE_CHANNEL_PREFIX@" .. a, KEYS[1])
	return n elseif v == "@REDLOCK_SHARED_MARK@" then
	@include stray_record
	@set publish redis.call("publish", "@REDLOCK_RELEASE_CHANNEL_PREFIX@" .. KEYS[1], KEYS[1])
	@include shared_release
else
	@include stray_record
	return 0 end
