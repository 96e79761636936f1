#!/usr/bin/env bash
# bench/storm.sh: the requests fenec-entry and nginx answer and LOSE in a storm, each in front
# of the same bench/upstream on loopback: new connections by the million, keep-alive,
# pipelining, slow clients, more connections than the open-file limit, a graceful stop and an
# upgrade in place under load. One table; bench/README.md ("Storm") says what each row does.
#
#   bash bench/storm.sh [flags]     (flags: bash bench/storm.sh --help)
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bash bench/storm.sh [flags]

  --rows LIST      comma list of rows, by number or name (default all):
                   1 new, 2 keepalive, 3 pipelined, 4 slow, 5 nofile, 6 sigterm, 7 upgrade
  --targets LIST   comma list from nginx,fenec-entry (default both)
  --entry-bin PATH measure this fenec-entry binary instead of building ./cmd/fenec-entry
  --quick          a short run (about 2 minutes), for smoke tests: 3-second runs, one round of
                   row 1, 50 slow clients, row 5 at --nofile 2000 --hold 2100
  --new-conns N    row 1: rounds until fenec-entry has made N requests (default 2000000)
  --nofile N       row 5: the targets' open-file limit (default 20000)
  --hold N         row 5: idle keep-alive connections held (default 21000)
  --out FILE       raw results, JSON lines (default bench/out/storm-<UTC time>.jsonl); the
                   table goes beside it as .md
  --keep           keep the temp dir (configs, logs, every tool's output) and print its path
EOF
}
die() {
	echo "storm.sh: $*" >&2
	exit 1
}
say() { echo "storm.sh: $*" >&2; }

ROWS_ARG=all TARGETS_ARG=nginx,fenec-entry ENTRY_BIN="" QUICK=0 KEEP=0 OUT=""
NEW_CONNS="" NOFILE="" HOLD=""
while (($#)); do
	case $1 in
	--rows) ROWS_ARG=${2:?--rows needs a value}; shift 2 ;;
	--targets) TARGETS_ARG=${2:?--targets needs a value}; shift 2 ;;
	--entry-bin) ENTRY_BIN=${2:?--entry-bin needs a value}; shift 2 ;;
	--quick) QUICK=1; shift ;;
	--new-conns) NEW_CONNS=${2:?--new-conns needs a value}; shift 2 ;;
	--nofile) NOFILE=${2:?--nofile needs a value}; shift 2 ;;
	--hold) HOLD=${2:?--hold needs a value}; shift 2 ;;
	--out) OUT=${2:?--out needs a value}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done

# The lengths of everything, default and --quick.
CONNS=64       # wrk's connections, rows 1-4
PIPELINE=16    # row 3: requests per write
SIGNAL_CLIENTS=16 # rows 6-7: clients of each load (new connections, keep-alive)
DRAIN=5s       # fenec-entry's --drain
if ((QUICK)); then
	ROUND_S=3 RUN_S=3 SLOW_CLIENTS=50 SLOW_S=5
	NEW_CONNS=${NEW_CONNS:-1} NOFILE=${NOFILE:-2000} HOLD=${HOLD:-2100}
else
	ROUND_S=30 RUN_S=10 SLOW_CLIENTS=200 SLOW_S=15
	NEW_CONNS=${NEW_CONNS:-2000000} NOFILE=${NOFILE:-20000} HOLD=${HOLD:-21000}
fi
[[ $NEW_CONNS =~ ^[0-9]+$ ]] || die "--new-conns: want a number, got '$NEW_CONNS'"
if ! [[ $NOFILE =~ ^[0-9]+$ ]] || ((NOFILE < 256)); then die "--nofile: want a number >= 256, got '$NOFILE'"; fi
if ! [[ $HOLD =~ ^[0-9]+$ ]] || ((HOLD < 1 || HOLD > 200000)); then die "--hold: want 1..200000, got '$HOLD'"; fi

declare -a ROWS=() TARGETS=()
[[ $ROWS_ARG != all ]] || ROWS_ARG=1,2,3,4,5,6,7
IFS=, read -r -a _rows <<<"$ROWS_ARG"
for r in "${_rows[@]}"; do
	case $r in
	1 | new) ROWS+=(1) ;; 2 | keepalive) ROWS+=(2) ;; 3 | pipelined) ROWS+=(3) ;; 4 | slow) ROWS+=(4) ;;
	5 | nofile) ROWS+=(5) ;; 6 | sigterm) ROWS+=(6) ;; 7 | upgrade) ROWS+=(7) ;;
	*) die "--rows: want a comma list from 1-7 or new,keepalive,pipelined,slow,nofile,sigterm,upgrade, got '$r'" ;;
	esac
done
IFS=, read -r -a _targets <<<"$TARGETS_ARG"
for t in "${_targets[@]}"; do
	case $t in nginx | fenec-entry) TARGETS+=("$t") ;; *) die "--targets: want nginx and/or fenec-entry, got '$t'" ;; esac
