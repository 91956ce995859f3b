-- Fragment: local now, the master's time in ms (TIME, as key expiry counts it).

local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
