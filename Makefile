# redlock: Redlock distributed locks for PostgreSQL, built with PGXS.

MODULE_big = redlock
EXTENSION = redlock
DATA = $(wildcard sql/redlock--*.sql)
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
SHLIB_LINK = -lhiredis
PGFILEDESC = "redlock - Redlock distributed locks on independent Redis masters"

# pg_regress suites: every sql/NAME.sql but the install scripts, against expected/NAME.out,
# in alphabetical order (each file creates what it uses, so the order does not matter).
# They need the Redis masters that test/run starts and names in redlock.servers.
REGRESS = $(sort $(filter-out redlock--%,$(basename $(notdir $(wildcard sql/*.sql)))))
REGRESS_OPTS = --load-extension=redlock

EXTRA_CLEAN = results regression.diffs regression.out tmp_check

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: every object depends on the one shared header.
$(OBJS): src/redlock.h

# PostgreSQL's own headers warn under -Wextra: include them as system headers so that
# warnings are reported for our code only.
override CPPFLAGS := $(patsubst -I%,-isystem %,$(filter -I$(includedir)%,$(CPPFLAGS))) \
	$(filter-out -I$(includedir)%,$(CPPFLAGS))
