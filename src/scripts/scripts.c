/*-------------------------------------------------------------------------
 *
 * scripts.c
 *	  The Lua scripts every round runs, registered in one place: their bodies are the
 *	  files NAME.lua of this folder, embedded at build time (src/scripts/embed writes
 *	  lua.h); here each becomes a RedlockScript with what the connection layer must
 *	  know of it (keys first in its argv, whether a late or repeated run is harmless,
 *	  whether it sets keys for an attempt).  Every connection loads them all in its
 *	  handshake (wire/node.c), so a script first used long after the library loaded
 *	  (a fencing token, an inspection) is already in the master's cache.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "redlock.h"
#include "scripts/lua.h"
#include "scripts/scripts.h"
#include "wire/node.h"

RedlockScript redlock_script_release = {.body = REDLOCK_LUA_RELEASE, .redeliver = true};
RedlockScript redlock_script_quiet_release = {.body = REDLOCK_LUA_QUIET_RELEASE, .redeliver = true};
RedlockScript redlock_script_extend = {.body = REDLOCK_LUA_EXTEND};
RedlockScript redlock_script_permits_beyond = {.body = REDLOCK_LUA_PERMITS_BEYOND};
RedlockScript redlock_script_set_acquire = {.body = REDLOCK_LUA_SET_ACQUIRE, .acquires = true};
RedlockScript redlock_script_set_release = {.body = REDLOCK_LUA_SET_RELEASE, .redeliver = true};
RedlockScript redlock_script_shared_acquire = {.body = REDLOCK_LUA_SHARED_ACQUIRE, .acquires = true};
RedlockScript redlock_script_fence_read = {.body = REDLOCK_LUA_FENCE_READ, .nkeys = 2};
RedlockScript redlock_script_fence_write = {.body = REDLOCK_LUA_FENCE_WRITE, .nkeys = 2};
RedlockScript redlock_script_lock_info = {.body = REDLOCK_LUA_LOCK_INFO};
RedlockScript redlock_script_force_release = {.body = REDLOCK_LUA_FORCE_RELEASE};
RedlockScript redlock_script_scan = {.body = REDLOCK_LUA_SCAN};
RedlockScript redlock_script_watch_read = {.body = REDLOCK_LUA_WATCH_READ};
RedlockScript redlock_script_deadlock_publish = {.body = REDLOCK_LUA_DEADLOCK_PUBLISH};
RedlockScript redlock_script_deadlock_read = {.body = REDLOCK_LUA_DEADLOCK_READ};
RedlockScript redlock_script_deadlock_withdraw = {.body = REDLOCK_LUA_DEADLOCK_WITHDRAW, .redeliver = true};

/*
 * RedlockScriptsInit
 *		Makes every script known to the connection layer (redlock_script_register) when
 *		the library is loaded, so that every connection loads them all in its
 *		handshake.  Called from _PG_init.  Raises ERROR (XX000) only if hashing fails.
 *		Not a distlock section: the scripts are §2's, §6's, §9's and the kinds'.
 */
void
RedlockScriptsInit(void)
{
	redlock_script_register(&redlock_script_release);
	redlock_script_register(&redlock_script_quiet_release);
	redlock_script_register(&redlock_script_extend);
	redlock_script_register(&redlock_script_permits_beyond);
	redlock_script_register(&redlock_script_set_acquire);
	redlock_script_register(&redlock_script_set_release);
	redlock_script_register(&redlock_script_shared_acquire);
	redlock_script_register(&redlock_script_fence_read);
	redlock_script_register(&redlock_script_fence_write);
	redlock_script_register(&redlock_script_lock_info);
	redlock_script_register(&redlock_script_force_release);
	redlock_script_register(&redlock_script_scan);
	redlock_script_register(&redlock_script_watch_read);
	redlock_script_register(&redlock_script_deadlock_publish);
	redlock_script_register(&redlock_script_deadlock_read);
	redlock_script_register(&redlock_script_deadlock_withdraw);
}
