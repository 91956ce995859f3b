/*-------------------------------------------------------------------------
 *
 * scripts.h
 *	  The Lua scripts of every round (scripts.c; their text in the .lua files beside it).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_SCRIPTS_H
#define REDLOCK_SCRIPTS_H

#include "redlock.h"

extern RedlockScript redlock_script_release;
extern RedlockScript redlock_script_quiet_release;
extern RedlockScript redlock_script_extend;
extern RedlockScript redlock_script_permits_beyond;
extern RedlockScript redlock_script_set_acquire;
extern RedlockScript redlock_script_set_release;
extern RedlockScript redlock_script_shared_acquire;
extern RedlockScript redlock_script_fence_read;
extern RedlockScript redlock_script_fence_write;
extern RedlockScript redlock_script_lock_info;
extern RedlockScript redlock_script_force_release;
extern RedlockScript redlock_script_scan;
extern RedlockScript redlock_script_watch_read;
extern RedlockScript redlock_script_deadlock_publish;
extern RedlockScript redlock_script_deadlock_read;
extern RedlockScript redlock_script_deadlock_withdraw;

extern void RedlockScriptsInit(void);

#endif							/* REDLOCK_SCRIPTS_H */
