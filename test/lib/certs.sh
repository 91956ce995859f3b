# test/lib/certs.sh: throwaway TLS certificates for tests and benchmarks (sourced, bash).
# shellcheck shell=bash
#
#   rl_make_certs DIR   writes into DIR (created), each NAME.crt with NAME.key (0600):
#                       ca         a CA that signs the three below
#                       server     for the masters: subjectAltName IP:127.0.0.1, localhost
#                       client     a client certificate (Redis asks for one by default)
#                       elsewhere  for another name only (DNS:elsewhere.invalid)
#                       cn-only    CN=localhost, but subjectAltName IP:127.0.0.1 only
#                       other-ca   a CA that signed none of them
#                       RSA 2048, valid 2 days.  Returns non-zero, saying why, on failure.

rl_make_certs()
{
	local dir=$1 log
	mkdir -p "$dir" || return 1
	log=$dir/openssl.log
	_rl_ca()
	{
		openssl req -x509 -new -nodes -newkey rsa:2048 -days 2 -subj "/CN=redlock test $1" \
			-keyout "$dir/$1.key" -out "$dir/$1.crt" >>"$log" 2>&1
	}
	_rl_cert()
	{
		local name=$1 san=$2 cn=${3:-$1}
		openssl req -new -nodes -newkey rsa:2048 -subj "/CN=$cn" \
			-keyout "$dir/$name.key" -out "$dir/$name.csr" >>"$log" 2>&1 &&
			printf 'subjectAltName=%s\n' "$san" >"$dir/$name.ext" &&
			openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
				-CAcreateserial -days 2 -extfile "$dir/$name.ext" -out "$dir/$name.crt" >>"$log" 2>&1
	}
	if ! { _rl_ca ca && _rl_ca other-ca &&
		_rl_cert server 'IP:127.0.0.1,DNS:localhost' &&
		_rl_cert client 'DNS:redlock-client' &&
		_rl_cert elsewhere 'DNS:elsewhere.invalid' &&
		_rl_cert cn-only 'IP:127.0.0.1' localhost; }; then
		echo "certs: openssl failed; see $log" >&2
		return 1
	fi
	chmod 0600 "$dir"/*.key
	rm -f "$dir"/*.csr "$dir"/*.ext
}
