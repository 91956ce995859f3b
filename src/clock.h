/*-------------------------------------------------------------------------
 *
 * clock.h
 *	  The validity clock (clock.c): monotonic milliseconds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_CLOCK_H
#define REDLOCK_CLOCK_H

#include "redlock.h"

extern double redlock_clock_ms(void);

#endif							/* REDLOCK_CLOCK_H */
