#!/usr/bin/env bash
# keychaind's own CPU time per `secret-tool lookup` at 10,000 items, two builds side by side: BASE and NEW (keychaind
# executables, release), alternating for ROUNDS rounds, each in a private session bus and home of its own, filled with
# Python secretstorage, then 100 items stored with secret-tool (as Benchmarks/peers/secret-service.sh does); 3 x 100
# lookups of those items per round (utime + stime of keychaind from /proc/PID/stat). Figures in docs/PERFORMANCE.md.
# (Benchmarks/peers/secret-service.sh measures against gnome-keyring.) Before 2026-11-28 the lookups named items that
# did not exist, so the figures of that time are a search that finds nothing: no secret read, no record of one.
#   Benchmarks/peers/secret-service-cpu-ab.sh BASE NEW [ROUNDS]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BASE NEW [ROUNDS]" >&2; exit 2; }
base="$(readlink -f "$1")"; new="$(readlink -f "$2")"; rounds="${3:-2}"
here="$(cd "$(dirname "$0")" && pwd)"
python3 -c "import secretstorage" 2>/dev/null || pip install -q secretstorage >/dev/null 2>&1
measure() {  # measure KEYCHAIND LABEL
    local work
    work="$(mktemp -d)"
    mkdir -p "$work/run" && chmod 700 "$work/run"
    HOME="$work" XDG_DATA_HOME="$work/data" XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config" \
        XDG_RUNTIME_DIR="$work/run" keychaind="$1" label="$2" here="$here" dbus-run-session -- bash -c '
        "$keychaind" --secret-service --notify-ready > "$XDG_RUNTIME_DIR/ready" 2>/dev/null &
        for _ in $(seq 1 200); do [ -s "$XDG_RUNTIME_DIR/ready" ] && break; sleep 0.05; done
        python3 "$here/inprocess.py" secretstorage prefill 10000
        server=$(cat "$XDG_RUNTIME_DIR"/keychain/*.sock.lock)
        ticks=$(getconf CLK_TCK)
        cpu() { awk "{ print \$14 + \$15 }" "/proc/$server/stat"; }
        for i in $(seq 1 100); do
            printf "password-%s" "$i" | secret-tool store --label="bench $i" service bench-service account "bench-account-$i"
        done
        for i in $(seq 1 20); do secret-tool lookup service bench-service account "bench-account-$i" >/dev/null; done
        line="$label:"
        for _ in 1 2 3; do
            before=$(cpu)
            for i in $(seq 1 100); do secret-tool lookup service bench-service account "bench-account-$i" | grep -qx "password-$i" \
                || { echo "$label: lookup $i did not return its secret"; exit 1; }; done
            line="$line $(( ($(cpu) - before) * 1000000 / ticks / 100 ))"
        done
        echo "$line µs of keychaind CPU per lookup"
        kill "$server"  # and gone before its home is removed
        for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$server" 2>/dev/null || true' 2>/dev/null
    rm -rf "$work"
}
for _ in $(seq "$rounds"); do
    measure "$base" base
    measure "$new" new
done
