/*-------------------------------------------------------------------------
 *
 * tls.c
 *	  TLS on the connections to the Redis masters (redlock.tls and its files), with
 *	  OpenSSL under hiredis' TLS layer (hiredis_ssl, hiredis 1.0 and later).
 *
 * conn.c keeps the non-blocking connections (and waitset.c the one WaitEventSet): once
 * a TCP connect is done conn.c starts a session here, which hands the socket to hiredis
 * (redisInitiateSSL) and then drives the handshake one step per socket event, saying
 * whether it waits to read or to write; only after the handshake do hiredis' reads and
 * writes go through the session.  Every connection of one configuration shares a
 * context (trusted CAs, client certificate and key, verification), built when its
 * first connection opens, so that the files are read once per configuration, not once
 * per connect.
 *
 * Verification is on by default (redlock.tls_verify = full): the master's chain must
 * lead to a trusted CA and its certificate must name the host (or IP address) written
 * in redlock.servers, as libpq's sslmode=verify-full.  Without it TLS hides the
 * traffic but anyone on the path could stand in for a master, grant locks and read
 * the password.  Unix-socket masters are not wrapped: Redis serves them in clear.
 *
 * A build against a hiredis without TLS (Debian 12's 0.14) compiles the stubs at the
 * end: redlock.tls refuses "on" with 0A000, and nothing else here is ever called.
 *
 * OpenSSL allocates with malloc; nothing here holds palloc'd memory or raises.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"
#include "wire/tls.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "build.h"
#include "redlock.h"

#ifdef REDLOCK_TLS

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <hiredis/hiredis_ssl.h>

/*
 * The words of OpenSSL's oldest queued error with words (a system error's strerror,
 * "No such file or directory" for a missing file), or fallback; the queue is emptied.
 */
static const char *
tls_openssl_error(const char *fallback)
{
	unsigned long e;
	const char *reason = NULL;

	while ((e = ERR_get_error()) != 0)
	{
		if (reason != NULL)
			continue;
#ifdef ERR_SYSTEM_ERROR			/* OpenSSL 3 */
		if (ERR_SYSTEM_ERROR(e))
#else
		if (ERR_GET_LIB(e) == ERR_LIB_SYS)
#endif
			reason = strerror(ERR_GET_REASON(e));
		else
			reason = ERR_reason_error_string(e);
	}
	return reason ? reason : fallback;
}

/*
 * A private key readable by others is refused, as PostgreSQL refuses its own
 * ssl_key_file: no group or world access, or group read only when root owns it.
 */
static bool
tls_key_file_private(const char *path, char *why, size_t whylen)
{
	struct stat st;

	if (stat(path, &st) != 0)
	{
		snprintf(why, whylen, "could not access redlock.tls_key_file \"%s\": %s",
				 path, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode))
	{
		snprintf(why, whylen, "redlock.tls_key_file \"%s\" is not a regular file", path);
		return false;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0)
	{
		snprintf(why, whylen, "redlock.tls_key_file \"%s\" must be owned by the server's operating system user or root",
				 path);
		return false;
	}
	if ((st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO))) ||
		(st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO))))
	{
		snprintf(why, whylen, "redlock.tls_key_file \"%s\" has group or world access (chmod 0600)",
				 path);
		return false;
	}
	return true;
}

/*
 * Asked for an encrypted key's passphrase: there is none to give (OpenSSL's own
 * callback would read the terminal, and wait).  Notes that it was asked.
 */
static int
tls_no_passphrase(char *buf pg_attribute_unused(), int size pg_attribute_unused(),
			  int rwflag pg_attribute_unused(), void *asked)
{
	*(bool *) asked = true;
	return 0;
}

/*
 * redlock_tls_context_new
 *		Builds the TLS context of a configuration: TLS 1.2 or later, renegotiation
 *		refused (after the handshake a write never waits for a read), the trusted CAs
 *		of config->ca_file or else the system's store, the client certificate and key
 *		when given, and peer verification unless config->verify is NONE.  verify = CA
 *		needs config->ca_file: with the system's store it would accept any publicly
 *		trusted certificate for any name (libpq refuses verify-ca with the system's
 *		store likewise).  A certificate needs its key and a key its certificate; an
 *		encrypted key is refused (nothing could type its passphrase).
 *
 * Returns the context (free it with redlock_tls_context_free), or NULL with why
 * (whylen bytes) saying which file or step failed.  Raises nothing.
 */
