-- One watched lock's state as one master shows it (worker/notifier.c, a round of
-- redlock_watch's notifier).  KEYS[1]: the key.  Replies: lock_info.lua's state when the
-- key holds a string; else "forced VALUE" when a forced release deleted VALUE there in
-- the last few seconds (force_release.lua's mark); else "".  Changes nothing.

@include lock_state
if info == "" then
	local f = redis.pcall("get", @REDLOCK_FORCED_KEY_LUA@)
	if type(f) == "string" then info = "forced " .. f end end
return info
