#!/usr/bin/env bash
# deploy/check.sh: validates the deploy files with what a Linux machine with Go and
# Python 3.11 has; CI can run it as is (bash deploy/check.sh). Docker is not needed.
#
#  1. builds fenec-entry and serf with the Dockerfile's exact build flags;
#  2. fly/fly.toml parses (tomllib) and holds what the deploy needs (keys, ports, timeouts,
#     6PN addresses, no secrets); every FENEC_ENTRY_* name in fly.toml and
#     bare-metal/env.example is a flag of `fenec-entry serve --help`, and env.example
#     lists every flag;
#  3. the entry starts with fly.toml's [env] (as on a Fly Machine) and with env.example, and
#     drains on SIGTERM to exit 0; only the listen addresses, TLS files, the gossip key and
#     the state directory (a fresh one, which serf's snapshot must then be in) are replaced
#     for the run; with env.example as --config, SIGHUP (the unit's ExecReload) reloads it;
#  4. bare-metal/fenec-entry.service: structure, then `systemd-analyze verify` and an offline
#     `systemd-analyze security` score when systemd-analyze exists;
#  5. the Dockerfile: structure, then hadolint or dockerfile-utils (installed, else from npm
#     into a temporary folder; required under CI=true);
#  6. prometheus/fenec-entry.rules.yml: `promtool check rules` and `promtool test rules`
#     (fenec-entry.rules.test.yml), and every query of grafana/fenec-entry.json parsed by
#     promtool as a rule; promtool (Debian's prometheus package) is required under CI=true;
#     their metric names are held to docs/REFERENCE.md by a Go test (cmd/fenec-entry);
#  7. shellcheck of this script when installed.
#
# Exits non-zero on the first failure; prints what it skipped for want of a tool.
set -euo pipefail

DEPLOY="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$DEPLOY/.." && pwd)"
TMP="$(mktemp -d)"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT

say() { printf '%s\n' "check: $*"; }
fail() {
	printf '%s\n' "check: FAIL: $*" >&2
	exit 1
}
skip() { printf '%s\n' "check: skipped: $*"; }

command -v go >/dev/null || fail "go is not installed"
command -v python3 >/dev/null || fail "python3 is not installed"
python3 -c 'import tomllib' 2>/dev/null || fail "python3 has no tomllib (need Python 3.11 or later)"

# ---- 1. the Dockerfile's build ---------------------------------------------------------
DOCKERFILE="$DEPLOY/fly/Dockerfile"
# shellcheck disable=SC2016 # the Dockerfile's text, not this shell's variables
for want in 'CGO_ENABLED=0' 'go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}"' \
	'-o /out/fenec-entry ./cmd/fenec-entry' 'go build -trimpath -ldflags "-s -w" -o /out/serf github.com/hashicorp/serf/cmd/serf'; do
	grep -qF -- "$want" "$DOCKERFILE" || fail "Dockerfile: no '$want' (keep this script's build in step)"
done
say "building with the Dockerfile's flags"
(
	cd "$ROOT"
	VERSION=v0.0.0-check COMMIT=0000000000000000000000000000000000000000
	export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
	go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
		-o "$TMP/fenec-entry" ./cmd/fenec-entry
	go build -trimpath -ldflags "-s -w" -o "$TMP/serf" github.com/hashicorp/serf/cmd/serf
)
"$TMP/fenec-entry" version | grep -q 'v0.0.0-check commit 0000000' || fail "version/commit not stamped by -X"
"$TMP/serf" version >/dev/null || fail "the serf binary does not run"
"$TMP/fenec-entry" serve --help >"$TMP/help.txt"

# ---- 2 and 4 (structure). Python writes the environments for step 3. -----------------------
python3 - "$DEPLOY" "$TMP" <<'PY'
import os, re, sys, tomllib

deploy, tmp = sys.argv[1], sys.argv[2]
errors = []
def err(msg): errors.append(msg)

flags = set(re.findall(r"\(env (FENEC_ENTRY_[A-Z0-9_]+)", open(os.path.join(tmp, "help.txt")).read()))
if len(flags) < 30:
    sys.exit(f"check: FAIL: found only {len(flags)} FENEC_ENTRY_* names in serve --help")
