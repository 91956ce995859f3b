/*-------------------------------------------------------------------------
 *
 * build.c
 *	  What this build of redlock was compiled with: TLS to the masters or not, and the
 *	  hiredis it was built against.  The setting redlock.tls (guc.c) and the connection
 *	  layer's TLS stubs (wire/tls.c) both ask here; the Makefile's probe decides
 *	  (REDLOCK_TLS).  hiredis' header is read for its version numbers only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <hiredis/hiredis.h>

#include "build.h"

/*
 * redlock_tls_supported
 *		Returns true when this build speaks TLS (hiredis_ssl, hiredis 1.0 and later).
 *		Otherwise returns false and writes into why (whylen bytes) the hiredis it was
 *		built with, for a DETAIL line.  Raises nothing.  Not a distlock section: TLS is
 *		the transport under it (README, "TLS to the masters").
 */
bool
redlock_tls_supported(char *why, size_t whylen)
{
#ifdef REDLOCK_TLS
	(void) why;
	(void) whylen;
	return true;
#else
	snprintf(why, whylen,
			 "This build of redlock uses hiredis %d.%d.%d, without its TLS library (hiredis_ssl, hiredis 1.0 or later).",
			 HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
	return false;
#endif
}
