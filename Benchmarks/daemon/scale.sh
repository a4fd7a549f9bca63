#!/usr/bin/env bash
# keychaind under load, as issue 22 §3 states it (docs/PERFORMANCE.md "keychaind under load: many clients"):
# finds from CLIENTS clients against one, the others' p99 beside a client that holds a question open / sent half a
# frame / floods, 1,000 idle connections, and memory after TOTAL finds. Release builds with the Swift runtime linked
# statically (as installed); a scratch home; keychaind's pinentry is one that never answers.
#   Benchmarks/daemon/scale.sh [ITEMS=10000] [CLIENTS=64] [TOTAL=1000000]
#   KEYCHAIND=/path/to/another/keychaind Benchmarks/daemon/scale.sh …   (the same benchmark against another build)
#   STEPS="parallel" Benchmarks/daemon/scale.sh …   (some of the steps: parallel, disturbed, idle, steady)
#   KEYCHAIND_CPUS=0 Benchmarks/daemon/scale.sh …   (keychaind held to these CPUs, through taskset)
set -euo pipefail
items="${1:-10000}" clients="${2:-64}" total="${3:-1000000}"
cd "$(dirname "$0")/../.."
scratch="${SCRATCH:-.build}"
swift build --scratch-path "$scratch" -c release --static-swift-stdlib --product keychaind 2>&1 | grep -E "error" || true
daemon="${KEYCHAIND:-$(swift build --scratch-path "$scratch" -c release --static-swift-stdlib --show-bin-path)/keychaind}"
(cd Benchmarks && swift build -c release --product DaemonScale 2>&1 | grep -E "error" || true)
scale="$(cd Benchmarks && swift build -c release --show-bin-path)/DaemonScale"
home="$(mktemp -d)"
stop() {
    kill "$(cat "$home"/run/keychain/*.sock.lock 2>/dev/null)" 2>/dev/null || true
    for _ in $(seq 1 100); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 || break; sleep 0.05; done
    pkill -f "$home/pinentry-silent" 2>/dev/null || true
    rm -rf "$home"
}
trap stop EXIT
mkdir -p -m 700 "$home/run"
# A pinentry that greets and then never answers: the question a user leaves open.
printf '#!/bin/sh\necho "OK ready"\nexec sleep 100000\n' > "$home/pinentry-silent"
chmod 755 "$home/pinentry-silent"
export HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
    XDG_RUNTIME_DIR="$home/run"
PINENTRY_PROGRAM="$home/pinentry-silent" setsid -f ${KEYCHAIND_CPUS:+taskset -c "$KEYCHAIND_CPUS"} "$daemon" >/dev/null 2>&1
for _ in $(seq 1 200); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 && break; sleep 0.05; done
steps=" ${STEPS:-parallel disturbed idle steady} "
if [[ "$steps" == *" parallel "* ]]; then
    echo "== finds: one client, then $clients at once"
    "$scale" "$items" parallel "$clients" 20000
fi
if [[ "$steps" == *" disturbed "* ]]; then
    echo "== 8 clients' finds, quiet and beside clients that misbehave"
    "$scale" "$items" disturbed 8 2000
fi
if [[ "$steps" == *" idle "* ]]; then
    echo "== 1,000 idle connections"
    "$scale" "$items" idle 1000
fi
if [[ "$steps" == *" steady "* ]]; then
    echo "== memory after $total finds"
    "$scale" "$items" steady "$total"
fi