SECRETS = {"FENEC_ENTRY_GOSSIP_KEY", "FENEC_ENTRY_ENTRY_TOKEN", "FENEC_ENTRY_RPC_AUTH"}

def duration(s):
    """Seconds of a Go duration such as 10s, 1m30s, 500ms."""
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|s|m|h)", s):
        if m.start() != pos:
            raise ValueError(s)
        total += float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(s)
    return total

def hostport(s):
    m = re.fullmatch(r"(\[[0-9a-fA-F:.]*\]|[^:\[\]]*):(\d+)", s)
    if not m:
        raise ValueError(s)
    return m.group(1).strip("[]"), int(m.group(2))

# Leave (3 s) + open requests after the drain (10 s) + admin shutdown (1 s).
STOP_OVERHEAD = 14

# ---- fly.toml --------------------------------------------------------------------------
path = os.path.join(deploy, "fly", "fly.toml")
with open(path, "rb") as f:
    fly = tomllib.load(f)
env = fly.get("env", {})
for k in ("app", "primary_region", "kill_signal", "kill_timeout", "env", "http_service", "checks", "metrics"):
    if k not in fly:
        err(f"fly.toml: no {k}")
for k, v in env.items():
    if not k.startswith("FENEC_ENTRY_"):
        err(f"fly.toml [env]: {k} is not a FENEC_ENTRY_* variable (the entry reads only those)")
    elif k not in flags:
        err(f"fly.toml [env]: {k} is not a flag of fenec-entry serve (typo?)")
    if k in SECRETS:
        err(f"fly.toml [env]: {k} is a secret: set it with fly secrets set")
    if not isinstance(v, str):
        err(f"fly.toml [env]: {k} must be a string")
if fly.get("kill_signal") != "SIGTERM":
    err("fly.toml: kill_signal must be SIGTERM (the entry drains on it)")
drain = duration(env.get("FENEC_ENTRY_DRAIN", "10s"))
kt = fly.get("kill_timeout", 5)
kt = duration(kt) if isinstance(kt, str) else kt
if kt <= drain + STOP_OVERHEAD:
    err(f"fly.toml: kill_timeout {kt}s must exceed drain {drain}s + {STOP_OVERHEAD}s")
listen = hostport(env.get("FENEC_ENTRY_LISTEN", ":8080"))
admin = hostport(env.get("FENEC_ENTRY_ADMIN_LISTEN", "127.0.0.1:9091"))
hs = fly.get("http_service", {})
if hs.get("internal_port") != listen[1]:
    err(f"fly.toml: http_service.internal_port {hs.get('internal_port')} is not the --listen port {listen[1]}")
if listen[0] not in ("", "0.0.0.0", "::"):
    err("fly.toml: --listen must be a wildcard: Fly's proxy comes over the private IPv4 address")
if hs.get("auto_stop_machines") not in ("off", False):
    err("fly.toml: auto_stop_machines must be off (entries are a gossip cluster)")
conc = hs.get("concurrency", {})
mi = int(env.get("FENEC_ENTRY_MAX_INFLIGHT", "10000"))
if conc.get("type") != "requests":
    err("fly.toml: http_service.concurrency.type should be requests (what --max-inflight counts)")
if not (0 < conc.get("soft_limit", 0) <= conc.get("hard_limit", 0) <= mi):
    err(f"fly.toml: want 0 < soft_limit <= hard_limit <= --max-inflight ({mi})")
if not any(c.get("path") == "/_entry/ready" for c in hs.get("checks", [])):
    err("fly.toml: no [[http_service.checks]] on /_entry/ready")
if admin[0] in ("127.0.0.1", "::1", "localhost"):
    err("fly.toml: --admin-listen on loopback: Fly's checks and metrics cannot reach it")
ready = [c for c in fly.get("checks", {}).values() if c.get("path") == "/readyz"]
if not ready or ready[0].get("port") != admin[1] or ready[0].get("type") != "http":
    err(f"fly.toml: want an http check on /readyz at the admin port {admin[1]}")
if fly.get("metrics", {}).get("port") != admin[1] or fly.get("metrics", {}).get("path") != "/metrics":
    err(f"fly.toml: [metrics] must scrape /metrics on the admin port {admin[1]}")