RedlockTlsContext *
redlock_tls_context_new(const RedlockTlsConfig *config, char *why, size_t whylen)
{
	SSL_CTX    *ctx;
	bool		passphrase_asked = false;

	if (config->verify == REDLOCK_TLS_VERIFY_CA && config->ca_file[0] == '\0')
	{
		snprintf(why, whylen, "redlock.tls_verify = ca needs redlock.tls_ca_file (with the system's CAs any public certificate would pass)");
		return NULL;
	}
	if ((config->cert_file[0] == '\0') != (config->key_file[0] == '\0'))
	{
		snprintf(why, whylen, "redlock.%s is set but redlock.%s is not",
				 config->cert_file[0] ? "tls_cert_file" : "tls_key_file",
				 config->cert_file[0] ? "tls_key_file" : "tls_cert_file");
		return NULL;
	}

	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL)
	{
		snprintf(why, whylen, "could not create a TLS context: %s",
				 tls_openssl_error("out of memory"));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);

	if (config->ca_file[0] != '\0')
	{
		if (SSL_CTX_load_verify_locations(ctx, config->ca_file, NULL) != 1)
		{
			snprintf(why, whylen, "could not load redlock.tls_ca_file \"%s\": %s",
					 config->ca_file, tls_openssl_error("unknown error"));
			goto fail;
		}
	}
	else if (SSL_CTX_set_default_verify_paths(ctx) != 1)
	{
		snprintf(why, whylen, "could not load the system's trusted CA certificates: %s",
				 tls_openssl_error("unknown error"));
		goto fail;
	}

	if (config->cert_file[0] != '\0' &&
		SSL_CTX_use_certificate_chain_file(ctx, config->cert_file) != 1)
	{
		snprintf(why, whylen, "could not load redlock.tls_cert_file \"%s\": %s",
				 config->cert_file, tls_openssl_error("unknown error"));
		goto fail;
	}
	if (config->key_file[0] != '\0')
	{
		if (!tls_key_file_private(config->key_file, why, whylen))
			goto fail;
		SSL_CTX_set_default_passwd_cb(ctx, tls_no_passphrase);
		SSL_CTX_set_default_passwd_cb_userdata(ctx, &passphrase_asked);
		if (SSL_CTX_use_PrivateKey_file(ctx, config->key_file, SSL_FILETYPE_PEM) != 1)
		{
			snprintf(why, whylen, "could not load redlock.tls_key_file \"%s\": %s",
					 config->key_file, passphrase_asked ?
					 "encrypted keys are not supported" :
					 tls_openssl_error("unknown error"));
			ERR_clear_error();
			goto fail;
		}
		SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
		if (SSL_CTX_check_private_key(ctx) != 1)
		{
			snprintf(why, whylen, "redlock.tls_key_file \"%s\" does not match redlock.tls_cert_file \"%s\"",
					 config->key_file, config->cert_file);
			ERR_clear_error();
			goto fail;
		}
	}
	SSL_CTX_set_verify(ctx, config->verify == REDLOCK_TLS_VERIFY_NONE ?
					   SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
	return (RedlockTlsContext *) ctx;

fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/*
 * redlock_tls_context_free
 *		Frees context (NULL is allowed).  Sessions still open keep their own reference.
 */
void
redlock_tls_context_free(RedlockTlsContext *context)
{
	SSL_CTX_free((SSL_CTX *) context);
}

/*
 * The master's certificate failed verification: X509_V_OK or the reason.  Under
 * tls_verify = none a result is still recorded, but it did not end anything.
 */
static long
tls_verify_failure(const SSL *ssl)
{
	if (SSL_get_verify_mode(ssl) == SSL_VERIFY_NONE)
		return X509_V_OK;
	return SSL_get_verify_result(ssl);
}

/* The words for a failed handshake step whose SSL_get_error() was err. */
static void
tls_handshake_failure(SSL *ssl, int err, char *why, size_t whylen)
{
	long		verified = tls_verify_failure(ssl);

	if (verified != X509_V_OK)
		snprintf(why, whylen, "TLS handshake failed: certificate verify failed: %s",
				 X509_verify_cert_error_string(verified));
	else if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
		snprintf(why, whylen, "TLS handshake failed: %s",
				 errno ? strerror(errno) : "the master closed the connection");
	else if (err == SSL_ERROR_ZERO_RETURN)
		snprintf(why, whylen, "TLS handshake failed: the master closed the connection");
	else
		snprintf(why, whylen, "TLS handshake failed: %s", tls_openssl_error("unknown error"));
	ERR_clear_error();
}

/*
 * redlock_tls_session_start
 *		Starts TLS on conn, whose TCP connect is complete: a session of context that
 *		sends host as the server name (SNI, unless host is an IP address) and, when
 *		verify is FULL, requires the master's certificate to name host; hiredis then
 *		reads and writes through it.  Continue with redlock_tls_handshake.
 *
 * Returns the session, owned by conn from then on (redisFree frees it), or NULL with
 * why (whylen bytes).  Raises nothing.
 */
RedlockTlsSession *
redlock_tls_session_start(RedlockTlsContext *context, RedlockTlsVerify verify,
						  redisContext *conn, const char *host, char *why, size_t whylen)
{
	SSL		   *ssl;
	unsigned char addr[sizeof(struct in6_addr)];
	bool		is_ip = inet_pton(AF_INET, host, addr) == 1 ||
		inet_pton(AF_INET6, host, addr) == 1;

	ERR_clear_error();
	ssl = SSL_new((SSL_CTX *) context);
	if (ssl == NULL)
	{
		snprintf(why, whylen, "could not start TLS: %s", tls_openssl_error("out of memory"));
		return NULL;
	}
	/* A name is matched against the subjectAltNames only, never the subject's CN. */
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
	if ((!is_ip && SSL_set_tlsext_host_name(ssl, host) != 1) ||
		(verify == REDLOCK_TLS_VERIFY_FULL &&
		 (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) :
		  SSL_set1_host(ssl, host)) != 1))
	{
		snprintf(why, whylen, "could not set the TLS server name \"%s\": %s",
				 host, tls_openssl_error("unknown error"));
		SSL_free(ssl);
		return NULL;
	}

	/*
	 * Non-blocking, hiredis takes the session once its first handshake step has run,
	 * however far that got; on failure the session stays ours to free.
	 */
	if (redisInitiateSSL(conn, ssl) != REDIS_OK)
	{
		/* hiredis only peeked at OpenSSL's errors: they can say more than it did. */
		if (tls_verify_failure(ssl) != X509_V_OK || ERR_peek_error() != 0)
			tls_handshake_failure(ssl, SSL_ERROR_SSL, why, whylen);
		else
			snprintf(why, whylen, "TLS handshake failed: %s", conn->errstr);
		SSL_free(ssl);
		return NULL;
	}
	return (RedlockTlsSession *) ssl;
}

