#!/usr/bin/env bash
# keychaind under load from one process: the in-process find round trip, CLIENTS × REQUESTS mixed calls at once,
# and the daemon's resident memory after ITEMS items. Release builds of both packages; a scratch home.
#   Benchmarks/daemon/load.sh [ITEMS=1000] [CLIENTS=8] [REQUESTS=10000]
set -euo pipefail
items="${1:-1000}" clients="${2:-8}" requests="${3:-10000}"
cd "$(dirname "$0")/../.."
swift build -c release --product keychaind >/dev/null
daemon="$(swift build -c release --show-bin-path)/keychaind"
(cd Benchmarks && swift build -c release --product DaemonLoad >/dev/null)
load="$(cd Benchmarks && swift build -c release --show-bin-path)/DaemonLoad"
home="$(mktemp -d)"
stop() {
    kill "$(cat "$home"/run/keychain/*.sock.lock 2>/dev/null)" 2>/dev/null || true
    for _ in $(seq 1 100); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 || break; sleep 0.05; done
    rm -rf "$home"
}
trap stop EXIT
mkdir -p -m 700 "$home/run"
export HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
    XDG_RUNTIME_DIR="$home/run"
setsid -f "$daemon" >/dev/null 2>&1
for _ in $(seq 1 200); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 && break; sleep 0.05; done
"$load" "$items" "$clients" "$requests"
pid="$(cat "$home"/run/keychain/*.sock.lock)"
echo "keychaind resident memory after the run: $(awk '/VmRSS/ {print $2, $3}' "/proc/$pid/status") (peak $(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status"))"
