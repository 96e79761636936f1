#!/usr/bin/env bash
# bench/profile.sh: where a proxied request's CPU goes, for fenec-entry and for nginx side by
# side, under the throughput load of bench/proxies.sh (wrk -c32 on CPU 0, the upstream and the
# proxy on CPU 1, one worker). Per request: CPU microseconds of the proxy process, syscalls by
# name (perf's syscall tracepoints), and for the entry goroutines created, heap allocations, GC
# cycles and a CPU profile grouped by where the time goes. See bench/README.md.
#
#   bash bench/profile.sh [flags]     (flags: bash bench/profile.sh --help)
set -euo pipefail

usage() {
	cat <<'EOF'
usage: bash bench/profile.sh [flags]

  --seconds S      seconds measured per target (env BENCH_SECONDS, default 10)
  --conns N        wrk connections (env BENCH_CONNS, default 32)
  --targets LIST   comma list from nginx,fenec-entry (env BENCH_TARGETS, default both)
  --entry-bin PATH a fenec-entry built with -tags pprof to profile instead of building
                   ./cmd/fenec-entry with it (env BENCH_ENTRY_BIN)
  --pin MODE       split: wrk on CPU 0, upstream and proxy on CPU 1, nginx 1 worker and the
                   entry GOMAXPROCS=1 (default); none: nothing pinned, nginx
                   worker_processes auto, the entry's Ps its own (env BENCH_PIN)
  --out DIR        keep the CPU profile and raw counts here (env BENCH_OUT, default
                   bench/out/profile-<UTC time>)
EOF
}
die() {
	echo "profile.sh: $*" >&2
	exit 1
}

SECONDS_=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNS:-32}
TARGETS_ARG=${BENCH_TARGETS:-nginx,fenec-entry}
ENTRY_BIN=${BENCH_ENTRY_BIN:-}
OUT=${BENCH_OUT:-}
PIN=${BENCH_PIN:-split}
while (($#)); do
	case $1 in
	--seconds) SECONDS_=${2:?--seconds needs a value}; shift 2 ;;
	--conns) CONNS=${2:?--conns needs a value}; shift 2 ;;
	--targets) TARGETS_ARG=${2:?--targets needs a value}; shift 2 ;;
	--entry-bin) ENTRY_BIN=${2:?--entry-bin needs a value}; shift 2 ;;
	--out) OUT=${2:?--out needs a value}; shift 2 ;;
	--pin) PIN=${2:?--pin needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done
if ! [[ $SECONDS_ =~ ^[0-9]+$ ]] || ((SECONDS_ < 2 || SECONDS_ > 600)); then die "--seconds: want an integer in 2..600, got '$SECONDS_'"; fi
if ! [[ $CONNS =~ ^[0-9]+$ ]] || ((CONNS < 1 || CONNS > 10000)); then die "--conns: want an integer in 1..10000, got '$CONNS'"; fi
IFS=, read -r -a TARGETS <<<"$TARGETS_ARG"
for t in "${TARGETS[@]}"; do
	case $t in nginx | fenec-entry) ;; *) die "--targets: want a comma list from nginx,fenec-entry, got '$t'" ;; esac