done
((${#ROWS[@]} && ${#TARGETS[@]})) || die "--rows and --targets: want at least one each"
has_row() { [[ " ${ROWS[*]} " == *" $1 "* ]]; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
source bench/lib.sh
REQ_PATH=/t/acme/items/1

# ---- tools, limits, builds ----------------------------------------------------------------
PATH=$PATH:/usr/sbin:/sbin
command -v go >/dev/null || die "go is missing (the toolchain that builds the upstream, connhold and fenec-entry)"
for tool in wrk curl openssl ss prlimit; do
	command -v "$tool" >/dev/null && continue
	case $tool in ss) apt_install iproute2 ;; prlimit) apt_install util-linux ;; *) apt_install "$tool" ;; esac
done
if [[ " ${TARGETS[*]} " == *" nginx "* ]] && ! command -v nginx >/dev/null; then apt_install nginx-light || apt_install nginx; fi
# By its full path: nginx starts its new binary from argv[0] at an upgrade (row 7).
NGINX=$(command -v nginx || true)

# The targets run with the open-file limit found here (rows 1-4, 6, 7) or --nofile (row 5); this
# shell and the clients it starts with more, when it may be raised (the hard limit: root with
# CAP_SYS_RESOURCE). Row 5's connections are held by as many connhold processes as that
# limit needs, each holding at most the limit less 1000.
TARGET_NOFILE=$(ulimit -Sn)
[[ $TARGET_NOFILE != unlimited ]] || TARGET_NOFILE=1048576
CLIENT_NOFILE=$((HOLD + 20000 > 65536 ? HOLD + 20000 : 65536))
if ! ulimit -n "$CLIENT_NOFILE" 2>/dev/null; then
	[[ $(ulimit -Hn) == unlimited ]] || ((CLIENT_NOFILE < $(ulimit -Hn))) || CLIENT_NOFILE=$(ulimit -Hn)
	ulimit -Sn "$CLIENT_NOFILE"
fi
((CLIENT_NOFILE >= 4096)) || die "this shell's open-file limit is $CLIENT_NOFILE: the clients need 4096 or more"
HOLDERS=$(((HOLD + CLIENT_NOFILE - 1001) / (CLIENT_NOFILE - 1000)))
read -r PORT_LO PORT_HI </proc/sys/net/ipv4/ip_local_port_range
# Row 5's client connections come from 127.0.0.1, .2, ...: no source address gives more than
# half of the ephemeral ports to one target port.
SOURCES=$(((HOLD + 100) / ((PORT_HI - PORT_LO + 1) / 2) + 1))
! has_row 5 || [[ $(ulimit -Hn) == unlimited ]] || ((NOFILE <= $(ulimit -Hn))) ||
	die "--nofile $NOFILE: above the hard open-file limit ($(ulimit -Hn)), which prlimit cannot raise here"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fenec-storm.XXXXXX")
declare -A PIDS=()
bench_traps
mkdir -p "$TMP/bin"
say "building bench/upstream, bench/connhold$([[ -n $ENTRY_BIN ]] || echo ' and cmd/fenec-entry')"
go build -trimpath -o "$TMP/bin/upstream" ./bench/upstream
go build -trimpath -o "$TMP/bin/connhold" ./bench/connhold
if [[ -n $ENTRY_BIN ]]; then
	[[ -x $ENTRY_BIN ]] || die "--entry-bin: $ENTRY_BIN is not an executable file"
	cp "$ENTRY_BIN" "$TMP/bin/fenec-entry" # a copy: row 7 upgrades it in place, from its own path
elif [[ " ${TARGETS[*]} " == *" fenec-entry "* ]]; then
	go build -trimpath -ldflags "-s -w -X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo dev) -X main.commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
		-o "$TMP/bin/fenec-entry" ./cmd/fenec-entry
fi
bench_cert "$TMP/tls"
wrk_report_lua "$TMP/report.lua"
{
	# Row 3: PIPELINE requests in one write; wrk counts each answer.
	echo "init = function(args) local r = {} for i = 1, $PIPELINE do r[i] = wrk.format() end req = table.concat(r) end"
	echo 'request = function() return req end'
	cat "$TMP/report.lua"
} >"$TMP/pipeline.lua"

NEXT_PORT=${BENCH_BASE_PORT:-18500}
start() { # start NAME cmd...: in the background, its output in $TMP/NAME.log
	local name=$1
	shift
	(exec "$@") >"$TMP/$name.log" 2>&1 </dev/null &
	PIDS[$name]=$!
}
free_port UP_PORT
start upstream "$TMP/bin/upstream" -listen "127.0.0.1:$UP_PORT"
wait_ok "http://127.0.0.1:$UP_PORT$REQ_PATH"

# ---- targets ------------------------------------------------------------------------------
# up TARGET KIND [NOFILE [WORKERS [DAEMON]]]: starts TARGET (nginx, fenec-entry) afresh, KIND
# plain or tls, its open-file limit NOFILE, nginx with WORKERS workers (default: one a CPU),
# daemonized when DAEMON is 1 (its binary upgrade needs that). Sets T_NAME, T_PID, T_ADDR,
# T_URL, T_CURL (curl's flags for it), T_LOG, T_DIR.
N_UP=0
up() {
	local t=$1 kind=$2 nofile=${3:-$TARGET_NOFILE} workers=${4:-$(nproc)} daemon=${5:-0} port admin gossip rpc tls=() listen i
	((++N_UP))
	T_NAME=$t-$N_UP T_DIR=$TMP/$t-$N_UP T_CURL=()
	mkdir -p "$T_DIR"
	free_port port
	T_ADDR=127.0.0.1:$port
	if [[ $kind == tls ]]; then T_URL=https://$T_ADDR$REQ_PATH T_CURL=(-k); else T_URL=http://$T_ADDR$REQ_PATH; fi
	if [[ $t == nginx ]]; then
		listen="listen $T_ADDR$([[ $kind == plain ]] || echo ' ssl');"
		# worker_connections above the open-file limit, so that the limit is what binds (row
		# 5), by 1/32 of it: nginx closes idle keep-alive connections to take new ones
		# ("reusing connections") once fewer than 1/16 of worker_connections are free, which
		# is then below the limit. No worker_rlimit_nofile, which would raise the limit. An
		# idle keep-alive connection is kept 300 s (75 s by default), longer than row 5 holds them.
		nginx_conf "$T_DIR" "$UP_PORT" "$([[ $kind == plain ]] || nginx_tls "$CERT" "$KEY")
    server {
        $listen
$(nginx_location '')
    }" "$workers" "$((nofile + nofile / 32))" "" "    keepalive_timeout 300s;
"
		T_LOG=$T_DIR/error.log
		if ((daemon)); then
			prlimit --nofile="$nofile:$nofile" "$NGINX" -p "$T_DIR" -c "$T_DIR/nginx.conf" -e "$T_LOG" >"$TMP/$T_NAME.log" 2>&1 ||
				{ cat "$TMP/$T_NAME.log" >&2; die "$T_NAME did not start"; }
			for ((i = 0; i < 100; i++)); do [[ ! -s $T_DIR/nginx.pid ]] || break; sleep 0.05; done # the daemon writes it
			T_PID=$(cat "$T_DIR/nginx.pid") || die "$T_NAME wrote no pid file"
			PIDS[$T_NAME]=$T_PID
		else
			start "$T_NAME" prlimit --nofile="$nofile:$nofile" "$NGINX" -p "$T_DIR" -c "$T_DIR/nginx.conf" -e "$T_LOG" -g 'daemon off;'
			T_PID=${PIDS[$T_NAME]}
		fi
	else
		free_port admin
		free_port gossip
		free_port rpc
		[[ $kind == plain ]] || tls=(--tls-cert "$CERT" --tls-key "$KEY")
		start "$T_NAME" prlimit --nofile="$nofile:$nofile" "$TMP/bin/fenec-entry" serve \
			--listen "$T_ADDR" --admin-listen "127.0.0.1:$admin" --routers "eu=http://127.0.0.1:$UP_PORT" \
			--gossip-bind "127.0.0.1:$gossip" --rpc-addr "127.0.0.1:$rpc" --drain "$DRAIN" \
			--pid-file "$T_DIR/entry.pid" "${tls[@]}"
		T_PID=${PIDS[$T_NAME]} T_LOG=$TMP/$T_NAME.log
	fi
	wait_ok "$T_URL" "${T_CURL[@]}"
}
down() { # down: stops the target up started last (and its workers with it)
	bench_stop "$T_PID"
	unset "PIDS[$T_NAME]"
}
# gone PID S: waits up to S seconds for PID to exit; sets GONE_MS, the time it took (-1: it did not)
gone() {
	local t0=${EPOCHREALTIME/./} end=$((SECONDS + $2))
	while bench_alive "$1"; do
		((SECONDS < end)) || { GONE_MS=-1; return 1; }
		sleep 0.02
	done
	GONE_MS=$(((${EPOCHREALTIME/./} - t0) / 1000))
}

# ---- results ------------------------------------------------------------------------------
# One result is a TSV line of $TMP/rows.tsv and a JSON line of OUT: row title, target,
# requests, answered 2xx, non-2xx (count, "status=n,..."), LOST (count, "kind=n,..."), dials
# that did not connect (count, "kind=n,..."), note. "kind=n" lists are summed over rounds.
ROWS_TSV=$TMP/rows.tsv
: >"$ROWS_TSV"
list_sum() { # list_sum "k=v,...": the sum of the v
	local s=0 kv kvs
	IFS=, read -r -a kvs <<<"$1"
	for kv in "${kvs[@]}"; do [[ -z $kv ]] || s=$((s + ${kv#*=})); done
	echo "$s"
}
list_json() { # list_json "k=v,...": {"k":v,...}
	local out="" kv kvs
	IFS=, read -r -a kvs <<<"$1"
	for kv in "${kvs[@]}"; do [[ -z $kv ]] || out+="${out:+,}\"${kv%%=*}\":${kv#*=}"; done
	echo "{$out}"
}
# record ROW TITLE TARGET ANSWERED_2XX NON2XX_LIST LOST_LIST NOTCONN_LIST NOTE [RAW_JSON]
record() {
	local row=$1 title=$2 t=$3 ok=$4 non=$5 lost=$6 nc=$7 note=$8 raw=${9:-null} n_non n_lost n_nc idle
	n_non=$(list_sum "$non") n_lost=$(list_sum "$lost") n_nc=$(list_sum "$nc") idle=$(jnum "$raw" closed_idle)
	printf '%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%d\n' "$row" "$title" "$t" "$((ok + n_non + n_lost))" "$ok" \
		"$n_non" "$non" "$n_lost" "$lost" "$n_nc" "$nc" "$note" "$idle" >>"$ROWS_TSV"
	printf '{"kind":"storm","row":%s,"title":%s,"target":"%s","requests":%d,"answered_2xx":%d,"non_2xx":%d,"non_2xx_by_status":%s,"lost":%d,"lost_by_kind":%s,"not_connected":%d,"not_connected_by_kind":%s,"note":%s,"raw":%s}\n' \
		"$(json_str "$row")" "$(json_str "$title")" "$t" "$((ok + n_non + n_lost))" "$ok" "$n_non" "$(list_json "$non")" \
		"$n_lost" "$(list_json "$lost")" "$n_nc" "$(list_json "$nc")" "$(json_str "$note")" "$raw" >>"$OUT"
	if ((n_lost)); then say "  $t: $((ok + n_non + n_lost)) requests, $n_lost LOST ($lost)"; else say "  $t: $((ok + n_non + n_lost)) requests, none lost"; fi
}

# wrk_start NAME SECS LUA [ARGS...]: wrk on T_URL in the background (W_PID), its output in W_OUT.
wrk_start() {
	local name=$1 secs=$2 lua=$3
	shift 3
	W_OUT=$TMP/wrk.$name.$((++N_UP)).out
	wrk -t2 -c"$CONNS" -d"${secs}s" --timeout 5s -s "$lua" "$@" "$T_URL" >"$W_OUT" 2>&1 &
	W_PID=$!
	PIDS[wrk]=$W_PID
}
# wrk_end: waits for it and reads its BENCH line: sets W_OK, W_NON, W_LOST, W_NC (record's
# lists) and W_RAW (the line as JSON). wrk's kinds: read (the connection ended or was reset
# before the whole answer), write (the request could not be written), timeout (an answer
# slower than 5 s, counted again every 2 s while it waits: an upper bound), connect (a dial
# that failed; wrk does not tell refused from the rest).
wrk_end() {
	local line kv
	local -A w=()
	wait "$W_PID" || { cat "$W_OUT" >&2; die "wrk failed"; }
	unset "PIDS[wrk]"
	line=$(grep '^BENCH ' "$W_OUT") || { cat "$W_OUT" >&2; die "wrk printed no BENCH line"; }
	W_RAW=""
	for kv in ${line#BENCH }; do
		w[${kv%%=*}]=${kv#*=}
		W_RAW+=",\"${kv%%=*}\":${kv#*=}"
	done
	W_RAW="{\"tool\":\"wrk\"$W_RAW}"
	W_OK=$((w[requests] - w[non_2xx])) W_NON="" W_LOST="" W_NC=""
	((w[non_2xx] == 0)) || W_NON="non-2xx=${w[non_2xx]}"
	for kv in read write timeout; do ((w[${kv}_errors] == 0)) || W_LOST+="${W_LOST:+,}$kv=${w[${kv}_errors]}"; done
	((w[connect_errors] == 0)) || W_NC="connect=${w[connect_errors]}"
}
wrk_row() { # wrk_row ROW TITLE TARGET SECS LUA [ARGS...]: one wrk run, recorded
	local row=$1 title=$2 t=$3
	shift 3
	wrk_start "$t" "$@"
	wrk_end
	record "$row" "$title" "$t" "$W_OK" "$W_NON" "$W_LOST" "$W_NC" "" "$W_RAW"
}

# connhold's JSON lines, read without jq: jnum LINE KEY, the number at the first "KEY":;
# jmap LINE KEY, the flat object at the first "KEY": as k=v,...
jnum() {
	local re="\"$2\":(-?[0-9]+)"
	if [[ $1 =~ $re ]]; then echo "${BASH_REMATCH[1]}"; else echo 0; fi
}
jmap() {
	local re="\"$2\":\{([^}]*)\}" s
	[[ $1 =~ $re ]] || return 0
	s=${BASH_REMATCH[1]//\"/}
	echo "${s//:/=}"
}
# split_kinds "kind=n,...": connhold's kinds into record's lists: C_NON (status_N), C_NC (a dial
# that failed: refused, connect_timeout, connect_error) and C_LOST (the rest).
split_kinds() {
	local kv kvs
	C_NON="" C_LOST="" C_NC=""
	IFS=, read -r -a kvs <<<"$1"
	for kv in "${kvs[@]}"; do
		case $kv in
		"") ;;
		status_*) C_NON+="${C_NON:+,}${kv#status_}" ;;
		refused=* | connect_timeout=* | connect_error=*) C_NC+="${C_NC:+,}$kv" ;;
		*) C_LOST+="${C_LOST:+,}$kv" ;;
		esac
	done
}
# load_result LINE: record's lists from a connhold -load line: C_OK, C_NON, C_LOST, C_NC, and
# C_NOTE (connections made, found closed while idle, lost on a kept-alive connection).
load_result() {
	local kv kvs non=""
	C_OK=0
	IFS=, read -r -a kvs <<<"$(jmap "$1" answered_by_status)"
	for kv in "${kvs[@]}"; do
		if [[ $kv == 2* ]]; then C_OK=$((C_OK + ${kv#*=})); else non+="${non:+,}$kv"; fi
	done
	C_LOST=$(jmap "$1" lost_by_kind) C_NC=$(jmap "$1" dial_failed_by_kind) C_NON=$non
	C_NOTE="$(jnum "$1" connections) connections"
	(($(jnum "$1" closed_idle) == 0)) || C_NOTE+=", $(jnum "$1" closed_idle) seen closed while idle (dialed again)"
	(($(jnum "$1" lost_on_reused) == 0)) || C_NOTE+=", $(jnum "$1" lost_on_reused) of the lost on a kept-alive connection"
}

# loads_start: two connhold loads on T_ADDR until loads_stop, SIGNAL_CLIENTS clients each: new
# connections (Connection: close) and keep-alive; over TLS when T_URL is https.
loads_start() {
	local k args
	for k in new keep; do
		args=(-addr "$T_ADDR" -load -n "$SIGNAL_CLIENTS" -timeout 5s)
		[[ $k == keep ]] || args+=(-close)
		[[ $T_URL != https* ]] || args+=(-tls)
		rm -f "$TMP/load.$k.in"
		mkfifo "$TMP/load.$k.in"
		"$TMP/bin/connhold" "${args[@]}" <"$TMP/load.$k.in" >"$TMP/load.$k.out" 2>"$TMP/load.$k.err" &
		PIDS[load-$k]=$!
	done
	# Read-write: opening does not wait for connhold; closing is its end of stdin.
	exec {FD_NEW}<>"$TMP/load.new.in" {FD_KEEP}<>"$TMP/load.keep.in"
}
# loads_stop: ends both loads (each client finishes the request it is making); sets L_NEW and
# L_KEEP, their JSON lines.
loads_stop() {
	local k
	exec {FD_NEW}>&- {FD_KEEP}>&-
	for k in new keep; do
		gone "${PIDS[load-$k]}" 20 || die "connhold -load ($k) did not stop within 20 s"
		wait "${PIDS[load-$k]}" || die "connhold -load ($k): $(tail -n 1 "$TMP/load.$k.err")"
		unset "PIDS[load-$k]"
	done
	L_NEW=$(cat "$TMP/load.new.out") L_KEEP=$(cat "$TMP/load.keep.out")
}
loads_record() { # loads_record ROW TITLE TARGET NOTE: both loads' lines recorded
	load_result "$L_NEW"
	record "$1" "$2: new connections (connhold -load -close)" "$3" "$C_OK" "$C_NON" "$C_LOST" "$C_NC" "$C_NOTE; $4" "$L_NEW"
	load_result "$L_KEEP"
	record "$1" "$2: keep-alive (connhold -load)" "$3" "$C_OK" "$C_NON" "$C_LOST" "$C_NC" "$C_NOTE; $4" "$L_KEEP"
}

# ---- rows 1-4: one plain instance of each target ----------------------------------------
declare -A URL=() ADDR=() NAME=() PID=()
shared_up() {
	local t
	for t in "${TARGETS[@]}"; do
		up "$t" plain
		URL[$t]=$T_URL ADDR[$t]=$T_ADDR NAME[$t]=$T_NAME PID[$t]=$T_PID
	done
}
shared_down() {
	local t
	for t in "${TARGETS[@]}"; do T_PID=${PID[$t]} T_NAME=${NAME[$t]} down; done
}
use() { T_URL=${URL[$1]} T_ADDR=${ADDR[$1]} T_NAME=${NAME[$1]} T_PID=${PID[$1]}; }

ROUNDS_NEW=0
row_new() { # rounds of each target in turn, the order rotated, until fenec-entry made NEW_CONNS
	local i t n=${#TARGETS[@]} made
	local -A total=()
	say "row 1: a new connection each request, ${ROUND_S}s a target a round, until fenec-entry has made $NEW_CONNS"
	while :; do
		((++ROUNDS_NEW))
		for ((i = 0; i < n; i++)); do
			t=${TARGETS[$(((i + ROUNDS_NEW - 1) % n))]}
			use "$t"
			say "row 1, round $ROUNDS_NEW: $t"
			wrk_row 1 "1 new connection each request (wrk -c$CONNS, Connection: close)" "$t" "$ROUND_S" "$TMP/report.lua" -H 'Connection: close'
			total[$t]=$((${total[$t]:-0} + W_OK))
		done
		made=${total[fenec-entry]:-${total[${TARGETS[0]}]}}
		((made < NEW_CONNS && ROUNDS_NEW < 200)) || break
	done
}
row_wrk() { # row_wrk ROW: 2 keep-alive, 3 pipelined
	local t
	for t in "${TARGETS[@]}"; do
		use "$t"
		say "row $1: $t"
		if (($1 == 2)); then
			wrk_row 2 "2 keep-alive (wrk -c$CONNS)" "$t" "$RUN_S" "$TMP/report.lua"
		else
			wrk_row 3 "3 pipelined, $PIPELINE requests a write (wrk -c$CONNS)" "$t" "$RUN_S" "$TMP/pipeline.lua"
		fi
	done
}
row_slow() {
	local t line
	for t in "${TARGETS[@]}"; do
		use "$t"
		say "row 4: $SLOW_CLIENTS slow clients for ${SLOW_S}s beside a keep-alive load, $t"
		wrk_start "$t" "$((SLOW_S + 3))" "$TMP/report.lua"
		# A byte every 5-20 ms: a GET's head (~70 bytes) takes about a second, a POST's with
		# its 32-byte body about two, well within the entry's 10 s --header-timeout.
		line=$("$TMP/bin/connhold" -addr "$T_ADDR" -load -slow -n "$SLOW_CLIENTS" -per-conn 4 -byte-min 5ms \
			-byte-max 20ms -body 32 -timeout 10s -duration "${SLOW_S}s" 2>"$TMP/slow.err") ||
			die "connhold -slow: $(tail -n 1 "$TMP/slow.err")"
		wrk_end
		load_result "$line"
		record 4 "4 slow clients, a byte every 5-20 ms ($SLOW_CLIENTS clients, connhold -load -slow)" "$t" "$C_OK" "$C_NON" "$C_LOST" "$C_NC" "$C_NOTE" "$line"
		record 4 "4 keep-alive beside the slow clients (wrk -c$CONNS)" "$t" "$W_OK" "$W_NON" "$W_LOST" "$W_NC" "" "$W_RAW"
	done
}

# ---- row 5: more idle connections than the open-file limit -------------------------------
# hold_sum: the JSON lines of the holders, summed: H_HELD, H_KINDS (failed, kind=n,...), H_OPEN_MS
# and H_LAST_MS (the latest), H_RAW (the lines as a JSON array).
hold_sum() {
	local f line kv kvs
	local -A kinds=()
	H_HELD=0 H_OPEN_MS=0 H_LAST_MS=0 H_RAW="" H_KINDS=""
	for f in "$TMP"/hold.*.out; do
		line=$(grep -m1 '^{' "$f") || die "connhold printed no JSON line ($f)"
		H_RAW+="${H_RAW:+,}$line"
		H_HELD=$((H_HELD + $(jnum "$line" held)))
		(($(jnum "$line" open_ms) < H_OPEN_MS)) || H_OPEN_MS=$(jnum "$line" open_ms)
		(($(jnum "$line" last_ok_ms) < H_LAST_MS)) || H_LAST_MS=$(jnum "$line" last_ok_ms)
		IFS=, read -r -a kvs <<<"$(jmap "$line" failed_by_kind)"
		for kv in "${kvs[@]}"; do [[ -z $kv ]] || kinds[${kv%%=*}]=$((${kinds[${kv%%=*}]:-0} + ${kv#*=})); done
	done
	for kv in "${!kinds[@]}"; do H_KINDS+="${H_KINDS:+,}$kv=${kinds[$kv]}"; done
	H_RAW="[$H_RAW]"
}
row_nofile() {
	local t j deadline reusing fresh fresh_code fresh_s closed emfile note hold_args
	for t in "${TARGETS[@]}"; do
		say "row 5: $t under an open-file limit of $NOFILE, $HOLD idle keep-alive connections held"
		up "$t" plain "$NOFILE" 1
		rm -f "$TMP/hold.in" "$TMP"/hold.*.out
		mkfifo "$TMP/hold.in"
		# HOLDERS processes (their stdin the one FIFO), 256 opened at once by each, each dial and
		# first answer within 5 s; every failure counted.
		for ((j = 0; j < HOLDERS; j++)); do
			hold_args=(-addr "$T_ADDR" -path "$REQ_PATH" -n "$((HOLD / HOLDERS + (j < HOLD % HOLDERS)))" -parallel 256
				-timeout 5s -sources "$SOURCES" -max-failed "$HOLD")
			"$TMP/bin/connhold" "${hold_args[@]}" <"$TMP/hold.in" >"$TMP/hold.$j.out" 2>"$TMP/hold.$j.err" &
			PIDS[hold-$j]=$!
		done
		exec {FD_HOLD}<>"$TMP/hold.in"
		deadline=$((SECONDS + 300))
		for ((j = 0; j < HOLDERS; j++)); do
			until grep -q '^READY ' "$TMP/hold.$j.out" 2>/dev/null; do
				bench_alive "${PIDS[hold-$j]}" || die "connhold through $t: $(tail -n 1 "$TMP/hold.$j.err")"
				((SECONDS < deadline)) || die "connhold through $t: $HOLD connections not tried within 300 s"
				sleep 0.1
			done
		done
		hold_sum
		# A fresh client while they are held: one curl (its time), then 5 s of new connections.
		read -r fresh_code fresh_s < <(curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 10 "$T_URL" || true)
		[[ -n ${fresh_code:-} ]] || fresh_code=000
		fresh=$("$TMP/bin/connhold" -addr "$T_ADDR" -load -close -n 4 -timeout 5s -duration 5s 2>"$TMP/fresh.err") ||
			die "connhold -load (fresh clients): $(tail -n 1 "$TMP/fresh.err")"
		exec {FD_HOLD}>&-
		for ((j = 0; j < HOLDERS; j++)); do
			gone "${PIDS[hold-$j]}" 20 || die "connhold (hold) did not let go within 20 s"
			wait "${PIDS[hold-$j]}" || die "connhold (hold): $(tail -n 1 "$TMP/hold.$j.err")"
			unset "PIDS[hold-$j]"
		done
		closed=$(cat "$TMP"/hold.*.out | awk '/^DONE / { sub(/.*closed=/, ""); n += $1 } END { print n + 0 }')
		emfile=$(grep -ci 'too many open files' "$T_LOG" || true) reusing=$(grep -ci 'reusing connections' "$T_LOG" || true)
		down
		split_kinds "$H_KINDS"
		note="took $(awk -v a="$H_LAST_MS" 'BEGIN { printf "%.1f", a / 1000 }') s to take $H_HELD"
		note+=" (all tried in $(awk -v a="$H_OPEN_MS" 'BEGIN { printf "%.1f", a / 1000 }') s); $closed closed by $t while held"
		note+="; its log: 'too many open files' $emfile times"
		[[ $t != nginx ]] || note+=", 'reusing connections' $reusing times"
		record 5 "5 open-file limit $NOFILE, $HOLD idle connections: their first requests (connhold)" "$t" \
			"$H_HELD" "$C_NON" "$C_LOST" "$C_NC" "$note" "$H_RAW"
		load_result "$fresh"
		if [[ $fresh_code == 000 ]]; then
			note="fresh curl: no answer within 10 s"
		else
			note="fresh curl: $fresh_code in $(awk -v s="$fresh_s" 'BEGIN { printf "%.3f", s }') s"
		fi
		record 5 "5 open-file limit: fresh clients while held (5 s, connhold -load -close -n 4)" "$t" "$C_OK" "$C_NON" "$C_LOST" "$C_NC" "$note; $C_NOTE" "$fresh"
	done
}

# ---- rows 6 and 7: a graceful stop and an upgrade in place, under load ------------------
row_stop() {
	local kind t sig note
	for kind in plain tls; do
		for t in "${TARGETS[@]}"; do
			sig=SIGTERM
			[[ $t != nginx ]] || sig=SIGQUIT
			say "row 6: $sig under load, $kind, $t"
			up "$t" "$kind"
			loads_start
			sleep 2
			kill -s "${sig#SIG}" "$T_PID"
			gone "$T_PID" 40 || die "$t did not exit within 40 s of $sig"
			note="$sig; exited $(awk -v a="$GONE_MS" 'BEGIN { printf "%.1f", a / 1000 }') s later"
			sleep 1 # and the load goes on, refused
			loads_stop
			wait "$T_PID" 2>/dev/null || true
			unset "PIDS[$T_NAME]"
			loads_record 6 "6 $sig under load, $([[ $kind == plain ]] && echo plain || echo TLS)" "$t" "$note"
		done
	done
}
row_upgrade() {
	local kind t old new note deadline
	for kind in plain tls; do
		for t in "${TARGETS[@]}"; do
			say "row 7: upgrade in place under load, $kind, $t"
			if [[ $t == nginx ]]; then up "$t" "$kind" "" "" 1; else up "$t" "$kind"; fi
			old=$T_PID
			loads_start
			sleep 2
			deadline=$((SECONDS + 35))
			if [[ $t == nginx ]]; then
				# nginx's binary upgrade: USR2 starts the new master (the old pid file becomes
				# nginx.pid.oldbin), WINCH stops the old workers gracefully, QUIT the old master.
				kill -USR2 "$old"
				until [[ -s $T_DIR/nginx.pid.oldbin && -s $T_DIR/nginx.pid && $(cat "$T_DIR/nginx.pid") != "$old" ]] &&
					[[ -n $(pgrep -P "$(cat "$T_DIR/nginx.pid")" || true) ]]; do
					((SECONDS < deadline)) || die "nginx: no new master with workers within 35 s of USR2"
					sleep 0.05
				done
				new=$(cat "$T_DIR/nginx.pid")
				PIDS[$T_NAME-new]=$new
				kill -WINCH "$old"
				# The old master's children: its workers, and the new master.
				until [[ -z $(pgrep -P "$old" | grep -vx "$new" || true) ]]; do
					((SECONDS < deadline + 30)) || die "nginx: the old workers still run 30 s after WINCH"
					sleep 0.05
				done
				kill -QUIT "$old"
				gone "$old" 30 || die "nginx: the old master did not exit within 30 s of QUIT"
				note="USR2, WINCH, QUIT; the old master exited $(awk -v a="$GONE_MS" 'BEGIN { printf "%.1f", a / 1000 }') s after QUIT"
			else
				kill -USR2 "$old"
				until [[ -s $T_DIR/entry.pid && $(cat "$T_DIR/entry.pid") != "$old" ]]; do
					((SECONDS < deadline)) || { tail -n 5 "$T_LOG" >&2; die "fenec-entry: no new process in --pid-file within 35 s of SIGUSR2"; }
					sleep 0.05
				done
				new=$(cat "$T_DIR/entry.pid")
				PIDS[$T_NAME-new]=$new
				gone "$old" 40 || die "fenec-entry: the old process did not exit within 40 s of the upgrade"
				note="SIGUSR2; the old process exited $(awk -v a="$GONE_MS" 'BEGIN { printf "%.1f", a / 1000 }') s after the new one took over"
			fi
			wait "$old" 2>/dev/null || true
			unset "PIDS[$T_NAME]"
			sleep 2 # the load goes on, on the new process
			loads_stop
			[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "${T_CURL[@]}" "$T_URL" || true) == 200 ]] ||
				die "$t: the new process does not answer after the upgrade"
			T_PID=$new T_NAME=$T_NAME-new
			down
			loads_record 7 "7 upgrade in place under load, $([[ $kind == plain ]] && echo plain || echo TLS)" "$t" "$note"
		done
	done
}

# ---- the report ---------------------------------------------------------------------------
# report: the markdown table, a line a row and target (row 1's rounds summed), then what the
# columns mean and the facts of the run.
report() {
	awk -F'\t' -v secs="$ROUND_S" '
	function addlist(key, list,   n, i, kv, a) {
		n = split(list, a, ",")
		for (i = 1; i <= n; i++) {
			if (a[i] == "") continue
			split(a[i], kv, "=")
			if (!((key, kv[1]) in lst)) { keys[key] = keys[key] (keys[key] == "" ? "" : SUBSEP) kv[1] }
			lst[key, kv[1]] += kv[2]
		}
	}
	function show(key, n,   out, k, i, m) {
		if (n == 0) return "0"
		m = split(keys[key], k, SUBSEP)
		for (i = 1; i <= m; i++) out = out (i > 1 ? ", " : "") k[i] " " lst[key, k[i]]
		return n " (" out ")"
	}
	{
		key = $2 SUBSEP $3
		if (!(key in seen)) { seen[key] = ++nkeys; order[nkeys] = key; row[key] = $1; title[key] = $2; target[key] = $3 }
		req[key] += $4; ok[key] += $5; non[key] += $6; lost[key] += $8; nc[key] += $10
		addlist(key SUBSEP "non", $7); addlist(key SUBSEP "lost", $9); addlist(key SUBSEP "nc", $11)
		if ($12 != "") note[key] = $12
		runs[key]++; idle[key] += $13
	}
	END {
		print "| row | target | requests | answered 2xx | non-2xx | LOST | not connected | verdict | notes |"
		print "|---|---|--:|--:|--:|--:|--:|---|---|"
		for (i = 1; i <= nkeys; i++) {
			key = order[i]
			fail = lost[key]
			if (row[key] == 7) fail += non[key] + nc[key] + idle[key]
			if (row[key] == 7) verdict = fail ? "**FAILED " fail "**" : "no failure"
			else verdict = fail ? "**LOST " fail "**" : "none lost"
			n = note[key]
			if (row[key] == 1) n = runs[key] " round" (runs[key] > 1 ? "s" : "") " of " secs " s" (n == "" ? "" : "; " n)
			printf "| %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", title[key], target[key], req[key], ok[key],
				show(key SUBSEP "non", non[key]), show(key SUBSEP "lost", lost[key]), show(key SUBSEP "nc", nc[key]), verdict, n
		}
	}' "$ROWS_TSV"
	cat <<EOF

- requests: answered (2xx and not) + LOST. **LOST**: a request written (over TLS: its connection's
  handshake begun) on a connection the target's kernel accepted, with no whole answer. connhold's
  kinds: eof (the connection ended before any byte of the answer), reset (ECONNRESET before any
  byte), partial (ended or reset part-way through the answer), broken_pipe (the request could
  not be written), timeout (no whole answer within 5 s; 10 s for slow clients), handshake_eof,
  handshake_reset, ... (the TLS handshake of the request's new connection ended so). wrk's (rows 1-4): read (ended or reset before the whole answer), write,
  timeout (an answer slower than 5 s, counted again every 2 s while it waits: an upper bound,
  and it may have come).
- not connected: dials that failed, no request written: refused (nothing listens; after a
  graceful stop the target no longer listens, which is not a loss), connect_timeout,
  connect_error; wrk's connect (it does not tell refused apart). A client dials again 10 ms
  after a failed dial.
- "seen closed while idle": a kept-alive connection the target closed between two requests,
  seen by the client before it wrote the next (as Go's Transport sees it): not a request. A
  load's client writes its next request as soon as it has read an answer, so such a connection
  was closed right after an answer that did not say Connection: close: a client that does not
  look first (wrk) loses a request there.
- verdict: rows 1-6, the LOST; row 7, every failure (non-2xx, LOST, not connected, and
  connections seen closed while idle), since nothing may fail at an upgrade.
- machine: $(nproc) CPUs ($cpu_model), kernel $(uname -r), $started; nothing pinned
- fenec-entry: $ver_entry (--drain $DRAIN, --header-timeout 10s, its default); nginx: $ver_nginx
  ($(nproc) workers, 1 in row 5); wrk $ver_wrk; $ver_go
- open-file limit: the targets $TARGET_NOFILE (row 5: $NOFILE), each client process $CLIENT_NOFILE; row 5's
  connections held by $HOLDERS connhold process(es), from $SOURCES source address(es)
- run time: $(((SECONDS - T0) / 60)) min $(((SECONDS - T0) % 60)) s; raw: $OUT
- reproduce: cd $ROOT && $REPRO
EOF
}

# ---- main ---------------------------------------------------------------------------------
if [[ -z $OUT ]]; then
	mkdir -p "$ROOT/bench/out"
	OUT=$ROOT/bench/out/storm-$(date -u +%Y%m%dT%H%M%SZ).jsonl
fi
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
OUT_MD=${OUT%.jsonl}.md
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
ver_nginx=$(nginx -v 2>&1 | awk 'NR == 1 { sub(/^nginx version: /, ""); print }' || true)
ver_wrk=$(wrk -v 2>&1 | awk 'NR == 1 { print $2 }' || true)
ver_go=$(go version | awk '{ print $3 }')
ver_entry=-
[[ ! -x $TMP/bin/fenec-entry ]] || ver_entry=$(timeout 5 "$TMP/bin/fenec-entry" version 2>/dev/null | awk 'NR == 1' || true)
QUICK_FLAG=""
((!QUICK)) || QUICK_FLAG=" --quick"
REPRO="bash bench/storm.sh --rows $(IFS=,; echo "${ROWS[*]}") --targets $(IFS=,; echo "${TARGETS[*]}")${QUICK_FLAG} --new-conns $NEW_CONNS --nofile $NOFILE --hold $HOLD${ENTRY_BIN:+ --entry-bin $ENTRY_BIN}"
printf '{"kind":"meta","started":%s,"nproc":%d,"cpu":%s,"kernel":%s,"fenec_entry":%s,"nginx":%s,"wrk":%s,"go":%s,"rows":"%s","targets":"%s","quick":%s,"new_conns":%d,"nofile":%d,"hold":%d,"target_nofile":%d,"sources":%d,"reproduce":%s}\n' \
	"$(json_str "$started")" "$(nproc)" "$(json_str "$cpu_model")" "$(json_str "$(uname -r)")" "$(json_str "$ver_entry")" \
	"$(json_str "$ver_nginx")" "$(json_str "$ver_wrk")" "$(json_str "$ver_go")" "$(IFS=,; echo "${ROWS[*]}")" \
	"$(IFS=,; echo "${TARGETS[*]}")" "$( ((QUICK)) && echo true || echo false)" "$NEW_CONNS" "$NOFILE" "$HOLD" "$TARGET_NOFILE" "$SOURCES" \
	"$(json_str "$REPRO")" >>"$OUT"

T0=$SECONDS
if has_row 1 || has_row 2 || has_row 3 || has_row 4; then
	shared_up
	! has_row 1 || row_new
	! has_row 2 || row_wrk 2
	! has_row 3 || row_wrk 3
	! has_row 4 || row_slow
	shared_down
fi
! has_row 5 || row_nofile
! has_row 6 || row_stop
! has_row 7 || row_upgrade
report | tee "$OUT_MD"
echo "(this report: $OUT_MD)"
