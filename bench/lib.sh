# shellcheck shell=bash
# bench/lib.sh: what the bench scripts share (proxies.sh, storm.sh, conformance.sh, profile.sh,
# pgo.sh). Source it after defining die; it uses TMP (a directory it removes at exit, unless
# KEEP=1) and PIDS (the processes it stops at exit, an array or an associative one) when
# bench_traps has been called.

bench_cleanup() { # bench_stop every process of PIDS; TMP removed unless KEEP=1
	bench_stop "${PIDS[@]}"
	if ((${KEEP:-0})); then echo "${0##*/}: kept $TMP" >&2; else rm -rf "$TMP"; fi
}
bench_traps() { # bench_traps: bench_cleanup at exit; INT and TERM exit 130
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}
bench_alive() { # bench_alive PID: the process runs (a zombie, exited but not yet reaped, does not)
	local st
	st=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $st && $st != Z ]]
}
# bench_stop PID...: SIGTERM; a second SIGTERM to those still running 1 s later (fenec-entry
# drains on the first and stops at once on the second); SIGKILL to those still running 4 s
# after that. Processes need not be this shell's children (an upgraded fenec-entry or nginx).
bench_stop() {
	local p i left=()
	(($#)) || return 0
	for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
	for ((i = 0; i < 50; i++)); do
		left=()
		for p in "$@"; do if bench_alive "$p"; then left+=("$p"); fi; done
		((${#left[@]})) || break
		((i != 10)) || kill -TERM "${left[@]}" 2>/dev/null || true
		sleep 0.1
	done
	for p in "${left[@]}"; do
		echo "${0##*/}: pid $p still running after two SIGTERMs: SIGKILL" >&2
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in "$@"; do wait "$p" 2>/dev/null || true; done # this shell's children among them
}

free_port() { # free_port VAR: a port with no TCP listener, from PORT_BASE (default 19000) up
	local p=${NEXT_PORT:-${PORT_BASE:-19000}}
	while [[ -n $(ss -Htln "sport = :$p") ]]; do ((p++)); done
	NEXT_PORT=$((p + 1))
	printf -v "$1" %d "$p"
}
wait_ok() { # wait_ok URL [CURL-ARGS...]: until it answers 200, at most 10 s
	local url=$1
	shift
	for _ in $(seq 100); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" "$url") == 200 ]] && return 0
		sleep 0.1
	done
	die "$url did not answer 200 within 10 s"
}
json_str() { # json_str TEXT: TEXT as a JSON string (quotes, backslashes; control characters as spaces)
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "${s//[[:cntrl:]]/ }"
}

APT_UPDATED=0
apt_install() { # apt_install pkg...: install, running apt-get update once and only if needed
	local me=${0##*/}
	((EUID == 0)) || die "need to install $* but not root: run as root or install them yourself"
	command -v apt-get >/dev/null || die "need to install $* and apt-get is missing"
	if ((!APT_UPDATED)); then
		echo "$me: apt-get update" >&2
		apt-get update -qq >&2
		APT_UPDATED=1
	fi
	echo "$me: apt-get install $*" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

bench_cert() { # bench_cert DIR: a self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 in DIR; sets CERT and KEY
	mkdir -p "$1"
	CERT=$1/cert.pem KEY=$1/key.pem
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
		-keyout "$KEY" -out "$CERT" >"$1/req.log" 2>&1 ||
		{ cat "$1/req.log" >&2; die "openssl req: could not make the certificate"; }
}

# nginx_conf DIR UP_PORT SERVERS [WORKERS [WORKER_CONNECTIONS [MAIN [HTTP]]]]: writes
# DIR/nginx.conf, nginx as the benches run it in front of bench/upstream on UP_PORT (upstream
# keepalive 64, no access log, its temp files in DIR) with the server blocks SERVERS
# (nginx_location is the proxying they share), MAIN and HTTP (lines) added to the main and http
# contexts. Defaults: 1 worker, 4096 connections.
nginx_conf() {
	local dir=$1 up=$2 servers=$3 workers=${4:-1} conns=${5:-4096} main=${6:-} http=${7:-}
	mkdir -p "$dir"
	cat >"$dir/nginx.conf" <<EOF
worker_processes $workers;
${main}pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections $conns; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_requests 1000000;
${http}    upstream fenec_router {
        server 127.0.0.1:$up;
        keepalive 64;
        keepalive_requests 1000000;
    }
$servers
}
EOF
}
# nginx_location [EXTRA]: the proxying of every nginx the benches run: the header work the
# entry does (Fenec-Home: 1 and an X-Request-Id on the way in, Fenec-Home dropped on the way
# out), streamed (proxy_buffering off), EXTRA lines added inside.
nginx_location() {
	# shellcheck disable=SC2016 # nginx's $request_id, not this shell's
	printf '%s\n' '        location / {
            proxy_pass http://fenec_router;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Fenec-Home 1;
            proxy_set_header X-Request-Id $request_id;
            proxy_hide_header Fenec-Home;
            proxy_buffering off;'"${1:+
$1}"'
        }'
}
# nginx_tls CERT KEY: the TLS lines of every HTTPS nginx the benches run. ssl_protocols:
# nginx 1.22's default leaves TLS 1.3 out, which the entry (Go) and every client here speak.
# The server's order of TLS 1.3 ciphers, as the entry (Go) chooses its own: both then agree
# on TLS_AES_128_GCM_SHA256 with clients (OpenSSL's) that list AES-256 first. Session cache
# and tickets as nginx has them by default, with the shared cache of a server of several workers.
nginx_tls() {
	printf '%s\n' "    ssl_certificate $1;
    ssl_certificate_key $2;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_prefer_server_ciphers on;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256;
    ssl_session_cache shared:SSL:10m;"
}

# wrk_report_lua FILE: a wrk script whose done() prints one machine-readable line (latency in
# microseconds; errors in total, socket_errors, and by wrk's kind) and the latencies themselves,
# "HIST µs:count ...", for runs merged into one.
wrk_report_lua() {
	cat >"$1" <<'EOF'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH p50_us=%d p99_us=%d rps=%.1f requests=%d duration_us=%d socket_errors=%d non_2xx=%d connect_errors=%d read_errors=%d write_errors=%d timeout_errors=%d\n",
    latency:percentile(50.0), latency:percentile(99.0),
    summary.requests / (summary.duration / 1e6), summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status, e.connect, e.read, e.write, e.timeout))
  local parts = {}
  for i = 1, #latency do
    local v, c = latency(i)
    parts[#parts + 1] = string.format("%d:%d", v, c)
  end
  io.write("HIST " .. table.concat(parts, " ") .. "\n")
end
EOF
}
