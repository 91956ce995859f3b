# test/lib/servers.sh: Redis masters and a scratch PostgreSQL 15 cluster (sourced, bash).
# shellcheck shell=bash
#
# Used by test/run and test/demo, as root.  Everything lives in one temp dir, RL_TMP:
#
#   rl_setup                 make RL_TMP (owned by postgres) and trap EXIT to clean up
#   rl_check_ports N         fail, saying which, when a port needed is taken
#   rl_start_masters N       start N masters (RL_REDIS_SERVER, default redis-server; e.g.
#                            valkey-server, with RL_REDIS_CLI=valkey-cli) on 127.0.0.1,
#                            ports from RL_REDIS_BASE_PORT (default 28379) up, each with
#                            test/lib/start-master (which waits for PING and checks that the
#                            master says in INFO server that it is what rl_server_identity
#                            names); with RL_REDIS_TLS_DIR (certificates of
#                            test/lib/certs.sh) they serve TLS only, on the same ports, and
#                            rl_redis_cli uses TLS
#   rl_server_identity       print what RL_REDIS_SERVER is: "Redis 7.0.15", "Valkey 8.1.1"
#                            (start-master --identity)
#   rl_servers_guc           print the redlock.servers value naming the masters
#   rl_kill_master I         SIGKILL master I (0-based)
#   rl_start_cluster         initdb + start a cluster on port RL_PG_PORT (default 28432),
#                            unix socket only, in RL_TMP/sock, redlock.servers set, and
#                            the lines of RL_PG_EXTRA_CONF (if set) appended
#   rl_psql ARGS...          psql as postgres against the scratch cluster
#   rl_stop_all              stop the cluster and every master, by PID
#   rl_cleanup               rl_stop_all, then remove RL_TMP (the EXIT trap)
#
# When a server does not start, rl_start_masters and rl_start_cluster say why and exit;
# with RL_START_RETURNS=1 they return non-zero instead (test/run records a FAIL and
# still prints its summary).
# Ports are checked before use: a port something already listens on is an error, with a
# hint to choose others through the environment.  The defaults sit below Linux's ephemeral
# range (32768-60999), where an outgoing connection could hold them.

RL_PGBIN=${RL_PGBIN:-/usr/lib/postgresql/${RL_PG_MAJOR:-15}/bin}
RL_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RL_REDIS_BASE_PORT=${RL_REDIS_BASE_PORT:-28379}
RL_REDIS_SERVER=${RL_REDIS_SERVER:-redis-server}
RL_REDIS_CLI=${RL_REDIS_CLI:-redis-cli}
RL_REDIS_TLS_DIR=${RL_REDIS_TLS_DIR:-}
RL_PG_PORT=${RL_PG_PORT:-28432}
RL_TMP=
RL_REDIS_PORTS=()
RL_REDIS_DIRS=()
RL_PG_DATA=
RL_PG_SOCK=

rl_log()
{
	echo "servers: $*"
}

rl_die()
{
	echo "servers: ERROR: $*" >&2
	exit 1
}

# Says why a server did not start; exits, or returns 1 when RL_START_RETURNS=1.
rl_error()
{
	echo "servers: ERROR: $*" >&2
	[[ ${RL_START_RETURNS:-} == 1 ]] || exit 1
	return 1
}

# Succeeds when nothing accepts TCP connections on 127.0.0.1:PORT.
rl_port_free()
{
	local port=$1
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		return 1
	fi
	return 0
}

# Runs a command as the postgres user, from RL_TMP (the caller's directory may be one
# postgres cannot enter, such as /root).
rl_as_postgres()
{
	(cd "$RL_TMP" && runuser -u postgres -- "$@")
}

# Succeeds when the ports of N masters and of the cluster are all free; otherwise says
# which are taken and how to choose others, and fails.
rl_check_ports()
{
	local n=${1:-5} i port busy=0
	for ((i = 0; i < n; i++)); do
		port=$((RL_REDIS_BASE_PORT + i))
		if ! rl_port_free "$port"; then
			echo "servers: ERROR: port $port is in use; choose other Redis ports with RL_REDIS_BASE_PORT=NNNN" >&2
			busy=1
		fi
	done
	if ! rl_port_free "$RL_PG_PORT"; then
		echo "servers: ERROR: port $RL_PG_PORT is in use; choose another PostgreSQL port with RL_PG_PORT=NNNN" >&2
		busy=1
	fi
	return "$busy"
}