if "FENEC_ENTRY_SNAPSHOT_LISTEN" in env:
    err("fly.toml: FENEC_ENTRY_SNAPSHOT_LISTEN: the flag is gone (the table travels on --gossip-bind)")
for k in ("FENEC_ENTRY_GOSSIP_BIND", "FENEC_ENTRY_GOSSIP_ADVERTISE"):
    if hostport(env.get(k, ":0"))[0] != "fly-local-6pn":
        err(f"fly.toml: {k} must be on fly-local-6pn (6PN only)")
if env.get("FENEC_ENTRY_JOIN_DNS") != f"{fly.get('app')}.internal":
    err(f"fly.toml: FENEC_ENTRY_JOIN_DNS must be {fly.get('app')}.internal")
rpc = hostport(env.get("FENEC_ENTRY_RPC_ADDR", "127.0.0.1:7373"))
if rpc[0] not in ("127.0.0.1", "::1", "localhost"):
    err("fly.toml: keep --rpc-addr on loopback")
if env.get("FENEC_ENTRY_CLIENT_IP") != "fly":
    err("fly.toml: --client-ip should be fly (Fly-Client-IP)")
# Warm restart: the state directory is the Machine's volume, or nothing survives a restart.
sd = env.get("FENEC_ENTRY_STATE_DIR")
mounts = fly.get("mounts", {})
if isinstance(mounts, list):
    mounts = mounts[0] if len(mounts) == 1 else {}
if sd is not None:
    if mounts.get("destination") != sd:
        err(f"fly.toml: FENEC_ENTRY_STATE_DIR {sd} must be the [mounts] destination (a volume), have {mounts.get('destination')}")
    if not mounts.get("source"):
        err("fly.toml: [mounts] needs a source (the volume's name)")
elif mounts:
    err("fly.toml: [mounts] without FENEC_ENTRY_STATE_DIR: the volume is unused")

# Environment of a run as on a Fly Machine: fly-local-6pn does not resolve here, and the
# addresses are replaced on the command line anyway.
with open(os.path.join(tmp, "fly.env"), "w") as f:
    for k, v in env.items():
        f.write(f"{k}={v}\n")
    f.write("FLY_REGION=fra\nFLY_MACHINE_ID=check0machine0id\n")

# ---- env.example -----------------------------------------------------------------------
path = os.path.join(deploy, "bare-metal", "env.example")
active, mentioned = {}, set()
for n, line in enumerate(open(path), 1):
    line = line.rstrip("\n")
    mentioned.update(re.findall(r"FENEC_ENTRY_[A-Z0-9_]+", line))
    s = line.strip()
    if not s or s[0] in "#;":
        continue
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", s)
    if not m:
        err(f"env.example:{n}: not KEY=value")
        continue
    k, v = m.groups()
    if v.startswith('"'):
        if not (len(v) >= 2 and v.endswith('"')):
            err(f"env.example:{n}: unbalanced quotes")
        v = v[1:-1]
    elif ";" in v or " " in v:
        err(f"env.example:{n}: quote a value with ';' or spaces")
    if "$" in v:
        err(f"env.example:{n}: '$' in a value")
    active[k] = v
for k in sorted(mentioned - flags):
    err(f"env.example: {k} is not a flag of fenec-entry serve (typo?)")
for k in sorted(flags - mentioned):
    err(f"env.example: {k} is not listed (every flag should be, commented if unused)")
bm_drain = duration(active.get("FENEC_ENTRY_DRAIN", "10s"))
bm_listen = hostport(active.get("FENEC_ENTRY_LISTEN", ":8080"))
bm_mi = int(active.get("FENEC_ENTRY_MAX_INFLIGHT", "10000"))
bm_state = active.get("FENEC_ENTRY_STATE_DIR")
with open(os.path.join(tmp, "bare.env"), "w") as f:
    for k, v in active.items():
        f.write(f"{k}={v}\n")

# ---- fenec-entry.service (structure) -----------------------------------------------------
path = os.path.join(deploy, "bare-metal", "fenec-entry.service")
unit, section = {}, None
for n, line in enumerate(open(path), 1):
    s = line.strip()
    if not s or s[0] in "#;":
        continue
    if s.startswith("["):
        section = s.strip("[]")
        continue
    if "=" not in s or section is None:
        err(f"fenec-entry.service:{n}: not Key=value in a section")
        continue
    k, v = s.split("=", 1)
    unit.setdefault(section, {}).setdefault(k.strip(), []).append(v.strip())
