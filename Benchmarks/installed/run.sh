#!/usr/bin/env bash
# The installed tools' speed, side by side in one run (docs/PERFORMANCE.md, "As installed"):
#   - `security find-generic-password -w` from the installed release binaries (Swift runtime linked in), through
#     the keychaind they start, in a keychain of STORE items;
#   - `secret-tool lookup` against gnome-keyring-daemon holding the same number of items (an unlocked login keyring
#     in a private D-Bus session);
#   - a static Swift program that does nothing: the floor of any Swift command's start.
# Each is one whole process per lookup, the three interleaved RUNS times (bash's clock around each), so that a
# machine that speeds up or slows down meets all three alike. Prints medians and the issue's two ratios.
#
#   sudo Benchmarks/installed/run.sh [STORE] [RUNS]       (default 1000 items, 200 runs)
#
# Installs into a scratch prefix with scripts/install.sh (root: the files must be root's, as installed), building
# the release first if `.build-install` has none; needs gnome-keyring, secret-tool, dbus-run-session, secretstorage.
set -euo pipefail
store="${1:-1000}"
runs="${2:-200}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (the tools are installed root-owned, as a package installs them)" >&2; exit 1; }
need=()
command -v secret-tool >/dev/null || need+=(libsecret-tools)
command -v gnome-keyring-daemon >/dev/null || need+=(gnome-keyring)
command -v dbus-run-session >/dev/null || need+=(dbus-daemon)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -c "import secretstorage" 2>/dev/null || python3 -m pip install -q secretstorage >/dev/null 2>&1

work="$(mktemp -d)"
trap 'pkill -f "$work/prefix/bin/keychaind" 2>/dev/null || true; rm -rf "$work"' EXIT
build=()
[ -x "$root/.build-install/release/security" ] && build=(--no-build)
"$root/scripts/install.sh" "${build[@]}" --prefix "$work/prefix" >/dev/null
mkdir -p "$work/empty"
printf '// does nothing: the start of a static Swift program\n' > "$work/empty/main.swift"
swiftc -O -static-stdlib "$work/empty/main.swift" -o "$work/empty/empty" 2>/dev/null

mkdir -p "$work/home" "$work/run"
chmod 700 "$work/run"
export HOME="$work/home" XDG_RUNTIME_DIR="$work/run" XDG_DATA_HOME="$work/home/.local/share" PATH="$work/prefix/bin:$PATH"
security="$work/prefix/bin/security"
# The keychain: STORE items (the first command starts keychaind, which stays for the lookups).
for i in $(seq 0 $((store - 1))); do
    printf 'fill-password-%s' "$i" | "$security" add-generic-password -s bench-fill -a "fill-account-$i" -w
done
[ "$("$security" find-generic-password -s bench-fill -a fill-account-7 -w)" = fill-password-7 ] \
    || { echo "run.sh: the keychain does not answer" >&2; exit 1; }

export store runs work here security
dbus-run-session -- bash -c '
    set -e
    printf "bench-password" | gnome-keyring-daemon --unlock --components=secrets >/dev/null
    python3 "$here/../peers/inprocess.py" secretstorage prefill "$store"
    [ "$(secret-tool lookup service bench-fill account fill-account-7)" = fill-password-7 ]
    target=$((store / 2))
    for r in $(seq 1 "$runs"); do
        t0=${EPOCHREALTIME/./}; "$security" find-generic-password -s bench-fill -a "fill-account-$target" -w >/dev/null
        t1=${EPOCHREALTIME/./}; secret-tool lookup service bench-fill account "fill-account-$target" >/dev/null
        t2=${EPOCHREALTIME/./}; "$work/empty/empty"
        t3=${EPOCHREALTIME/./}
        printf "%s\t%s\t%s\n" $((t1 - t0)) $((t2 - t1)) $((t3 - t2))
    done > "$work/times.tsv"
' 2> "$work/session.log" || { cat "$work/session.log" >&2; exit 1; }

python3 - "$work/times.tsv" "$store" "$runs" <<'EOF'
import statistics, sys
rows = [list(map(int, line.split())) for line in open(sys.argv[1])]
ours, peer, floor = (statistics.median(column) / 1000 for column in zip(*rows))
print(f"{sys.argv[2]} items, {sys.argv[3]} interleaved runs, median whole-process time per lookup:")
print(f"  security find-generic-password -w (installed, keychaind)  {ours:6.2f} ms")
print(f"  secret-tool lookup (gnome-keyring)                       {peer:6.2f} ms")
print(f"  a static Swift program that does nothing                 {floor:6.2f} ms")
print(f"  secret-tool / security = {peer / ours:.2f}x (bar: at least 3x)")
print(f"  security / do-nothing  = {ours / floor:.2f}x (bar: at most 1.3x)")
EOF
