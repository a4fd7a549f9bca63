#!/usr/bin/env bash
# Backup and restore of a keychain of N items (default 100,000): `security backup-keychain` / `restore-keychain`'s
# service calls, in-process, each in a process of its own; the restore goes into an empty keychain of another home
# (another device key), then once more into the same one (every item kept: the merge path). Prints seconds, items
# and peak resident memory of each.
#   Benchmarks/backup/run.sh [N]          (builds PeerWorkload in release first)
set -euo pipefail
count="${1:-100000}"
cd "$(dirname "$0")/.."
swift build -c release --product PeerWorkload >/dev/null
bin="$(swift build -c release --show-bin-path)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export KEYCHAIN_BACKEND=embedded
home() { export HOME="$work/$1" XDG_DATA_HOME="$work/$1/data" XDG_STATE_HOME="$work/$1/state" XDG_CONFIG_HOME="$work/$1/config"; }
home source
"$bin/PeerWorkload" fill "$count"
"$bin/PeerWorkload" backup "$work/keychain.backup"
ls -l "$work/keychain.backup" | awk '{ printf "backup file: %.1f MiB\n", $5 / 1048576 }'
home target
"$bin/PeerWorkload" fill 0
"$bin/PeerWorkload" restore "$work/keychain.backup"
"$bin/PeerWorkload" restore "$work/keychain.backup"