svc = unit.get("Service", {})
def one(k, default=None):
    return svc.get(k, [default])[-1]
want = {
    "EnvironmentFile": "/etc/fenec-entry/env", "KillSignal": "SIGTERM", "Restart": "on-failure",
    "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
    "RestartPreventExitStatus": "2",
}
for k, v in want.items():
    if one(k) != v:
        err(f"fenec-entry.service: want {k}={v}, have {one(k)}")
if not one("ExecStart", "").endswith("fenec-entry serve --config /etc/fenec-entry/env"):
    err("fenec-entry.service: ExecStart must run `fenec-entry serve --config /etc/fenec-entry/env` (the EnvironmentFile)")
if one("ExecReload") != "/bin/kill -HUP $MAINPID":
    err("fenec-entry.service: want ExecReload=/bin/kill -HUP $MAINPID (systemctl reload re-reads --config)")
if not (one("DynamicUser") == "yes" or one("User")):
    err("fenec-entry.service: run as DynamicUser or a dedicated User, never root")
if duration(one("TimeoutStopSec", "90s")) <= bm_drain + STOP_OVERHEAD:
    err(f"fenec-entry.service: TimeoutStopSec must exceed drain {bm_drain}s + {STOP_OVERHEAD}s")
if int(one("LimitNOFILE", "0")) < 2 * bm_mi + 10000:
    err("fenec-entry.service: LimitNOFILE too low for --max-inflight (a client and a router connection each)")
caps_amb, caps_bnd = one("AmbientCapabilities", ""), one("CapabilityBoundingSet", "")
if bm_listen[1] < 1024:
    if "CAP_NET_BIND_SERVICE" not in caps_amb or caps_bnd != "CAP_NET_BIND_SERVICE":
        err(f"fenec-entry.service: --listen port {bm_listen[1]} needs CAP_NET_BIND_SERVICE, and nothing more")
elif caps_amb or caps_bnd:
    err("fenec-entry.service: no capability is needed for a port >= 1024: empty both")
if "Install" not in unit:
    err("fenec-entry.service: no [Install] section")
# Warm restart: ProtectSystem=strict leaves only StateDirectory= writable, at /var/lib/<name>.
sdir = one("StateDirectory")
if bm_state is not None and (not sdir or bm_state != "/var/lib/" + sdir):
    err(f"env.example: FENEC_ENTRY_STATE_DIR {bm_state} must be the unit's StateDirectory (/var/lib/{sdir}): nothing else is writable")
if sdir and sdir != "fenec-entry":
    err(f"fenec-entry.service: StateDirectory={sdir}, want fenec-entry")
# Upgrades in place: systemd follows the new process through PIDFile=, which the entry writes
# (--pid-file) into RuntimeDirectory=, the only other writable place.
bm_pid = active.get("FENEC_ENTRY_PID_FILE")
if bm_pid is None or one("PIDFile") != bm_pid:
    err(f"env.example: FENEC_ENTRY_PID_FILE {bm_pid} must be the unit's PIDFile ({one('PIDFile')})")
elif os.path.dirname(bm_pid) != "/run/" + (one("RuntimeDirectory") or ""):
    err(f"fenec-entry.service: RuntimeDirectory={one('RuntimeDirectory')} must hold PIDFile {bm_pid}")

if errors:
    for e in errors:
        print("check: FAIL:", e, file=sys.stderr)
    sys.exit(1)
print(f"check: fly.toml, env.example and fenec-entry.service hold what the deploy needs ({len(flags)} flags known)")
PY

