#!/usr/bin/env bash
# Sync, measured (issue: end-to-end encrypted sync; figures in docs/PERFORMANCE.md):
#   1. a new device receives N items (default 10,000): the first device's keychain is filled with N synchronizable
#      items, `security sync-setup` sends them, and `security sync-recover` on a new home takes them all;
#   2. a change on one device readable on another while both are online (keychaind's background rounds and the
#      server's push), median of CHANGES (10);
#   3. the server: item writes per second with two instances on one PostgreSQL, at 1 and at 10,000 accounts.
# Release builds of keychaind, security, keychain-example and keychain-sync-server (the Swift runtime linked in, as
# installed), PostgreSQL from scripts/sync-postgres.sh.
#   Benchmarks/sync/run.sh [N [CHANGES [load|no-load]]]   (CHANGES: how many changes part 2 times, default 10)
set -euo pipefail
count="${1:-10000}"
changes="${2:-10}"
load="${3:-load}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
scratch="$root/.build-bench-sync"
for product in keychaind security keychain-example keychain-sync-server; do
    swift build --package-path "$root" --scratch-path "$scratch" -c release --static-swift-stdlib --product "$product" >/dev/null
done
bin="$scratch/release"
(cd "$root/Benchmarks" && swift build -c release --product PeerWorkload >/dev/null && swift build -c release --product SyncLoad >/dev/null)
bench="$(cd "$root/Benchmarks" && swift build -c release --show-bin-path)"
work="$(mktemp -d /tmp/kc-sync-bench.XXXXXX)"
chmod 755 "$work"  # PostgreSQL runs as nobody when this runs as root
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    "$root/scripts/sync-postgres.sh" stop "$work/pg" || true
    rm -rf "$work"
}
trap cleanup EXIT
line=$("$root/scripts/sync-postgres.sh" start "$work/pg")
user=$(echo "$line" | sed 's/.*user=\([^ ]*\).*/\1/')
server() {  # server PORT
    "$bin/keychain-sync-server" --database-socket "$work/pg/.s.PGSQL.5432" --database-user "$user" \
        --database-name postgres --port "$1" --log-level error > "$work/server-$1.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q listening "$work/server-$1.log" 2>/dev/null && return; sleep 0.1; done
    echo "server on $1 did not start" >&2; exit 1
}
server 18761
server 18762
home() {  # home NAME: a user of its own, with its own keychaind (started on demand, release build)
    export HOME="$work/$1" XDG_DATA_HOME="$work/$1/data" XDG_STATE_HOME="$work/$1/state" XDG_CONFIG_HOME="$work/$1/config"
    export XDG_RUNTIME_DIR="$work/$1/run" KEYCHAIN_BACKEND=daemon KEYCHAIN_SYNC_INTERVAL="${2:-off}"
    mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

home first
KEYCHAIN_BACKEND=embedded "$bench/PeerWorkload" fill-sync "$count"
start=$(now)
setup=$("$bin/security" sync-setup --server http://127.0.0.1:18761)
echo "first device sends $count items: $(elapsed "$start") s"
key=$(echo "$setup" | sed -n '/Recovery key/{n;p}' | tr -d ' ')
home second
start=$(now)
echo "$key" | "$bin/security" sync-recover --server http://127.0.0.1:18762 -P - >/dev/null
echo "new device receives $count items: $(elapsed "$start") s"
"$bin/security" sync-status | grep -q "items:    $count\$" || { echo "the new device does not hold $count items" >&2; exit 1; }

# Both online, with keychaind's background rounds (the timer at 60 s: what arrives comes by the push).
for name in first second; do home "$name" 60; kill "$(cat "$work/$name/run/keychain/"*.sock.lock)" 2>/dev/null || true; done
sleep 0.5
home first 60; "$bin/security" sync-status >/dev/null
home second 60; "$bin/security" sync-status >/dev/null
sleep 1
times=()
for i in $(seq "$changes"); do
    home first 60
    echo -n "value-$i" | "$bin/keychain-example" --synchronizable set latency acct
    start=$(now)
    home second 60
    until [ "$("$bin/keychain-example" --synchronizable get latency acct 2>/dev/null)" = "value-$i" ]; do sleep 0.02; done
    times+=("$(elapsed "$start")")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "change readable on the other device: median %.2f s, max %.2f s (%d changes)\n", a[int((NR + 1) / 2)], a[NR], NR }'

[ "$load" = load ] || exit 0
for accounts in 1 10000; do
    "$bench/SyncLoad" http://127.0.0.1:18761,http://127.0.0.1:18762 "$accounts" 10 64
done
