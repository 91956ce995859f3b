-- The acquire of a set of resources, all or nothing (doc/sets.md).  KEYS[1]: the
-- set's first key.  ARGV[1]: the token.  ARGV[2]: the TTL in ms.  ARGV[3]: every key,
-- NUL-joined.  ARGV[4]: the holder record's value, or "".  Sets every key (and its
-- record) when none exists.  Replies: 1 when it set every key, 0 when it set none.

local ks = {}
for k in string.gmatch(ARGV[3], "[^%z]+") do ks[#ks + 1] = k end
if redis.call("exists", unpack(ks)) > 0 then return 0 end
for i = 1, #ks do
	redis.call("set", ks[i], ARGV[1], "px", ARGV[2])
	if ARGV[4] ~= "" then
		redis.pcall("set", ks[i] .. "\255holder", ARGV[4], "nx", "px", ARGV[2]) end
end return 1