# ---- 3. the entry starts with each configuration and drains on SIGTERM ----------------------
# run_entry NAME ENVFILE EXPECT_JSON_PYTHON: starts the entry with exactly ENVFILE's
# variables (plus PATH), listeners moved to free loopback ports, no TLS, a fresh gossip key
# and no drain; waits for /readyz; checks /status.json; SIGTERM; wants exit 0.
run_entry() {
	local name="$1" envfile="$2" expect="$3"
	local log="$TMP/$name.log" key admin="" pid rc state="$TMP/$name.state"
	key="$(head -c 32 /dev/urandom | base64)"
	mkdir -p "$state"
	local -a envs=()
	mapfile -t envs <"$envfile"
	# The key in the environment, after the file's (env takes the last): on the command line
	# the entry would warn that ps shows it.
	env -i PATH="$PATH" "${envs[@]}" FENEC_ENTRY_GOSSIP_KEY="$key" "$TMP/fenec-entry" serve \
		--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --gossip-bind 127.0.0.1:0 --gossip-advertise "" \
		--rpc-addr 127.0.0.1:0 --tls-cert "" --tls-key "" --state-dir "$state" --pid-file "$TMP/$name.pid" \
		--drain 0s 2>"$log" &
	pid=$!
	PIDS+=("$pid")
	for _ in $(seq 1 100); do
		admin="$(grep -o '"admin_listen":"[^"]*"' "$log" 2>/dev/null | head -1 | cut -d'"' -f4 || true)"
		[ -n "$admin" ] && break
		kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "$name: the entry exited at start"; }
		sleep 0.1
	done
	[ -n "$admin" ] || { cat "$log" >&2; fail "$name: no start line"; }
	for _ in $(seq 1 100); do
		curl -fsS "http://$admin/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "http://$admin/readyz" >/dev/null || fail "$name: /readyz never answered 200"
	[ "$(cat "$TMP/$name.pid" 2>/dev/null)" = "$pid" ] || fail "$name: the PID file does not hold the entry's PID $pid"
	curl -fsS "http://$admin/status.json" >"$TMP/$name.status.json"
	python3 -c "import json,sys; s=json.load(open(sys.argv[1])); $expect" "$TMP/$name.status.json" ||
		fail "$name: /status.json is not as expected: $(cat "$TMP/$name.status.json")"
	kill -TERM "$pid"
	for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "$name: still running 30 s after SIGTERM"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$log" >&2; fail "$name: exit status $rc after SIGTERM, want 0"; }
	grep -q '"message":"drained"' "$log" || fail "$name: no drain in the log"
	if grep -q '^FENEC_ENTRY_STATE_DIR=' "$envfile"; then
		[ -f "$state/serf.snapshot" ] || fail "$name: --state-dir set but no serf snapshot in it after the run"
	fi
	say "$name: started, ready, drained on SIGTERM, exit 0"
}
run_entry fly "$TMP/fly.env" \
	"assert s['pop']=='fra' and s['continent']=='EU' and s['node']=='check0machine0id' and s['gossip'] and [r['name'] for r in s['regions']]==['eu','us','ap'], s"
run_entry bare-metal "$TMP/bare.env" \
	"assert s['pop']=='fra1' and s['continent']=='EU' and s['gossip'] and [r['name'] for r in s['regions']]==['eu','us','ap'], s"

# ---- 3b. systemctl reload: ExecReload's SIGHUP re-reads --config ---------------------------
# env.example as the unit's --config (the settings run_entry moves stay on the command line,
# so they leave the file: a setting may not be in both), then a changed log level, SIGHUP.
conf="$TMP/reload.env"
mkdir -p "$TMP/reload.state"
grep -vE '^FENEC_ENTRY_(LISTEN|ADMIN_LISTEN|GOSSIP_BIND|GOSSIP_ADVERTISE|RPC_ADDR|TLS_CERT|TLS_KEY|GOSSIP_KEY|DRAIN|STATE_DIR|PID_FILE)=' \
	"$TMP/bare.env" >"$conf"
chmod 0640 "$conf" # as the README installs it
log="$TMP/reload.log"
env -i PATH="$PATH" FENEC_ENTRY_GOSSIP_KEY="$(head -c 32 /dev/urandom | base64)" "$TMP/fenec-entry" serve --config "$conf" \
	--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --gossip-bind 127.0.0.1:0 --gossip-advertise "" \
	--rpc-addr 127.0.0.1:0 --tls-cert "" --tls-key "" --state-dir "$TMP/reload.state" --pid-file "$TMP/reload.pid" \
	--drain 0s 2>"$log" &
