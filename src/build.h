/*-------------------------------------------------------------------------
 *
 * build.h
 *	  What this build of redlock was compiled with (build.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_BUILD_H
#define REDLOCK_BUILD_H

#include "redlock.h"

extern bool redlock_tls_supported(char *why, size_t whylen);

#endif							/* REDLOCK_BUILD_H */
