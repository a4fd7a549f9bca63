#!/usr/bin/env bash
# Apple-style code in-process: SecItemCopyMatching (KEYCHAIN_BACKEND=embedded) against the plain-SQLite floor, in
# one run (Benchmarks/Sources/SecItemFind); a scratch home each time.
#   Benchmarks/daemon/secitem.sh [ITEMS=2000] [FINDS=20000]
set -euo pipefail
items="${1:-2000}" finds="${2:-20000}"
cd "$(dirname "$0")/../.."
(cd Benchmarks && swift build -c release --product SecItemFind 2>&1 | grep -E "error" || true)
bench="$(cd Benchmarks && swift build -c release --show-bin-path)/SecItemFind"
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
mkdir -p -m 700 "$home/run"
HOME="$home" XDG_DATA_HOME="$home/data" XDG_STATE_HOME="$home/state" XDG_CONFIG_HOME="$home/config" \
    XDG_RUNTIME_DIR="$home/run" KEYCHAIN_BACKEND=embedded "$bench" "$items" "$finds"
