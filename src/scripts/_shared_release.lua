-- Fragment, where KEYS[1] holds the shared marker: the hold of token ARGV[1] ends on
-- this master (spec §5 for a shared hold).  When no hold is left the key goes, and
-- @publish@ (a statement, or nothing) announces that.  When this hold's expiry was the
-- latest (the key's), the key's expiry becomes the latest of those left whose time has
-- not run out (the others go).  Ends the script: 1 when this hold was there and still
-- valid, else 0, as the exclusive release answers.

local h = @REDLOCK_READERS_KEY_LUA@
@include shared_now
local mine = tonumber(redis.call("hget", h, ARGV[1]) or "0")
redis.call("hdel", h, ARGV[1])
local last = 0
if redis.call("hlen", h) > 1 then
	last = tonumber(redis.call("hget", h, "") or "0")
	if mine >= last then last = 0
		local all = redis.call("hgetall", h)
		for i = 1, #all, 2 do if all[i] ~= "" then
				local x = tonumber(all[i + 1])
				if x <= now then redis.call("hdel", h, all[i]) elseif x > last then last = x end
			end end
		if last > 0 then local s = string.format("%.0f", last) redis.call("hset", h, "", s)
			redis.call("pexpireat", KEYS[1], s) redis.call("pexpireat", h, s) end
	end end
if last == 0 then redis.call("del", KEYS[1], h) @publish@ end
if mine > now then return 1 else return 0 end
