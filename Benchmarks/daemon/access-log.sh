#!/usr/bin/env bash
# The access log's cost (docs/ACCESS-LOG.md): the same load against a keychaind without the log and one with it,
# side by side, alternating, RUNS times each: the find round trip from one client, the mixed throughput of
# CLIENTS clients, and keychaind's CPU time, for the whole run and per call of the clients' part (DaemonLoad, release
# builds, a scratch home per run). MIX "finds" makes the clients' calls all finds: the find throughput's cost.
#   [KEYCHAIND_CPUS=0] Benchmarks/daemon/access-log.sh OLD_KEYCHAIND NEW_KEYCHAIND [RUNS=5] [ITEMS=1000] [CLIENTS=8] \
#     [REQUESTS=2000] [MIX=mixed|finds]
# KEYCHAIND_CPUS: both keychaind run on these CPUs only (taskset), the clients anywhere. On a 2-vCPU machine one
# CPU makes keychaind's CPU time per call repeat within about 1% from run to run (unpinned: about 5%), since its
# threads then never pass data between the two CPUs' caches.
# OLD_KEYCHAIND: a release keychaind without the log, built the same way from the same commit with
# Benchmarks/daemon/without-access-log.patch applied (the only difference then is the log; a commit from before the
# log also differs in everything done since, and speaks an older protocol than DaemonLoad), e.g.
#   git worktree add /tmp/nolog HEAD && swift build --package-path /tmp/nolog -c release --static-swift-stdlib \
#     --product keychaind && cp /tmp/nolog/.build/release/keychaind /tmp/keychaind-with-log &&
#   patch -d /tmp/nolog -p1 < Benchmarks/daemon/without-access-log.patch && swift build --package-path /tmp/nolog \
#     -c release --static-swift-stdlib --product keychaind   # OLD: /tmp/nolog/.build/release/keychaind
set -euo pipefail
old="$1" new="$2" runs="${3:-5}" items="${4:-1000}" clients="${5:-8}" requests="${6:-2000}" mix="${7:-mixed}"
cd "$(dirname "$0")/../.."
(cd Benchmarks && swift build -c release --product DaemonLoad >/dev/null)
load="$(cd Benchmarks && swift build -c release --show-bin-path)/DaemonLoad"

one() {  # one NAME DAEMON: one run in a scratch home; prints
         # "NAME find-p50-µs calls-per-second keychaind-cpu-ms keychaind-cpu-µs-per-call"
    local home
    home="$(mktemp -d)"
    mkdir -p -m 700 "$home/run"
    (
        export HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
            XDG_RUNTIME_DIR="$home/run"
        setsid -f ${KEYCHAIND_CPUS:+taskset -c "$KEYCHAIND_CPUS"} "$2" >/dev/null 2>&1
        for _ in $(seq 1 200); do ls "$home"/run/keychain/*.sock >/dev/null 2>&1 && break; sleep 0.05; done
        out="$("$load" "$items" "$clients" "$requests" "$mix")"
        pid="$(cat "$home"/run/keychain/*.sock.lock)"
        # keychaind's own CPU time for the whole run (utime + stime of /proc/PID/stat: every thread, ended ones
        # included, in clock ticks): the same work in both, so the ratio is what the log costs keychaind, free of
        # the wall clock's noise.
        cpu="$(sed 's/.*) //' "/proc/$pid/stat" | awk -v hz="$(getconf CLK_TCK)" '{printf "%d", ($12 + $13) * 1000 / hz}')"
        kill "$pid" 2>/dev/null || true
        p50="$(sed -n 's/^find round trip.*p50 \([0-9]*\) µs.*/\1/p' <<<"$out")"
        rate="$(sed -n 's/.* \([0-9]*\) requests\/s.*/\1/p' <<<"$out" | head -1)"
        per="$(sed -n 's/.* \([0-9]*\) µs per request.*/\1/p' <<<"$out")"
        echo "$1 $p50 $rate $cpu $per"
    )
    sleep 0.3
    rm -rf "$home"
}

results="$(for _ in $(seq 1 "$runs"); do one before "$old"; one after "$new"; done)"
echo "$results"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for column in 2 3 4 5; do
    b="$(awk -v c=$column '$1=="before" {print $c}' <<<"$results" | median)"
    a="$(awk -v c=$column '$1=="after" {print $c}' <<<"$results" | median)"
    name=$(case $column in 2) echo "find round trip p50 (µs)" ;; 3) echo "$mix calls/s" ;; 4) echo "keychaind CPU time (ms)" ;;
        5) echo "keychaind CPU time per $mix call of the clients (µs)" ;; esac)
    echo "$name: before $b, after $a, ratio $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a/b}')"
done