/*
 * redlock_tls_handshake
 *		Runs session's handshake as far as the socket allows without blocking.
 *
 * Returns REDLOCK_TLS_DONE, REDLOCK_TLS_WANT_READ or REDLOCK_TLS_WANT_WRITE (call
 * again once the socket is readable or writable), or REDLOCK_TLS_FAILED with why
 * (whylen bytes): a refused certificate says why verification failed.  Raises nothing.
 */
RedlockTlsStep
redlock_tls_handshake(RedlockTlsSession *session, char *why, size_t whylen)
{
	SSL		   *ssl = (SSL *) session;
	int			rc,
				err;

	ERR_clear_error();
	errno = 0;
	rc = SSL_do_handshake(ssl);
	if (rc == 1)
		return REDLOCK_TLS_DONE;
	err = SSL_get_error(ssl, rc);
	if (err == SSL_ERROR_WANT_READ)
		return REDLOCK_TLS_WANT_READ;
	if (err == SSL_ERROR_WANT_WRITE)
		return REDLOCK_TLS_WANT_WRITE;
	tls_handshake_failure(ssl, err, why, whylen);
	return REDLOCK_TLS_FAILED;
}

/*
 * redlock_tls_clear_errors
 *		Empties OpenSSL's error queue of this thread, before hiredis reads or writes
 *		through a session, so that redlock_tls_io_error finds only that call's reason.
 *		Raises nothing.
 */
