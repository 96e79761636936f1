#!/usr/bin/env bash
# bench/proxies.sh: the added latency and the throughput of fenec-entry next to nginx and
# haproxy, all proxying one request to the same upstream on loopback, measured in
# interleaved rounds; with --mode conns, the memory each of them spends per open client
# connection, idle or streaming; with --mode protocols, fenec-entry beside nginx over every
# protocol a client speaks (HTTP/1.1 plain and over TLS, h2, h2c, TLS handshakes and session
# resumption) and the memory of held connections, in one run. See bench/README.md for what it
# measures and how to read it.
#
#   bash bench/proxies.sh [flags]     (flags: bash bench/proxies.sh --help)
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bash bench/proxies.sh [flags]

  --mode MODE      requests: added latency and requests/s (the default);
                   conns: memory (RSS) per held connection, idle and streaming;
                   protocols: fenec-entry beside nginx over plain HTTP/1.1, HTTPS HTTP/1.1,
                          h2, h2c, full TLS handshakes, session resumption, and the memory of
                          the conns mode, one table of ratios (env BENCH_MODE)
  --rounds N       interleaved rounds (env BENCH_ROUNDS, default 5; 3 in conns mode)
  --seconds S      seconds per measurement (env BENCH_SECONDS, default 5)
  --latency-slices N  the latency run (one connection) of each round is N slices of S/N
                   seconds, the targets taking turns slice by slice, their latencies merged
                   per target: host speed that drifts within a round hits every target alike
                   (env BENCH_LATENCY_SLICES, default S, one-second slices; 1: one run each)
  --warmup S       seconds of warm-up load per target before the rounds (env BENCH_WARMUP, default 3)
  --conns N        connections of the throughput run (env BENCH_CONNS, default 32)
  --pin MODE       split: wrk on the first half of the CPUs, upstream and proxy on the
                          other half (on 2 cores: wrk on CPU 0, servers on CPU 1); default
                   none:  nothing pinned, every process on every CPU (env BENCH_PIN)
  --workers N      nginx worker_processes and haproxy nbthread (env BENCH_WORKERS, default:
                   the CPUs the servers may use); given, fenec-entry runs with GOMAXPROCS=N,
                   else with its default (its Ps follow its load, up to those CPUs)
  --targets LIST   comma list from direct,nginx,haproxy,fenec-entry (env BENCH_TARGETS, default all;
                   conns mode: nginx,haproxy,fenec-entry, direct has no proxy to measure;
                   protocols mode: nginx,fenec-entry, the only two it knows)
  --base-port P    first port tried for the listeners (env BENCH_BASE_PORT, default 18000)
  --idle-wait S    before each round, wait up to S seconds for other processes to use less
                   than 15% of a CPU (env BENCH_IDLE_WAIT, default 30); runs they disturb anyway
                   are named in warnings and in the report
  --entry-bin PATH a fenec-entry binary to measure instead of building ./cmd/fenec-entry
                   (env BENCH_ENTRY_BIN), e.g. to compare two builds; started as
                   `fenec-entry serve` with no layout flag, it runs as it does by default
                   (an older build's worker processes are measured with it)
  --ab-bin PATH    a second fenec-entry binary, measured as target fenec-entry-b in the same
                   interleaved rounds as fenec-entry (env BENCH_AB_BIN): a before/after A/B
                   whose two sides see the same machine noise
  --out FILE       raw per-round numbers, JSON lines (env BENCH_OUT,
                   default bench/out/proxies-<UTC time>.jsonl)
  --check          exit 1 when fenec-entry's added p50 is above 1.1x nginx's or its
                   requests/s below 0.9x nginx's (the floor of bench/README.md)
  --keep           keep the temp dir (configs, logs, raw wrk output) and print its path

conns mode (--seconds, --warmup, --conns, --idle-wait and --check are for the requests mode):
  --idle-conns N   idle keep-alive connections held, each after one answered GET
                   (env BENCH_IDLE_CONNS, default 10000)
  --streams N      server-sent event streams held open (env BENCH_STREAMS, default 2000)
  --settle S       seconds from the last connection open to the second memory reading
                   (env BENCH_SETTLE, default 5)
  --scenarios LIST comma list from idle,streams (env BENCH_SCENARIOS, default both;
                   protocols mode: none leaves the memory rows out)

protocols mode (--seconds, --latency-slices, --warmup, --conns, --idle-wait, --pin, --workers
and the conns mode's flags all apply; --check does not):
  --h2-clients N   h2load's connections for h2 and h2c (env BENCH_H2_CLIENTS, default 8)
  --h2-streams N   h2load's streams at once on each (-m; env BENCH_H2_STREAMS, default 16)
  --resumes N      reconnects with the last session saved, counted if resumed
                   (env BENCH_RESUMES, default 30)
EOF
}

die() {
	echo "proxies.sh: $*" >&2
	exit 1
}

# AWK_STATS: the awk functions of every table. med(a, n) sorts a[1..n] in place and is their
# median; add(key, v) notes a value under key; stat(key, fmt) is "median (min-max)" of the
# values under key, the median alone when the three print alike, and the awk variable none
# (-v none=...; empty by default) when there are none.
AWK_STATS='
	function med(a, n,   i, j, v) {
		for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function add(key, v) { vals[key, ++cnt[key]] = v }
	function stat(key, fmt,   a, i, n, m) {
		n = cnt[key]
		if (n == 0) return none
		for (i = 1; i <= n; i++) a[i] = vals[key, i]
		m = med(a, n)
		if (sprintf(fmt, a[1]) == sprintf(fmt, a[n])) return sprintf(fmt, m)
		return sprintf(fmt " (" fmt "-" fmt ")", m, a[1], a[n])
	}
'
MODE=${BENCH_MODE:-requests}
ROUNDS=${BENCH_ROUNDS:-} # default by mode, below
MEASURE_S=${BENCH_SECONDS:-5}
SLICES=${BENCH_LATENCY_SLICES:-}
WARMUP_S=${BENCH_WARMUP:-3}
CONNS=${BENCH_CONNS:-32}
PIN=${BENCH_PIN:-split}
TARGETS_ARG=${BENCH_TARGETS:-} # default by mode, below
TARGETS_DEFAULT=0              # 1: --targets not given
BASE_PORT=${BENCH_BASE_PORT:-18000}
OUT=${BENCH_OUT:-}
WORKERS=${BENCH_WORKERS:-}
ENTRY_BIN=${BENCH_ENTRY_BIN:-}
AB_BIN=${BENCH_AB_BIN:-}
IDLE_WAIT_S=${BENCH_IDLE_WAIT:-30}
IDLE_MAX=15 # % of one CPU that other processes may use before a round counts as noisy
IDLE_CONNS=${BENCH_IDLE_CONNS:-10000}
STREAMS=${BENCH_STREAMS:-2000}
SETTLE_S=${BENCH_SETTLE:-5}
SCENARIOS_ARG=${BENCH_SCENARIOS:-idle,streams}
H2_CLIENTS=${BENCH_H2_CLIENTS:-8}
H2_STREAMS=${BENCH_H2_STREAMS:-16}
RESUMES=${BENCH_RESUMES:-30}
CHECK=0
KEEP=0

while (($#)); do
	case $1 in
	--mode) MODE=${2:?--mode needs a value}; shift 2 ;;
	--idle-conns) IDLE_CONNS=${2:?--idle-conns needs a value}; shift 2 ;;
	--streams) STREAMS=${2:?--streams needs a value}; shift 2 ;;
	--settle) SETTLE_S=${2:?--settle needs a value}; shift 2 ;;
	--scenarios) SCENARIOS_ARG=${2:?--scenarios needs a value}; shift 2 ;;
	--h2-clients) H2_CLIENTS=${2:?--h2-clients needs a value}; shift 2 ;;
	--h2-streams) H2_STREAMS=${2:?--h2-streams needs a value}; shift 2 ;;
	--resumes) RESUMES=${2:?--resumes needs a value}; shift 2 ;;
	--rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
	--seconds) MEASURE_S=${2:?--seconds needs a value}; shift 2 ;;
	--latency-slices) SLICES=${2:?--latency-slices needs a value}; shift 2 ;;
	--warmup) WARMUP_S=${2:?--warmup needs a value}; shift 2 ;;
	--conns) CONNS=${2:?--conns needs a value}; shift 2 ;;
	--pin) PIN=${2:?--pin needs a value}; shift 2 ;;
	--workers) WORKERS=${2:?--workers needs a value}; shift 2 ;;
	--idle-wait) IDLE_WAIT_S=${2:?--idle-wait needs a value}; shift 2 ;;
	--entry-bin) ENTRY_BIN=${2:?--entry-bin needs a value}; shift 2 ;;
	--ab-bin) AB_BIN=${2:?--ab-bin needs a value}; shift 2 ;;
	--targets) TARGETS_ARG=${2:?--targets needs a value}; shift 2 ;;
	--base-port) BASE_PORT=${2:?--base-port needs a value}; shift 2 ;;
	--out) OUT=${2:?--out needs a value}; shift 2 ;;
	--check) CHECK=1; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done

# want_int NAME VALUE MIN MAX: VALUE must be an integer in MIN..MAX.
want_int() {
	if ! [[ $2 =~ ^[0-9]+$ ]] || (($2 < $3 || $2 > $4)); then
		die "--$1: want an integer in $3..$4, got '$2'"
	fi
}
case $MODE in
requests)
	ROUNDS=${ROUNDS:-5}
	TARGETS_ARG=${TARGETS_ARG:-direct,nginx,haproxy,fenec-entry}
	;;
conns)
	[[ -n $TARGETS_ARG ]] || TARGETS_DEFAULT=1
	# A round here starts and stops every target twice and holds thousands of connections;
	# three rounds give a median, and the figures move little between rounds.
	ROUNDS=${ROUNDS:-3}
	TARGETS_ARG=${TARGETS_ARG:-nginx,haproxy,fenec-entry}
	((!CHECK)) || die "--check: no floor in --mode conns"
	;;
protocols)
	ROUNDS=${ROUNDS:-5}
	TARGETS_ARG=${TARGETS_ARG:-nginx,fenec-entry}
	((!CHECK)) || die "--check: no floor in --mode protocols"
	;;
*) die "--mode: want requests, conns or protocols, got '$MODE'" ;;
esac
want_int rounds "$ROUNDS" 1 1000
want_int seconds "$MEASURE_S" 1 3600
SLICES=${SLICES:-$MEASURE_S}
want_int latency-slices "$SLICES" 1 "$MEASURE_S"
((MEASURE_S % SLICES == 0)) || die "--latency-slices: want a divisor of --seconds ($MEASURE_S), got $SLICES"
SLICE_S=$((MEASURE_S / SLICES))
want_int warmup "$WARMUP_S" 0 3600
want_int idle-wait "$IDLE_WAIT_S" 0 3600
want_int conns "$CONNS" 2 10000
want_int base-port "$BASE_PORT" 1024 64999
case $PIN in split | none) ;; *) die "--pin: want split or none, got '$PIN'" ;; esac
if [[ $MODE == protocols ]]; then
	want_int h2-clients "$H2_CLIENTS" 1 1000
	want_int h2-streams "$H2_STREAMS" 1 1000
	want_int resumes "$RESUMES" 1 1000
