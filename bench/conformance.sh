#!/usr/bin/env bash
# bench/conformance.sh: an HTTP/1.1 conformance and request-smuggling run, fenec-entry beside
# nginx and haproxy, all in front of the same recording upstream on loopback. See
# bench/README.md ("Conformance: the door against nginx and haproxy").
#
#   bash bench/conformance.sh [flags]     (flags: bash bench/conformance.sh --help)
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bash bench/conformance.sh [flags]

  --entry BIN      a fenec-entry binary to test instead of building ./cmd/fenec-entry
  --targets LIST   comma list from nginx,haproxy,fenec-entry (default all three)
  --cases FILTER   only the cases whose id matches FILTER (a regexp, or a substring)
  --json FILE      also write every outcome, with what the upstream saw, as JSON
  --out FILE       the per-case table (default bench/out/conformance-<UTC time>.md)
  --base-port P    first port tried for the listeners (default 19400)
  --keep           keep the temp dir (configs, logs) and print its path
EOF
}

die() {
	echo "conformance.sh: $*" >&2
	exit 1
}

ENTRY_BIN=""
TARGETS_ARG=nginx,haproxy,fenec-entry
CASES=""
JSON=""
OUT=""
PORT_BASE=19400
KEEP=0
while (($#)); do
	case $1 in
	--entry) ENTRY_BIN=${2:?--entry needs a value}; shift 2 ;;
	--targets) TARGETS_ARG=${2:?--targets needs a value}; shift 2 ;;
	--cases) CASES=${2:?--cases needs a value}; shift 2 ;;
	--json) JSON=${2:?--json needs a value}; shift 2 ;;
	--out) OUT=${2:?--out needs a value}; shift 2 ;;
	--base-port) PORT_BASE=${2:?--base-port needs a value}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done
IFS=, read -ra TARGETS <<<"$TARGETS_ARG"
for t in "${TARGETS[@]}"; do
	case $t in nginx | haproxy | fenec-entry) ;; *) die "--targets: unknown target $t" ;; esac
done
has_target() { [[ ,$TARGETS_ARG, == *,$1,* ]]; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh

# ---- tools ------------------------------------------------------------------------------
PATH=$PATH:/usr/sbin:/sbin
command -v go >/dev/null || die "go is missing"
command -v curl >/dev/null || apt_install curl
command -v ss >/dev/null || apt_install iproute2
if has_target nginx && ! command -v nginx >/dev/null; then
	apt_install nginx || apt_install nginx-light
fi
if has_target haproxy && ! command -v haproxy >/dev/null; then apt_install haproxy; fi

# ---- temp dir, processes, cleanup -------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fenec-conformance.XXXXXX")
PIDS=()
if ((KEEP)); then
	cleanup_keep() {
		local p
		for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
		for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
		echo "conformance.sh: kept $TMP" >&2
	}
	trap cleanup_keep EXIT
	trap 'exit 130' INT TERM
else
	bench_traps
fi
start() { # start NAME cmd...: run cmd in the background, its output in $TMP/NAME.log
	local name=$1
	shift
	"$@" >"$TMP/$name.log" 2>&1 &
	PIDS+=("$!")
}
wait_up() { # wait_up NAME URL: until URL answers 200, at most 10 s
	for _ in $(seq 100); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$2") == 200 ]] && return 0
		sleep 0.1
	done
	tail -20 "$TMP/$1.log" >&2 || true
	die "$1 did not answer 200 at $2 within 10 s"
}

# ---- build ------------------------------------------------------------------------------
mkdir -p "$TMP/bin"
go build -o "$TMP/bin/conformance" ./bench/conformance || die "bench/conformance does not build"
if has_target fenec-entry; then
	if [[ -n $ENTRY_BIN ]]; then
		[[ -x $ENTRY_BIN ]] || die "--entry: $ENTRY_BIN is not an executable file"
		cp "$ENTRY_BIN" "$TMP/bin/fenec-entry"
	else
		go build -o "$TMP/bin/fenec-entry" ./cmd/fenec-entry ||
			die "./cmd/fenec-entry does not build; pass --entry BIN, or --targets nginx,haproxy"
	fi
fi

# ---- start ------------------------------------------------------------------------------
free_port UP
start upstream "$TMP/bin/conformance" upstream -listen "127.0.0.1:$UP"
wait_up upstream "http://127.0.0.1:$UP/t/acme/conf/ready"
RUN_ARGS=()

if has_target nginx; then
	free_port NGINX
	mkdir -p "$TMP/nginx"
	# nginx's workers drop root: they must reach the temp dir to buffer request bodies.
	chmod 755 "$TMP" "$TMP/nginx"
	# As shipped for everything about parsing: no ignore_invalid_headers,
	# large_client_header_buffers or underscores_in_headers here.
	cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    upstream fenec_router {
        server 127.0.0.1:$UP;
        keepalive 16;
    }
    server {
        listen 127.0.0.1:$NGINX;
        location / {
            proxy_pass http://fenec_router;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
EOF
	start nginx nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;'
	wait_up nginx "http://127.0.0.1:$NGINX/t/acme/conf/ready"
	RUN_ARGS+=(-target "nginx=127.0.0.1:$NGINX")
fi

if has_target haproxy; then
	free_port HAPROXY
	cat >"$TMP/haproxy.cfg" <<EOF
global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 5s
    timeout server 5s
frontend entry
    bind 127.0.0.1:$HAPROXY
    default_backend fenec_router
backend fenec_router
    server r1 127.0.0.1:$UP
EOF
	start haproxy haproxy -db -f "$TMP/haproxy.cfg"
	wait_up haproxy "http://127.0.0.1:$HAPROXY/t/acme/conf/ready"
	RUN_ARGS+=(-target "haproxy=127.0.0.1:$HAPROXY")
fi

if has_target fenec-entry; then
	free_port ENTRY
	free_port ADMIN
	free_port RPC
	free_port GOSSIP
	# No --gossip-key: the entry serves alone.
	start fenec-entry "$TMP/bin/fenec-entry" serve --listen "127.0.0.1:$ENTRY" \
		--admin-listen "127.0.0.1:$ADMIN" --routers "eu=http://127.0.0.1:$UP" \
		--rpc-addr "127.0.0.1:$RPC" --gossip-bind "127.0.0.1:$GOSSIP"
	wait_up fenec-entry "http://127.0.0.1:$ADMIN/readyz"
	wait_up fenec-entry "http://127.0.0.1:$ENTRY/t/acme/conf/ready"
	RUN_ARGS+=(-target "fenec-entry=127.0.0.1:$ENTRY")
fi

# ---- run --------------------------------------------------------------------------------
if [[ -z $OUT ]]; then
	mkdir -p bench/out
	OUT=$ROOT/bench/out/conformance-$(date -u +%Y%m%dT%H%M%SZ).md
fi
RUN_ARGS+=(-upstream "127.0.0.1:$UP" -out "$OUT")
[[ -z $CASES ]] || RUN_ARGS+=(-cases "$CASES")
[[ -z $JSON ]] || RUN_ARGS+=(-json "$JSON")
echo "## HTTP/1.1 conformance: $(IFS=,; echo "${TARGETS[*]}")"
echo
"$TMP/bin/conformance" run "${RUN_ARGS[@]}"