void
redlock_tls_clear_errors(void)
{
	ERR_clear_error();
}

/*
 * redlock_tls_io_error
 *		After hiredis failed to read or write through a session: copies OpenSSL's
 *		reason (an alert from the master, say "certificate required") into why
 *		(whylen bytes) and returns true, or returns false when it has none.  Raises
 *		nothing.
 */
bool
redlock_tls_io_error(char *why, size_t whylen)
{
	const char *reason = tls_openssl_error(NULL);

	if (reason == NULL)
		return false;
	snprintf(why, whylen, "TLS error: %s", reason);
	return true;
}

/*
 * redlock_tls_pending
 *		Returns true when session holds decrypted bytes that hiredis has not read yet:
 *		the socket will not signal them, so the caller reads again.  Raises nothing.
 */
bool
redlock_tls_pending(RedlockTlsSession *session)
{
	return SSL_pending((SSL *) session) > 0;
}

/*
 * redlock_tls_gone_while_idle
 *		The TLS form of conn.c's idle check: true when session can no longer be used
 *		(the master closed it, or sent data nobody asked for).  Protocol records that
 *		carry no data (session tickets) are consumed and do not count.  Raises nothing.
 */
bool
redlock_tls_gone_while_idle(RedlockTlsSession *session)
{
	SSL		   *ssl = (SSL *) session;
	char		byte;
	int			rc,
				err;

	ERR_clear_error();
	rc = SSL_peek(ssl, &byte, 1);
	if (rc > 0)
		return true;
	err = SSL_get_error(ssl, rc);
	ERR_clear_error();
	return err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE;
}

#else							/* !REDLOCK_TLS */

/* The Makefile says which of hiredis_ssl and OpenSSL's headers the build lacks. */

/*
 * Without TLS support: redlock.tls is on only when it came from the configuration,
 * and every TCP connection fails here, before anything is sent in clear.
 */
RedlockTlsContext *
redlock_tls_context_new(const RedlockTlsConfig *config pg_attribute_unused(),
						char *why, size_t whylen)
{
	snprintf(why, whylen,
			 "redlock.tls is on, but this build of redlock has no TLS (hiredis %d.%d.%d, without hiredis_ssl): not connecting in clear",
			 HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
	return NULL;
}

void
redlock_tls_context_free(RedlockTlsContext *context pg_attribute_unused())
{
}

RedlockTlsSession *
redlock_tls_session_start(RedlockTlsContext *context pg_attribute_unused(),
						  RedlockTlsVerify verify pg_attribute_unused(),
						  redisContext *conn pg_attribute_unused(),
						  const char *host pg_attribute_unused(), char *why, size_t whylen)
{
	redlock_tls_supported(why, whylen);
	return NULL;
}

RedlockTlsStep
redlock_tls_handshake(RedlockTlsSession *session pg_attribute_unused(), char *why, size_t whylen)
{
	redlock_tls_supported(why, whylen);
	return REDLOCK_TLS_FAILED;
}

void
redlock_tls_clear_errors(void)
{
}

bool
redlock_tls_io_error(char *why pg_attribute_unused(), size_t whylen pg_attribute_unused())
{
	return false;
}

bool
redlock_tls_pending(RedlockTlsSession *session pg_attribute_unused())
{
	return false;
}

bool
redlock_tls_gone_while_idle(RedlockTlsSession *session pg_attribute_unused())
{
	return true;
}

#endif							/* REDLOCK_TLS */
