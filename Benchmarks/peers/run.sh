#!/usr/bin/env bash
# Side-by-side timing of one password operation at a time, on this keychain and on the Linux peers, in one run:
#   one process per operation: our `security`, gnome-keyring's `secret-tool`, `pass` (passphrase-less GnuPG key),
#                              `keepassxc-cli` (a KDBX 4 file whose key derivation is tuned to 100 ms);
#   in-process:                our native API (Benchmarks' PeerWorkload), Python secretstorage against the same
#                              gnome-keyring, Python keyring with keyrings.cryptfile.
# Every store lives in a fresh temporary HOME and is first filled with STORE items; then OPS items are added, found,
# updated and deleted, each operation timed on its own; then the store is locked and unlocked UNLOCKS times where it
# has a password to unlock with.
#   Benchmarks/peers/run.sh [OPS] [STORE]       (default 200 and 1000; the long runs: 1000 1000 and 1000 10000)
# Prints the tables for docs/PERFORMANCE.md and writes the chart to docs/peers-latency.png.
set -euo pipefail
ops="${1:-200}"
store="${2:-1000}"
# keyrings.cryptfile runs Argon2 on every operation (about 0.4 s each) and keepassxc-cli its key derivation (tuned to
# 0.1 s) in every process: a few dozen / a few hundred operations tell their cost.
cryptfile_ops=$(( ops < 20 ? ops : 20 ))
keepassxc_ops=${KEEPASSXC_OPS:-$(( ops < 200 ? ops : 200 ))}
unlocks=20
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

need=()
command -v secret-tool >/dev/null || need+=(libsecret-tools)
command -v gnome-keyring-daemon >/dev/null || need+=(gnome-keyring)
command -v pass >/dev/null || need+=(pass)
command -v dbus-run-session >/dev/null || need+=(dbus)
command -v keepassxc-cli >/dev/null || need+=(keepassxc)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c "import secretstorage, keyring, keyrings.cryptfile, matplotlib" 2>/dev/null \
    || pip install -q secretstorage keyring keyrings.cryptfile matplotlib >/dev/null 2>&1
# Statically linked Swift runtime, as a distribution would ship it: process start-up is then a few milliseconds.
(cd "$root" && swift build -c release --product security --static-swift-stdlib --scratch-path .build-static >/dev/null)
(cd "$root" && swift build -c release --product keychaind --static-swift-stdlib --scratch-path .build-static >/dev/null)
# What `security` becomes when it opens the keychain in-process (the embedded column).
(cd "$root" && swift build -c release --product keychain-embedded --static-swift-stdlib --scratch-path .build-static >/dev/null)
security="$root/.build-static/release/security"
(cd "$root/Benchmarks" && swift build -c release --product PeerWorkload >/dev/null)
workload="$root/Benchmarks/.build/release/PeerWorkload"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.tsv"

# time_ops NAME OP [COUNT] -- runs "$OP i" for i in 1..COUNT (default: ops) and records each one's microseconds
# (bash's own clock, so that no extra process is started inside the measurement).
time_ops() {
    local name="$1" op="$2"
    for i in $(seq 1 "${3:-$ops}"); do
        local t0 t1
        t0=${EPOCHREALTIME/./}
        "$op" "$i" >/dev/null 2>&1 || echo "failed: $name $op $i" >&2
        t1=${EPOCHREALTIME/./}
        printf '%s\t%s\t%s\n' "$name" "${op#op_}" "$(( t1 - t0 ))" >> "$results"
    done
}

disk_report() {  # NAME DIR ITEMS
    local bytes
    bytes=$(du -sb "$2" | cut -f1)
    # Readable = in a file's bytes or in a file's name (pass names its files after the entries).
    local readable=no
    if grep -rqa -e "bench-account-1" -e "bench-service" "$2" 2>/dev/null \
        || [ -n "$(find "$2" \( -name '*bench-account-1*' -o -name '*bench-service*' \) -print -quit)" ]; then
        readable=yes  # (not `find | grep -q`: under pipefail, find's SIGPIPE made a hit look like a miss)
    fi
    printf '%s\tbytes-per-item\t%s\n%s\tnames-readable\t%s\n' "$1" "$(( bytes / $3 ))" "$1" "$readable" >> "$results"
}

