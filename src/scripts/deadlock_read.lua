-- Every live wait record on this master, with what this master says of it, for a
-- deadlock check (doc/deadlock.md §3).  KEYS[1]: the waits hash.  Fields past their
-- expiry, and fields that are not "EXPIRY RECORD" with a record that parses, are
-- deleted.  A record is netstrings: version, cluster, pid, wait id, start, kind, the
-- count of keys waited for, those keys, the count of holds, and each hold's key and
-- token; a record of another version passes as it is, without this master's word.
-- Replies: one string of netstrings, four per record: its field, the record, one
-- character per key waited for ("1" where a waiting exclusive acquire's intent is on
-- it) and one per hold ("1" where the key holds the token, "2" where it holds the
-- shared marker and the token is a live shared hold, else "0").  Changes nothing else.

@include netstring
@include shared_now

-- What this master says of record rec: its intents and holds, as above.
local function judge(rec)
	local p, f = 1, nil
	f, p = take(rec, p)
	if f ~= "1" then return "", "" end
	for j = 1, 6 do f, p = take(rec, p) end
	local intents = {}
	for j = 1, tonumber(f) or error("bad count") do
		local k
		k, p = take(rec, p)
		intents[j] = redis.call("exists", k .. "@REDLOCK_INTENT_KEY_SUFFIX@") == 1 and "1" or "0" end
	f, p = take(rec, p)
	local live = {}
	for j = 1, tonumber(f) or error("bad count") do
		local k, t
		k, p = take(rec, p)
		t, p = take(rec, p)
		local g = redis.pcall("get", k)
		live[j] = "0"
		if g == t then live[j] = "1"
		elseif g == "@REDLOCK_SHARED_MARK@" then
			local e = tonumber(redis.call("hget", k .. "@REDLOCK_READERS_KEY_SUFFIX@", t) or "0")
			if e and e > now then live[j] = "2" end end end
	return table.concat(intents), table.concat(live)
end

local out = {}
local all = redis.call("hgetall", KEYS[1])
for i = 1, #all, 2 do
	local v = all[i + 1]
	local sp = string.find(v, " ", 1, true)
	local e = sp and tonumber(string.sub(v, 1, sp - 1))
	local ok, intents, live = false, nil, nil
	if e and e > now then ok, intents, live = pcall(judge, string.sub(v, sp + 1)) end
	if ok then
		out[#out + 1] = ns(all[i]) .. ns(string.sub(v, sp + 1)) .. ns(intents) .. ns(live)
	else
		redis.call("hdel", KEYS[1], all[i])
	end
end
return table.concat(out)
