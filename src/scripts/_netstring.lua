-- Fragment: take(s, i), the netstring ("LEN:BYTES") of s at byte i: its bytes and the
-- index after it, raising an error where s holds none there (a caller's pcall catches
-- it); ns(s), s as a netstring.  The wait records (doc/deadlock.md §2) are netstrings,
-- so that keys and tokens of any bytes pass through.
local function take(s, i)
	local c = string.find(s, ":", i, true)
	if not c then error("not a netstring") end
	local n = tonumber(string.sub(s, i, c - 1))
	if not n or n < 0 or c + n > #s then error("not a netstring") end
	return string.sub(s, c + 1, c + n), c + n + 1 end
local function ns(s) return #s .. ":" .. s end
