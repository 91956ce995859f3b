-- Fragment: sets local info to the lock's state on this master: "" when KEYS[1] holds
-- no string, else its PTTL, the length of its value, the value, and the holder record
-- when the record is of that value.

local info = ""
if redis.call("type", KEYS[1]).ok == "string" then
	local v = redis.call("get", KEYS[1])
	local h = redis.pcall("get", @REDLOCK_HOLDER_KEY_LUA@)
	if type(h) == "string" and string.sub(h, 1, #v + 1) == v .. "\t"
	then h = string.sub(h, #v + 2) else h = "" end
	info = redis.call("pttl", KEYS[1]) .. " " .. #v .. " " .. v .. h end
