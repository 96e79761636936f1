#!/usr/bin/env bash
# bench/pgo.sh: records cmd/fenec-entry/default.pgo, the CPU profile Go's compiler optimizes
# the entry's build with (profile-guided optimization: it inlines the hot calls and
# devirtualizes the hot interface calls; `go build` uses the file by itself).
#
#   bash bench/pgo.sh [--seconds S] [--out FILE]
#
# The profile is of the request path under the benchmark's load (bench/proxies.sh): the entry
# built with -tags pprof in front of bench/upstream, nothing pinned, its default Ps, and two
# loads one after the other, wrk -t2 -c32 (throughput) and wrk -t1 -c1 (latency), merged.
# Record it again when the request path changes much; a stale profile only optimizes less.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bash bench/pgo.sh [flags]

  --seconds S   seconds profiled for each of the two loads (default 20)
  --out FILE    where to write the merged profile (default cmd/fenec-entry/default.pgo)
EOF
}
die() {
	echo "pgo.sh: $*" >&2
	exit 1
}

SECS=20
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/cmd/fenec-entry/default.pgo
while (($#)); do
	case $1 in
	--seconds) SECS=${2:?--seconds needs a value}; shift 2 ;;
	--out) OUT=${2:?--out needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown flag $1" ;;
	esac
done
if ! [[ $SECS =~ ^[0-9]+$ ]] || ((SECS < 5 || SECS > 600)); then die "--seconds: want an integer in 5..600, got '$SECS'"; fi
for tool in wrk curl go ss; do
	command -v "$tool" >/dev/null || die "$tool is missing (apt-get install -y wrk curl iproute2)"
done

cd "$ROOT"
TMP=$(mktemp -d)
PIDS=()
PORT_BASE=19300
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_traps

echo "pgo.sh: building bench/upstream and cmd/fenec-entry (-tags pprof)" >&2
go build -trimpath -o "$TMP/upstream" ./bench/upstream
go build -tags pprof -trimpath -o "$TMP/fenec-entry" ./cmd/fenec-entry
free_port UP
free_port FE
free_port ADMIN
free_port GOSSIP
free_port RPC
free_port PPROF
"$TMP/upstream" --listen "127.0.0.1:$UP" >"$TMP/upstream.log" 2>&1 &
PIDS+=($!)
wait_ok "http://127.0.0.1:$UP/t/acme/items/1"
FENEC_ENTRY_PPROF_ADDR=127.0.0.1:$PPROF "$TMP/fenec-entry" serve \
	--listen "127.0.0.1:$FE" --admin-listen "127.0.0.1:$ADMIN" --routers "eu=http://127.0.0.1:$UP" \
	--log-level warn --gossip-bind "127.0.0.1:$GOSSIP" --rpc-addr "127.0.0.1:$RPC" >"$TMP/entry.log" 2>&1 &
PIDS+=($!)
URL=http://127.0.0.1:$FE/t/acme/items/1
wait_ok "$URL"

profile() { # profile NAME THREADS CONNS: a CPU profile of SECS under that wrk load
	local name=$1 wrk_pid
	wrk -t"$2" -c"$3" -d3s "$URL" >/dev/null # warm-up
	wrk -t"$2" -c"$3" -d"$((SECS + 4))s" "$URL" >"$TMP/$name.wrk" 2>&1 &
	wrk_pid=$!
	sleep 1
	curl -sf --max-time "$((SECS + 10))" -o "$TMP/$name.pprof" \
		"http://127.0.0.1:$PPROF/debug/pprof/profile?seconds=$SECS" || die "$name: no CPU profile"
	wait "$wrk_pid" || die "$name: wrk failed: $(cat "$TMP/$name.wrk")"
	echo "pgo.sh: $name: $(awk '/^Requests\/sec:/ { print $2 }' "$TMP/$name.wrk") requests/s" >&2
}
echo "pgo.sh: profiling ${SECS}s at 32 connections, then ${SECS}s at 1" >&2
profile c32 2 32
profile c1 1 1
go tool pprof -proto "$TMP/c32.pprof" "$TMP/c1.pprof" >"$TMP/merged.pprof" 2>/dev/null ||
	die "go tool pprof could not merge the profiles"
mv "$TMP/merged.pprof" "$OUT"
echo "pgo.sh: wrote $OUT ($(wc -c <"$OUT") bytes); rebuild to use it" >&2
