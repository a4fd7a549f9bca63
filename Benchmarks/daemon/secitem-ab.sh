#!/usr/bin/env bash
# Apple-style finds in-process, an earlier revision beside this checkout (issue 22: "a benchmark that runs the
# previous release beside the current one"): the same SecItemFind source (Benchmarks/Sources/SecItemFind) built
# against REV's Security module and against this checkout's, run in turn, ROUNDS rounds, a scratch home per run.
#   Benchmarks/daemon/secitem-ab.sh REV [ROUNDS=3] [ITEMS=2000] [FINDS=20000]
# REV is any revision whose package has the Security library (every one since the first slice). Its build is kept
# in ${SECITEM_AB_CACHE:-$XDG_CACHE_HOME/swift-keychain/secitem-ab}/REV (~/.cache when XDG_CACHE_HOME is unset; a
# directory of the user's own, never one in /tmp that another user could have made first and filled), so a second run
# with the same REV builds only this checkout's side.
# Release builds, one at a time (2 cores); the first build of REV takes several minutes.
set -euo pipefail
rev="$1" rounds="${2:-3}" items="${3:-2000}" finds="${4:-20000}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
commit="$(git -C "$root" rev-parse --verify "$rev^{commit}")"
top="${SECITEM_AB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/swift-keychain/secitem-ab}"
mkdir -p -m 700 "$top"
[ -O "$top" ] || { echo "secitem-ab.sh: $top is not yours: refusing to run what it holds" >&2; exit 1; }
cache="$top/$commit"
old_bench="$cache/bench/.build/release/SecItemFind"
if [ ! -x "$old_bench" ]; then
    mkdir -p "$cache"
    # REV's files only (not a worktree: nothing is registered in this clone).
    if [ ! -d "$cache/tree" ]; then
        mkdir -p "$cache/tree.partial"
        git -C "$root" archive "$commit" | tar -x -C "$cache/tree.partial"
        mv "$cache/tree.partial" "$cache/tree"
    fi
    # A package of its own beside REV's tree: the benchmark's source, REV's Security, the GRDB REV resolves.
    mkdir -p "$cache/bench/Sources/SecItemFind"
    cp "$root/Benchmarks/Sources/SecItemFind/main.swift" "$cache/bench/Sources/SecItemFind/"
    cat >"$cache/bench/Package.swift" <<'EOF'
// swift-tools-version: 6.1
import PackageDescription
let package = Package(
    name: "secitem-ab",
    dependencies: [.package(path: "../tree"), .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0")],
    targets: [.executableTarget(name: "SecItemFind", dependencies: [
        .product(name: "Security", package: "tree"), .product(name: "GRDB", package: "GRDB.swift")])]
)
EOF
    echo "secitem-ab.sh: building SecItemFind against $rev ($commit)" >&2
    swift build --package-path "$cache/bench" -c release --product SecItemFind 2>&1 | grep -E "error|warning: unre" >&2 || true
    [ -x "$old_bench" ] || { echo "secitem-ab.sh: the build against $rev failed" >&2; exit 1; }
fi
echo "secitem-ab.sh: building SecItemFind against this checkout" >&2
(cd "$root/Benchmarks" && swift build -c release --product SecItemFind 2>&1 | grep -E "error" >&2 || true)
new_bench="$(cd "$root/Benchmarks" && swift build -c release --show-bin-path)/SecItemFind"

one() {  # one NAME BENCH: one run in a scratch home; prints "NAME p50 floor ratio"
    local home
    home="$(mktemp -d)"
    mkdir -p -m 700 "$home/run"
    local out
    out="$(HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
        XDG_RUNTIME_DIR="$home/run" KEYCHAIN_BACKEND=embedded "$2" "$items" "$finds")"
    rm -rf "$home"
    local p50 floor
    p50="$(sed -n 's/^SecItemCopyMatching.*p50 \([0-9.]*\) µs.*/\1/p' <<<"$out")"
    floor="$(sed -n 's/^plain SQLite floor.*p50 \([0-9.]*\) µs.*/\1/p' <<<"$out")"
    echo "$1 $p50 $floor $(awk -v a="$p50" -v b="$floor" 'BEGIN {printf "%.2f", a/b}')"
}
results=""
for _ in $(seq 1 "$rounds"); do
    for which in old new; do
        bench_var="${which}_bench"
        line="$(one "$which" "${!bench_var}")"
        echo "$line"
        results+="$line"$'\n'
    done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
old50="$(awk '$1=="old" {print $2}' <<<"$results" | median)"
new50="$(awk '$1=="new" {print $2}' <<<"$results" | median)"
echo "SecItemCopyMatching p50, median of $rounds: $rev $old50 µs, this checkout $new50 µs, this/$rev $(awk -v a="$new50" -v b="$old50" 'BEGIN {printf "%.3f", a/b}')"
echo "floor p50 (each run's own), median: $(awk '{print $3}' <<<"$results" | median) µs"
