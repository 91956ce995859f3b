/*-------------------------------------------------------------------------
 *
 * guc.h
 *	  The redlock.* settings (guc.c): their values, and what is derived from them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_GUC_H
#define REDLOCK_GUC_H

#include "redlock.h"

extern int	redlock_connect_timeout_ms;
extern int	redlock_timeout_ms;
extern int	redlock_quorum_timeout_ms;
extern int	redlock_retry_delay_ms;
extern int	redlock_retry_jitter_ms;
extern double redlock_clock_drift_factor;
extern char *redlock_key_prefix;
extern char *redlock_username;
extern char *redlock_password;
extern char *redlock_password_file;
extern int	redlock_database;
extern int	redlock_commit_margin_ms;
extern bool redlock_auto_extend;
extern bool redlock_record_holder;
extern bool redlock_cancel_on_loss;
extern bool redlock_test_commit_guard_first;
extern int	redlock_max_auto_extended_locks;
extern int	redlock_max_auto_extended_locks_per_role;
extern int	redlock_max_locks_per_role;
extern int	redlock_quorum;
extern int	redlock_max_ttl_ms;
extern int	redlock_restart_quarantine_ms;
extern int	redlock_watch_interval_ms;
extern int	redlock_deadlock_timeout_ms;
extern bool redlock_tls;
extern int	redlock_tls_verify;
extern char *redlock_tls_ca_file;
extern char *redlock_tls_cert_file;
extern char *redlock_tls_key_file;
extern const RedlockServerList *redlock_server_list;
extern uint64 redlock_connection_generation;

/* The longest password redlock.password_file may hold, in bytes. */
#define REDLOCK_PASSWORD_LEN 1024

extern void RedlockGucInit(void);
extern const char *redlock_effective_password(void);
extern int	redlock_ttl_limit(const char **setting);

extern void redlock_tls_config(RedlockTlsConfig *config);	/* guc.c */
extern bool redlock_tls_config_equal(const RedlockTlsConfig *a, const RedlockTlsConfig *b);

#endif							/* REDLOCK_GUC_H */
