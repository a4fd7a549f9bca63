#!/usr/bin/env bash
# `security find-generic-password -w` as whole processes, through keychaind (a keychain with a password, unlocked
# once) and in-process (a keychain without a password: in-process a password keychain is locked in every new
# process), over keychains of STORE items; median and p90 of RUNS runs each, interleaved.
#   Benchmarks/daemon/run.sh [STORE=1000] [RUNS=50]        (after swift build -c release)
set -euo pipefail
store="${1:-1000}" runs="${2:-50}"
cd "$(dirname "$0")/../.."
bin="$(swift build -c release --show-bin-path)"
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
security() { "$bin/security" "$@"; }
KEYCHAIN_BACKEND=daemon security create-keychain -p bench-password locked >/dev/null
KEYCHAIN_BACKEND=embedded security create-keychain -p "" open >/dev/null
# `-w` last reads the password from standard input, so the item goes to the default keychain: set it per phase.
security default-keychain -s locked
for i in $(seq 1 "$store"); do echo "pw$i" | KEYCHAIN_BACKEND=daemon security add-generic-password -a "acct$i" -s svc -w; done
security default-keychain -s open
for i in $(seq 1 "$store"); do echo "pw$i" | KEYCHAIN_BACKEND=embedded security add-generic-password -a "acct$i" -s svc -w; done
target="acct$(( (store + 1) / 2 ))"
declare -a daemon=() embedded=()
for _ in $(seq 1 "$runs"); do
    t0=$(date +%s%N); KEYCHAIN_BACKEND=daemon security find-generic-password -a "$target" -s svc -w locked >/dev/null
    t1=$(date +%s%N); KEYCHAIN_BACKEND=embedded security find-generic-password -a "$target" -s svc -w open >/dev/null
    t2=$(date +%s%N)
    daemon+=($(( (t1 - t0) / 1000 ))); embedded+=($(( (t2 - t1) / 1000 )))
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "median %.1f ms, p90 %.1f ms", a[int((NR+1)/2)]/1000, a[int(NR*0.9)]/1000}'; }
echo "find -w, $store items, $runs runs: through keychaind $(stats "${daemon[@]}"); in-process $(stats "${embedded[@]}")"
