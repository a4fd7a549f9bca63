#!/usr/bin/env bash
# Side-by-side, whole-process timing of one password operation per command, on this keychain and on the Linux
# peers: gnome-keyring through `secret-tool`, and `pass` with a passphrase-less GnuPG key.
# Every store lives in a fresh temporary HOME; the workload is the same for each.
#   Benchmarks/peers/run.sh [ITEMS]          (default 200; the long run uses 1000)
# Prints one line per store and operation: median and mean milliseconds per operation, and bytes on disk per item,
# and whether the service/account names are readable in the files.
set -euo pipefail
items="${1:-200}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

need=()
command -v secret-tool >/dev/null || need+=(libsecret-tools)
command -v gnome-keyring-daemon >/dev/null || need+=(gnome-keyring)
command -v pass >/dev/null || need+=(pass)
command -v dbus-run-session >/dev/null || need+=(dbus)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Statically linked Swift runtime, as a distribution would ship it: process start-up is then a few milliseconds.
(cd "$root" && swift build -c release --product security --static-swift-stdlib --scratch-path .build-static >/dev/null)
security="$root/.build-static/release/security"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
results="$work/results.tsv"

# time_ops NAME OP -- runs "$OP i" for i in 1..items and records each one's milliseconds.
time_ops() {
    local name="$1" op="$2"
    for i in $(seq 1 "$items"); do
        local t0 t1
        t0=$(date +%s%N)
        "$op" "$i" >/dev/null 2>&1 || echo "failed: $name $op $i" >&2
        t1=$(date +%s%N)
        printf '%s\t%s\t%s\n' "$name" "${op#op_}" "$(( (t1 - t0) / 1000 ))" >> "$results"
    done
}

disk_report() {  # NAME DIR
    local bytes
    bytes=$(du -sb "$2" | cut -f1)
    local readable=no
    if grep -rqa "bench-account-1" "$2" 2>/dev/null || grep -rqa "bench-service" "$2" 2>/dev/null; then readable=yes; fi
    printf '%s\tbytes-per-item\t%s\n%s\tnames-readable\t%s\n' "$1" "$(( bytes / items ))" "$1" "$readable" >> "$results"
}

# --- this keychain, one `security` process per operation (keychain without a password, as a desktop login keychain
#     that is already unlocked; the password classes would add one scrypt per process without the daemon).
export XDG_DATA_HOME="$work/ours/data" XDG_STATE_HOME="$work/ours/state" XDG_CONFIG_HOME="$work/ours/config"
"$security" list-keychains >/dev/null 2>&1
"$security" add-generic-password -a warmup -s warmup -w x 2>/dev/null
op_add() { "$security" add-generic-password -a "bench-account-$1" -s bench-service -w "password-$1"; }
op_find() { "$security" find-generic-password -a "bench-account-$1" -s bench-service -w; }
op_update() { "$security" add-generic-password -U -a "bench-account-$1" -s bench-service -w "changed-$1"; }
op_delete() { "$security" delete-generic-password -a "bench-account-$1" -s bench-service; }
for op in op_add op_find op_update; do time_ops security "$op"; done
disk_report security "$work/ours"
time_ops security op_delete
unset XDG_DATA_HOME XDG_STATE_HOME XDG_CONFIG_HOME

# --- gnome-keyring through secret-tool, one process per operation, in a private D-Bus session.
mkdir -p "$work/gk"
export -f time_ops disk_report
mkdir -p "$work/gk/run" && chmod 700 "$work/gk/run"
HOME="$work/gk" XDG_DATA_HOME="$work/gk/data" XDG_RUNTIME_DIR="$work/gk/run" items="$items" results="$results" \
    dbus-run-session -- bash -c 2>"$work/gk/dbus.log" '
    set -e
    # A login keyring with a password, unlocked, as a desktop session has it.
    printf "bench-password" | gnome-keyring-daemon --unlock --components=secrets >/dev/null
    op_add() { printf "password-%s" "$1" | secret-tool store --label="bench $1" service bench-service account "bench-account-$1"; }
    op_find() { secret-tool lookup service bench-service account "bench-account-$1"; }
    op_update() { printf "changed-%s" "$1" | secret-tool store --label="bench $1" service bench-service account "bench-account-$1"; }
    op_delete() { secret-tool clear service bench-service account "bench-account-$1"; }
    for op in op_add op_find op_update; do time_ops secret-tool "$op"; done
    disk_report secret-tool "$XDG_DATA_HOME"
    time_ops secret-tool op_delete
'

# --- pass, with a passphrase-less GnuPG key, one process per operation.
export GNUPGHOME="$work/pass/gnupg" PASSWORD_STORE_DIR="$work/pass/store"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key bench@example.invalid default default never 2>/dev/null
pass init bench@example.invalid >/dev/null
op_add() { printf 'password-%s\n' "$1" | pass insert -e "bench-service/bench-account-$1"; }
op_find() { pass show "bench-service/bench-account-$1"; }
op_update() { printf 'changed-%s\n' "$1" | pass insert -f -e "bench-service/bench-account-$1"; }
op_delete() { pass rm -f "bench-service/bench-account-$1"; }
for op in op_add op_find op_update; do time_ops pass "$op"; done
disk_report pass "$PASSWORD_STORE_DIR"
time_ops pass op_delete
gpgconf --kill gpg-agent 2>/dev/null || true

python3 "$here/report.py" "$results" "$items"
