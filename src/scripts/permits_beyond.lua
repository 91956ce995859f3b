-- Sent with a semaphore's attempt: is a slot past its permits held?  A caller
-- giving more permits for the same resource would break the bound of those giving fewer;
-- this is how they learn of it.  KEYS[1]: the semaphore's key.  ARGV[1]: its permits.
-- ARGV[2]: the most permits there can be.  Replies: the lowest slot held past the
-- permits, or 0.

for i = tonumber(ARGV[1]) + 1, tonumber(ARGV[2]) do
	if redis.call("exists", KEYS[1] .. "@REDLOCK_PERMIT_SLOT_SEPARATOR@" .. i) == 1
	then return i end end return 0
