/*-------------------------------------------------------------------------
 *
 * configset.h
 *	  The node set of a configuration slot, for the background workers (configset.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REDLOCK_CONFIGSET_H
#define REDLOCK_CONFIGSET_H

#include "redlock.h"

extern RedlockNodeSet *redlock_configset_for_slot(int slot, uint32 generation);

#endif							/* REDLOCK_CONFIGSET_H */
