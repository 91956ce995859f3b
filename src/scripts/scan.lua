-- One batch of the locks under a key prefix (redlock_cluster_locks).  KEYS[1]: the
-- prefix.  ARGV[1]: the batch size (SCAN's COUNT).  ARGV[2]: the cursor, or "done".
-- Replies: the next cursor, then "LEN KEY" for each lock key found (records, readers
-- hashes, intents, forced marks and fencing counters left out), space-separated.

if ARGV[2] == "done" then return "0" end
local p = string.gsub(KEYS[1], "[%*%?%[%]\\]", "\\%0") .. "*"
local r = redis.call("scan", ARGV[2], "match", p, "count", ARGV[1])
local out = {r[1]}
for _, k in ipairs(r[2]) do
	if string.byte(k, 1) ~= 255 and string.sub(k, -7) ~= "\255holder"
	and string.sub(k, -8) ~= "\255readers" and string.sub(k, -7) ~= "\255intent"
	and string.sub(k, -7) ~= "\255forced"
	then out[#out + 1] = #k .. " " .. k end end
return table.concat(out, " ")