pid=$!
PIDS+=("$pid")
for _ in $(seq 1 100); do grep -qs '"message":"entry started"' "$log" && break; sleep 0.1; done
grep -q '"message":"entry started"' "$log" || { cat "$log" >&2; fail "reload: the entry did not start with env.example as --config"; }
# Installed as the README says (secrets in a 0640 file), no setting is warned of (the joins
# of the template's peers, which this machine cannot reach, are).
! grep -qE '"level":"warn","flag":' "$log" || { cat "$log" >&2; fail "reload: the entry warned at start with env.example installed 0640"; }
sed -i 's/^FENEC_ENTRY_LOG_LEVEL=.*/FENEC_ENTRY_LOG_LEVEL=debug/' "$conf"
kill -HUP "$pid"
for _ in $(seq 1 100); do grep -q '"changed":\["log-level"\]' "$log" && break; sleep 0.1; done
grep -q '"changed":\["log-level"\].*"message":"configuration reloaded"' "$log" ||
	{ cat "$log" >&2; fail "reload: SIGHUP did not reload --config"; }
kill -0 "$pid" 2>/dev/null || fail "reload: SIGHUP stopped the entry"
say "bare-metal: SIGHUP (the unit's ExecReload) re-read --config and applied it"

# ---- 3c. the README's upgrade: USR2 starts the new process, which the PID file then names --
kill -USR2 "$pid"
rc=0
wait "$pid" || rc=$? # the old process drains (no connection open: at once) and exits
[ "$rc" -eq 0 ] || { cat "$log" >&2; fail "upgrade: the old process exited $rc, want 0"; }
grep -q '"message":"upgrade: the new process is ready; this one hands over gossip and drains"' "$log" ||
	{ cat "$log" >&2; fail "upgrade: USR2 did not start a new process"; }
newpid="$(cat "$TMP/reload.pid")"
if [ -z "$newpid" ] || [ "$newpid" = "$pid" ] || ! kill -0 "$newpid" 2>/dev/null; then
	cat "$log" >&2
	fail "upgrade: the PID file names $newpid, not a new live process"
