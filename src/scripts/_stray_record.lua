-- Fragment: where the key is not ours, a holder record of our token (ARGV[1]) may
-- still be there (its SET NX succeeded where the lock's did not): it is deleted.

local h = redis.pcall("get", @REDLOCK_HOLDER_KEY_LUA@)
if type(h) == "string" and string.sub(h, 1, #ARGV[1] + 1) == ARGV[1] .. "\t"
then redis.pcall("del", @REDLOCK_HOLDER_KEY_LUA@) end