# --- this keychain, one `security` process per operation (keychain without a password, as a desktop login keychain
#     that is already unlocked; the password classes would add one scrypt per process without the daemon).
export XDG_DATA_HOME="$work/ours/data" XDG_STATE_HOME="$work/ours/state" XDG_CONFIG_HOME="$work/ours/config" \
    KEYCHAIN_BACKEND=embedded
"$workload" prefill "$store" 2>/dev/null
op_add() { "$security" add-generic-password -a "bench-account-$1" -s bench-service -w "password-$1"; }
op_find() { "$security" find-generic-password -a "bench-account-$1" -s bench-service -w; }
op_update() { "$security" add-generic-password -U -a "bench-account-$1" -s bench-service -w "changed-$1"; }
op_delete() { "$security" delete-generic-password -a "bench-account-$1" -s bench-service; }
for op in op_add op_find op_update; do time_ops security "$op"; done
disk_report security "$work/ours" $(( store + ops ))
time_ops security op_delete
"$workload" run "$ops" >> "$results"
# Unlock: PeerWorkload creates the keychain "bench-unlock" with a password and times unlocks in-process; each
# `security unlock-keychain` process reads the password from standard input.
"$workload" unlock "$unlocks" >> "$results"
op_unlock() { printf 'bench-password\n' | "$security" unlock-keychain bench-unlock; }
time_ops security op_unlock "$unlocks"
unset XDG_DATA_HOME XDG_STATE_HOME XDG_CONFIG_HOME KEYCHAIN_BACKEND

# --- this keychain through keychaind: a keychain WITH a password, unlocked once (as a desktop session has it), then
#     one `security` process per operation, each served by the daemon.
export XDG_DATA_HOME="$work/kcd/data" XDG_STATE_HOME="$work/kcd/state" XDG_CONFIG_HOME="$work/kcd/config" \
    XDG_RUNTIME_DIR="$work/kcd/run" KEYCHAIN_BACKEND=daemon
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
"$security" create-keychain -p bench-password bench >/dev/null
"$security" default-keychain -s bench
for i in $(seq 1 "$store"); do "$security" add-generic-password -a "fill-account-$i" -s bench-fill -w "fill-$i"; done
for op in op_add op_find op_update; do time_ops security-keychaind "$op"; done
disk_report security-keychaind "$work/kcd/data" $(( store + ops ))
time_ops security-keychaind op_delete
kill "$(cat "$XDG_RUNTIME_DIR"/keychain/*.sock.lock)" 2>/dev/null || true
unset XDG_DATA_HOME XDG_STATE_HOME XDG_CONFIG_HOME XDG_RUNTIME_DIR KEYCHAIN_BACKEND

# --- gnome-keyring through secret-tool, one process per operation, in a private D-Bus session.
mkdir -p "$work/gk"
export -f time_ops disk_report
mkdir -p "$work/gk/run" && chmod 700 "$work/gk/run"
HOME="$work/gk" XDG_DATA_HOME="$work/gk/data" XDG_RUNTIME_DIR="$work/gk/run" ops="$ops" store="$store" unlocks="$unlocks" \
    results="$results" here="$here" \
    dbus-run-session -- bash -c 2>"$work/gk/dbus.log" '
    set -e
    # A login keyring with a password, unlocked, as a desktop session has it.
    printf "bench-password" | gnome-keyring-daemon --unlock --components=secrets >/dev/null
    python3 "$here/inprocess.py" secretstorage prefill "$store"
    op_add() { printf "password-%s" "$1" | secret-tool store --label="bench $1" service bench-service account "bench-account-$1"; }
    op_find() { secret-tool lookup service bench-service account "bench-account-$1"; }
    op_update() { printf "changed-%s" "$1" | secret-tool store --label="bench $1" service bench-service account "bench-account-$1"; }
    op_delete() { secret-tool clear service bench-service account "bench-account-$1"; }
    for op in op_add op_find op_update; do time_ops secret-tool "$op"; done
    disk_report secret-tool "$XDG_DATA_HOME" $(( store + ops ))
    time_ops secret-tool op_delete
    python3 "$here/inprocess.py" secretstorage run "$ops" >> "$results"
    python3 "$here/inprocess.py" secretstorage unlock "$unlocks" >> "$results"
