#!/usr/bin/env bash
# What one short-lived client costs keychaind (docs/PERFORMANCE.md, "What one new client costs keychaind"): two
# keychaind builds, in turn, each serving FINDS `security find-generic-password -w` processes (one connection each:
# identification, session, search list and states, search) in a keychain of ITEMS items; keychaind's own CPU time
# over them (utime + stime from /proc/PID/stat, every thread) and the loop's wall time, per find.
#   Benchmarks/daemon/connection-ab.sh OLD NEW [ROUNDS=5] [FINDS=400] [ITEMS=1000]
# OLD and NEW are each a keychaind executable, served by the same `security` (the release build in .build-install,
# as scripts/install.sh builds it), or a directory that holds a `keychaind` and the `security` of the same build
# (builds that speak different protocol versions). The items are stored with -A (any program reads them), so no
# question depends on which build made them.
set -euo pipefail
old="$1" new="$2" rounds="${3:-5}" finds="${4:-400}" items="${5:-1000}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
installed_security="$root/.build-install/release/security"
pair() {  # BUILD: "keychaind security" of that build
    if [ -d "$1" ]; then echo "$1/keychaind $1/security"; else echo "$1 $installed_security"; fi
}
read -r old_keychaind old_security <<<"$(pair "$old")"
read -r new_keychaind new_security <<<"$(pair "$new")"
for tool in "$old_security" "$new_security"; do
    [ -x "$tool" ] || { echo "connection-ab.sh: no $tool: build it first: swift build --scratch-path .build-install -c release --static-swift-stdlib --product security" >&2; exit 1; }
done
home="$(mktemp -d)"
daemon=""
stop() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    daemon=""
    for _ in $(seq 1 100); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 || break; sleep 0.05; done
}
trap 'stop; rm -rf "$home"' EXIT
mkdir -p -m 700 "$home/run"
export HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
    XDG_RUNTIME_DIR="$home/run"
start() {  # start KEYCHAIND: serve this home with that build until stop
    "$1" >/dev/null 2>&1 &
    daemon=$!
    # The socket's name depends on the directories served (keychaind-HASH.sock for these).
    for _ in $(seq 1 200); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 && return; sleep 0.05; done
    echo "connection-ab.sh: $1 did not start" >&2
    exit 1
}
find_one() { "$security" find-generic-password -s bench-fill -a "fill-account-$((items / 2))" -w >/dev/null; }

security="$new_security"
start "$new_keychaind"
for i in $(seq 0 $((items - 1))); do
    printf 'fill-password-%s' "$i" | "$security" add-generic-password -A -s bench-fill -a "fill-account-$i" -w 2>/dev/null
done
[ "$("$security" find-generic-password -s bench-fill -a fill-account-7 -w)" = fill-password-7 ] \
    || { echo "connection-ab.sh: the keychain does not answer" >&2; exit 1; }
stop

ticks="$(getconf CLK_TCK)"
results=""
for _ in $(seq 1 "$rounds"); do
    for which in old new; do
        keychaind_var="${which}_keychaind" security_var="${which}_security"
        security="${!security_var}"
        start "${!keychaind_var}"
        find_one  # the keychain opened, before the count starts
        before="$(awk '{print $14 + $15}' "/proc/$daemon/stat")"
        t0=${EPOCHREALTIME/./}
        for _ in $(seq 1 "$finds"); do find_one; done
        t1=${EPOCHREALTIME/./}
        after="$(awk '{print $14 + $15}' "/proc/$daemon/stat")"
        stop
        line="$which $(( (after - before) * 1000000 / ticks / finds )) $(( (t1 - t0) / finds ))"
        echo "$line"
        results+="$line"$'\n'
    done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for column in 2 3; do
    b="$(awk -v c=$column '$1=="old" {print $c}' <<<"$results" | median)"
    a="$(awk -v c=$column '$1=="new" {print $c}' <<<"$results" | median)"
    name=$([ $column = 2 ] && echo "keychaind CPU per find (µs)" || echo "wall time per find, whole loop (µs)")
    echo "$name: old $b, new $a, new/old $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a/b}')"
done
