# test/lib/deps.sh: install what building and testing redlock needs (sourced, bash).
# shellcheck shell=bash
#
# rl_install_deps installs the Debian packages with apt-get, and does nothing when they
# are all installed already, so that reruns stay quick.  Must run as root.
# rl_install_demo_deps does the same for test/demo's shorter list.
# rl_install_missing WHO PKG... does the same for any list (test/deb, test/matrix,
# test/fuzz/run, test/model/run), WHO naming the caller in what it prints.
# RL_PG_MAJOR (default 15, Debian 12's) picks the PostgreSQL version: test/matrix sets 17
# in a Debian 13 root and 18 in a sid root.  libssl-dev: where hiredis has its TLS
# library (1.0 and later) the build then always has TLS; openssl: test/t/060_tls_to_masters.pl
# makes its certificates with it.

RL_PG_MAJOR=${RL_PG_MAJOR:-15}
RL_DEB_PACKAGES=(
	make gcc libc6-dev
	"postgresql-$RL_PG_MAJOR" "postgresql-server-dev-$RL_PG_MAJOR" "postgresql-$RL_PG_MAJOR-cron"
	libhiredis-dev libssl-dev openssl redis-server redis-tools
	libipc-run-perl perl
	pgbouncer
)

# What test/demo uses, and nothing more (no pgbouncer, whose package starts a service, no
# pg_cron): building (make, gcc, libc6-dev, the server headers, hiredis) and running
# (PostgreSQL, redis-server, redis-cli).  test/readme/run checks that each is used.
RL_DEMO_PACKAGES=(
	make gcc libc6-dev
	"postgresql-$RL_PG_MAJOR" "postgresql-server-dev-$RL_PG_MAJOR"
	libhiredis-dev redis-server redis-tools
)

# Installs those of the packages PKG... that are not installed (apt-get update first),
# and nothing when all are; WHO starts each line it prints.  Fails when one cannot be
# installed, or is missing and this is not root.
rl_install_missing()
{
	local who=$1 pkg missing=()
	shift
	for pkg; do
		[[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null) == "install ok installed" ]] ||
			missing+=("$pkg")
	done
	if [[ ${#missing[@]} -eq 0 ]]; then
		echo "$who: all packages already installed ($*)"
		return 0
	fi
	if [[ $(id -u) -ne 0 ]]; then
		echo "$who: needs ${missing[*]}: run as root (sudo $0)" >&2
		return 1
	fi
	echo "$who: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Installs the packages, unless they are all there already.
rl_install_deps()
{
	rl_install_missing deps "${RL_DEB_PACKAGES[@]}"
}

# Installs test/demo's packages, unless they are all there already.
rl_install_demo_deps()
{
	rl_install_missing demo "${RL_DEMO_PACKAGES[@]}"
}

# node and npm, for test/t/020_interop_with_node_redlock.pl (node-redlock, installed by the test with npm ci).
# Installs Debian's nodejs and npm only when node or npm is missing.
rl_install_node()
{
	if command -v node >/dev/null && command -v npm >/dev/null; then
		echo "deps: node $(node --version) and npm $(npm --version 2>/dev/null) present"
		return 0
	fi
	[[ $(id -u) -eq 0 ]] || { echo "deps: node/npm missing and not root" >&2; return 1; }
	echo "deps: installing nodejs npm"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends nodejs npm
}
