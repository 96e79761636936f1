# shellcheck shell=bash
# bench/lib.sh: what the bench scripts share (proxies.sh, conformance.sh, profile.sh, pgo.sh). Source it after defining die;
# it uses TMP (a directory it removes at exit) and PIDS (the processes it kills at exit, an
# array or an associative one) when bench_traps has been called.

bench_cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
bench_traps() { # bench_traps: bench_cleanup at exit; INT and TERM exit 130
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}

free_port() { # free_port VAR: a port with no TCP listener, from PORT_BASE (default 19000) up
	local p=${NEXT_PORT:-${PORT_BASE:-19000}}
	while [[ -n $(ss -Htln "sport = :$p") ]]; do ((p++)); done
	NEXT_PORT=$((p + 1))
	printf -v "$1" %d "$p"
}
wait_ok() { # wait_ok URL: until it answers 200, at most 10 s
	for _ in $(seq 100); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1") == 200 ]] && return 0
		sleep 0.1
	done
	die "$1 did not answer 200 within 10 s"
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
