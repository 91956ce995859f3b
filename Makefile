# redlock: Redlock distributed locks for PostgreSQL, built with PGXS.

MODULE_big = redlock
EXTENSION = redlock
DATA = $(wildcard sql/redlock--*.sql)
# src/ is a folder per layer (src/README.md); includes name the folder: "wire/call.h".
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
PG_CPPFLAGS += -I$(srcdir)/src -Isrc

# The Lua scripts (src/scripts/NAME.lua) are embedded at build time into one generated
# header, src/scripts/lua.h (src/scripts/embed; Perl, which Debian always has).
RL_LUA = $(sort $(wildcard $(srcdir)/src/scripts/*.lua))
SHLIB_LINK = -lhiredis

# TLS to the masters (src/wire/tls.c) when hiredis has its TLS library (hiredis_ssl, 1.0 and
# later: Debian 13) and OpenSSL's headers are there; Debian 12's hiredis 0.14 has none.
# Each is probed on its own, so that the build says which one is missing, in one plain
# line.  REDLOCK_TLS=yes or no overrides the probe.
rl_has_header = $(shell printf '\043include <$(1)>\n' | $(CC) -E -x c - >/dev/null 2>&1 && echo yes)
ifndef REDLOCK_TLS
RL_HIREDIS_SSL := $(call rl_has_header,hiredis/hiredis_ssl.h)
RL_OPENSSL := $(call rl_has_header,openssl/ssl.h)
ifeq ($(RL_HIREDIS_SSL)$(RL_OPENSSL),yesyes)
REDLOCK_TLS := yes
else
REDLOCK_TLS := no
ifeq ($(filter clean distclean maintainer-clean,$(MAKECMDGOALS)),)
$(info redlock: building without TLS (redlock.tls = on will be refused): \
	$(if $(RL_HIREDIS_SSL),,no <hiredis/hiredis_ssl.h>: TLS needs hiredis 1.0 or later with its TLS library (Debian 13's libhiredis-dev; Debian 12's hiredis 0.14 has none)$(if $(RL_OPENSSL),,; ))$(if $(RL_OPENSSL),,no <openssl/ssl.h>: install OpenSSL's headers (libssl-dev)))
endif
endif
endif
ifeq ($(REDLOCK_TLS),yes)
PG_CPPFLAGS += -DREDLOCK_TLS
SHLIB_LINK += -lhiredis_ssl -lssl -lcrypto
endif
PGFILEDESC = "redlock - Redlock distributed locks on independent Redis masters"

# pg_regress suites: every test/sql/NAME.sql against test/expected/NAME.out, in
# alphabetical order (each file creates what it uses, so the order does not matter);
# sql/ holds only the install and upgrade scripts.  They need the Redis masters that
# test/run starts and names in redlock.servers.
REGRESS = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS = --inputdir=test --load-extension=redlock

EXTRA_CLEAN = results regression.diffs regression.out tmp_check src/scripts/lua.h

# TAP suites (test/t/*.pl, helpers in test/lib): `make prove_installcheck` against the
# installed extension, as an ordinary user (initdb refuses root; it says so); each test
# starts its own Redis masters and clusters.  PROVE_TESTS picks files (README).  Not wired
# into `installcheck` (TAP_TESTS), which runs the pg_regress suites only: test/run runs
# those twice (without and with the library preloaded) and the TAP suites once.
PROVE_TESTS ?= $(sort $(wildcard test/t/*.pl))

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: every object depends on the shared headers (but
# the generated lua.h, which scripts.o alone includes: were every object to depend on it,
# those built before it would look stale to the next make, and `make install` would
# rebuild them without the first make's COPT).
$(OBJS): $(filter-out src/scripts/lua.h,$(wildcard src/*.h src/*/*.h))

src/scripts/lua.h: $(RL_LUA) $(srcdir)/src/scripts/embed
	@$(MKDIR_P) $(dir $@)
	perl $(srcdir)/src/scripts/embed $(RL_LUA) > $@.tmp && mv $@.tmp $@

src/scripts/scripts.o src/scripts/scripts.bc: src/scripts/lua.h

# PostgreSQL's own headers warn under -Wextra: include them as system headers so that
# warnings are reported for our code only.
override CPPFLAGS := $(patsubst -I%,-isystem %,$(filter -I$(includedir)%,$(CPPFLAGS))) \
	$(filter-out -I$(includedir)%,$(CPPFLAGS))

# As pgvector does: PGXS defines prove_installcheck only with TAP_TESTS, for t/*.pl.
# PostgreSQL::Test::Utils takes its directories from TESTDIR up to 15 and from
# TESTDATADIR and TESTLOGDIR from 16 on (else the relative "tmp_check" and "log"): set
# all three, so that every version keeps data and logs, absolute, under tmp_check.
.PHONY: prove_installcheck
prove_installcheck:
	@if [ "$$(id -u)" = 0 ]; then \
		echo "prove_installcheck: run it as an ordinary user: the TAP suites run initdb, which refuses root (e.g. runuser -u postgres -- make prove_installcheck)" >&2; \
		exit 1; \
	fi
	rm -rf '$(CURDIR)'/tmp_check
	$(MKDIR_P) '$(CURDIR)'/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' TESTDATADIR='$(CURDIR)/tmp_check' \
		TESTLOGDIR='$(CURDIR)/tmp_check/log' PATH="$(bindir):$$PATH" \
		PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
		$(PROVE) $(PG_PROVE_FLAGS) -I test/lib $(PROVE_FLAGS) $(PROVE_TESTS)
