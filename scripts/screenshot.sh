#!/usr/bin/env bash
# Writes docs/status.png (or the path given): the /status page of a real entry (four entries
# in one gossip cluster on loopback, stand-in routers, one router down, one region marked) as
# headless Chromium renders it at 1280x900, and docs/status-390.png beside it, the same page
# on a phone (390x844). The pictures are taken by TestStatusPageChromium in
# node/status_test.go, which also checks the page's DOM, the PNGs, and its layout at both
# widths: nothing past the window's edge or out of its cell, no table header over another.
#
# Needs Debian's chromium: apt-get install -y chromium
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
	echo "screenshot: chromium is not installed; on Debian or Ubuntu: apt-get install -y chromium" >&2
	exit 1
fi
out="${1:-docs/status.png}"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

"${GO:-go}" test -count=1 -run '^TestStatusPageChromium$' ./node -args -status-screenshot="$out"
echo "wrote $out and ${out%.png}-390.png"
