/*-------------------------------------------------------------------------
 *
 * tls.h
 *	  TLS under the connections to the masters (tls.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_TLS_H
#define REDLOCK_TLS_H

#include "redlock.h"

/* One step of a handshake. */
typedef enum RedlockTlsStep
{
	REDLOCK_TLS_DONE,
	REDLOCK_TLS_WANT_READ,
	REDLOCK_TLS_WANT_WRITE,
	REDLOCK_TLS_FAILED
} RedlockTlsStep;

/* OpenSSL's SSL_CTX and SSL, opaque outside tls.c. */
typedef struct ssl_ctx_st RedlockTlsContext;
typedef struct ssl_st RedlockTlsSession;
struct redisContext;

extern RedlockTlsContext *redlock_tls_context_new(const RedlockTlsConfig *config,
												  char *why, size_t whylen);
extern void redlock_tls_context_free(RedlockTlsContext *context);
extern RedlockTlsSession *redlock_tls_session_start(RedlockTlsContext *context,
													RedlockTlsVerify verify,
													struct redisContext *conn,
													const char *host, char *why,
													size_t whylen);
extern RedlockTlsStep redlock_tls_handshake(RedlockTlsSession *session, char *why,
											size_t whylen);
extern void redlock_tls_clear_errors(void);
extern bool redlock_tls_io_error(char *why, size_t whylen);
extern bool redlock_tls_pending(RedlockTlsSession *session);
extern bool redlock_tls_gone_while_idle(RedlockTlsSession *session);

#endif							/* REDLOCK_TLS_H */