done
case $PIN in split | none) ;; *) die "--pin: want split or none, got '$PIN'" ;; esac
((EUID == 0)) || die "needs root (perf's syscall tracepoints)"
(($(nproc) >= 2)) || die "needs 2 CPUs (wrk on CPU 0, the servers on CPU 1)"
PATH=$PATH:/usr/sbin:/sbin
for tool in wrk nginx perf curl taskset go; do
	command -v "$tool" >/dev/null || die "$tool is missing (apt-get install -y wrk nginx linux-perf curl util-linux)"
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
[[ -n $OUT ]] || OUT=bench/out/profile-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d)
declare -A PIDS=()
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_traps
# proc_ticks, ctx_switches, steal_ticks and served_count use bash builtins only: the window's
# edges (window_edge) fork nothing, so on CPUs shared with the load they take microseconds,
# not the tenths of a second a fork of curl or awk can take there.
proc_ticks() { # proc_ticks PID...: "utime stime" of the processes, in clock ticks
	local user=0 sys=0 p f
	for p in "$@"; do
		read -r -a f <"/proc/$p/stat"
		# fields after the ")" of comm: utime is field 14, stime 15 (1-based, comm has no spaces here)
		user=$((user + f[13]))
		sys=$((sys + f[14]))
	done
	echo "$user $sys"
}
ctx_switches() { # ctx_switches PID...: "voluntary involuntary" context switches of every thread
	local p st k val v=0 n=0
	for p in "$@"; do
		for st in /proc/"$p"/task/*/status; do
			while read -r k val; do
				case $k in
				voluntary_ctxt_switches:) v=$((v + val)) ;;
				nonvoluntary_ctxt_switches:) n=$((n + val)) ;;
				esac
			done <"$st" 2>/dev/null || true
		done
	done
	echo "$v $n"
}
steal_ticks() { # steal_ticks: "steal total" over the CPUs (the hypervisor running other guests)
	local cpu a b c d e f g h rest s=0 t=0
	while read -r cpu a b c d e f g h rest; do
		[[ $cpu == cpu[0-9]* ]] || continue
		s=$((s + h))
		t=$((t + a + b + c + d + e + f + g + h))
	done </proc/stat
	echo "$s $t"
}
served_count() { # served_count: the requests the upstream served (its /_bench/requests)
	local fd line body=
	exec {fd}<>"/dev/tcp/127.0.0.1/$UP_PORT"
	printf 'GET /_bench/requests HTTP/1.0\r\nHost: bench\r\n\r\n' >&"$fd"
	while IFS= read -r -t 5 line <&"$fd"; do body=${line%$'\r'}; done
	exec {fd}<&-
	echo "$body"
}
# ON0 and ON1 prefix a command to pin it to CPU 0 or 1 (--pin split), or are empty (--pin
# none); being no function, "${ON1[@]}" cmd & leaves $! the command's own pid.
ON0=() ON1=()
PPROF_PORT='' ADMIN_PORT='' # the entry's, set when it starts
[[ $PIN == none ]] || ON0=(taskset -c 0) ON1=(taskset -c 1)
runtime_metric() { # runtime_metric FILE NAME
	awk -v n="$2" '$1 == n { print $2 }' "$1"
}

echo "profile.sh: building bench/upstream$([[ -n $ENTRY_BIN ]] || echo ' and cmd/fenec-entry (-tags pprof)')" >&2
go build -trimpath -o "$TMP/upstream" ./bench/upstream
if [[ -n $ENTRY_BIN ]]; then
	[[ -x $ENTRY_BIN ]] || die "--entry-bin: $ENTRY_BIN is not an executable file"
	cp "$ENTRY_BIN" "$TMP/fenec-entry"
else
	go build -tags pprof -trimpath -o "$TMP/fenec-entry" ./cmd/fenec-entry
fi
free_port UP_PORT
"${ON1[@]}" "$TMP/upstream" --listen "127.0.0.1:$UP_PORT" >"$TMP/upstream.log" 2>&1 &
PIDS[upstream]=$!
wait_ok "http://127.0.0.1:$UP_PORT/t/acme/items/1"

REPORT=$OUT/report.md
{
	if [[ $PIN == split ]]; then
		echo "## Where a request's CPU goes: wrk -t2 -c$CONNS on CPU 0, upstream and proxy on CPU 1"
	else
		echo "## Where a request's CPU goes: wrk -t2 -c$CONNS, upstream and proxy, nothing pinned"
	fi
	echo
	echo "- machine: nproc $(nproc) ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- repo at $(git rev-parse --short HEAD 2>/dev/null || echo -)$([[ -z $(git status --porcelain 2>/dev/null) ]] || echo +dirty); $(nginx -v 2>&1); $("$TMP/fenec-entry" version 2>/dev/null | head -1)"
	echo "- reproduce: bash bench/profile.sh --seconds $SECONDS_ --conns $CONNS --targets $TARGETS_ARG --pin $PIN${ENTRY_BIN:+ --entry-bin $ENTRY_BIN}"
	echo
} >"$REPORT"

# measure NAME URL PID...: the load, then the counts over a window of SECONDS_ in its middle.
# SYSCALLS: the system calls counted one by one (a proxy's and the Go runtime's usual ones);
# raw_syscalls:sys_enter counts them all, so the rest is reported as "other". perf takes
# about 27 ms to set up each tracepoint, and 'syscalls:sys_enter_*' (~360 of them) took ten
# seconds here: a short list keeps the load run short.
SYSCALLS=(read write readv writev pread64 recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait
	epoll_pwait2 epoll_ctl futex nanosleep clock_nanosleep sched_yield accept accept4 close shutdown
	getsockopt setsockopt mmap munmap madvise mprotect brk tgkill rt_sigreturn rt_sigprocmask
	sigaltstack getrusage openat newfstatat fcntl ioctl splice io_uring_enter getpid gettid
	clone clone3 connect socket)
# SCHED_EVENTS: the system-wide scheduler counts (those this kernel has).
SCHED_EVENTS=(context-switches sched:sched_wakeup power:cpu_idle ipi:ipi_send_cpu)
sched_events() {
	local ev=() e
	for e in "${SCHED_EVENTS[@]}"; do
		if [[ $e == *:* ]]; then
			[[ -d /sys/kernel/tracing/events/${e/://} || -d /sys/kernel/debug/tracing/events/${e/://} ]] || continue
		fi
		ev+=("$e")
	done
	(IFS=,; echo "${ev[*]}")
}
perf_events() { # the -e list: raw_syscalls:sys_enter and each of SYSCALLS this kernel traces
	local list=raw_syscalls:sys_enter c
	for c in "${SYSCALLS[@]}"; do
		[[ -d /sys/kernel/tracing/events/syscalls/sys_enter_$c || -d /sys/kernel/debug/tracing/events/syscalls/sys_enter_$c ]] &&
			list+=,syscalls:sys_enter_$c
	done
	echo "$list"
}

# window_edge 0|1: one edge of the first window (no perf): the upstream's request count, the
# CPU ticks, context switches and steal, taken together by builtins; for the entry also its
# runtime metrics and allocation profile, read just inside the edges (their curls take a few
# milliseconds of an 8 s window). Reads WIN_* from the environment; writes $TMP/edge0 or
# edge1 and the entry's files.
window_edge() {
	local e=$1
	if [[ $e == 1 && $WIN_NAME == fenec-entry ]]; then
		curl -s --max-time 5 "http://127.0.0.1:$PPROF_PORT/debug/runtime-metrics" >"$TMP/rm$e"
		curl -s --max-time 5 -o "$TMP/allocs$e.pprof" "http://127.0.0.1:$PPROF_PORT/debug/pprof/allocs"
	fi
	# The request count first and last, nearest perf's own start and end, and the rest by
	# builtins, forking nothing: the three windows are the same within a millisecond or two.
	{
		[[ $e == 1 ]] || { printf 'served '; served_count; }
		echo "t ${EPOCHREALTIME/./}"
		printf 'proxy '
		# shellcheck disable=SC2086 # WIN_PIDS is a list
		proc_ticks $WIN_PIDS
		printf 'upstream '; proc_ticks "$WIN_UP"
		printf 'wrk '; proc_ticks "$WIN_WRK"
		printf 'ctx '
		# shellcheck disable=SC2086 # WIN_PIDS is a list
		ctx_switches $WIN_PIDS
		printf 'steal '; steal_ticks
		[[ $e == 0 ]] || { printf 'served '; served_count; }
	} >"$TMP/edge$e"
	if [[ $e == 0 && $WIN_NAME == fenec-entry ]]; then
		curl -s --max-time 5 "http://127.0.0.1:$PPROF_PORT/debug/runtime-metrics" >"$TMP/rm$e"
		curl -s --max-time 5 -o "$TMP/allocs$e.pprof" "http://127.0.0.1:$PPROF_PORT/debug/pprof/allocs"
	fi
}
edge() { # edge FILE KEY [FIELD]: a value recorded by window_edge
	awk -v k="$2" -v f="${3:-2}" '$1 == k { print $f }' "$1"
}

# measure NAME URL PID...: the load, then the counts over a window of SECONDS_ in its middle.
measure() {
	local name=$1 url=$2
	shift 2
	local pids=("$@") hz rps reqs secs u s up w v n st tt
	hz=$(getconf CLK_TCK)
	"${ON0[@]}" wrk -t2 -c"$CONNS" -d3s "$url" >/dev/null # warm-up
	# The load outlasts perf's setup and the window; it is stopped after the window.
	"${ON0[@]}" wrk -t2 -c"$CONNS" -d"$((SECONDS_ + 60))s" "$url" >"$TMP/$name.wrk" 2>&1 &
	local wrk_pid=$! # wrk itself (taskset execs it)
	sleep 1
	# Two windows of SECONDS_ in the same load: the first measures CPU, context switches and
	# the entry's profile and allocations; the second counts system calls. perf's tracepoints
	# slow every system call (the load ran at a third of its speed under them here), so they
	# are kept out of the first; counts a request are not moved by that.
	local script
	script="$(declare -f window_edge proc_ticks ctx_switches steal_ticks served_count)
		set -u
		window_edge 0
		if [[ \$WIN_NAME == fenec-entry ]]; then
			curl -s --max-time $((SECONDS_ + 10)) -o '$OUT/$name.cpu.pprof' \
				'http://127.0.0.1:$PPROF_PORT/debug/pprof/profile?seconds=$SECONDS_' &
		fi
		sleep $SECONDS_
		wait
		window_edge 1"
	export TMP UP_PORT PPROF_PORT # for the windows' scripts
	WIN_NAME=$name WIN_PIDS="${pids[*]}" WIN_UP=${PIDS[upstream]} WIN_WRK=$wrk_pid \
		bash -c "$script"
	# perf runs its workload (the window) once every counter is set up, and reads them after
	# it ends: the requests counted first and last in it, by builtins, are those of its window.
	script="$(declare -f served_count)
		set -u
		echo \"start \${EPOCHREALTIME/./} \$(served_count)\" >'$TMP/span'
		sleep $SECONDS_
		echo \"end \${EPOCHREALTIME/./} \$(served_count)\" >>'$TMP/span'"
	perf stat -x, -e "$(perf_events)" -p "$(
		IFS=,
		echo "${pids[*]}"
	)" -o "$TMP/$name.perf" -- bash -c "$script" 2>"$TMP/$name.perf.err" || {
		cat "$TMP/$name.perf.err" >&2
		die "$name: perf stat failed"
	}
	cp "$TMP/span" "$TMP/span.syscalls"
	# A third window, system-wide: how often threads switch, wake, and CPUs go idle and are
	# woken by another's interrupt, for every process of the run (a proxy's timing moves
	# the load generator's and the upstream's too).
	perf stat -a -x, -e "$(sched_events)" -o "$TMP/$name.sched" \
		-- bash -c "$script" 2>"$TMP/$name.sched.err" || {
		cat "$TMP/$name.sched.err" >&2
		die "$name: perf stat -a failed"
	}
	cp "$TMP/span" "$TMP/span.sched"
	kill -INT "$wrk_pid" 2>/dev/null || true
	wait "$wrk_pid" || true
	[[ -s $TMP/edge1 ]] || die "$name: the window's end was not recorded"
	[[ $name != fenec-entry ]] || cp "$TMP/allocs0.pprof" "$OUT/$name.allocs0.pprof"
	[[ $name != fenec-entry ]] || cp "$TMP/allocs1.pprof" "$OUT/$name.allocs.pprof"
	reqs=$(($(edge "$TMP/edge1" served) - $(edge "$TMP/edge0" served)))
	((reqs > 0)) || die "$name: no request counted in the window"
	secs=$(awk -v a="$(edge "$TMP/edge0" t)" -v b="$(edge "$TMP/edge1" t)" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')
	rps=$(awk -v n="$reqs" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	local perf_reqs # the requests in perf's window
	perf_reqs=$(($(edge "$TMP/span.syscalls" end 3) - $(edge "$TMP/span.syscalls" start 3)))
	((perf_reqs > 0)) || die "$name: no request counted in perf's window"
	local sched_reqs
	sched_reqs=$(($(edge "$TMP/span.sched" end 3) - $(edge "$TMP/span.sched" start 3)))
	((sched_reqs > 0)) || die "$name: no request counted in the system-wide window"
	u=$(($(edge "$TMP/edge1" proxy) - $(edge "$TMP/edge0" proxy)))
	s=$(($(edge "$TMP/edge1" proxy 3) - $(edge "$TMP/edge0" proxy 3)))
	up=$(($(edge "$TMP/edge1" upstream) + $(edge "$TMP/edge1" upstream 3) - $(edge "$TMP/edge0" upstream) - $(edge "$TMP/edge0" upstream 3)))
	w=$(($(edge "$TMP/edge1" wrk) + $(edge "$TMP/edge1" wrk 3) - $(edge "$TMP/edge0" wrk) - $(edge "$TMP/edge0" wrk 3)))
	v=$(($(edge "$TMP/edge1" ctx) - $(edge "$TMP/edge0" ctx)))
	n=$(($(edge "$TMP/edge1" ctx 3) - $(edge "$TMP/edge0" ctx 3)))
	st=$(($(edge "$TMP/edge1" steal) - $(edge "$TMP/edge0" steal)))
	tt=$(($(edge "$TMP/edge1" steal 3) - $(edge "$TMP/edge0" steal 3)))
	cp "$TMP/$name.perf" "$OUT/$name.syscalls.csv"
	{
		echo "### $name"
		echo
		echo "- processes counted together: ${#pids[@]} (the process and its children)"
		awk -v r="$rps" -v n="$reqs" -v secs="$secs" -v u="$u" -v s="$s" -v hz="$hz" 'BEGIN {
			printf "- requests/s %.0f; requests in the %.1f s window %d (the upstream'"'"'s count); proxy CPU %.1f µs per request (user %.1f, kernel %.1f)\n",
				r, secs, n, (u + s) / hz * 1e6 / n, u / hz * 1e6 / n, s / hz * 1e6 / n }'
		# The others' CPU in the same window: where they share the proxy's CPUs (--pin none), a
		# proxy that costs them more (fewer answers a wake-up) is slower for it.
		awk -v wt="$w" -v ut="$up" -v n="$reqs" -v hz="$hz" 'BEGIN {
			printf "- the others'"'"' CPU per request in the window: wrk %.1f µs, upstream %.1f µs\n",
				wt / hz * 1e6 / n, ut / hz * 1e6 / n }'
		awk -v n="$reqs" -v v="$v" -v i="$n" 'BEGIN {
			printf "- context switches per request (all threads): %.2f voluntary, %.2f involuntary\n", v / n, i / n }'
		awk -v s="$st" -v t="$tt" 'BEGIN { if (t > 0) {
			p = 100 * s / t
			printf "- steal (the hypervisor running other guests): %.0f%% of the CPU time%s\n", p, (p > 10) ? ": this run is slowed by the host" : "" } }'
		awk -F, -v n="$perf_reqs" '$3 == "raw_syscalls:sys_enter" { total = $1 / n }
			$3 ~ /^syscalls:sys_enter_/ && $1 + 0 > 0 {
				name = $3; sub(/^syscalls:sys_enter_/, "", name); named += $1 / n
				if ($1 / n >= 0.01) printf "%.2f %s\n", $1 / n, name }
			END { if (total - named >= 0.01) printf "%.2f other\n", total - named; printf "%.2f TOTAL\n", total }' "$TMP/$name.perf" | sort -rn |
			awk '$2 == "TOTAL" { total = $1; next } { list = list sep $2 " " $1; sep = ", " }
				END { printf "- syscalls per request: %s (%s)\n", total, list }'
		awk -F, -v n="$sched_reqs" '
			BEGIN { name["context-switches"] = "context switches"; name["sched:sched_wakeup"] = "wake-ups"
				name["power:cpu_idle"] = "CPU idle entries and exits"; name["ipi:ipi_send_cpu"] = "inter-processor interrupts" }
			$3 in name && $1 + 0 >= 0 { list = list sep name[$3] " " sprintf("%.3f", $1 / n); sep = ", " }
			END { if (list != "") print "- system-wide, every process, per request: " list }' "$TMP/$name.sched"
		if [[ $name == fenec-entry ]]; then
			local k v0 v1
			for k in /sched/goroutines-created:goroutines /gc/heap/allocs:objects /gc/heap/allocs:bytes /gc/cycles/total:gc-cycles; do
				v0=$(runtime_metric "$TMP/rm0" "$k")
				v1=$(runtime_metric "$TMP/rm1" "$k")
				awk -v k="$k" -v a="$v0" -v b="$v1" -v n="$reqs" 'BEGIN {
					if (k ~ /cycles/) printf "- %s: %.2f per 10,000 requests\n", k, (b - a) / n * 10000
					else printf "- %s: %.2f per request\n", k, (b - a) / n }'
			done
			# The runtime times one in 8 of a goroutine's runs (gTrackingPeriod), so the
			# histogram's count times 8 estimates how often a goroutine was made to run: the
			# wakes a request costs (each a chance to change CPU).
			v0=$(runtime_metric "$TMP/rm0" /sched/latencies:seconds:count)
			v1=$(runtime_metric "$TMP/rm1" /sched/latencies:seconds:count)
			awk -v a="$v0" -v b="$v1" -v n="$reqs" 'BEGIN {
				if (a != "" && b != "") printf "- goroutine runs (the runtime samples 1 in 8; times 8): %.2f per request\n", (b - a) * 8 / n }'
			local g0 g1 t0 t1
			g0=$(runtime_metric "$TMP/rm0" /cpu/classes/gc/total:cpu-seconds)
			g1=$(runtime_metric "$TMP/rm1" /cpu/classes/gc/total:cpu-seconds)
			t0=$(runtime_metric "$TMP/rm0" /cpu/classes/total:cpu-seconds)
			t1=$(runtime_metric "$TMP/rm1" /cpu/classes/total:cpu-seconds)
			awk -v a="$g0" -v b="$g1" -v c="$t0" -v d="$t1" 'BEGIN {
				if (d > c) printf "- GC share of the Go CPU (runtime/metrics estimate): %.1f%%\n", (b - a) / (d - c) * 100 }'
			echo
			echo "CPU profile, by where the time goes (cumulative share of the samples; a sample can be in more than one row):"
			echo
			echo '| where | share |'
			echo '|---|---|'
			go tool pprof -top -cum -nodecount=100000 "$TMP/fenec-entry" "$OUT/$name.cpu.pprof" 2>/dev/null >"$OUT/$name.cum.txt"
			awk '
				BEGIN {
					want["internal/runtime/syscall/linux.Syscall6"] = "syscalls (all)"
					want["syscall.write"] = "  write (net.Conn)"
					want["github.com/fenec/fenec-entry/sockio.(*Conn).write"] = "  write (sockio, raw)"
					want["syscall.read"] = "  read (net.Conn)"
					want["github.com/fenec/fenec-entry/sockio.(*Conn).read"] = "  read (sockio, raw)"
					want["github.com/fenec/fenec-entry/h1.epollCtl"] = "  epoll_ctl (the h1 poller)"
					want["internal/runtime/syscall/linux.EpollWait"] = "  epoll_wait (netpoll)"
					want["runtime.futex"] = "  futex (thread wake and sleep)"
					want["net/http.(*conn).serve"] = "net/http server, per connection (--http1-server std)"
					want["net/http.(*conn).readRequest"] = "  reading and parsing the request"
					want["net/http.(*connReader).backgroundRead"] = "  its background read (notices a client leaving)"
					want["net/http.(*response).finishRequest"] = "  finishing the answer (flush)"
					want["github.com/fenec/fenec-entry/h1.(*conn).serve"] = "h1 server, per woken connection (--http1-server lean)"
					want["net/http.ReadRequest"] = "  parsing the request (http.ReadRequest)"
					want["github.com/fenec/fenec-entry/h1.readPlainInto"] = "  parsing a plain request (h1.readPlainInto)"
					want["github.com/fenec/fenec-entry/proxy.(*Handler).ServeHTTP"] = "proxy.Handler.ServeHTTP"
					want["github.com/fenec/fenec-entry/proxy.(*Handler).forward"] = "  forward: to the router and back"
					want["net/http.ReadResponse"] = "  the answer head from the router (http.ReadResponse)"
					want["runtime.schedule"] = "Go scheduler"
					want["runtime.newstack"] = "goroutine stack growth (runtime.newstack)"
					want["runtime.gcBgMarkWorker"] = "GC background marking"
					want["runtime.mallocgc"] = "allocation (mallocgc)"
					order = "internal/runtime/syscall/linux.Syscall6 syscall.write github.com/fenec/fenec-entry/sockio.(*Conn).write syscall.read github.com/fenec/fenec-entry/sockio.(*Conn).read github.com/fenec/fenec-entry/h1.epollCtl internal/runtime/syscall/linux.EpollWait runtime.futex net/http.(*conn).serve net/http.(*conn).readRequest net/http.(*connReader).backgroundRead net/http.(*response).finishRequest github.com/fenec/fenec-entry/h1.(*conn).serve net/http.ReadRequest github.com/fenec/fenec-entry/h1.readPlainInto github.com/fenec/fenec-entry/proxy.(*Handler).ServeHTTP github.com/fenec/fenec-entry/proxy.(*Handler).forward net/http.ReadResponse runtime.schedule runtime.newstack runtime.gcBgMarkWorker runtime.mallocgc"
				}
				$NF in want { cum[$NF] = $5 }
				END { n = split(order, o, " "); for (i = 1; i <= n; i++) printf "| %s | %s |\n", want[o[i]], (o[i] in cum) ? cum[o[i]] : "0%" }
			' "$OUT/$name.cum.txt"
			echo
			echo "Top 15 functions by their own time:"
			echo
			echo '```'
			go tool pprof -top -nodecount=15 "$TMP/fenec-entry" "$OUT/$name.cpu.pprof" 2>/dev/null | sed -n '/flat%/,$p'
			echo '```'
			echo
			echo "Where the window's heap allocations were made (objects, the sampled heap profile's difference over the window; the sampling is by bytes, so the counts are estimates):"
			echo
			echo '```'
			go tool pprof -top -sample_index=alloc_objects -nodecount=20 -base "$OUT/$name.allocs0.pprof" "$TMP/fenec-entry" "$OUT/$name.allocs.pprof" 2>/dev/null | sed -n '/flat%/,$p'
			echo '```'
		fi
		echo
	} >>"$REPORT"
}

for t in "${TARGETS[@]}"; do
	echo "profile.sh: $t" >&2
	case $t in
	nginx)
		free_port NGINX_PORT
		mkdir -p "$TMP/nginx"
		cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes $([[ $PIN == split ]] && echo 1 || echo auto);
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    keepalive_requests 1000000;
    upstream fenec_router { server 127.0.0.1:$UP_PORT; keepalive 64; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://fenec_router;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Fenec-Home 1;
            proxy_set_header X-Request-Id \$request_id;
            proxy_hide_header Fenec-Home;
            proxy_buffering off;
        }
    }
}
EOF
		"${ON1[@]}" nginx -e "$TMP/nginx/error.log" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' >"$TMP/nginx.log" 2>&1 &
		PIDS[nginx]=$!
		wait_ok "http://127.0.0.1:$NGINX_PORT/t/acme/items/1"
		mapfile -t nginx_pids < <(pgrep -P "${PIDS[nginx]}"; echo "${PIDS[nginx]}")
		measure nginx "http://127.0.0.1:$NGINX_PORT/t/acme/items/1" "${nginx_pids[@]}"
		kill "${PIDS[nginx]}"
		wait "${PIDS[nginx]}" 2>/dev/null || true
		unset 'PIDS[nginx]'
		;;
	fenec-entry)
		free_port FE_PORT
		free_port ADMIN_PORT
		free_port GOSSIP_PORT
		free_port RPC_PORT
		free_port PPROF_PORT
		procs=()
		[[ $PIN == none ]] || procs=(GOMAXPROCS=1)
		"${ON1[@]}" env "${procs[@]}" FENEC_ENTRY_PPROF_ADDR="127.0.0.1:$PPROF_PORT" "$TMP/fenec-entry" serve \
			--listen "127.0.0.1:$FE_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
			--routers "eu=http://127.0.0.1:$UP_PORT" --log-level warn \
			--gossip-bind "127.0.0.1:$GOSSIP_PORT" --rpc-addr "127.0.0.1:$RPC_PORT" >"$TMP/fenec-entry.log" 2>&1 &
		PIDS[fenec-entry]=$!
		wait_ok "http://127.0.0.1:$FE_PORT/t/acme/items/1"
		curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$PPROF_PORT/debug/runtime-metrics" ||
			die "fenec-entry serves no /debug/runtime-metrics: --entry-bin must be built with -tags pprof"
		# An older build given as --entry-bin may start worker processes by default: the CPU,
		# syscalls and switches are then its process's and theirs together (the Go profile and
		# runtime metrics stay its own process's).
		mapfile -t entry_pids < <(pgrep -P "${PIDS[fenec-entry]}" || true; echo "${PIDS[fenec-entry]}")
		measure fenec-entry "http://127.0.0.1:$FE_PORT/t/acme/items/1" "${entry_pids[@]}"
		kill "${PIDS[fenec-entry]}"
		wait "${PIDS[fenec-entry]}" 2>/dev/null || true
		unset 'PIDS[fenec-entry]'
		;;
	esac
done
cat "$REPORT"
echo "profile.sh: report, profile and raw counts in $OUT" >&2
