-- The release of a set (doc/sets.md, spec §2 for each key).  KEYS[1]: the set's
-- first key.  ARGV[1]: the token.  ARGV[2]: every key, NUL-joined.  Deletes the keys
-- that hold the token, with their records, and announces each; a stray record of the
-- token beside a key not ours is deleted.  Replies: the keys that were not ours, as a
-- bit mask (bit k for the k-th key, from 0).

local ks = {}
for k in string.gmatch(ARGV[2], "[^%z]+") do ks[#ks + 1] = k end
local vs = redis.call("mget", unpack(ks))
local d, r, m, b = {}, {}, 0, 1
for i = 1, #ks do
	local h = ks[i] .. "\255holder"
	if vs[i] == ARGV[1] then d[#d + 1] = ks[i] r[#r + 1] = h
	else
		local v = redis.pcall("get", h)
		if type(v) == "string" and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. "\t"
		then redis.pcall("del", h) end
		m = m + b end
	b = b * 2 end
if #d > 0 then
	redis.call("del", unpack(d)) redis.pcall("del", unpack(r))
	for i = 1, #d do
		redis.call("publish", "@REDLOCK_RELEASE_CHANNEL_PREFIX@" .. d[i], d[i]) end
end return m