# Makes the temp dir and installs the cleanup trap.
rl_setup()
{
	[[ $(id -u) -eq 0 ]] || rl_die "must run as root (PostgreSQL runs as the postgres user)"
	id postgres >/dev/null 2>&1 || rl_die "no postgres OS user: is postgresql-${RL_PG_MAJOR:-15} installed?"
	RL_TMP=$(mktemp -d /tmp/redlock-test.XXXXXX)
	chown postgres: "$RL_TMP"
	chmod 755 "$RL_TMP"
	trap rl_cleanup EXIT
	trap 'exit 130' INT TERM
}

# PID of a running process from PIDFILE, or nothing.
rl_pid_of()
{
	local pidfile=$1 pid
	[[ -s $pidfile ]] || return 0
	pid=$(head -n1 "$pidfile")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
	return 0
}

# Waits up to SECONDS for process PID to end (or become a zombie).
rl_wait_gone()
{
	local pid=$1 seconds=${2:-10} i state
	for ((i = 0; i < seconds * 10; i++)); do
		state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 0
		[[ -z $state || $state == Z ]] && return 0
		sleep 0.1
	done
	return 1
}

# Runs test/lib/start-master with the servers named in RL_REDIS_SERVER and RL_REDIS_CLI.
_rl_start_master_cmd()
{
	RL_REDIS_SERVER=$RL_REDIS_SERVER RL_REDIS_CLI=$RL_REDIS_CLI "$RL_LIB_DIR/start-master" "$@"
}

# What RL_REDIS_SERVER is, from its --version line: "Redis 7.0.15", "Valkey 8.1.1";
# nothing when it does not say.
rl_server_identity()
{
	local is
	is=$(_rl_start_master_cmd --identity) && echo "$is"
}

# Starts master I on port BASE+I with test/lib/start-master, which waits until it answers
# PING and checks that it is the server RL_REDIS_SERVER names (a run meant for Valkey
# cannot pass against Redis).
rl_start_master()
{
	local i=$1 port dir out tls=()
	port=$((RL_REDIS_BASE_PORT + i))
	dir=$RL_TMP/redis$i
	rl_port_free "$port" ||
		{ rl_error "port $port is in use; choose other Redis ports with RL_REDIS_BASE_PORT=NNNN"; return 1; }
	RL_REDIS_DIRS[i]=$dir
	[[ -z $RL_REDIS_TLS_DIR ]] || tls=(--tls-dir "$RL_REDIS_TLS_DIR")
	out=$(_rl_start_master_cmd "${tls[@]}" "$port" "$dir") || { rl_error "$out"; return 1; }
	RL_REDIS_PORTS[i]=$port
}

# Starts N masters (default 5).
rl_start_masters()
{
	local n=${1:-5} i
	for ((i = 0; i < n; i++)); do
		rl_start_master "$i" || return 1
	done
	rl_log "$n masters ($(rl_server_identity), $RL_REDIS_SERVER) up on ports ${RL_REDIS_PORTS[*]}"
}

# The redlock.servers value for the running masters.
rl_servers_guc()
{
	local IFS=, items=() p
	for p in "${RL_REDIS_PORTS[@]}"; do
		items+=("127.0.0.1:$p")
	done
	echo "${items[*]}"
}

# Runs RL_REDIS_CLI (redis-cli) against 127.0.0.1:PORT, with TLS under RL_REDIS_TLS_DIR.
_rl_cli_at()
{
	local port=$1
	shift
	if [[ -n $RL_REDIS_TLS_DIR ]]; then
		"$RL_REDIS_CLI" -h 127.0.0.1 -p "$port" --tls --cacert "$RL_REDIS_TLS_DIR/ca.crt" \
			--cert "$RL_REDIS_TLS_DIR/client.crt" --key "$RL_REDIS_TLS_DIR/client.key" "$@"
	else
		"$RL_REDIS_CLI" -h 127.0.0.1 -p "$port" "$@"
	fi
}

# Runs RL_REDIS_CLI (redis-cli) against master I.
rl_redis_cli()
{
	local i=$1
	shift
	_rl_cli_at "${RL_REDIS_PORTS[i]}" "$@"
}

# SIGKILLs master I and waits until it is gone.
rl_kill_master()
{
	local i=$1 pid
	pid=$(rl_pid_of "${RL_REDIS_DIRS[i]}/redis.pid")
	[[ -n $pid ]] || return 0
	kill -KILL "$pid"
	rl_wait_gone "$pid" 10
}