fi
if [[ $MODE != requests ]]; then
	want_int idle-conns "$IDLE_CONNS" 1 60000
	want_int streams "$STREAMS" 1 30000
	# fenec-entry closes a client connection idle for 120 s (node/node.go, idleTimeout, not a
	# flag): the second reading must come well within that.
	want_int settle "$SETTLE_S" 0 60
	declare -a SCENARIOS=()
	IFS=, read -r -a _scen <<<"$SCENARIOS_ARG"
	for s in "${_scen[@]}"; do
		case $s in
		idle | streams) [[ " ${SCENARIOS[*]} " == *" $s "* ]] || SCENARIOS+=("$s") ;;
		none) [[ $MODE == protocols && ${#_scen[@]} == 1 ]] || die "--scenarios: none is for --mode protocols, alone" ;;
		*) die "--scenarios: want a comma list from idle,streams, got '$s'" ;;
		esac
	done
	[[ $MODE == protocols ]] || ((${#SCENARIOS[@]})) || die "--scenarios: empty"
fi

declare -a TARGETS=()
IFS=, read -r -a _targets <<<"$TARGETS_ARG"
for t in "${_targets[@]}"; do
	case $t in
	direct)
		[[ $MODE == requests ]] || die "--targets: direct has no proxy process to measure in --mode $MODE"
		TARGETS+=("$t")
		;;
	haproxy)
		[[ $MODE != protocols ]] || die "--targets: --mode protocols measures nginx and fenec-entry only"
		TARGETS+=("$t")
		;;
	nginx | fenec-entry) TARGETS+=("$t") ;;
	*) die "--targets: want a comma list from direct,nginx,haproxy,fenec-entry, got '$t'" ;;
	esac
done
((${#TARGETS[@]})) || die "--targets: empty"
if [[ -n $AB_BIN ]]; then
	[[ -x $AB_BIN ]] || die "--ab-bin: $AB_BIN is not an executable file"
	[[ " ${TARGETS[*]} " == *" fenec-entry "* ]] || die "--ab-bin: needs fenec-entry among --targets"
	TARGETS+=(fenec-entry-b)
fi
has_target() {
	local t
	for t in "${TARGETS[@]}"; do [[ $t == "$1" ]] && return 0; done
	return 1
}
drop_target() {
	local t keep=()
	for t in "${TARGETS[@]}"; do [[ $t == "$1" ]] || keep+=("$t"); done
	TARGETS=("${keep[@]}")
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh # apt_install
REQ_PATH=/t/acme/items/1

# ---- CPU layout -------------------------------------------------------------------------
# On 2 cores the load generator competes with the servers for CPU. split gives wrk a core of
# its own and puts everything being measured (upstream and proxy) on the other, so every
# target runs under the same layout and wrk's own CPU cost stays out of the comparison;
# README.md says why. Workers per proxy (nginx workers, haproxy threads) = the CPUs the servers
# may use, unless --workers says otherwise (fenec-entry: see ENTRY_ENV below). The upstream's
# GOMAXPROCS follows its affinity, as Go does by default.
NCPU=$(nproc)
CLIENT_CPUS=""
SERVER_CPUS=""
CLK_TCK=$(getconf CLK_TCK) # the ticks of /proc/PID/stat
CLIENT_NCPU=0 # CPUs given to wrk alone; 0: none (unpinned)
if [[ $PIN == split ]]; then
	((NCPU >= 2)) || die "--pin split needs 2 CPUs or more (nproc: $NCPU); use --pin none"
	((NCPU == $(getconf _NPROCESSORS_ONLN))) ||
		die "--pin split: this shell may use only some CPUs ($NCPU of $(getconf _NPROCESSORS_ONLN)); use --pin none"
	half=$((NCPU / 2))
	CLIENT_NCPU=$half
	CLIENT_CPUS=0
	((half == 1)) || CLIENT_CPUS=0-$((half - 1))
	SERVER_CPUS=$half
	((NCPU - half == 1)) || SERVER_CPUS=$half-$((NCPU - 1))
	SERVER_NCPU=$((NCPU - half))
else
	SERVER_NCPU=$NCPU
fi
# fenec-entry runs with its default (GOMAXPROCS unset: its Ps follow its load, up to the CPUs it
# may use; package procs) unless --workers fixes them, as nginx's and haproxy's are.
ENTRY_ENV=()
[[ -z $WORKERS ]] || ENTRY_ENV=(GOMAXPROCS="$WORKERS")
WORKERS=${WORKERS:-$SERVER_NCPU}
want_int workers "$WORKERS" 1 256
if ((${#ENTRY_ENV[@]})); then
	ENTRY_PROCS="GOMAXPROCS=$WORKERS"
else
	ENTRY_PROCS="GOMAXPROCS unset (its Ps follow the load, up to $SERVER_NCPU)"
fi
# ENTRY_KIDS: the most child processes each fenec-entry target was seen with (count_kids). This
# build runs one process and has none; an older one (--entry-bin, --ab-bin) may run its own
# default of a master and worker processes, whose CPU and memory are counted with it.
declare -A ENTRY_KIDS=()
count_kids() { # count_kids NAME: records how many child processes target NAME has now
	local k
	k=$(ps -o pid= --ppid "${PIDS[$1]}" 2>/dev/null | wc -l || true)
	((k <= ${ENTRY_KIDS[$1]:-0})) || ENTRY_KIDS[$1]=$k
}
entry_layouts() { # entry_layouts: "; fenec-entry ..." for each fenec-entry target, for the report
	local t k
	for t in fenec-entry fenec-entry-b; do
		has_target "$t" || continue
		k=${ENTRY_KIDS[$t]:-0}
		if ((k == 0)); then
			printf '; %s one process, %s' "$t" "$ENTRY_PROCS"
		else
			printf '; %s %d processes (a process and the %d it started, its build'"'"'s own default layout, measured together), %s' \
				"$t" "$((k + 1))" "$k" "${ENTRY_ENV[0]:-GOMAXPROCS unset}"
		fi
	done
}
pinned() { # pinned CPUS cmd...: exec cmd on CPUS (or anywhere when CPUS is empty)
	local cpus=$1
	shift
	if [[ -n $cpus ]]; then exec taskset -c "$cpus" "$@"; else exec "$@"; fi
}

# ---- tools ------------------------------------------------------------------------------
PATH=$PATH:/usr/sbin:/sbin
command -v go >/dev/null || die "go is missing (the toolchain that builds the upstream and fenec-entry)"
tools="curl taskset ss"
[[ $MODE == conns ]] || tools="wrk $tools"
[[ $MODE != protocols ]] || tools+=" h2load openssl"
for tool in $tools; do
	command -v "$tool" >/dev/null && continue
	case $tool in
	taskset) apt_install util-linux ;;
	ss) apt_install iproute2 ;;
	h2load) apt_install nghttp2-client ;;
	*) apt_install "$tool" ;;
	esac
done
if has_target nginx && ! command -v nginx >/dev/null; then
	# nginx is the core build; nginx-light is its name on older releases. On a host with
	# systemd, the package's own nginx service may start on :80; this script neither uses
	# nor stops it.
	apt_install nginx || apt_install nginx-light
fi
if has_target haproxy && ! command -v haproxy >/dev/null; then apt_install haproxy; fi

# ---- temp dir, processes, cleanup --------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fenec-bench.XXXXXX")
declare -A PIDS=()
WRK_PID=""
# stop_all: SIGTERM to every process started here, a second SIGTERM to those still running
# after 1 s (fenec-entry drains on the first and exits at once on the second, as serf's
# agent does), SIGKILL to those still running 4 s later.
stop_all() {
	local name pid i alive pass
	[[ -z $WRK_PID ]] || kill -TERM "$WRK_PID" 2>/dev/null || true
	for pass in 10 40; do
		for name in "${!PIDS[@]}"; do kill -TERM "${PIDS[$name]}" 2>/dev/null || true; done
		for ((i = 0; i < pass; i++)); do
			alive=0
			for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
			((alive)) || return 0
			sleep 0.1
		done
	done
	for name in "${!PIDS[@]}"; do
		pid=${PIDS[$name]}
		if kill -0 "$pid" 2>/dev/null; then
			echo "proxies.sh: $name (pid $pid) still running after two SIGTERMs: SIGKILL" >&2
			pkill -KILL -P "$pid" 2>/dev/null || true # nginx workers: children of this master
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
}
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_all
	wait 2>/dev/null || true
	if ((KEEP)); then
		echo "proxies.sh: kept $TMP" >&2
	else
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_log() { # show_log NAME: the end of a process's logs, for an error message
	local f
	for f in "$TMP/$1.log" "$TMP/$1/error.log"; do # nginx keeps its own error.log
		[[ -s $f ]] || continue
		echo "---- last lines of $f ----" >&2
		tail -n 20 "$f" >&2
		echo "----" >&2
	done
}

start() { # start NAME CPUS cmd...: run in the background, output to $TMP/NAME.log
	local name=$1 cpus=$2
	shift 2
	(pinned "$cpus" "$@") >"$TMP/$name.log" 2>&1 </dev/null &
	PIDS[$name]=$!
}

check_alive() {
	local name
	for name in "${!PIDS[@]}"; do
		if ! kill -0 "${PIDS[$name]}" 2>/dev/null; then
			show_log "$name"
			die "$name (pid ${PIDS[$name]}) has exited"
		fi
	done
}

NEXT_PORT=$BASE_PORT
port() { # port VAR: the next port >= NEXT_PORT with no TCP or UDP listener
	local p=$NEXT_PORT
	while [[ -n $(ss -Htuln "sport = :$p") ]]; do
		((p++))
		((p < 65535)) || die "no free port above --base-port $BASE_PORT"
	done
	NEXT_PORT=$((p + 1))
	printf -v "$1" %d "$p"
}

# wait_ready NAME URL [CURL-ARGS...]: poll (bounded, 15 s) until URL answers 200, failing at
# once if the process dies.
wait_ready() {
	local name=$1 url=$2 i code
	shift 2
	for ((i = 0; i < 150; i++)); do
		if ! kill -0 "${PIDS[$name]}" 2>/dev/null; then
			show_log "$name"
			die "$name exited while starting"
		fi
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" "$url" || true)
		[[ $code == 200 ]] && return 0
		sleep 0.1
	done
	show_log "$name"
	die "$name did not answer 200 at $url within 15 s (last status: ${code:-none})"
}

# verify NAME URL: one request by hand, checked the way a client of the entry would see it.
verify() {
	local name=$1 url=$2 hdr status size
	hdr=$TMP/$name.verify.hdr
	size=$(curl -s -D "$hdr" -o /dev/null -w '%{size_download}' --max-time 2 "$url") ||
		die "$name: request to $url failed"
	read -r status <"$hdr"
	[[ $status == HTTP/1.1\ 200* ]] || die "$name: want HTTP/1.1 200, got: $status"
	grep -qi '^fenec-shard: 1' "$hdr" || die "$name: answer lacks Fenec-Shard: 1 (not from the upstream?)"
	((size == 64)) || die "$name: want the upstream's 64-byte body, got $size bytes"
	if grep -qi '^fenec-home:' "$hdr"; then
		echo "proxies.sh: warning: $name passed Fenec-Home on to the client" >&2
	fi
}

# ---- build -------------------------------------------------------------------------------
mkdir -p "$TMP/bin"
echo "proxies.sh: building bench/upstream$([[ $MODE == requests ]] || echo ', bench/connhold, cmd/fenec-standin')$([[ -n $ENTRY_BIN ]] || echo ' and cmd/fenec-entry')" >&2
go build -trimpath -o "$TMP/bin/upstream" ./bench/upstream
if [[ $MODE != requests ]]; then
	go build -trimpath -o "$TMP/bin/connhold" ./bench/connhold
	# The streams' upstream: the stream scenario cannot go without it.
	go build -trimpath -o "$TMP/bin/fenec-standin" ./cmd/fenec-standin 2>"$TMP/fenec-standin.build.log" ||
		{ sed -n 1,5p "$TMP/fenec-standin.build.log" >&2; die "--mode conns: ./cmd/fenec-standin does not build"; }
fi
if has_target fenec-entry && [[ -n $ENTRY_BIN ]]; then
	[[ -x $ENTRY_BIN ]] || die "--entry-bin: $ENTRY_BIN is not an executable file"
	cp "$ENTRY_BIN" "$TMP/bin/fenec-entry"
elif has_target fenec-entry; then
	# As `make build` does, so that `fenec-entry version` names what was measured.
	ldflags="-s -w -X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
	ldflags+=" -X main.commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	if ! go build -trimpath -ldflags "$ldflags" -o "$TMP/bin/fenec-entry" ./cmd/fenec-entry 2>"$TMP/fenec-entry.build.log"; then
		echo "proxies.sh: SKIPPING fenec-entry: ./cmd/fenec-entry does not build yet:" >&2
		sed -n 1,5p "$TMP/fenec-entry.build.log" | sed 's/^/    /' >&2
		drop_target fenec-entry
	fi
fi
((${#TARGETS[@]})) || die "no target left to measure"

# ---- the raw file and the facts of a run (both modes) --------------------------------------
open_out() { # open_out: sets OUT (unless --out gave it) and OUT_MD, and empties OUT
	if [[ -z $OUT ]]; then
		mkdir -p "$ROOT/bench/out"
		OUT=$ROOT/bench/out/proxies-$(date -u +%Y%m%dT%H%M%SZ).jsonl
	fi
	mkdir -p "$(dirname "$OUT")"
	: >"$OUT"
	OUT_MD=${OUT%.jsonl}.md
}

# facts: the machine and the versions, for the report and the meta line: sets ver_nginx,
# ver_haproxy, ver_go, cpu_model, git_rev, ver_entry and started.
# (awk reads to the end: no early close, no SIGPIPE under pipefail)
facts() {
	ver_nginx=-
	ver_haproxy=-
	if has_target nginx; then ver_nginx=$(nginx -v 2>&1 | awk 'NR == 1 { sub(/^nginx version: /, ""); print }'); fi
	if has_target haproxy; then ver_haproxy=$(haproxy -v 2>/dev/null | awk 'NR == 1 { print $3 }'); fi
	ver_go=$(go version | awk '{ print $3 }')
	cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	git_rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo -)
	[[ -n $(git -C "$ROOT" status --porcelain 2>/dev/null) ]] && git_rev+="+dirty"
	ver_entry=-
	if has_target fenec-entry; then
		# `fenec-entry version` prints version, commit and Go version (docs/REFERENCE.md, Commands).
		ver_entry=$(timeout 5 "$TMP/bin/fenec-entry" version 2>/dev/null | awk 'NR == 1' || true)
		if [[ -z $ver_entry ]]; then
			ver_entry="built from the repo at $git_rev"
			[[ -z $ENTRY_BIN ]] || ver_entry="$ENTRY_BIN (no version)"
		fi
	fi
	if has_target fenec-entry-b; then
		ver_b=$(timeout 5 "$TMP/bin/fenec-entry-b" version 2>/dev/null | awk 'NR == 1' || true)
		ver_entry+="; fenec-entry-b: ${ver_b:-$AB_BIN (no version)}"
	fi
	started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
}

# ---- conns mode: memory per held connection ----------------------------------------------
# For each round, scenario (idle, streams) and target: a fresh proxy, a warm-up, its RSS (and
# fenec-entry's goroutines), connhold opening and holding the connections, the same again
# --settle seconds later, (after - before) / connections. README.md, "Cost per open
# connection", says why and how to read it.
EVENTS_PATH=/t/acme/events
STANDIN_KEEPALIVE=20s # the stand-in's keep-alive comment on every stream
HOLD_PARALLEL=64      # connections connhold opens at once; also the warm-up's connections
declare -A ADMIN=()   # fenec-entry's admin port, by target
SKIPPED=()            # targets left out, and why, for the report

# conns_limits: the open-file limit (raised here, inherited by every process started), the
# proxies' own limits, and connhold's source addresses. Sets NEED_FDS (the proxy's sockets
# and some room), NOFILE, SOURCES and PORT_RANGE.
conns_limits() {
	local most cur hard want lo hi per_source idle=0 streams=0 held
	# What a left-out scenario would hold counts for nothing here.
	[[ " ${SCENARIOS[*]} " != *" idle "* ]] || idle=$IDLE_CONNS
	[[ " ${SCENARIOS[*]} " != *" streams "* ]] || streams=$STREAMS
	held=$((idle > streams ? idle : streams))
	most=$((idle > 2 * streams ? idle : 2 * streams)) # a stream holds two sockets in the proxy
	NEED_FDS=$((most + 1024))
	want=$((2 * NEED_FDS > 65536 ? 2 * NEED_FDS : 65536))
	cur=$(ulimit -Sn)
	hard=$(ulimit -Hn)
	if [[ $cur != unlimited ]] && ((cur < want)) && ! ulimit -n "$want" 2>/dev/null; then
		# Raising the hard limit takes CAP_SYS_RESOURCE; up to it, anyone may.
		[[ $hard == unlimited ]] || ((hard >= NEED_FDS)) ||
			die "--mode conns: --idle-conns $IDLE_CONNS and --streams $STREAMS need an open-file limit of $NEED_FDS, and it cannot be raised (ulimit -n: soft $cur, hard $hard): raise the hard limit, or hold fewer connections"
		[[ $cur == "$hard" ]] || ulimit -Sn "$hard"
		echo "proxies.sh: could not raise the open-file limit to $want: using the hard limit, $hard (enough for $NEED_FDS)" >&2
	fi
	NOFILE=$(ulimit -Sn)
	[[ $NOFILE != unlimited ]] || NOFILE=1048576
	# haproxy wants two sockets for each connection it may take (maxconn), and refuses to start
	# when the limit is lower; an idle connection needs only one, but that does not help.
	HAPROXY_MAXCONN=$(((NOFILE - 100) / 2 < NEED_FDS ? (NOFILE - 100) / 2 : NEED_FDS))
	if has_target haproxy && ((HAPROXY_MAXCONN < held + HOLD_PARALLEL)); then
		local why="haproxy takes at most $HAPROXY_MAXCONN connections under an open-file limit of $NOFILE (maxconn: two sockets each), fewer than the $held held"
		((TARGETS_DEFAULT)) || die "--targets haproxy: $why; raise the hard limit (ulimit -Hn) or hold fewer connections"
		echo "proxies.sh: SKIPPING haproxy: $why" >&2
		drop_target haproxy
		SKIPPED+=("haproxy was not measured: $why")
	fi
	# Every client connection is one source port of 127.0.0.1 towards one proxy port. A
	# quarter of the ephemeral range is left to everything else; beyond that connhold dials
	# from 127.0.0.2, 127.0.0.3, ... too. The proxy's own connections to the stand-in (one per
	# stream) have no such way out.
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
	PORT_RANGE="$lo-$hi"
	per_source=$(((hi - lo + 1) * 3 / 4))
	((per_source > 0)) || die "net.ipv4.ip_local_port_range $PORT_RANGE: no source ports"
	SOURCES=$(((held + per_source - 1) / per_source))
	((streams <= per_source)) ||
		die "--streams $STREAMS: the proxy opens one connection to the stand-in per stream, from 127.0.0.1, and net.ipv4.ip_local_port_range ($PORT_RANGE) leaves about $per_source"
}

# conns_start NAME SCENARIO: starts target NAME afresh on new ports, in front of the upstream
# of SCENARIO (idle: bench/upstream, streams: the stand-in), and waits until it answers.
# Sets HOLD_ADDR, where connhold connects.
conns_start() {
	local name=$1 scen=$2 up ready p_listen p_admin p_gossip p_rpc
	if [[ $scen == idle ]]; then
		up=$UP_PORT ready=$REQ_PATH
	else
		up=$STANDIN_PORT ready=/t/acme/echo # the stand-in's 200 that is not a stream
	fi
	port p_listen
	case $name in
	nginx)
		# The request mode's nginx, with one worker (its RSS is the reading), its
		# connection limits raised, and no timeout that a held connection could reach:
		# keepalive_timeout (75 s by default) would close an idle one, proxy_read_timeout
		# (60 s) a stream quieter than that.
		rm -rf "$TMP/nginx"
		nginx_conf "$TMP/nginx" "$up" "    server {
        listen 127.0.0.1:$p_listen;
$(nginx_location '            proxy_read_timeout 1h;
            proxy_send_timeout 1h;')
    }" 1 "$NEED_FDS" "worker_rlimit_nofile $NOFILE;
" '    keepalive_timeout 1h;
'
		start nginx "$SERVER_CPUS" nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" \
			-c "$TMP/nginx/nginx.conf" -g 'daemon off;'
		;;
	haproxy)
		# The request mode's haproxy, maxconn (global and per frontend) as high as the
		# open-file limit lets it, and the client, server and keep-alive timeouts at an hour.
		cat >"$TMP/haproxy.cfg" <<EOF
global
    nbthread $WORKERS
    maxconn $HAPROXY_MAXCONN
defaults
    mode http
    maxconn $HAPROXY_MAXCONN
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 1h
    timeout server 1h
    timeout http-keep-alive 1h
frontend entry
    bind 127.0.0.1:$p_listen
    unique-id-format %{+X}o\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid
    http-request set-header Fenec-Home 1
    http-request set-header X-Request-Id %[unique-id]
    default_backend fenec_router
backend fenec_router
    http-response del-header Fenec-Home
    server r1 127.0.0.1:$up
EOF
		start haproxy "$SERVER_CPUS" haproxy -db -f "$TMP/haproxy.cfg"
		;;
	fenec-entry | fenec-entry-b)
		# As the request mode starts it. Its timeouts cannot reach a held connection within
		# a measurement: a client connection idle for 120 s is closed (node/node.go, not a
		# flag; --settle is at most 60), and once a router's answer head is in, a stream
		# has no deadline (--answer-timeout bounds the head only). A stream is a request in
		# flight: --max-inflight is raised only when the streams would exceed its default.
		port p_admin
		port p_gossip
		port p_rpc
		local extra=()
		((STREAMS + HOLD_PARALLEL <= 10000)) || extra=(--max-inflight "$((STREAMS + HOLD_PARALLEL))")
		start "$name" "$SERVER_CPUS" env "${ENTRY_ENV[@]}" "$TMP/bin/$name" serve \
			--listen "127.0.0.1:$p_listen" --admin-listen "127.0.0.1:$p_admin" \
			--routers "eu=http://127.0.0.1:$up" \
			--gossip-bind "127.0.0.1:$p_gossip" --rpc-addr "127.0.0.1:$p_rpc" "${extra[@]}"
		ADMIN[$name]=$p_admin
		;;
	esac
	wait_ready "$name" "http://127.0.0.1:$p_listen$ready"
	HOLD_ADDR=127.0.0.1:$p_listen
}

# pause S: sleeps S seconds such that a signal to this script cuts it short (its trap runs at
# once in `wait`, but only after a foreground sleep has ended).
pause() {
	sleep "$1" &
	PIDS[sleep]=$!
	wait "${PIDS[sleep]}" || true
	unset "PIDS[sleep]"
}

# stop_one NAME: stops one process started here as stop_all does, and forgets it.
stop_one() {
	local name=$1 pid=${PIDS[$1]} pass i
	for pass in 10 40; do
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < pass; i++)); do
			kill -0 "$pid" 2>/dev/null || break 2
			sleep 0.1
		done
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "proxies.sh: $name (pid $pid) still running after two SIGTERMs: SIGKILL" >&2
		pkill -KILL -P "$pid" 2>/dev/null || true
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	unset "PIDS[$name]"
}

# rss NAME: sets R_KIB, the VmRSS of target NAME in KiB: for nginx, of its worker (the
# master only starts and watches it); for fenec-entry, of its process and of its children if
# it has any (an older build's workers); else of the process.
rss() {
	local pids=${PIDS[$1]} p v
	if [[ $1 == nginx ]]; then
		pids=$(ps -o pid= --ppid "${PIDS[$1]}" | tr '\n' ' ' || true)
		[[ -n ${pids// /} ]] || die "nginx: no worker process under pid ${PIDS[$1]}"
	elif [[ $1 == fenec-entry* ]]; then
		pids+=" $(ps -o pid= --ppid "${PIDS[$1]}" | tr '\n' ' ' || true)"
		count_kids "$1"
	fi
	R_KIB=0
	for p in $pids; do
		v=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$p/status" 2>/dev/null || true)
		[[ $v =~ ^[0-9]+$ ]] || die "$1: no VmRSS in /proc/$p/status"
		R_KIB=$((R_KIB + v))
	done
}

# goroutines NAME: sets R_GOR, go_goroutines of fenec-entry NAME's /metrics; "" for the others.
goroutines() {
	R_GOR=""
	[[ -n ${ADMIN[$1]:-} ]] || return 0
	R_GOR=$(curl -s --max-time 2 "http://127.0.0.1:${ADMIN[$1]}/metrics" | awk '$1 == "go_goroutines" { print $2 }' || true)
	[[ $R_GOR =~ ^[0-9]+$ ]] || die "$1: no go_goroutines at http://127.0.0.1:${ADMIN[$1]}/metrics"
}

# connhold_args SCENARIO N: sets HOLD_ARGS, connhold's flags for N connections to HOLD_ADDR.
# A failure or two in a thousand is let through (and reported); more stops the run.
connhold_args() {
	HOLD_ARGS=(-addr "$HOLD_ADDR" -n "$2" -parallel "$HOLD_PARALLEL" -timeout 10s
		-sources "$SOURCES" -max-failed "$(($2 / 500))")
	if [[ $1 == idle ]]; then HOLD_ARGS+=(-path "$REQ_PATH"); else HOLD_ARGS+=(-stream -path "$EVENTS_PATH"); fi
}

# hold NAME SCENARIO N: connhold opens N connections through target NAME and holds them, in
# the background, its stdin a FIFO held open here; returns once it printed READY (within
# 120 s: fenec-entry would start closing the first idle ones then). Sets R_CONNS, R_FAILED
# and R_OPEN_MS.
hold() {
	local name=$1 t0 line deadline=$((SECONDS + 120))
	connhold_args "$2" "$3"
	rm -f "$TMP/hold.in"
	mkfifo "$TMP/hold.in"
	t0=${EPOCHREALTIME/./}
	(pinned "$CLIENT_CPUS" "$TMP/bin/connhold" "${HOLD_ARGS[@]}") <"$TMP/hold.in" >"$TMP/hold.out" 2>"$TMP/hold.err" &
	PIDS[connhold]=$!
	# Read-write: opening does not wait for connhold's end; closing it is connhold's EOF.
	exec {HOLD_FD}<>"$TMP/hold.in"
	until line=$(grep -m1 '^READY ' "$TMP/hold.out" 2>/dev/null); do
		if ! kill -0 "${PIDS[connhold]}" 2>/dev/null; then
			show_log "$name"
			die "connhold through $name ($2): $(tail -n 1 "$TMP/hold.err")"
		fi
		kill -0 "${PIDS[$name]}" 2>/dev/null || { show_log "$name"; die "$name exited while connections were opened"; }
		((SECONDS < deadline)) || die "connhold through $name ($2): $3 connections not open within 120 s"
		sleep 0.05
	done
	R_OPEN_MS=$(((${EPOCHREALTIME/./} - t0) / 1000))
	R_CONNS=$(echo "$line" | awk '{ sub(/.*conns=/, ""); print $1 + 0 }')
	R_FAILED=$(echo "$line" | awk '{ sub(/.*failed=/, ""); print $1 + 0 }')
	((R_FAILED == 0)) || echo "proxies.sh: warning: $name ($2): $R_FAILED of $3 connections failed: $(tail -n 1 "$TMP/hold.err")" >&2
}

# release: closes connhold's stdin, and waits (10 s at most) for it to let go of every
# connection. Sets R_CLOSED: the held connections the proxy had closed by then.
release() {
	local pid=${PIDS[connhold]} i
	exec {HOLD_FD}>&-
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && { echo "proxies.sh: connhold did not exit when its stdin closed" >&2; kill -TERM "$pid"; }
	wait "$pid" || die "connhold: $(tail -n 1 "$TMP/hold.err")"
	unset "PIDS[connhold]"
	R_CLOSED=$(awk '/^DONE / { sub(/.*closed=/, ""); print $1 + 0 }' "$TMP/hold.out")
	[[ -n $R_CLOSED ]] || die "connhold printed no DONE line"
}

# conns_measure ROUND POSITION SCENARIO NAME: one measurement, a row in $OUT and in $ROWS.
conns_measure() {
	local r=$1 pos=$2 scen=$3 name=$4 n before after gbefore gafter kbpc gpc
	n=$IDLE_CONNS
	[[ $scen == idle ]] || n=$STREAMS
	conns_start "$name" "$scen"
	# Warm-up: the same kind of connection, HOLD_PARALLEL of them, opened and let go, so
	# that what a first request sets up once (pools, lazily built state) is in the baseline.
	connhold_args "$scen" "$HOLD_PARALLEL"
	(pinned "$CLIENT_CPUS" "$TMP/bin/connhold" "${HOLD_ARGS[@]}") </dev/null >"$TMP/warmup.out" 2>&1 ||
		{ cat "$TMP/warmup.out" >&2; die "warm-up through $name ($scen) failed"; }
	sleep 1
	rss "$name"
	before=$R_KIB
	goroutines "$name"
	gbefore=$R_GOR
	hold "$name" "$scen" "$n"
	pause "$SETTLE_S"
	rss "$name"
	after=$R_KIB
	goroutines "$name"
	gafter=$R_GOR
	release
	check_alive
	stop_one "$name"
	((R_CLOSED == 0)) || echo "proxies.sh: warning: $name ($scen): $R_CLOSED of $R_CONNS held connections were closed by the proxy before they were let go" >&2
	((R_CONNS > 0)) || die "$name ($scen): no connection held"
	kbpc=$(awk -v a="$after" -v b="$before" -v n="$R_CONNS" 'BEGIN { printf "%.3f", (a - b) / n }')
	gpc=null
	[[ -z $gbefore ]] || gpc=$(awk -v a="$gafter" -v b="$gbefore" -v n="$R_CONNS" 'BEGIN { printf "%.3f", (a - b) / n }')
	printf '{"kind":"conns","round":%d,"position":%d,"scenario":"%s","target":"%s","conns":%d,"failed":%d,"open_ms":%d,"settle_s":%d,"rss_before_kb":%d,"rss_after_kb":%d,"kb_per_conn":%s,"goroutines_before":%s,"goroutines_after":%s,"goroutines_per_conn":%s,"closed_during_hold":%d}\n' \
		"$r" "$pos" "$scen" "$name" "$R_CONNS" "$R_FAILED" "$R_OPEN_MS" "$SETTLE_S" "$before" "$after" "$kbpc" \
		"${gbefore:-null}" "${gafter:-null}" "$gpc" "$R_CLOSED" >>"$OUT"
	printf '%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\n' "$r" "$scen" "$name" "$R_CONNS" "$before" "$after" "$kbpc" \
		"${gpc/null/-}" "$R_CLOSED" "$R_OPEN_MS" >>"$ROWS"
	echo "proxies.sh: round $r, $scen, $name: $R_CONNS conns in ${R_OPEN_MS} ms, RSS $before -> $after KiB: $kbpc KB/conn${gbefore:+, goroutines $gbefore -> $gafter}" >&2
}

# conns_table: the report's table from $ROWS: medians over rounds (min-max); the ratio is
# paired within a round and scenario.
conns_table() {
	awk -F'\t' -v targets="$(IFS=,; echo "${TARGETS[*]}")" -v scenarios="$(IFS=,; echo "${SCENARIOS[*]}")" -v none=- "$AWK_STATS"'
	{ kb[$1, $2, $3] = $7; rounds[$1] = 1
	  add("conns " $2 " " $3, $4); add("before " $2 " " $3, $5 / 1024); add("after " $2 " " $3, $6 / 1024)
	  add("kb " $2 " " $3, $7); if ($8 != "-") add("gor " $2 " " $3, $8) }
	END {
		nt = split(targets, T, ",")
		ns = split(scenarios, S, ",")
		for (r in rounds) for (s = 1; s <= ns; s++) for (k = 1; k <= nt; k++) {
			sc = S[s]; t = T[k]
			if (((r, sc, t) in kb) && ((r, sc, "nginx") in kb) && kb[r, sc, "nginx"] > 0)
				add("ratio " sc " " t, kb[r, sc, t] / kb[r, sc, "nginx"])
		}
		print "| scenario | target | conns | RSS before MiB | RSS after MiB | KB per conn | goroutines per conn | ratio vs nginx |"
		print "|---|---|---|---|---|---|---|---|"
		for (s = 1; s <= ns; s++) for (k = 1; k <= nt; k++) {
			sc = S[s]; t = T[k]; key = sc " " t
			printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, t, stat("conns " key, "%d"),
				stat("before " key, "%.1f"), stat("after " key, "%.1f"), stat("kb " key, "%.2f"),
				stat("gor " key, "%.2f"), stat("ratio " key, "%.2f")
		}
	}' "$ROWS"
}

# latency_slice T INST URL REQ ERR OTHER STEAL: one slice of the one-connection latency run
# (wrk -t1 -c1 for SLICE_S) against INST at URL, for target T: its histogram appended to
# $TMP/hist.T, its requests and errors added to, and its other load and steal kept at their
# worst in, the associative arrays named REQ, ERR, OTHER and STEAL, keyed by T.
# shellcheck disable=SC2004 # associative arrays, through namerefs: the key needs its $
latency_slice() {
	local t=$1 inst=$2 url=$3
	local -n slice_req=$4 slice_err=$5 slice_other=$6 slice_steal=$7
	wrk_run "$inst" 1 1 "$SLICE_S" "$url"
	grep '^HIST ' "$TMP/wrk.$inst.out" >>"$TMP/hist.$t" || die "wrk printed no HIST line against $inst"
	slice_req[$t]=$((slice_req[$t] + R_REQUESTS)) slice_err[$t]=$((slice_err[$t] + R_SOCKET_ERRORS + R_NON_2XX))
	((R_OTHER <= slice_other[$t])) || slice_other[$t]=$R_OTHER
	((R_STEAL <= slice_steal[$t])) || slice_steal[$t]=$R_STEAL
}

# start_backends: the upstream every target proxies to and, with the streams scenario, the
# stand-in router whose event streams they hold.
start_backends() {
	port UP_PORT
	start upstream "$SERVER_CPUS" "$TMP/bin/upstream" -listen "127.0.0.1:$UP_PORT"
	wait_ready upstream "http://127.0.0.1:$UP_PORT$REQ_PATH"
	if [[ " ${SCENARIOS[*]} " == *" streams "* ]]; then
		port STANDIN_PORT
		start standin "$SERVER_CPUS" "$TMP/bin/fenec-standin" --region "eu=127.0.0.1:$STANDIN_PORT" \
			--tenants acme=eu --http-keepalive "$STANDIN_KEEPALIVE" --log-level warn
		wait_ready standin "http://127.0.0.1:$STANDIN_PORT/t/acme/echo"
	fi
}

conns_main() {
	local r i t s n order
	conns_limits
	((${#TARGETS[@]})) || die "no target left to measure"
	if has_target fenec-entry-b; then cp "$AB_BIN" "$TMP/bin/fenec-entry-b"; fi
	start_backends

	open_out
	facts
	REPRO="bash bench/proxies.sh --mode conns --rounds $ROUNDS --idle-conns $IDLE_CONNS --streams $STREAMS --settle $SETTLE_S --scenarios $SCENARIOS_ARG --pin $PIN${ENTRY_ENV[0]:+ --workers $WORKERS} --targets $TARGETS_ARG${ENTRY_BIN:+ --entry-bin $ENTRY_BIN}${AB_BIN:+ --ab-bin $AB_BIN}"
	{
		printf '{"kind":"meta","mode":"conns","started":%s,"nproc":%d,"cpu":%s,"kernel":%s' \
			"$(json_str "$started")" "$NCPU" "$(json_str "$cpu_model")" "$(json_str "$(uname -r)")"
		printf ',"pin":%s,"client_cpus":%s,"server_cpus":%s,"workers":%d,"rounds":%d,"scenarios":%s,"idle_conns":%d,"streams":%d,"settle_s":%d' \
			"$(json_str "$PIN")" "$(json_str "$CLIENT_CPUS")" "$(json_str "$SERVER_CPUS")" "$WORKERS" \
			"$ROUNDS" "$(json_str "$(IFS=,; echo "${SCENARIOS[*]}")")" "$IDLE_CONNS" "$STREAMS" "$SETTLE_S"
		printf ',"nofile":%d,"nginx_worker_connections":%d,"sources":%d,"ip_local_port_range":%s' \
			"$NOFILE" "$NEED_FDS" "$SOURCES" "$(json_str "$PORT_RANGE")"
		printf ',"git":%s,"fenec_entry":%s,"nginx":%s,"haproxy":%s,"go":%s,"targets":%s,"reproduce":%s}\n' \
			"$(json_str "$git_rev")" "$(json_str "$ver_entry")" "$(json_str "$ver_nginx")" \
			"$(json_str "$ver_haproxy")" "$(json_str "$ver_go")" \
			"$(json_str "$(IFS=,; echo "${TARGETS[*]}")")" "$(json_str "$REPRO")"
	} >>"$OUT"

	ROWS=$TMP/rows.tsv # round scenario target conns rss-before rss-after kb/conn goroutines/conn closed open-ms
	: >"$ROWS"
	n=${#TARGETS[@]}
	echo "proxies.sh: --mode conns: targets ${TARGETS[*]}; $ROUNDS rounds x $n targets x ${#SCENARIOS[@]} scenarios (${SCENARIOS[*]}; idle $IDLE_CONNS, streams $STREAMS); about $((ROUNDS * n * ${#SCENARIOS[@]} * (SETTLE_S + 6)))s" >&2
	# Rounds as in the requests mode: every target once per scenario, the order rotated by
	# one each round.
	for ((r = 1; r <= ROUNDS; r++)); do
		order=()
		for ((i = 0; i < n; i++)); do order+=("${TARGETS[$(((i + r - 1) % n))]}"); done
		echo "proxies.sh: round $r/$ROUNDS: ${order[*]}" >&2
		for s in "${SCENARIOS[@]}"; do
			for ((i = 0; i < n; i++)); do
				conns_measure "$r" "$((i + 1))" "$s" "${order[$i]}"
			done
		done
	done

	{
		echo "## fenec-entry vs nginx vs haproxy: memory per held client connection, on loopback"
		echo
		conns_table
		echo
		echo "Median over $ROUNDS interleaved rounds (min-max); the ratio is paired per round. 1 KB = 1024 B."
		for s in "${SCENARIOS[@]}"; do
			if [[ $s == idle ]]; then
				echo "idle: $IDLE_CONNS keep-alive connections, each after one GET $REQ_PATH answered 200 by bench/upstream, then idle."
			else
				echo "streams: $STREAMS GET $EVENTS_PATH held open, server-sent events from fenec-standin (event: open at once, a keep-alive comment every $STANDIN_KEEPALIVE)."
			fi
		done
		echo "RSS: VmRSS of the proxy (nginx: its one worker; fenec-entry: its process and any children), fresh for each measurement, read after a warm-up of $HOLD_PARALLEL connections and again ${SETTLE_S}s after the last connection was open;"
		echo "KB per conn = (after - before) / conns. goroutines per conn: go_goroutines of fenec-entry's /metrics, the same way."
		echo
		awk -F'\t' '{ c += $9 } END { if (c) printf "- WARNING: %d held connections were closed by the proxy before they were let go (raw: closed_during_hold)\n", c
			else print "- every held connection was still open when it was let go" }' "$ROWS"
		echo "- machine: nproc $NCPU ($cpu_model), kernel $(uname -r), $started"
		echo "- versions: nginx $ver_nginx, haproxy $ver_haproxy, go $ver_go; fenec-entry: $ver_entry; repo at $git_rev"
		if [[ $PIN == split ]]; then
			echo "- layout: connhold on CPU $CLIENT_CPUS; upstream, stand-in and proxy on CPU $SERVER_CPUS; nginx 1 worker; $WORKERS haproxy thread(s)$(entry_layouts)"
		else
			echo "- layout: nothing pinned; nginx 1 worker; $WORKERS haproxy thread(s)$(entry_layouts)"
		fi
		echo "- limits: ulimit -n $(ulimit -n); nginx worker_connections $NEED_FDS, worker_rlimit_nofile $NOFILE$(has_target haproxy && echo "; haproxy maxconn $HAPROXY_MAXCONN"); connhold from $SOURCES source address(es) (ip_local_port_range $PORT_RANGE)"
		for t in "${SKIPPED[@]}"; do echo "- $t"; done
		echo "- raw: $OUT"
		echo "- reproduce: cd $ROOT && $REPRO"
	} >"$OUT_MD"
	echo
	cat "$OUT_MD"
	echo "(this report: $OUT_MD)"
}

# ---- measuring (requests and protocols modes) ----------------------------------------------
wrk_report_lua "$TMP/report.lua" # one BENCH line and the HIST of latencies per wrk run (lib.sh)

# cpu_ticks: one line per CPU from /proc/stat, "busy total process": busy = all but idle and
# iowait, process = user + nice + system (what processes are charged with, in the same ticks
# as /proc/PID/stat).
cpu_ticks() {
	awk '/^cpu[0-9]/ { idle = $5 + $6; t = 0; for (i = 2; i <= 9; i++) t += $i; print t - idle, t, $2 + $3 + $4 }' /proc/stat
}
cpu_busy() { # cpu_busy BEFORE: each CPU's busy % since the cpu_ticks BEFORE, comma list
	paste -d' ' <(echo "$1") <(cpu_ticks) |
		awk '{ d = $5 - $2; pct = (d > 0) ? 100 * ($4 - $1) / d : 0; printf "%s%.0f", (NR > 1) ? "," : "", pct }'
}
# steal_ticks: "steal total" summed over the CPUs: the time the hypervisor ran other guests
# while this one wanted to run. Steal makes a run slower without any process here to blame.
steal_ticks() {
	awk '/^cpu[0-9]/ { t = 0; for (i = 2; i <= 9; i++) t += $i; s += $9; tt += t } END { print s, tt }' /proc/stat
}
steal_pct() { # steal_pct BEFORE: the steal share in % since the steal_ticks BEFORE
	echo "$1 $(steal_ticks)" | awk '{ d = $4 - $2; printf "%.0f", (d > 0) ? 100 * ($3 - $1) / d : 0 }'
}
# our_ticks: CPU ticks used so far by what this script runs: the servers and their children
# (nginx's workers), and every finished child of this shell (wrk runs: cutime + cstime).
our_ticks() {
	local pids p
	pids="${PIDS[*]} $(ps -o pid= --ppid "$(IFS=,; echo "${PIDS[*]}")" 2>/dev/null | tr '\n' ' ')"
	{
		# shellcheck disable=SC2086 # word splitting of the pid list is wanted
		for p in $pids; do cat "/proc/$p/stat" 2>/dev/null || true; done | awk '{ sub(/.*\) /, ""); s += $12 + $13 } END { print s + 0 }'
		awk '{ sub(/.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$$/stat"
	} | awk '{ s += $1 } END { print s }'
}
# other_load CPU_BEFORE OURS_BEFORE: the CPU used since then by processes this script did not
# start, in % of one CPU (top's way: 100 = one CPU busy all the time).
other_load() {
	local ours
	ours=$(($(our_ticks) - $2))
	paste -d' ' <(echo "$1") <(cpu_ticks) | awk -v ours="$ours" '
		{ proc += $6 - $3; wall += $5 - $2; n++ }
		END { o = (wall > 0) ? 100 * (proc - ours) / (wall / n) : 0; printf "%.0f", (o < 0) ? 0 : o }'
}
# pick_busy LIST CPUS: the mean busy % of CPUS (client, server or all) in a cpu_busy LIST.
pick_busy() {
	echo "$1" | awk -F, -v which="$2" -v nclient="$CLIENT_NCPU" '{
		from = 1; to = NF
		if (nclient && which == "client") to = nclient
		if (nclient && which == "server") from = nclient + 1
		s = 0; for (i = from; i <= to; i++) s += $i
		printf "%.0f", s / (to - from + 1) }'
}

# proc_ticks NAME: CPU ticks (user + system) used so far by server NAME and its children
# (nginx's workers; an older fenec-entry's, given with --entry-bin or --ab-bin).
proc_ticks() {
	local pids p
	[[ -n ${PIDS[$1]:-} ]] || { echo 0; return; } # direct: no proxy process
	pids="${PIDS[$1]} $(ps -o pid= --ppid "${PIDS[$1]}" 2>/dev/null | tr '\n' ' ')"
	# shellcheck disable=SC2086 # word splitting of the pid list is wanted
	for p in $pids; do cat "/proc/$p/stat" 2>/dev/null || true; done | awk '{ sub(/.*\) /, ""); s += $12 + $13 } END { print s + 0 }'
}

# children_ticks: CPU ticks (user + system) of this shell's finished children (wrk).
children_ticks() { awk '{ sub(/.*\) /, ""); print $14 + $15 }' "/proc/$$/stat"; }

# wrk_run NAME THREADS CONNS SECONDS URL: runs wrk on the client CPUs and sets the globals
# R_P50_US R_P99_US R_RPS R_REQUESTS R_DURATION_US R_SOCKET_ERRORS R_NON_2XX from its BENCH
# line, R_BUSY, each CPU's busy % during the run (comma list), R_OTHER (other_load),
# R_STEAL (steal_pct) and R_CLIENT_TICKS (wrk's CPU ticks).
wrk_run() {
	local name=$1 threads=$2 conns=$3 secs=$4 url=$5 before ours line steal0 child0
	ours=$(our_ticks)
	before=$(cpu_ticks)
	steal0=$(steal_ticks)
	child0=$(children_ticks) # last before wrk: the forks above are this shell's children too
	(pinned "$CLIENT_CPUS" wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 2s --latency \
		-s "$TMP/report.lua" "$url") >"$TMP/wrk.$name.out" 2>&1 &
	WRK_PID=$!
	wait "$WRK_PID" || { cat "$TMP/wrk.$name.out" >&2; die "wrk against $name failed"; }
	WRK_PID=""
	R_CLIENT_TICKS=$(($(children_ticks) - child0))
	R_BUSY=$(cpu_busy "$before")
	R_OTHER=$(other_load "$before" "$ours")
	R_STEAL=$(steal_pct "$steal0")
	line=$(grep '^BENCH ' "$TMP/wrk.$name.out") || { cat "$TMP/wrk.$name.out" >&2; die "wrk printed no BENCH line"; }
	eval "$(echo "$line" | awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); printf "R_%s=%s\n", toupper(kv[1]), kv[2] } }')"
	check_alive
	if ((R_SOCKET_ERRORS || R_NON_2XX)); then
		echo "proxies.sh: warning: $name: $R_SOCKET_ERRORS socket errors, $R_NON_2XX non-2xx answers" >&2
	fi
}

STEAL_MAX=10 # % steal above which a run is named in a warning
wait_idle() { # wait_idle ROUND
	local waited=0 other before ours
	while :; do
		ours=$(our_ticks)
		before=$(cpu_ticks)
		sleep 1
		other=$(other_load "$before" "$ours")
		((other > IDLE_MAX && waited < IDLE_WAIT_S)) || break
		((waited++ > 0)) || echo "proxies.sh: round $1: other processes use ${other}% of a CPU; waiting up to ${IDLE_WAIT_S}s for quiet" >&2
	done
	((other <= IDLE_MAX)) || echo "proxies.sh: warning: round $1 starts with other processes at ${other}% of a CPU: its numbers will be noisy" >&2
}
# hist_pct FILE: "p50 p99" in µs of the latencies in FILE's HIST lines (report.lua), merged;
# the rank as wrk's own percentile takes it.
hist_pct() {
	tr ' ' '\n' <"$1" | awk -F: 'NF == 2 { c[$1] += $2 } END { for (v in c) print v, c[v] }' | sort -n |
		awk '{ v[NR] = $1; c[NR] = $2; total += $2 }
		END {
			r50 = int(0.50 * total + 1); r99 = int(0.99 * total + 1); t = 0; p50 = p99 = 0
			for (i = 1; i <= NR; i++) { t += c[i]; if (!p50 && t >= r50) p50 = v[i]; if (!p99 && t >= r99) p99 = v[i] }
			if (!p99) p99 = v[NR]
			print p50 + 0, p99 + 0 }'
}

# ---- protocols mode: every protocol a client speaks, fenec-entry beside nginx -------------
# In one run and the same interleaved rounds, in front of the same upstream: plain HTTP/1.1,
# HTTP/1.1 over TLS, h2 over TLS, h2c, full TLS handshakes, session resumption, and the conns
# mode's memory per held connection. README.md, "Every protocol a client speaks", says what
# each row measures. Each target runs as two processes (two nginx masters with their workers,
# two fenec-entry processes): one with the plain listeners (HTTP/1.1; h2c: the entry on the
# same port, nginx on a second one, as nginx 1.22 speaks h2c only on a port of its own), one
# with the TLS listener, since the entry given a certificate serves TLS on its only listener.
# The memory rows start each target afresh as the conns mode does.
H2LOAD_THREADS=2 # as wrk -t2
declare -A INST_PLAIN=() INST_TLS=() URL_PLAIN=() URL_H2C=() URL_TLS=() TLS_ADDR=()
declare -A TLS_BYTES=() TLS_INFO=() BROKEN=()
# The rows each protocol's check stands for: a protocol that fails its check leaves them
# BROKEN in the table, the target's other protocols measured as usual.
declare -A PROTO_METRICS=([plain]="plain_rps plain_p50 plain_p99" [https]="https_rps https_p50 https_p99"
	[h2]="h2_rps" [h2c]="h2c_rps" [tls10]="handshakes resumed")

# proto_cert: one self-signed ECDSA P-256 certificate for the run, for every TLS listener.
proto_cert() { bench_cert "$TMP/tls"; }

# proto_nginx KIND: starts nginx-KIND, KIND plain (HTTP/1.1 on one port, h2c on a second) or
# tls (HTTPS, HTTP/1.1 and h2 by ALPN), with the requests mode's proxying and header work.
proto_nginx() {
	local kind=$1 name=nginx-$1 dir=$TMP/nginx-$1 p1 p2 servers loc
	mkdir -p "$dir"
	loc=$(nginx_location)
	port p1
	if [[ $kind == plain ]]; then
		port p2
		servers="    server {
        listen 127.0.0.1:$p1;
$loc
    }
    server {
        listen 127.0.0.1:$p2 http2;
$loc
    }"
		URL_PLAIN[nginx]=http://127.0.0.1:$p1$REQ_PATH
		URL_H2C[nginx]=http://127.0.0.1:$p2$REQ_PATH
		INST_PLAIN[nginx]=$name
	else
		# Session cache and tickets as nginx has them by default, with the shared cache a
		# server of several workers would use. ssl_protocols: nginx 1.22's default leaves
		# TLS 1.3 out, which the entry (Go) and every client here speak. The server's cipher
		# order, as the entry (Go) chooses its own: both then agree on TLS_AES_128_GCM_SHA256
		# with clients (OpenSSL's) that list AES-256 first.
		servers="$(nginx_tls "$CERT" "$KEY")
    server {
        listen 127.0.0.1:$p1 ssl http2;
$loc
    }"
		URL_TLS[nginx]=https://127.0.0.1:$p1$REQ_PATH
		TLS_ADDR[nginx]=127.0.0.1:$p1
		INST_TLS[nginx]=$name
	fi
	nginx_conf "$dir" "$UP_PORT" "$servers" "$WORKERS"
	start "$name" "$SERVER_CPUS" nginx -e "$dir/error.log" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;'
	if [[ $kind == plain ]]; then wait_ready "$name" "${URL_PLAIN[nginx]}"; else wait_ready "$name" "${URL_TLS[nginx]}" -k; fi
}

# proto_entry TARGET KIND: starts TARGET-KIND (fenec-entry or fenec-entry-b) as start_entry
# does; KIND tls adds the run's certificate, which turns its listener to HTTPS.
proto_entry() {
	local t=$1 kind=$2 name=$1-$2 listen admin gossip rpc tls=()
	port listen
	port admin
	port gossip
	port rpc
	[[ $kind == plain ]] || tls=(--tls-cert "$CERT" --tls-key "$KEY")
	start "$name" "$SERVER_CPUS" env "${ENTRY_ENV[@]}" "$TMP/bin/$t" serve \
		--listen "127.0.0.1:$listen" --admin-listen "127.0.0.1:$admin" \
		--routers "eu=http://127.0.0.1:$UP_PORT" \
		--gossip-bind "127.0.0.1:$gossip" --rpc-addr "127.0.0.1:$rpc" "${tls[@]}"
	if [[ $kind == plain ]]; then
		URL_PLAIN[$t]=http://127.0.0.1:$listen$REQ_PATH
		URL_H2C[$t]=${URL_PLAIN[$t]}
		INST_PLAIN[$t]=$name
		wait_ready "$name" "${URL_PLAIN[$t]}"
	else
		URL_TLS[$t]=https://127.0.0.1:$listen$REQ_PATH
		TLS_ADDR[$t]=127.0.0.1:$listen
		INST_TLS[$t]=$name
		wait_ready "$name" "${URL_TLS[$t]}" -k
	fi
	entry_kids "$t"
}

# entry_kids TARGET: count_kids for both processes of fenec-entry TARGET, the most under TARGET.
entry_kids() {
	local inst
	for inst in "${INST_PLAIN[$1]:-}" "${INST_TLS[$1]:-}"; do
		[[ -n $inst ]] || continue
		count_kids "$inst"
		((${ENTRY_KIDS[$inst]:-0} <= ${ENTRY_KIDS[$1]:-0})) || ENTRY_KIDS[$1]=${ENTRY_KIDS[$inst]}
	done
}

# check_http WANT URL CURL-ARGS...: one GET by hand, as verify does, for a protocol curl is
# told to speak; on failure returns 1 with WHY.
check_http() {
	local want=$1 url=$2 hdr=$TMP/check.hdr status size
	shift 2
	WHY=""
	: >"$hdr"
	if ! size=$(curl -sS -D "$hdr" -o /dev/null -w '%{size_download}' --max-time 2 "$@" "$url" 2>"$hdr.err"); then
		WHY="curl $* $url: $(tail -n 1 "$hdr.err")"
		return 1
	fi
	status=$(head -n 1 "$hdr" | tr -d '\r')
	[[ $status == "$want"* ]] || { WHY="curl $*: want $want, got: ${status:-no answer}"; return 1; }
	grep -qi '^fenec-shard: 1' "$hdr" || { WHY="curl $*: the answer lacks Fenec-Shard: 1"; return 1; }
	((size == 64)) || { WHY="curl $*: want the 64-byte body, got $size bytes"; return 1; }
	! grep -qi '^fenec-home:' "$hdr" || echo "proxies.sh: warning: $url passed Fenec-Home on to the client" >&2
}

# check_tls10 TARGET: the request openssl s_time and the resumption loop send (GET, HTTP/1.0,
# no Host) over TLS, checked by hand; sets TLS_BYTES (the answer's bytes, which s_time's
# must match) and TLS_INFO (what the handshake settled on). On failure returns 1 with WHY.
check_tls10() {
	local t=$1 out=$TMP/check.$1.tls10 status body info
	WHY=""
	printf 'GET %s HTTP/1.0\r\n\r\n' "$REQ_PATH" |
		timeout 5 openssl s_client -connect "${TLS_ADDR[$t]}" -quiet >"$out" 2>"$out.err" || true
	status=$(head -n 1 "$out" | tr -d '\r')
	[[ $status =~ ^HTTP/1\.[01]\ 200 ]] || { WHY="openssl s_client, GET HTTP/1.0: want 200, got: ${status:-no answer} ($(tail -n 1 "$out.err"))"; return 1; }
	grep -qi '^fenec-shard: 1' "$out" || { WHY="openssl s_client, GET HTTP/1.0: the answer lacks Fenec-Shard: 1"; return 1; }
	body=$(awk 'BEGIN { RS = "\r\n\r\n" } NR > 1 { printf "%s%s", (NR > 2) ? RS : "", $0 }' "$out" | wc -c)
	((body == 64)) || { WHY="openssl s_client, GET HTTP/1.0: want the 64-byte body, got $body bytes"; return 1; }
	TLS_BYTES[$t]=$(wc -c <"$out")
	info=$(timeout 5 openssl s_client -connect "${TLS_ADDR[$t]}" -alpn h2,http/1.1 </dev/null 2>&1 |
		awk '/^(New|Reused), / && !v { sub(/,$/, "", $2); v = $2; c = $NF }
			/^Server Temp Key:/ { sub(/^Server Temp Key: /, ""); sub(/,.*/, ""); k = $0 }
			/^Peer signature type:/ { s = $NF }
			/^ALPN protocol:/ { a = $NF }
			END { printf "%s %s, key exchange %s, %s signature, ALPN %s", v, c, k, s, (a == "") ? "none" : a }' || true)
	TLS_INFO[$t]=$info
}

# proto_check TARGET: every protocol of TARGET checked by hand before the rounds; a failure is
# a warning, and the rows of that protocol say BROKEN (the reason under the table).
proto_check() {
	local t=$1 p ok m
	for p in plain h2c https h2 tls10; do
		case $p in
		plain) check_http "HTTP/1.1 200" "${URL_PLAIN[$t]}" --http1.1 ;;
		h2c) check_http "HTTP/2 200" "${URL_H2C[$t]}" --http2-prior-knowledge ;;
		https) check_http "HTTP/1.1 200" "${URL_TLS[$t]}" -k --http1.1 ;;
		h2) check_http "HTTP/2 200" "${URL_TLS[$t]}" -k --http2 ;;
		tls10) check_tls10 "$t" ;;
		esac && ok=1 || ok=0
		((ok)) && continue
		echo "proxies.sh: warning: $t fails the $p check, its $p rows are left out: $WHY" >&2
		BROKEN[$t,$p]=$WHY
		for m in ${PROTO_METRICS[$p]}; do printf '%s\t%s\t%s\n' "$t" "$m" "$p: $WHY" >>"$TMP/broken.tsv"; done
	done
}
proto_ok() { [[ -z ${BROKEN[$1,$2]:-} ]]; } # proto_ok TARGET PROTO: its check passed

# client_run INST OUT CMD...: runs CMD on the client CPUs, its output to OUT, and sets what
# wrk_run does (R_BUSY, R_OTHER, R_STEAL, R_CLIENT_TICKS), R_WALL_US, and R_TARGET_TICKS and
# R_UP_TICKS, the CPU ticks of target process INST (and its children) and of the upstream.
client_run() {
	local inst=$1 out=$2 before ours steal0 child0 tt0 tu0 t0
	shift 2
	ours=$(our_ticks)
	before=$(cpu_ticks)
	steal0=$(steal_ticks)
	tt0=$(proc_ticks "$inst")
	tu0=$(proc_ticks upstream)
	child0=$(children_ticks) # last before the client: the forks above are this shell's children too
	t0=${EPOCHREALTIME/./}
	(pinned "$CLIENT_CPUS" "$@") >"$out" 2>&1 &
	WRK_PID=$!
	wait "$WRK_PID" || { tail -n 20 "$out" >&2; die "$1 against $inst failed"; }
	WRK_PID=""
	R_WALL_US=$((${EPOCHREALTIME/./} - t0))
	R_CLIENT_TICKS=$(($(children_ticks) - child0))
	R_TARGET_TICKS=$(($(proc_ticks "$inst") - tt0))
	R_UP_TICKS=$(($(proc_ticks upstream) - tu0))
	R_BUSY=$(cpu_busy "$before")
	R_OTHER=$(other_load "$before" "$ours")
	R_STEAL=$(steal_pct "$steal0")
	check_alive
}

# run_warnings R T WHAT: the disturbed-run warnings of the last run, as the requests mode's.
run_warnings() {
	((R_OTHER <= IDLE_MAX)) ||
		echo "proxies.sh: warning: round $1, $2, $3: other processes took ${R_OTHER}% of a CPU" >&2
	((R_STEAL <= STEAL_MAX)) ||
		echo "proxies.sh: warning: round $1, $2, $3: the hypervisor took ${R_STEAL}% of the CPU time (steal): other guests on this host" >&2
}

# proto_latency ROUND PROTO: the c=1 latency runs over PROTO (plain or https) of every target,
# sliced and merged as in the requests mode; a row per target.
proto_latency() {
	local r=$1 p=$2 k i t url inst p50 p99 busy
	local -A lat_req=() lat_err=() lat_other=() lat_steal=()
	local -a live=()
	for t in "${order[@]}"; do
		proto_ok "$t" "$p" || continue
		live+=("$t")
		: >"$TMP/hist.$t"
		lat_req[$t]=0 lat_err[$t]=0 lat_other[$t]=0 lat_steal[$t]=0
	done
	((${#live[@]})) || return 0
	for ((k = 0; k < SLICES; k++)); do
		for ((i = 0; i < ${#live[@]}; i++)); do
			t=${live[$(((i + k) % ${#live[@]}))]}
			if [[ $p == plain ]]; then inst=${INST_PLAIN[$t]} url=${URL_PLAIN[$t]}; else inst=${INST_TLS[$t]} url=${URL_TLS[$t]}; fi
			latency_slice "$t" "$inst" "$url" lat_req lat_err lat_other lat_steal
		done
	done
	for ((i = 0; i < ${#live[@]}; i++)); do
		t=${live[$i]}
		read -r p50 p99 < <(hist_pct "$TMP/hist.$t")
		((lat_req[$t] > 0)) || lat_err[$t]=$((lat_err[$t] + 1)) # no answer at all is an error too
		printf '{"kind":"protocol","round":%d,"position":%d,"target":"%s","measurement":"%s_latency","tool":"wrk -t1 -c1","seconds":%d,"slices":%d,"p50_us":%d,"p99_us":%d,"requests":%d,"errors":%d,"other_load_pct":%d,"steal_pct":%d}\n' \
			"$r" "$((i + 1))" "$t" "$p" "$MEASURE_S" "$SLICES" "$p50" "$p99" "${lat_req[$t]}" "${lat_err[$t]}" "${lat_other[$t]}" "${lat_steal[$t]}" >>"$OUT"
		busy=-
		printf '%d\t%s\t%s_p50\t%s\t-\t%d\t%d\t%d\t%s\n' "$r" "$t" "$p" "$p50" "${lat_err[$t]}" "${lat_steal[$t]}" "${lat_other[$t]}" "$busy" >>"$PROWS"
		printf '%d\t%s\t%s_p99\t%s\t-\t%d\t%d\t%d\t%s\n' "$r" "$t" "$p" "$p99" "${lat_err[$t]}" "${lat_steal[$t]}" "${lat_other[$t]}" "$busy" >>"$PROWS"
		((lat_other[$t] <= IDLE_MAX)) || echo "proxies.sh: warning: round $r, $t, $p latency: other processes took ${lat_other[$t]}% of a CPU" >&2
		((lat_steal[$t] <= STEAL_MAX)) || echo "proxies.sh: warning: round $r, $t, $p latency: the hypervisor took ${lat_steal[$t]}% of the CPU time (steal): other guests on this host" >&2
	done
}

# proto_load ROUND POSITION TARGET MEASUREMENT: one load run, MEASUREMENT plain or https
# (wrk -t2 -c--conns), h2 or h2c (h2load) or handshakes (openssl s_time -new); a row.
proto_load() {
	local r=$1 pos=$2 t=$3 m=$4 inst url out rps req err line tool json_extra="" bytes want tt0 tu0 us
	case $m in
	plain | https)
		if [[ $m == plain ]]; then inst=${INST_PLAIN[$t]} url=${URL_PLAIN[$t]}; else inst=${INST_TLS[$t]} url=${URL_TLS[$t]}; fi
		tool="wrk -t2 -c$CONNS"
		tt0=$(proc_ticks "$inst") tu0=$(proc_ticks upstream)
		wrk_run "$inst" 2 "$CONNS" "$MEASURE_S" "$url"
		R_TARGET_TICKS=$(($(proc_ticks "$inst") - tt0)) R_UP_TICKS=$(($(proc_ticks upstream) - tu0))
		rps=$R_RPS req=$R_REQUESTS err=$((R_SOCKET_ERRORS + R_NON_2XX))
		;;
	h2 | h2c)
		if [[ $m == h2 ]]; then inst=${INST_TLS[$t]} url=${URL_TLS[$t]}; else inst=${INST_PLAIN[$t]} url=${URL_H2C[$t]}; fi
		tool="h2load -t$H2LOAD_THREADS -c$H2_CLIENTS -m$H2_STREAMS"
		out=$TMP/h2load.$inst.out
		client_run "$inst" "$out" h2load -t"$H2LOAD_THREADS" -c"$H2_CLIENTS" -m"$H2_STREAMS" -D "$MEASURE_S" "$url"
		# "finished in 5.00s, 9514.50 req/s, ..."; "requests: T total, S started, D done,
		# OK succeeded, F failed, E errored, X timeout" (F: every failure, errors, timeouts and
		# 4xx/5xx answers alike); "status codes: A 2xx, B 3xx, C 4xx, D 5xx"
		line=$(awk '/^finished in / { r = $4 } /^requests: / { ok = $8; bad = $10 }
			/^status codes: / { st = $5 } /^Application protocol: / { ap = $3 }
			END { printf "%s %s %s %s %s", (r == "") ? "-" : r, (ok == "") ? 0 : ok, bad + 0, st + 0, (ap == "") ? "-" : ap }' "$out")
		read -r rps req err json_extra want <<<"$line"
		[[ $rps != - ]] || { tail -n 20 "$out" >&2; die "h2load against $inst printed no result"; }
		# 3xx answers are errors here too (h2load counts them as succeeded).
		err=$((err + json_extra))
		if [[ $want != "$m" ]]; then
			echo "proxies.sh: warning: round $r, $t, $m: h2load spoke ${want}, not $m: every request counted as an error" >&2
			err=$((err + req + 1))
		fi
		((err == 0)) || echo "proxies.sh: warning: round $r, $t, $m: $err failed or non-2xx requests of $((req + err)) (h2load, $out)" >&2
		json_extra=",\"application_protocol\":\"$want\""
		;;
	handshakes)
		inst=${INST_TLS[$t]}
		tool="openssl s_time -new"
		out=$TMP/s_time.$inst.out
		client_run "$inst" "$out" openssl s_time -new -connect "${TLS_ADDR[$t]}" -www "$REQ_PATH" -time "$MEASURE_S"
		# "N connections in T real seconds, B bytes read per connection": T in whole seconds,
		# so the rate is N over the run's own wall time.
		line=$(awk '/connections in .* real seconds/ { n = $1; b = $7 } END { print n + 0, b + 0 }' "$out")
		read -r req bytes <<<"$line"
		rps=$(awk -v n="$req" -v us="$R_WALL_US" 'BEGIN { printf "%.1f", (us > 0) ? n * 1e6 / us : 0 }')
		err=0
		want=${TLS_BYTES[$t]}
		if ((req == 0)); then
			err=1
			echo "proxies.sh: warning: round $r, $t, handshakes: openssl s_time made no connection ($out)" >&2
		elif ((bytes != want)); then
			# Every connection read the answer; one of another size is not the checked 200.
			err=$req
			echo "proxies.sh: warning: round $r, $t, handshakes: $bytes bytes read a connection, the checked answer has $want: every connection counted as an error" >&2
		fi
		json_extra=",\"bytes_per_conn\":$bytes,\"wall_us\":$R_WALL_US"
		;;
	esac
	[[ $t != fenec-entry* ]] || entry_kids "$t"
	us=$(awk -v c="$R_CLIENT_TICKS" -v u="$R_UP_TICKS" -v a="$R_TARGET_TICKS" -v n="$req" -v hz="$CLK_TCK" \
		'BEGIN { k = (n > 0) ? 1e6 / hz / n : 0; printf "%.2f\t%.2f\t%.2f\t%s", c * k, u * k, a * k, (u > 0) ? sprintf("%.3f", a / u) : "null" }')
	local us_c us_u us_t vs_up
	IFS=$'\t' read -r us_c us_u us_t vs_up <<<"$us"
	printf '{"kind":"protocol","round":%d,"position":%d,"target":"%s","measurement":"%s","tool":"%s","seconds":%d,"per_s":%s,"requests":%d,"errors":%d,"cpu_ticks":{"client":%d,"upstream":%d,"target":%d},"cpu_us_per_request":{"client":%s,"upstream":%s,"target":%s},"cpu_vs_upstream":%s,"cpu_busy_pct":[%s],"other_load_pct":%d,"steal_pct":%d%s}\n' \
		"$r" "$pos" "$t" "$m" "$tool" "$MEASURE_S" "$rps" "$req" "$err" "$R_CLIENT_TICKS" "$R_UP_TICKS" "$R_TARGET_TICKS" \
		"$us_c" "$us_u" "$us_t" "$vs_up" "$R_BUSY" "$R_OTHER" "$R_STEAL" "$json_extra" >>"$OUT"
	[[ $m == handshakes ]] || m=${m}_rps
	printf '%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n' "$r" "$t" "$m" "$rps" "$us_t" "$err" "$R_STEAL" "$R_OTHER" \
		"$(pick_busy "$R_BUSY" server)" >>"$PROWS"
	run_warnings "$r" "$t" "$m"
}

# proto_resume ROUND POSITION TARGET: a full handshake whose session is saved, then --resumes
# reconnects, each offering the last session saved (as a client keeps its newest ticket) and
# saving the one it gets; counts those the server resumed ("Reused" from openssl s_client).
proto_resume() {
	local r=$1 pos=$2 t=$3 i out=$TMP/resume.$3.out sess=$TMP/resume.$3 reused=0 fresh=0 failed=0 line
	rm -f "$sess".*.pem
	printf 'GET %s HTTP/1.0\r\n\r\n' "$REQ_PATH" |
		(pinned "$CLIENT_CPUS" timeout 5 openssl s_client -connect "${TLS_ADDR[$t]}" -sess_out "$sess.0.pem" -ign_eof) >"$out" 2>&1 || true
	[[ -s $sess.0.pem ]] || die "$t: openssl s_client saved no session ($(tail -n 1 "$out"))"
	for ((i = 1; i <= RESUMES; i++)); do
		printf 'GET %s HTTP/1.0\r\n\r\n' "$REQ_PATH" |
			(pinned "$CLIENT_CPUS" timeout 5 openssl s_client -connect "${TLS_ADDR[$t]}" \
				-sess_in "$sess.$((i - 1)).pem" -sess_out "$sess.$i.pem" -ign_eof) >"$out" 2>&1 || true
		line=$(awk '/^(New|Reused), / { print $1; exit }' "$out")
		if [[ ! -s $sess.$i.pem ]] || ! grep -Eq '^HTTP/1\.[01] 200' "$out"; then
			((++failed))
			cp "$sess.$((i - 1)).pem" "$sess.$i.pem" 2>/dev/null || true
		elif [[ $line == Reused, ]]; then
			((++reused))
		else
			((++fresh))
		fi
	done
	check_alive
	((failed == 0)) || echo "proxies.sh: warning: round $r, $t, resumption: $failed of $RESUMES reconnects failed or were not answered 200 (last: $out)" >&2
	printf '{"kind":"protocol","round":%d,"position":%d,"target":"%s","measurement":"resumption","tool":"openssl s_client -sess_in -sess_out","reconnects":%d,"resumed":%d,"full_handshakes":%d,"failed":%d}\n' \
		"$r" "$pos" "$t" "$RESUMES" "$reused" "$fresh" "$failed" >>"$OUT"
	printf '%d\t%s\tresumed\t%d\t-\t%d\t-\t-\t-\n' "$r" "$t" "$reused" "$failed" >>"$PROWS"
}

# proto_table: the one table of the protocols mode, from $PROWS and the memory rows in $ROWS;
# medians over rounds (min-max), ratios paired per round.
proto_table() {
	local mem=$TMP/memrows.tsv
	# The conns mode's rows as measurements (the connections the proxy closed while held as
	# errors): round target metric KB/conn.
	awk -F'\t' '{ printf "%d\t%s\t%s\t%s\t-\t%d\t-\t-\t-\n", $1, $3, ($2 == "idle") ? "idle_kb" : "stream_kb", $7, $9 }' "$ROWS" >"$mem"
	cat "$PROWS" "$mem" | awk -F'\t' -v targets="$(IFS=,; echo "${TARGETS[*]}")" -v resumes="$RESUMES" \
		-v conns="$CONNS" -v h2="-c$H2_CLIENTS -m$H2_STREAMS" -v idle="$IDLE_CONNS" -v streams="$STREAMS" \
		-v scen=" ${SCENARIOS[*]} " -v broken="$TMP/broken.tsv" "$AWK_STATS"'
	function cell(m, t, fmt,   s) {
		if ((t, m) in bad) return "BROKEN"
		s = stat(m " " t, fmt)
		if (s == "") return "MISSING"
		if (err[m, t] > 0) s = s " ⚠ " err[m, t] " err"
		return s
	}
	BEGIN { while ((getline line < broken) > 0) { split(line, f, "\t"); bad[f[1], f[2]] = 1 } }
	{ v[$1, $2, $3] = $4; if ($5 != "-") c[$1, $2, $3] = $5; err[$3, $2] += $6; rounds[$1] = 1
	  add($3 " " $2, $4); if ($5 != "-") add("cpu " $3 " " $2, $5) }
	END {
		nt = split(targets, T, ",")
		nm = 0
		M[++nm] = "plain_rps";  L[nm] = "plain HTTP/1.1 requests/s, c=" conns; B[nm] = "higher"; F[nm] = "%.0f"
		M[++nm] = "plain_p50";  L[nm] = "plain HTTP/1.1 p50 µs, c=1"; B[nm] = "lower"; F[nm] = "%.0f"
		M[++nm] = "plain_p99";  L[nm] = "plain HTTP/1.1 p99 µs, c=1"; B[nm] = "lower"; F[nm] = "%.0f"
		M[++nm] = "https_rps";  L[nm] = "HTTPS HTTP/1.1 requests/s, c=" conns; B[nm] = "higher"; F[nm] = "%.0f"
		M[++nm] = "https_p50";  L[nm] = "HTTPS HTTP/1.1 p50 µs, c=1"; B[nm] = "lower"; F[nm] = "%.0f"
		M[++nm] = "https_p99";  L[nm] = "HTTPS HTTP/1.1 p99 µs, c=1"; B[nm] = "lower"; F[nm] = "%.0f"
		M[++nm] = "h2_rps";     L[nm] = "h2 (TLS) requests/s, " h2; B[nm] = "higher"; F[nm] = "%.0f"
		M[++nm] = "h2c_rps";    L[nm] = "h2c requests/s, " h2; B[nm] = "higher"; F[nm] = "%.0f"
		M[++nm] = "handshakes"; L[nm] = "full TLS handshakes/s, one at a time"; B[nm] = "higher"; F[nm] = "%.0f"
		M[++nm] = "resumed";    L[nm] = "sessions resumed, of " resumes " reconnects"; B[nm] = "higher"; F[nm] = "%g/" resumes
		if (scen ~ / idle /) { M[++nm] = "idle_kb"; L[nm] = "KB per idle keep-alive connection (" idle " held)"; B[nm] = "lower"; F[nm] = "%.2f" }
		if (scen ~ / streams /) { M[++nm] = "stream_kb"; L[nm] = "KB per open event stream (" streams " held)"; B[nm] = "lower"; F[nm] = "%.2f" }
		# Ratios: every target but nginx against nginx, and fenec-entry against fenec-entry-b.
		np = 0
		for (k = 1; k <= nt; k++) if (T[k] != "nginx") { PA[++np] = T[k]; PB[np] = "nginx" }
		for (k = 1; k <= nt; k++) if (T[k] == "fenec-entry-b") { PA[++np] = "fenec-entry"; PB[np] = "fenec-entry-b" }
		for (i = 1; i <= nm; i++) for (p = 1; p <= np; p++) for (r in rounds) {
			m = M[i]; a = PA[p]; b = PB[p]
			if (((r, a, m) in v) && ((r, b, m) in v) && v[r, b, m] > 0) add("ratio " m " " a " " b, v[r, a, m] / v[r, b, m])
			if (((r, a, m) in c) && ((r, b, m) in c) && c[r, b, m] > 0) add("cpuratio " m " " a " " b, c[r, a, m] / c[r, b, m])
		}
		h = "| measurement | better |"; sep = "|---|---|"
		for (k = 1; k <= nt; k++) { h = h " " T[k] " | " T[k] " CPU µs |"; sep = sep "---|---|" }
		for (p = 1; p <= np; p++) { h = h " " PA[p] " / " PB[p] " | CPU " PA[p] " / " PB[p] " |"; sep = sep "---|---|" }
		print h; print sep
		for (i = 1; i <= nm; i++) {
			m = M[i]; line = "| " L[i] " | " B[i] " |"
			for (k = 1; k <= nt; k++) {
				t = T[k]
				cpu = ((t, m) in bad) ? "-" : stat("cpu " m " " t, "%.1f")
				line = line " " cell(m, T[k], F[i]) " | " ((cpu == "") ? "-" : cpu) " |"
			}
			for (p = 1; p <= np; p++) {
				s = stat("ratio " m " " PA[p] " " PB[p], "%.2f"); s2 = stat("cpuratio " m " " PA[p] " " PB[p], "%.2f")
				line = line " " ((s == "") ? "-" : s) " | " ((s2 == "") ? "-" : s2) " |"
			}
			print line
		}
	}'
}

# proto_busy: the server CPU's (or, unpinned, all CPUs') busy share during each load run, median.
proto_busy() {
	awk -F'\t' -v targets="$(IFS=,; echo "${TARGETS[*]}")" "$AWK_STATS"'
	$9 != "-" { x[$3, $2, ++n[$3, $2]] = $9; if (!($3 in seen)) { seen[$3] = 1; order[++nm] = $3 } }
	END {
		nt = split(targets, T, ",")
		for (i = 1; i <= nm; i++) {
			m = order[i]; s = ""
			for (k = 1; k <= nt; k++) {
				if (!((m, T[k]) in n)) continue
				delete a
				for (j = 1; j <= n[m, T[k]]; j++) a[j] = x[m, T[k], j]
				s = s sprintf("%s%s %.0f%%", (s == "") ? "" : ", ", T[k], med(a, n[m, T[k]]))
			}
			out = out sprintf("%s%s: %s", (out == "") ? "" : "; ", m, s)
		}
		print out
	}' "$PROWS"
}

protocols_main() {
	local r i t s n m order
	conns_limits
	((${#TARGETS[@]})) || die "no target left to measure"
	if has_target fenec-entry-b; then cp "$AB_BIN" "$TMP/bin/fenec-entry-b"; fi
	proto_cert
	: >"$TMP/broken.tsv"
	start_backends
	for t in "${TARGETS[@]}"; do
		if [[ $t == nginx ]]; then
			proto_nginx plain
			proto_nginx tls
		else
			proto_entry "$t" plain
			proto_entry "$t" tls
		fi
	done
	for t in "${TARGETS[@]}"; do proto_check "$t"; done

	open_out
	facts
	ver_wrk=$(wrk -v 2>&1 | awk 'NR == 1 { print $2 }' || true) # wrk -v exits 1
	ver_h2load=$(h2load --version 2>&1 | awk 'NR == 1 { print $2 }' || true)
	ver_openssl=$(openssl version 2>&1 | awk 'NR == 1 { print $2 }' || true)
	REPRO="bash bench/proxies.sh --mode protocols --rounds $ROUNDS --seconds $MEASURE_S --latency-slices $SLICES --warmup $WARMUP_S --idle-wait $IDLE_WAIT_S --conns $CONNS --h2-clients $H2_CLIENTS --h2-streams $H2_STREAMS --resumes $RESUMES --idle-conns $IDLE_CONNS --streams $STREAMS --settle $SETTLE_S --scenarios $SCENARIOS_ARG --pin $PIN${ENTRY_ENV[0]:+ --workers $WORKERS} --targets $TARGETS_ARG${ENTRY_BIN:+ --entry-bin $ENTRY_BIN}${AB_BIN:+ --ab-bin $AB_BIN}"
	{
		printf '{"kind":"meta","mode":"protocols","started":%s,"nproc":%d,"cpu":%s,"kernel":%s' \
			"$(json_str "$started")" "$NCPU" "$(json_str "$cpu_model")" "$(json_str "$(uname -r)")"
		printf ',"pin":%s,"client_cpus":%s,"server_cpus":%s,"workers":%d,"rounds":%d,"seconds":%d,"latency_slices":%d,"conns":%d,"h2_clients":%d,"h2_streams":%d,"resumes":%d' \
			"$(json_str "$PIN")" "$(json_str "$CLIENT_CPUS")" "$(json_str "$SERVER_CPUS")" "$WORKERS" \
			"$ROUNDS" "$MEASURE_S" "$SLICES" "$CONNS" "$H2_CLIENTS" "$H2_STREAMS" "$RESUMES"
		printf ',"scenarios":%s,"idle_conns":%d,"streams":%d,"settle_s":%d' \
			"$(json_str "$(IFS=,; echo "${SCENARIOS[*]}")")" "$IDLE_CONNS" "$STREAMS" "$SETTLE_S"
		printf ',"tls":{'
		s=""
		for t in "${TARGETS[@]}"; do
			printf '%s"%s":%s' "$s" "$t" "$(json_str "${TLS_INFO[$t]:-broken}")"
			s=,
		done
		printf '},"git":%s,"fenec_entry":%s,"nginx":%s,"wrk":%s,"h2load":%s,"openssl":%s,"go":%s,"targets":%s,"reproduce":%s}\n' \
			"$(json_str "$git_rev")" "$(json_str "$ver_entry")" "$(json_str "$ver_nginx")" \
			"$(json_str "$ver_wrk")" "$(json_str "$ver_h2load")" "$(json_str "$ver_openssl")" "$(json_str "$ver_go")" \
			"$(json_str "$(IFS=,; echo "${TARGETS[*]}")")" "$(json_str "$REPRO")"
	} >>"$OUT"

	PROWS=$TMP/protorows.tsv # round target metric value target-CPU-µs errors steal% other% server-busy%
	: >"$PROWS"
	ROWS=$TMP/rows.tsv # the conns mode's rows (conns_measure)
	: >"$ROWS"
	n=${#TARGETS[@]}
	echo "proxies.sh: --mode protocols: targets ${TARGETS[*]}; $ROUNDS rounds; about $((n * 4 * WARMUP_S + ROUNDS * (1 + n * (9 * MEASURE_S + 3) + n * ${#SCENARIOS[@]} * (SETTLE_S + 10))))s, more if it waits for quiet" >&2
	if ((WARMUP_S)); then
		for t in "${TARGETS[@]}"; do
			! proto_ok "$t" plain || wrk_run "${INST_PLAIN[$t]}" 2 "$CONNS" "$WARMUP_S" "${URL_PLAIN[$t]}"
			! proto_ok "$t" https || wrk_run "${INST_TLS[$t]}" 2 "$CONNS" "$WARMUP_S" "${URL_TLS[$t]}"
			! proto_ok "$t" h2 || client_run "${INST_TLS[$t]}" "$TMP/warmup.out" h2load -t"$H2LOAD_THREADS" \
				-c"$H2_CLIENTS" -m"$H2_STREAMS" -D "$WARMUP_S" "${URL_TLS[$t]}"
			! proto_ok "$t" h2c || client_run "${INST_PLAIN[$t]}" "$TMP/warmup.out" h2load -t"$H2LOAD_THREADS" \
				-c"$H2_CLIENTS" -m"$H2_STREAMS" -D "$WARMUP_S" "${URL_H2C[$t]}"
		done
	fi
	# Rounds as in the requests mode: every target once per measurement, the order rotated by
	# one each round; each measurement visits the targets in turn before the next starts, so
	# that what drifts within a round hits both sides of a ratio alike.
	for ((r = 1; r <= ROUNDS; r++)); do
		order=()
		for ((i = 0; i < n; i++)); do order+=("${TARGETS[$(((i + r - 1) % n))]}"); done
		wait_idle "$r"
		echo "proxies.sh: round $r/$ROUNDS: ${order[*]}" >&2
		proto_latency "$r" plain
		proto_latency "$r" https
		for m in plain https h2 h2c handshakes; do
			for ((i = 0; i < n; i++)); do
				t=${order[$i]}
				if [[ $m == handshakes ]]; then proto_ok "$t" tls10 || continue; else proto_ok "$t" "$m" || continue; fi
				proto_load "$r" "$((i + 1))" "$t" "$m"
			done
		done
		for ((i = 0; i < n; i++)); do
			t=${order[$i]}
			proto_ok "$t" tls10 || continue
			proto_resume "$r" "$((i + 1))" "$t"
		done
		for s in "${SCENARIOS[@]}"; do
			for ((i = 0; i < n; i++)); do conns_measure "$r" "$((i + 1))" "$s" "${order[$i]}"; done
		done
	done

	{
		echo "## fenec-entry vs nginx over every protocol a client speaks: GET $REQ_PATH on loopback"
		echo
		proto_table
		echo
		echo "Median over $ROUNDS interleaved rounds (min-max); each ratio is paired per round (this round's target over this round's nginx), then the median taken."
		echo "CPU µs: the target's CPU (user + system, every process of it) over the requests of the run; in the handshakes row, over the connections (a full handshake and one request each)."
		echo "p50/p99: wrk -t1 -c1 --latency, ${MEASURE_S}s in $SLICES slices taking turns with the other targets, merged; requests/s: wrk -t2 -c$CONNS, ${MEASURE_S}s; h2, h2c: h2load -t$H2LOAD_THREADS -c$H2_CLIENTS -m$H2_STREAMS -D $MEASURE_S;"
		echo "handshakes: openssl s_time -new -www $REQ_PATH -time $MEASURE_S (one connection at a time, each a full handshake and a GET); resumption: openssl s_client -sess_in (the last session saved) -sess_out, $RESUMES reconnects, \"Reused\" counted;"
		((${#SCENARIOS[@]} == 0)) || echo "memory: as --mode conns: (RSS after - before) / connections held, a fresh target each time (fenec-entry: every process of it; nginx: its worker), 1 KB = 1024 B."
		echo "⚠ N err: failed or non-2xx requests in those runs (raw file); BROKEN: the target failed that protocol's check by hand (below) and was not measured on it."
		echo
		echo "- server CPU busy during the load runs (median$([[ $PIN == split ]] && echo ", CPU $SERVER_CPUS" || echo ", all CPUs")): $(proto_busy)"
		awk -F'\t' -v max="$IDLE_MAX" "$AWK_STATS"'$8 != "-" { n++; v[n] = $8; if ($8 > worst) { worst = $8; at = "round " $1 ", " $2 ", " $3 } }
			END { if (!n) exit
				if (!worst) { print "- other processes during the runs: none measured"; exit }
				m = med(v, n)
				printf "- other processes during the runs: median %.0f%% of a CPU, worst %d%% (%s)%s\n", m, worst, at,
					(m > max) ? ": noisy, run again on a quiet machine" : (worst > max) ? ": distrust that run if it stands out in the raw file" : "" }' "$PROWS"
		awk -F'\t' -v max="$STEAL_MAX" "$AWK_STATS"'$7 != "-" { n++; v[n] = $7; if ($7 > worst) { worst = $7; at = "round " $1 ", " $2 ", " $3 } }
			END { if (!n) exit
				if (!worst) { print "- steal (the hypervisor running other guests): none measured"; exit }
				m = med(v, n)
				printf "- steal (the hypervisor running other guests): median %.0f%% of the CPU time, worst %d%% (%s)%s\n", m, worst, at,
					(worst > max) ? "; runs above " max "% are slowed by the host, not by the targets" : "" }' "$PROWS"
		for t in "${TARGETS[@]}"; do
			echo "- TLS, $t: ${TLS_INFO[$t]:-not checked (its TLS check failed)}; one self-signed ECDSA P-256 certificate for every target"
		done
		awk -F'\t' '{ split($3, p, ":"); if (!(($1, p[1]) in seen)) { seen[$1, p[1]] = 1; printf "- BROKEN: %s, %s\n", $1, $3 } }' "$TMP/broken.tsv"
		awk -F'\t' '{ c += $9 } END { if (c) printf "- WARNING: %d held connections were closed by the proxy before they were let go (raw: closed_during_hold)\n", c }' "$ROWS"
		echo "- machine: nproc $NCPU ($cpu_model), kernel $(uname -r), $started"
		echo "- versions: nginx $ver_nginx, wrk $ver_wrk, h2load $ver_h2load, OpenSSL $ver_openssl, go $ver_go; fenec-entry: $ver_entry; repo at $git_rev"
		if [[ $PIN == split ]]; then
			echo "- layout: wrk, h2load, openssl and connhold on CPU $CLIENT_CPUS; upstream$([[ " ${SCENARIOS[*]} " != *" streams "* ]] || echo ", stand-in") and targets on CPU $SERVER_CPUS; each target two processes (plain and h2c; TLS), $WORKERS nginx worker(s) each (memory rows: 1)$(entry_layouts)"
		else
			echo "- layout: nothing pinned; each target two processes (plain and h2c; TLS), $WORKERS nginx worker(s) each (memory rows: 1)$(entry_layouts)"
		fi
		echo "- raw: $OUT"
		echo "- reproduce: cd $ROOT && $REPRO"
	} >"$OUT_MD"
	echo
	cat "$OUT_MD"
	echo "(this report: $OUT_MD)"
}

if [[ $MODE == conns ]]; then
	conns_main
	exit 0
fi
if [[ $MODE == protocols ]]; then
	protocols_main
	exit 0
fi

# ---- start -------------------------------------------------------------------------------
port UP_PORT
start upstream "$SERVER_CPUS" "$TMP/bin/upstream" -listen "127.0.0.1:$UP_PORT"
wait_ready upstream "http://127.0.0.1:$UP_PORT$REQ_PATH"
declare -A URL=([direct]="http://127.0.0.1:$UP_PORT$REQ_PATH")

# nginx and haproxy do the header work the entry does on every request: add Fenec-Home: 1
# and an X-Request-Id on the way in, drop Fenec-Home on the way out.
if has_target nginx; then
	port NGINX_PORT
	nginx_conf "$TMP/nginx" "$UP_PORT" "    server {
        listen 127.0.0.1:$NGINX_PORT;
$(nginx_location)
    }" "$WORKERS"
	start nginx "$SERVER_CPUS" nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" \
		-c "$TMP/nginx/nginx.conf" -g 'daemon off;'
	URL[nginx]="http://127.0.0.1:$NGINX_PORT$REQ_PATH"
	wait_ready nginx "${URL[nginx]}"
fi

if has_target haproxy; then
	port HAPROXY_PORT
	cat >"$TMP/haproxy.cfg" <<EOF
global
    nbthread $WORKERS
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
frontend entry
    bind 127.0.0.1:$HAPROXY_PORT
    unique-id-format %{+X}o\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid
    http-request set-header Fenec-Home 1
    http-request set-header X-Request-Id %[unique-id]
    default_backend fenec_router
backend fenec_router
    http-response del-header Fenec-Home
    server r1 127.0.0.1:$UP_PORT
EOF
	start haproxy "$SERVER_CPUS" haproxy -db -f "$TMP/haproxy.cfg"
	URL[haproxy]="http://127.0.0.1:$HAPROXY_PORT$REQ_PATH"
	wait_ready haproxy "${URL[haproxy]}"
fi

# start_entry NAME: fenec-entry as target NAME, `fenec-entry serve` with no layout flag: this
# build runs one process (its Ps its own, or --workers); an older build given with --entry-bin
# or --ab-bin runs its own default, which may be a master and worker processes: those are its
# children, and proc_ticks and rss count them with it.
start_entry() {
	local name=$1 listen admin gossip rpc
	port listen
	port admin
	port gossip
	port rpc
	start "$name" "$SERVER_CPUS" env "${ENTRY_ENV[@]}" "$TMP/bin/$name" serve \
		--listen "127.0.0.1:$listen" --admin-listen "127.0.0.1:$admin" \
		--routers "eu=http://127.0.0.1:$UP_PORT" \
		--gossip-bind "127.0.0.1:$gossip" --rpc-addr "127.0.0.1:$rpc"
	URL[$name]="http://127.0.0.1:$listen$REQ_PATH"
	wait_ready "$name" "${URL[$name]}"
	count_kids "$name"
}
if has_target fenec-entry; then start_entry fenec-entry; fi
if has_target fenec-entry-b; then
	cp "$AB_BIN" "$TMP/bin/fenec-entry-b"
	start_entry fenec-entry-b
fi

for t in "${TARGETS[@]}"; do verify "$t" "${URL[$t]}"; done

open_out
facts
ver_wrk=$(wrk -v 2>&1 | awk 'NR == 1 { print $2 }' || true) # wrk -v exits 1
REPRO="bash bench/proxies.sh --rounds $ROUNDS --seconds $MEASURE_S --latency-slices $SLICES --warmup $WARMUP_S --idle-wait $IDLE_WAIT_S --conns $CONNS --pin $PIN${ENTRY_ENV[0]:+ --workers $WORKERS} --targets $TARGETS_ARG${ENTRY_BIN:+ --entry-bin $ENTRY_BIN}${AB_BIN:+ --ab-bin $AB_BIN}"
{
	printf '{"kind":"meta","started":%s,"nproc":%d,"cpu":%s,"kernel":%s' \
		"$(json_str "$started")" "$NCPU" "$(json_str "$cpu_model")" "$(json_str "$(uname -r)")"
	printf ',"pin":%s,"client_cpus":%s,"server_cpus":%s,"workers":%d,"rounds":%d,"seconds":%d,"latency_slices":%d,"conns":%d' \
		"$(json_str "$PIN")" "$(json_str "$CLIENT_CPUS")" "$(json_str "$SERVER_CPUS")" "$WORKERS" \
		"$ROUNDS" "$MEASURE_S" "$SLICES" "$CONNS"
	printf ',"git":%s,"fenec_entry":%s,"nginx":%s,"haproxy":%s,"wrk":%s,"go":%s,"targets":%s,"reproduce":%s}\n' \
		"$(json_str "$git_rev")" "$(json_str "$ver_entry")" "$(json_str "$ver_nginx")" \
		"$(json_str "$ver_haproxy")" "$(json_str "$ver_wrk")" "$(json_str "$ver_go")" \
		"$(json_str "$(IFS=,; echo "${TARGETS[*]}")")" "$(json_str "$REPRO")"
} >>"$OUT"

n=${#TARGETS[@]}
echo "proxies.sh: targets ${TARGETS[*]}; $ROUNDS rounds x $n targets x 2 runs x ${MEASURE_S}s (the latency run in $SLICES slices); about $((n * WARMUP_S + ROUNDS * (1 + n * 2 * MEASURE_S + n * SLICES / 4)))s, more if it waits for quiet" >&2
for t in "${TARGETS[@]}"; do
	((WARMUP_S == 0)) || wrk_run "$t" 2 "$CONNS" "$WARMUP_S" "${URL[$t]}"
done

# Rounds: each visits every target once, the order rotated by one each round so that no
# target always runs first or last. Before each round, the script waits (up to --idle-wait
# seconds) for other processes to leave the CPUs alone; during each run it measures what
# they took anyway (other_load), for the report.
ROWS=$TMP/rows.tsv # round target p50 p99 rps server-busy% client-busy% other-load%
: >"$ROWS"
STEALS=$TMP/steals.tsv # round target steal% (the larger of the two runs)
: >"$STEALS"
CPUS=$TMP/cpus.tsv # round target target-CPU/upstream-CPU in the load run
: >"$CPUS"
for ((r = 1; r <= ROUNDS; r++)); do
	order=()
	for ((i = 0; i < n; i++)); do order+=("${TARGETS[$(((i + r - 1) % n))]}"); done
	wait_idle "$r"
	echo "proxies.sh: round $r/$ROUNDS: ${order[*]}" >&2
	# The latency runs: --latency-slices slices per target, the targets taking turns (their
	# order rotated by one each slice too), each target's latencies merged over its slices.
	declare -A LREQ=() LERR=() LOTHER=() LSTEAL=()
	for t in "${TARGETS[@]}"; do
		: >"$TMP/hist.$t"
		LREQ[$t]=0 LERR[$t]=0 LOTHER[$t]=0 LSTEAL[$t]=0
	done
	for ((k = 0; k < SLICES; k++)); do
		for ((i = 0; i < n; i++)); do
			t=${order[$(((i + k) % n))]}
			latency_slice "$t" "$t" "${URL[$t]}" LREQ LERR LOTHER LSTEAL
		done
	done
	for ((i = 0; i < n; i++)); do
		t=${order[$i]}
		read -r p50 p99 < <(hist_pct "$TMP/hist.$t")
		lreq=${LREQ[$t]} lerr=${LERR[$t]} lother=${LOTHER[$t]} lsteal=${LSTEAL[$t]}
		# The target's CPU and the upstream's during the load run: the target's CPU a request
		# against the upstream's, measured in the same seconds on the same CPUs, is not moved
		# by the host's speed (steal), which moves both alike.
		cpu_t0=$(proc_ticks "$t") cpu_u0=$(proc_ticks upstream)
		wrk_run "$t" 2 "$CONNS" "$MEASURE_S" "${URL[$t]}"
		cpu_t=$(($(proc_ticks "$t") - cpu_t0)) cpu_u=$(($(proc_ticks upstream) - cpu_u0))
		[[ $t != fenec-entry* ]] || count_kids "$t"
		cpu_vs_up=$(awk -v a="$cpu_t" -v b="$cpu_u" -v t="$t" 'BEGIN { if (b > 0 && t != "direct") printf "%.3f", a / b; else print "null" }')
		# Each process's CPU µs a request in that run: wrk's, the upstream's, the target's.
		us_req=$(awk -v w="$R_CLIENT_TICKS" -v u="$cpu_u" -v a="$cpu_t" -v n="$R_REQUESTS" -v hz="$CLK_TCK" \
			'BEGIN { k = (n > 0) ? 1e6 / hz / n : 0; printf "%.2f\t%.2f\t%.2f", w * k, u * k, a * k }')
		printf '%d\t%s\t%s\t%s\n' "$r" "$t" "$cpu_vs_up" "$us_req" >>"$CPUS"
		# shellcheck disable=SC2086 # $us_req is three fields
		printf '{"kind":"round","round":%d,"position":%d,"target":"%s","p50_us":%d,"p99_us":%d,"latency_requests":%d,"latency_errors":%d,"latency_other_load_pct":%d,"rps":%s,"load_p50_us":%d,"load_p99_us":%d,"load_requests":%d,"load_errors":%d,"load_cpu_busy_pct":[%s],"load_other_load_pct":%d,"latency_steal_pct":%d,"load_steal_pct":%d,"load_cpu_vs_upstream":%s,"load_cpu_us_per_request":{"wrk":%s,"upstream":%s,"target":%s}}\n' \
			"$r" "$((i + 1))" "$t" "$p50" "$p99" "$lreq" "$lerr" "$lother" "$R_RPS" "$R_P50_US" "$R_P99_US" \
			"$R_REQUESTS" "$((R_SOCKET_ERRORS + R_NON_2XX))" "$R_BUSY" "$R_OTHER" "$lsteal" "$R_STEAL" "$cpu_vs_up" \
			$us_req >>"$OUT"
		printf '%d\t%s\t%d\n' "$r" "$t" "$((lsteal > R_STEAL ? lsteal : R_STEAL))" >>"$STEALS"
		printf '%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n' "$r" "$t" "$p50" "$p99" "$R_RPS" \
			"$(pick_busy "$R_BUSY" server)" "$(pick_busy "$R_BUSY" client)" "$((lother > R_OTHER ? lother : R_OTHER))" >>"$ROWS"
		((lother <= IDLE_MAX && R_OTHER <= IDLE_MAX)) ||
			echo "proxies.sh: warning: round $r, $t: other processes took ${lother}% / ${R_OTHER}% of a CPU (latency / load run)" >&2
		((lsteal <= STEAL_MAX && R_STEAL <= STEAL_MAX)) ||
			echo "proxies.sh: warning: round $r, $t: the hypervisor took ${lsteal}% / ${R_STEAL}% of the CPU time (steal; latency / load run): other guests on this host" >&2
	done
done

# ---- report ------------------------------------------------------------------------------
# Figures are the median over rounds (min-max). Added p50 and the ratios are paired within
# a round (each round's target against the same round's direct and nginx), then the median
# is taken: drift that hits a whole round cancels out. Exit status 3 from the awk: the floor
# was missed.
table() {
	awk -F'\t' -v targets="$(IFS=,; echo "${TARGETS[*]}")" -v conns="$CONNS" -v pin="$PIN" -v idlemax="$IDLE_MAX" -v none=n/a "$AWK_STATS"'
	function median(key,   a, i) { for (i = 1; i <= cnt[key]; i++) a[i] = vals[key, i]; return cnt[key] ? med(a, cnt[key]) : "" }
	{ p50[$1, $2] = $3; p99[$1, $2] = $4; rps[$1, $2] = $5; srv[$1, $2] = $6; cli[$1, $2] = $7
	  add("other", $8); if ($8 > othermax) { othermax = $8; otherat = "round " $1 ", " $2 }
	  rounds[$1] = 1; seen[$2] = 1 }
	END {
		nt = split(targets, T, ",")
		for (r in rounds) for (k = 1; k <= nt; k++) {
			t = T[k]
			if (!((r, t) in p50)) continue
			add("p50 " t, p50[r, t]); add("p99 " t, p99[r, t]); add("rps " t, rps[r, t])
			add("srv " t, srv[r, t]); add("cli " t, cli[r, t])
			if ((r, "direct") in p50) {
				a = p50[r, t] - p50[r, "direct"]; add("added " t, a)
				an = p50[r, "nginx"] - p50[r, "direct"]
				if (((r, "nginx") in p50) && an > 0 && t != "direct") add("addratio " t, a / an)
			}
			if (((r, "nginx") in rps) && rps[r, "nginx"] > 0) add("rpsratio " t, rps[r, t] / rps[r, "nginx"])
		}
		print "| target | p50 µs | p99 µs | added p50 µs | rps c=" conns " | added-p50 ratio vs nginx | rps ratio vs nginx |"
		print "|---|---|---|---|---|---|---|"
		for (k = 1; k <= nt; k++) {
			t = T[k]
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", t, stat("p50 " t, "%.0f"), stat("p99 " t, "%.0f"),
				t == "direct" ? "0" : stat("added " t, "%.0f"), stat("rps " t, "%.0f"),
				t == "direct" ? "-" : stat("addratio " t, "%.2f"), stat("rpsratio " t, "%.2f")
		}
		srvline = ""; cliline = ""
		for (k = 1; k <= nt; k++) {
			srvline = srvline sprintf("%s%s %.0f%%", (k > 1) ? ", " : "", T[k], median("srv " T[k]))
			cliline = cliline sprintf("%s%s %.0f%%", (k > 1) ? ", " : "", T[k], median("cli " T[k]))
		}
		print ""
		if (pin == "split") {
			print "CPU busy during the c=" conns " runs (median), server CPU: " srvline "; wrk CPU: " cliline
		} else {
			print "CPU busy during the c=" conns " runs (median), all CPUs: " srvline
		}
		om = median("other")
		verdict = ""
		if (om > idlemax) verdict = ": noisy, run again on a quiet machine"
		else if (othermax > idlemax) verdict = ": distrust that round if it stands out in the raw file"
		if (othermax > 0) printf "other processes during the runs: median %.0f%% of a CPU, worst %d%% (%s)%s\n", om, othermax, otherat, verdict
		else print "other processes during the runs: none measured"
		rc = 0
		if (("fenec-entry" in seen) && ("nginx" in seen) && ("direct" in seen)) {
			ar = median("addratio fenec-entry"); rr = median("rpsratio fenec-entry")
			okA = ar != "" && ar <= 1.1; okR = rr != "" && rr >= 0.9
			printf "\nfloor: fenec-entry added p50 %.3fx nginx (want <= 1.1): %s; requests/s %.3fx nginx (want >= 0.9): %s\n",
				ar, okA ? "ok" : "MISSED", rr, okR ? "ok" : "MISSED"
			if (!(okA && okR)) rc = 3
		}
		exit rc
	}' "$ROWS"
}

# clean_ratios: the ratios against nginx (and fenec-entry against fenec-entry-b), paired per
# round, over only the rounds in which neither run of the pair had more than STEAL_MAX% steal:
# on a shared host, the rounds the host did not disturb.
clean_ratios() {
	paste "$ROWS" "$STEALS" | awk -F'\t' -v max="$STEAL_MAX" "$AWK_STATS"'
	{ p50[$1, $2] = $3; p99[$1, $2] = $4; rps[$1, $2] = $5; st[$1, $2] = $11; if ($1 > rounds) rounds = $1
	  if (!($2 in have)) { have[$2] = 1; order[++nt] = $2 } }
	function pair(a, b,   r, n, x, y, z, i) {
		n = 0
		for (r = 1; r <= rounds; r++) {
			if (!((r, a) in rps) || !((r, b) in rps) || st[r, a] > max || st[r, b] > max || rps[r, b] <= 0 || p50[r, b] <= 0 || p99[r, b] <= 0) continue
			n++; x[n] = rps[r, a] / rps[r, b]; y[n] = p50[r, a] / p50[r, b]; z[n] = p99[r, a] / p99[r, b]
		}
		if (n == 0) { printf "| %s / %s | 0 of %d | - | - | - |\n", a, b, rounds; return }
		printf "| %s / %s | %d of %d | %.2f | %.2f | %.2f |\n", a, b, n, rounds, med(x, n), med(y, n), med(z, n)
	}
	END {
		print ""
		print "Paired per round over the rounds with at most " max "% steal in both runs (ratios of requests/s at c=32, p50 and p99 at c=1):"
		print ""
		print "| pair | rounds | requests/s | p50 | p99 |"
		print "|---|---|---|---|---|"
		for (i = 1; i <= nt; i++) if (order[i] != "nginx" && order[i] != "direct" && ("nginx" in have)) pair(order[i], "nginx")
		if (("fenec-entry" in have) && ("fenec-entry-b" in have)) pair("fenec-entry", "fenec-entry-b")
	}'
}

# cpu_ratios: each target's CPU a request against the upstream's in the same c=32 run, and
# (pinned, where proxy and upstream share the server CPU and keep it busy) the requests/s
# against nginx's that those costs give: (1 + nginx's) / (1 + the target's), per round.
cpu_ratios() {
	awk -F'\t' -v targets="$(IFS=,; echo "${TARGETS[*]}")" -v pin="$PIN" "$AWK_STATS"'
	function astat(x, n) { return n == 0 ? "-" : (n == 1 ? sprintf("%.2f", x[1]) : sprintf("%.2f (%.2f-%.2f)", med(x, n), x[1], x[n])) }
	function astat1(x, n) { return n == 1 ? sprintf("%.1f", x[1]) : sprintf("%.1f (%.1f-%.1f)", med(x, n), x[1], x[n]) }
	{ if ($1 > rounds) rounds = $1 }
	NF >= 6 { cw[$1, $2] = $4; cu[$1, $2] = $5; ca[$1, $2] = $6 }
	$3 != "null" { c[$1, $2] = $3 }
	END {
		nt = split(targets, T, ",")
		print ""
		print "CPU a request against the upstream'"'"'s, both measured in the same c=32 run (the host'"'"'s speed moves both alike)" \
			(pin == "split" ? ", and the requests/s against nginx'"'"'s that these costs give on the shared server CPU, (1 + nginx) / (1 + target), paired per round:" : ":")
		print ""
		print (pin == "split") ? "| target | CPU vs upstream | requests/s vs nginx at equal host speed |" : "| target | CPU vs upstream |"
		print (pin == "split") ? "|---|---|---|" : "|---|---|"
		for (k = 1; k <= nt; k++) {
			t = T[k]
			if (t == "direct") continue
			n = 0; m = 0; delete x; delete y
			for (r = 1; r <= rounds; r++) {
				if (!((r, t) in c)) continue
				x[++n] = c[r, t]
				if (((r, "nginx") in c) && c[r, t] > -1) y[++m] = (1 + c[r, "nginx"]) / (1 + c[r, t])
			}
			if (pin == "split") printf "| %s | %s | %s |\n", t, astat(x, n), astat(y, m)
			else printf "| %s | %s |\n", t, astat(x, n)
		}
		# Where the CPU of a request goes, process by process: a target that costs wrk or the
		# upstream more (smaller batches, more wake-ups) is slower for it on shared CPUs.
		print ""
		print "CPU µs a request in the c=32 run, by process (a host-speed change moves them all), and all three against nginx'"'"'s run, paired per round:"
		print ""
		print "| target | wrk | upstream | target | all | all vs nginx |"
		print "|---|---|---|---|---|---|"
		for (k = 1; k <= nt; k++) {
			t = T[k]
			n = 0; delete w; delete u; delete a; delete s; delete y; m = 0
			for (r = 1; r <= rounds; r++) {
				if (!((r, t) in cw)) continue
				n++; w[n] = cw[r, t]; u[n] = cu[r, t]; a[n] = ca[r, t]; s[n] = w[n] + u[n] + a[n]
				if (((r, "nginx") in cw) && cw[r, "nginx"] + cu[r, "nginx"] + ca[r, "nginx"] > 0)
					y[++m] = s[n] / (cw[r, "nginx"] + cu[r, "nginx"] + ca[r, "nginx"])
			}
			if (n) printf "| %s | %s | %s | %s | %s | %s |\n", t, astat1(w, n), astat1(u, n), astat1(a, n), astat1(s, n), astat(y, m)
		}
	}' "$CPUS"
}

set +e
(
	echo "## fenec-entry vs nginx vs haproxy: GET $REQ_PATH on loopback"
	echo
	table
	table_rc=$?
	clean_ratios
	cpu_ratios
	echo
	echo "Median over $ROUNDS interleaved rounds (min-max); added p50 and the ratios are paired per round."
	echo "p50/p99: wrk -t1 -c1 --latency, ${MEASURE_S}s in $SLICES slices taking turns with the other targets, merged; rps: wrk -t2 -c$CONNS, ${MEASURE_S}s."
	echo
	echo "- machine: nproc $NCPU ($cpu_model), kernel $(uname -r), $started"
	awk -F'\t' -v max="$STEAL_MAX" '{ n++; v[n] = $3; if ($3 > worst) { worst = $3; at = "round " $1 ", " $2 } }
		END { if (!n) exit
			for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
			m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			printf "- steal (the hypervisor running other guests): median %.0f%% of the CPU time, worst %d%% (%s)%s\n", m, worst, at,
				(worst > max) ? "; runs above " max "% are slowed by the host, not by the targets" : "" }' "$STEALS"
	echo "- versions: nginx $ver_nginx, haproxy $ver_haproxy, wrk $ver_wrk, go $ver_go; fenec-entry: $ver_entry; repo at $git_rev"
	if [[ $PIN == split ]]; then
		echo "- layout: wrk on CPU $CLIENT_CPUS; upstream and proxy on CPU $SERVER_CPUS; $WORKERS nginx worker(s), haproxy thread(s)$(entry_layouts)"
	else
		echo "- layout: nothing pinned; $WORKERS nginx worker(s), haproxy thread(s)$(entry_layouts)"
	fi
	has_target fenec-entry || echo "- fenec-entry was not measured: ./cmd/fenec-entry does not build yet"
	echo "- raw: $OUT"
	echo "- reproduce: cd $ROOT && $REPRO"
	exit "$table_rc"
) >"$OUT_MD"
report_rc=$?
set -e
echo
cat "$OUT_MD"
echo "(this report: $OUT_MD)"
if ((report_rc == 3)); then
	((CHECK == 0)) || exit 1
elif ((report_rc != 0)); then
	die "the report failed (status $report_rc)"
fi