'

# --- pass, with a passphrase-less GnuPG key, one process per operation.
export GNUPGHOME="$work/pass/gnupg" PASSWORD_STORE_DIR="$work/pass/store"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key bench@example.invalid default default never 2>/dev/null
pass init bench@example.invalid >/dev/null
for i in $(seq 1 "$store"); do printf 'fill-password-%s\n' "$i" | pass insert -e "bench-fill/fill-account-$i" >/dev/null; done
op_add() { printf 'password-%s\n' "$1" | pass insert -e "bench-service/bench-account-$1"; }
op_find() { pass show "bench-service/bench-account-$1"; }
op_update() { printf 'changed-%s\n' "$1" | pass insert -f -e "bench-service/bench-account-$1"; }
op_delete() { pass rm -f "bench-service/bench-account-$1"; }
for op in op_add op_find op_update; do time_ops pass "$op"; done
disk_report pass "$PASSWORD_STORE_DIR" $(( store + ops ))
time_ops pass op_delete
gpgconf --kill gpg-agent 2>/dev/null || true
unset GNUPGHOME PASSWORD_STORE_DIR

# --- keepassxc-cli, one process per operation; the master password comes on standard input each time, as a script
#     must give it (there is no agent). Filled by importing a KeePass XML export.
mkdir -p "$work/kp"
kdbx="$work/kp/bench.kdbx"
{
    printf '<?xml version="1.0" encoding="UTF-8"?>\n<KeePassFile><Meta><Generator>bench</Generator></Meta><Root>'
    printf '<Group><Name>Root</Name><Group><Name>bench-fill</Name>'
    for i in $(seq 1 "$store"); do
        printf '<Entry><String><Key>Title</Key><Value>fill-account-%s</Value></String>' "$i"
        printf '<String><Key>UserName</Key><Value>fill-account-%s</Value></String>' "$i"
        printf '<String><Key>Password</Key><Value>fill-password-%s</Value></String></Entry>' "$i"
    done
    printf '</Group><Group><Name>bench-service</Name></Group></Group></Root></KeePassFile>\n'
} > "$work/kp/fill.xml"
printf 'bench-password\nbench-password\n' | keepassxc-cli import -q -p -t 100 "$work/kp/fill.xml" "$kdbx" >/dev/null 2>&1
rm "$work/kp/fill.xml"
op_add() { printf 'bench-password\npassword-%s\n' "$1" | keepassxc-cli add -q -u "bench-account-$1" -p "$kdbx" "bench-service/bench-account-$1"; }
op_find() { printf 'bench-password\n' | keepassxc-cli show -q -s -a Password "$kdbx" "bench-service/bench-account-$1"; }
op_update() { printf 'bench-password\nchanged-%s\n' "$1" | keepassxc-cli edit -q -p "$kdbx" "bench-service/bench-account-$1"; }
op_delete() { printf 'bench-password\n' | keepassxc-cli rm -q "$kdbx" "bench-service/bench-account-$1"; }
for op in op_add op_find op_update; do time_ops keepassxc-cli "$op" "$keepassxc_ops"; done
disk_report keepassxc-cli "$work/kp" $(( store + keepassxc_ops ))
time_ops keepassxc-cli op_delete "$keepassxc_ops"
# Unlock: opening the database with its password (key derivation, then decrypting and parsing the whole file).
op_unlock() { printf 'bench-password\n' | keepassxc-cli db-info -q "$kdbx"; }
time_ops keepassxc-cli op_unlock "$unlocks"

# --- Python keyring with keyrings.cryptfile, in-process (empty store: each operation rewrites the whole file).
HOME="$work/cf" XDG_DATA_HOME="$work/cf/data" python3 "$here/inprocess.py" cryptfile run "$cryptfile_ops" >> "$results"

cp "$results" "${PEERS_RESULTS:-/dev/null}" 2>/dev/null || true
python3 "$here/report.py" "$results" "$ops" "$store" "$root/docs/peers-latency-$store.png"
