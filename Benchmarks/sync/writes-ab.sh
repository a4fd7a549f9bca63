#!/usr/bin/env bash
# The sync server's item writes per second, two builds side by side: BASE and NEW (keychain-sync-server executables,
# release), alternating for ROUNDS rounds on one private PostgreSQL (scripts/sync-postgres.sh). Each round starts two
# instances of one build and runs the load generator (Benchmarks/Sources/SyncLoad: 64 writes in flight for 10 s) at
# 1 account and at 10,000 accounts. Figures in docs/PERFORMANCE.md.
#   Benchmarks/sync/writes-ab.sh BASE NEW [ROUNDS]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BASE NEW [ROUNDS]" >&2; exit 2; }
base="$(readlink -f "$1")"; new="$(readlink -f "$2")"; rounds="${3:-3}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
(cd "$root/Benchmarks" && swift build -c release --product SyncLoad >/dev/null)
load="$(cd "$root/Benchmarks" && swift build -c release --show-bin-path)/SyncLoad"
work="$(mktemp -d /tmp/kc-sync-ab.XXXXXX)"
chmod 755 "$work"  # PostgreSQL runs as nobody when this runs as root
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    "$root/scripts/sync-postgres.sh" stop "$work/pg" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
line=$("$root/scripts/sync-postgres.sh" start "$work/pg")
user=$(echo "$line" | sed 's/.*user=\([^ ]*\).*/\1/')
measure() {  # measure EXECUTABLE LABEL
    pids=()
    for port in 18771 18772; do
        "$1" --database-socket "$work/pg/.s.PGSQL.5432" --database-user "$user" --database-name postgres \
            --port "$port" --log-level error > "$work/server-$port.log" 2>&1 &
        pids+=($!)
        for _ in $(seq 100); do grep -q listening "$work/server-$port.log" 2>/dev/null && break; sleep 0.1; done
    done
    for accounts in 1 10000; do
        echo "$2, $accounts accounts: $("$load" http://127.0.0.1:18771,http://127.0.0.1:18772 "$accounts" 10 64 | tail -1)"
    done
    for pid in "${pids[@]}"; do kill "$pid"; wait "$pid" 2>/dev/null || true; done
    pids=()
}
for _ in $(seq "$rounds"); do
    measure "$base" base
    measure "$new" new
done
