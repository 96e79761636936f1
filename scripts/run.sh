#!/usr/bin/env bash
# make run: stand-in routers for eu and us (two each) and one entry in front
# of them, on loopback. Prints curl lines to try; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$BIN/fenec-standin" \
  --region eu=127.0.0.1:7101,127.0.0.1:7102 \
  --region us=127.0.0.1:7201,127.0.0.1:7202 \
  --tenants acme=eu,initech=eu,globex=us,umbrella=us \
  --entry-token demo-entry-token --http-keepalive 5s &
pids+=($!)

"$BIN/fenec-entry" serve \
  --listen 127.0.0.1:8080 --admin-listen 127.0.0.1:9091 \
  --routers 'eu=http://127.0.0.1:7101,http://127.0.0.1:7102;us=http://127.0.0.1:7201,http://127.0.0.1:7202' \
  --default-region us --pop local --continent NA \
  --entry-token demo-entry-token --log-format console --log-level debug &
pids+=($!)

for i in $(seq 1 100); do
  curl -fsS -o /dev/null http://127.0.0.1:8080/_entry/health 2>/dev/null && break
  sleep 0.1
done

cat <<'TXT'

fenec-entry on http://127.0.0.1:8080 (admin http://127.0.0.1:9091), stand-in routers eu :7101 :7102, us :7201 :7202.
Try:
  curl -i http://127.0.0.1:8080/t/acme/items/1                    # relayed once by us, learns acme=eu
  curl -i http://127.0.0.1:8080/t/acme/items/1                    # now straight to eu
  curl -i -X POST -d hello http://127.0.0.1:8080/t/acme/items      # a write, applied once in eu
  curl -i -X POST -H 'Idempotency-Key: k1' -d hi http://127.0.0.1:8080/t/acme/items   # twice: one apply
  curl -N http://127.0.0.1:8080/t/globex/events?tick=1000          # server-sent events
  curl -s -X POST 'http://127.0.0.1:7101/_standin/fault?mode=reset_after_request'    # break a router
  curl -s http://127.0.0.1:7101/_standin/ledger                     # what was applied where
  curl -s http://127.0.0.1:9091/metrics | grep fenec_entry_
Ctrl-C stops everything.
TXT
wait -n "${pids[@]}"