fi
PIDS+=("$newpid")
admin="$(grep '"message":"entry started"' "$log" | tail -1 | grep -o '"admin_listen":"[^"]*"' | cut -d'"' -f4)"
for _ in $(seq 1 100); do curl -fsS "http://$admin/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS "http://$admin/readyz" >/dev/null || fail "upgrade: the new process is not ready"
kill -TERM "$newpid"
for _ in $(seq 1 300); do kill -0 "$newpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$newpid" 2>/dev/null && fail "upgrade: the new process still runs 30 s after SIGTERM"
say "bare-metal: USR2 (the README's upgrade) started a new process that the PID file names, then the old one exited 0"

# ---- 4. systemd ------------------------------------------------------------------------
UNIT="$DEPLOY/bare-metal/fenec-entry.service"
if command -v systemd-analyze >/dev/null; then
	# verify wants ExecStart's binary to exist: point a copy at the one just built.
	mkdir -p "$TMP/unit"
	sed "s#^ExecStart=/usr/local/bin/fenec-entry#ExecStart=$TMP/fenec-entry#" "$UNIT" >"$TMP/unit/fenec-entry.service"
	out="$(cd "$TMP/unit" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ./fenec-entry.service 2>&1)" ||
		fail "systemd-analyze verify: $out"
	# Anything it printed is a warning about the unit itself (unknown key, bad value).
	if printf '%s' "$out" | grep -q 'fenec-entry.service'; then fail "systemd-analyze verify: $out"; fi
	say "systemd-analyze verify: fenec-entry.service is clean"
	score="$(systemd-analyze security --offline=yes "$TMP/unit/fenec-entry.service" 2>/dev/null | grep -o 'exposure level.*' || true)"
	[ -n "$score" ] && say "systemd-analyze security (offline): $score"
else
	skip "systemd-analyze not installed: the unit got the structural check only"
fi

# ---- 5. Dockerfile -------------------------------------------------------------------------
# shellcheck disable=SC2016
grep -qE '^FROM --platform=\$BUILDPLATFORM \$\{GO_IMAGE\} AS build$' "$DOCKERFILE" || fail "Dockerfile: no builder stage"
grep -qE '^ARG GO_IMAGE=golang:1\.26' "$DOCKERFILE" || fail "Dockerfile: the builder must be golang:1.26 (go.mod)"
grep -qE '^USER nonroot' "$DOCKERFILE" || fail "Dockerfile: must run as nonroot"
grep -qxF 'ENTRYPOINT ["/fenec-entry", "serve"]' "$DOCKERFILE" || fail "Dockerfile: ENTRYPOINT must be [\"/fenec-entry\", \"serve\"]"
# The linter: hadolint or dockerfile-utils when installed, else dockerfile-utils from npm
# (pinned, into this run's temporary folder) where npm is.
dfu=""
if command -v hadolint >/dev/null; then
	:
elif command -v dockerfile-utils >/dev/null; then
	dfu=dockerfile-utils
elif command -v npm >/dev/null &&
	timeout 120 npm install --prefix "$TMP/npm" --no-audit --no-fund --loglevel=error dockerfile-utils@0.16.3 >"$TMP/npm.log" 2>&1; then
	dfu="$TMP/npm/node_modules/.bin/dockerfile-utils"
fi
if command -v hadolint >/dev/null; then
	hadolint "$DOCKERFILE" || fail "hadolint"
	say "hadolint: Dockerfile is clean"
elif [ -n "$dfu" ]; then
	out="$("$dfu" lint "$DOCKERFILE" 2>&1)" || fail "dockerfile-utils lint: $out"
	[ -z "$out" ] || fail "dockerfile-utils lint: $out"
	say "dockerfile-utils lint: Dockerfile is clean"
elif [ "${CI:-}" = "true" ]; then
	fail "no Dockerfile linter: neither hadolint nor dockerfile-utils installed, and no npm installed dockerfile-utils: $(tail -3 "$TMP/npm.log" 2>/dev/null)"
else
	skip "neither hadolint nor dockerfile-utils installed, and no npm installed dockerfile-utils: the Dockerfile got the structural check only"
fi

# ---- 6. alert rules and the dashboard --------------------------------------------------------
PROM="$DEPLOY/prometheus"
if command -v promtool >/dev/null; then
	out="$(promtool check rules "$PROM/fenec-entry.rules.yml" 2>&1)" || fail "promtool check rules: $out"
	out="$(cd "$PROM" && promtool test rules fenec-entry.rules.test.yml 2>&1)" || fail "promtool test rules: $out"
	say "promtool: fenec-entry.rules.yml checks and its unit tests pass"
	# Each dashboard query as a recording rule (JSON is YAML), Grafana's variables filled in.
	python3 - "$DEPLOY/grafana/fenec-entry.json" "$TMP/dashboard.rules.yml" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exprs = []
def walk(panels):
    for p in panels:
        walk(p.get("panels", []))
        for t in p.get("targets", []):
            if not t.get("expr"):
                sys.exit(f"check: FAIL: dashboard panel {p.get('title')!r}: a target without expr")
            exprs.append(t["expr"])
walk(d.get("panels", []))
names = {v["name"] for v in d.get("templating", {}).get("list", [])}
if not {"datasource", "pop", "instance"} <= names:
    sys.exit(f"check: FAIL: dashboard: want variables datasource, pop and instance, have {sorted(names)}")
if len(exprs) < 20:
    sys.exit(f"check: FAIL: dashboard: only {len(exprs)} queries")
def fill(e):
    return e.replace("$__rate_interval", "5m").replace("$instance", ".*").replace("$pop", ".*")
rules = [{"record": f"dashboard:query{i}", "expr": fill(e)} for i, e in enumerate(exprs)]
json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"))
print(f"check: dashboard: {len(exprs)} queries")
PY
	out="$(promtool check rules "$TMP/dashboard.rules.yml" 2>&1)" || fail "promtool: a dashboard query does not parse: $out"
	say "promtool: every grafana/fenec-entry.json query parses"
elif [ "${CI:-}" = "true" ]; then
	fail "promtool is not installed (apt-get install prometheus): the alert rules cannot be checked"
else
	skip "promtool not installed (apt-get install prometheus): the alert rules and the dashboard's queries were not checked"
fi

# ---- 7. this script ------------------------------------------------------------------------
if command -v shellcheck >/dev/null; then
	shellcheck "$0" || fail "shellcheck"
	say "shellcheck: deploy/check.sh is clean"
else
	skip "shellcheck not installed"
fi
say "all deploy checks passed"
