#!/usr/bin/env bash
# The Secret Service side by side, in one run: the same secret-tool (libsecret, which negotiates the encrypted DH
# session with both) against gnome-keyring-daemon and against keychaind --secret-service, each in a private D-Bus
# session and a fresh HOME whose default collection is first filled with STORE items (Python secretstorage); then
# OPS items are stored, looked up, stored again (replace) and cleared, one secret-tool process per operation.
#   Benchmarks/peers/secret-service.sh [OPS] [STORE]      (default 100 and 10000)
# Prints the table and the bars for docs/PERFORMANCE.md.
set -euo pipefail
ops="${1:-100}"
store="${2:-10000}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

need=()
command -v secret-tool >/dev/null || need+=(libsecret-tools)
command -v gnome-keyring-daemon >/dev/null || need+=(gnome-keyring)
command -v dbus-run-session >/dev/null || need+=(dbus)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c "import secretstorage" 2>/dev/null || pip install -q secretstorage >/dev/null 2>&1
# keychaind as a distribution would ship it: release, Swift runtime linked statically.
# SCRATCH names the build directory (default .build-static; another benchmark's static build is as good).
scratch="${SCRATCH:-.build-static}"
(cd "$root" && swift build -c release --product keychaind --static-swift-stdlib --scratch-path "$scratch" >/dev/null)
keychaind="$root/$scratch/release/keychaind"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.tsv"

# The timed part, run inside each private session: NAME, then the server already serving the bus.
cat > "$work/measure.sh" <<'MEASURE'
set -e
name="$1"
python3 "$here/inprocess.py" secretstorage prefill "$store"
# The service's own CPU time (utime + stime of its process, /proc/PID/stat) over each operation's OPS runs: what
# the service spends, without secret-tool's start and its half of the DH exchange.
server="$(eval "$server_pid")"
ticks=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }
op_add() { printf "password-%s" "$1" | secret-tool store --label="bench $1" service bench-service account "bench-account-$1"; }
op_find() { secret-tool lookup service bench-service account "bench-account-$1"; }
op_update() { printf "changed-%s" "$1" | secret-tool store --label="bench $1" service bench-service account "bench-account-$1"; }
op_delete() { secret-tool clear service bench-service account "bench-account-$1"; }
for op in op_add op_find op_update op_delete; do
    before=$(cpu)
    for i in $(seq 1 "$ops"); do
        t0=${EPOCHREALTIME/./}
        "$op" "$i" >/dev/null 2>&1 || echo "failed: $name $op $i" >&2
        t1=${EPOCHREALTIME/./}
        printf '%s\t%s\t%s\n' "$name" "${op#op_}" "$(( t1 - t0 ))" >> "$results"
    done
    printf '%s\tcpu-%s\t%s\n' "$name" "${op#op_}" "$(( ($(cpu) - before) * 1000000 / ticks / ops ))" >> "$results"
done
MEASURE

export ops store here results
# --- gnome-keyring-daemon (secrets component), a login keyring with a password, unlocked. Filling 10,000 items
# takes it about 25 minutes (it rewrites its whole file at every write); SECRET_SERVICE_PEER_RESULTS=FILE reuses the
# gnome-keyring lines of an earlier run's results instead (say so when quoting the figures).
if [ -n "${SECRET_SERVICE_PEER_RESULTS:-}" ]; then
    grep '^gnome-keyring' "$SECRET_SERVICE_PEER_RESULTS" >> "$results"
else
    mkdir -p "$work/gk/run" && chmod 700 "$work/gk/run"
    HOME="$work/gk" XDG_DATA_HOME="$work/gk/data" XDG_RUNTIME_DIR="$work/gk/run" \
        server_pid='pgrep -n -u "$(id -u)" -x gnome-keyring-d' dbus-run-session -- bash -c '
        printf "bench-password" | gnome-keyring-daemon --unlock --components=secrets >/dev/null
        bash "$0" gnome-keyring' "$work/measure.sh" 2>"$work/gk.log"
    cp "$results" "${TMPDIR:-/tmp}/secret-service-gnome-keyring.tsv"
fi

# --- keychaind --secret-service: the default keychain, created by the first store.
mkdir -p "$work/kc/run" && chmod 700 "$work/kc/run"
HOME="$work/kc" XDG_DATA_HOME="$work/kc/data" XDG_STATE_HOME="$work/kc/state" XDG_CONFIG_HOME="$work/kc/config" \
    XDG_RUNTIME_DIR="$work/kc/run" keychaind="$keychaind" server_pid='cat "$XDG_RUNTIME_DIR"/keychain/*.sock.lock' \
    dbus-run-session -- bash -c '
    "$keychaind" --secret-service --notify-ready > "$XDG_RUNTIME_DIR/ready" 2>/dev/null &
    for _ in $(seq 1 200); do [ -s "$XDG_RUNTIME_DIR/ready" ] && break; sleep 0.05; done
    bash "$0" keychaind
    kill "$(cat "$XDG_RUNTIME_DIR"/keychain/*.sock.lock)"' "$work/measure.sh" 2>"$work/kc.log"

python3 - "$results" "$ops" "$store" <<'REPORT'
import statistics, sys
from collections import defaultdict
path, ops, store = sys.argv[1], sys.argv[2], sys.argv[3]
times = defaultdict(list)
for line in open(path):
    name, op, micros = line.rstrip("\n").split("\t")
    times[(name, op)].append(int(micros) / 1000)
names, operations = ["keychaind", "gnome-keyring"], ["add", "find", "update", "delete"]
print(f"secret-tool against each Secret Service, {store} items in the collection, {ops} operations each; median "
      "milliseconds per whole secret-tool process (operations timed):\n")
print("| service | store (new) | lookup | store (replace) | clear |\n|---|---:|---:|---:|---:|")
for name in names:
    print(f"| {name} | " + " | ".join(f"{statistics.median(times[(name, op)]):.1f} ({len(times[(name, op)])})"
                                     for op in operations) + " |")
cpu = {key: values[0] for key, values in times.items() if key[1].startswith("cpu-")}
if cpu:
    print(f"\nEach service's own CPU time (utime + stime of its process) per operation, microseconds, over the "
          f"{ops} operations of each kind:\n")
    print("| service | store (new) | lookup | store (replace) | clear |\n|---|---:|---:|---:|---:|")
    for name in names:
        print(f"| {name} | " + " | ".join(f"{cpu.get((name, 'cpu-' + op), float('nan')) * 1000:.0f}"
                                         for op in operations) + " |")
print("\n| bar | ratio | met |\n|---|---:|---|")
for title, op, target in [("`secret-tool lookup` ≥ 2x faster against keychaind", "find", 2),
                          ("`secret-tool store` ≥ 10x faster against keychaind", "add", 10)]:
    ratio = statistics.median(times[("gnome-keyring", op)]) / statistics.median(times[("keychaind", op)])
    print(f"| {title} | {ratio:.1f}x | {'yes' if ratio >= target else '**no**'} |")
for title, op, target in [("keychaind's CPU per `secret-tool lookup` ≤ 1/5 of gnome-keyring's", "cpu-find", 5),
                          ("keychaind's CPU per `secret-tool store` ≥ 20x less than gnome-keyring's", "cpu-add", 20)]:
    if ("keychaind", op) in cpu and ("gnome-keyring", op) in cpu:
        ratio = cpu[("gnome-keyring", op)] / max(cpu[("keychaind", op)], 1e-9)
        print(f"| {title} | {ratio:.1f}x | {'yes' if ratio >= target else '**no**'} |")
REPORT