# Stops master I (SIGTERM, then SIGKILL if it lingers).
rl_stop_master()
{
	local i=$1 pid
	pid=$(rl_pid_of "${RL_REDIS_DIRS[i]}/redis.pid")
	[[ -n $pid ]] || return 0
	kill -CONT "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	rl_wait_gone "$pid" 5 || { kill -KILL "$pid" 2>/dev/null; rl_wait_gone "$pid" 5; }
}

# Creates and starts the scratch cluster, configured for the running masters.
rl_start_cluster()
{
	local guc
	rl_port_free "$RL_PG_PORT" ||
		{ rl_error "port $RL_PG_PORT is in use; choose another PostgreSQL port with RL_PG_PORT=NNNN"; return 1; }
	[[ -e /tmp/.s.PGSQL.$RL_PG_PORT ]] && rl_log "note: /tmp/.s.PGSQL.$RL_PG_PORT exists (another server?); ours uses its own socket dir"
	RL_PG_DATA=$RL_TMP/pgdata
	RL_PG_SOCK=$RL_TMP/sock
	rl_as_postgres mkdir -p "$RL_PG_SOCK"
	rl_as_postgres "$RL_PGBIN/initdb" -D "$RL_PG_DATA" -A trust -N -E UTF8 \
		--locale=C --no-instructions >"$RL_TMP/initdb.log" 2>&1 ||
		{ cat "$RL_TMP/initdb.log" >&2; rl_error "initdb failed"; return 1; }
	guc=$(rl_servers_guc)
	cat >>"$RL_PG_DATA/postgresql.conf" <<-EOF

		# scratch cluster for redlock tests (test/lib/servers.sh)
		port = $RL_PG_PORT
		listen_addresses = ''
		unix_socket_directories = '$RL_PG_SOCK'
		fsync = off
		max_connections = 30
		lc_messages = 'C'
		log_line_prefix = '%m [%p] '
		redlock.servers = '$guc'
		# The masters were just started without AOF: with the quarantine on they
		# would be left out of every quorum for its length (TAP 070 tests it).
		redlock.restart_quarantine = 0
	EOF
	[[ -n ${RL_PG_EXTRA_CONF:-} ]] && printf '%s\n' "$RL_PG_EXTRA_CONF" >>"$RL_PG_DATA/postgresql.conf"
	rl_as_postgres "$RL_PGBIN/pg_ctl" -D "$RL_PG_DATA" -l "$RL_TMP/postgresql.log" \
		-w -t 60 start >/dev/null ||
		{ cat "$RL_TMP/postgresql.log" >&2; rl_error "the scratch cluster did not start"; return 1; }
	export PGHOST=$RL_PG_SOCK PGPORT=$RL_PG_PORT
	rl_log "PostgreSQL up: PGHOST=$RL_PG_SOCK PGPORT=$RL_PG_PORT, redlock.servers = '$guc'"
}

# psql as postgres against the scratch cluster.
rl_psql()
{
	rl_as_postgres "$RL_PGBIN/psql" -X -h "$RL_PG_SOCK" -p "$RL_PG_PORT" "$@"
}

# Stops the scratch cluster (fast, then SIGKILL of the postmaster by PID).
rl_stop_cluster()
{
	local pid
	[[ -n $RL_PG_DATA && -d $RL_PG_DATA ]] || return 0
	pid=$(rl_pid_of "$RL_PG_DATA/postmaster.pid")
	[[ -n $pid ]] || return 0
	rl_as_postgres "$RL_PGBIN/pg_ctl" -D "$RL_PG_DATA" -m fast -w -t 20 stop \
		>/dev/null 2>&1 && return 0
	kill -KILL "$pid" 2>/dev/null
	rl_wait_gone "$pid" 10
}

# Stops the cluster and all masters.
rl_stop_all()
{
	local i
	rl_stop_cluster
	for i in "${!RL_REDIS_DIRS[@]}"; do
		rl_stop_master "$i"
	done
	RL_REDIS_PORTS=()
	RL_REDIS_DIRS=()
	RL_PG_DATA=
}

# The EXIT trap: stop everything, remove the temp dir.
rl_cleanup()
{
	local rc=$?
	trap - EXIT
	rl_stop_all
	if [[ -n $RL_TMP && -d $RL_TMP ]]; then
		if [[ -n ${RL_KEEP_TMP:-} ]]; then
			rl_log "kept $RL_TMP (RL_KEEP_TMP is set)"
		else
			rm -rf "$RL_TMP"
		fi
	fi
	exit "$rc"
}
