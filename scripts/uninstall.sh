#!/usr/bin/env bash
# Removes exactly what scripts/install.sh installed (its list, PREFIX/share/swift-keychain/installed-files), and
# never a keychain: the users' keychains and settings stay in their homes.
#
#   sudo scripts/uninstall.sh [--prefix /usr/local]
set -euo pipefail

prefix=/usr/local
die() { echo "uninstall.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        -h|--help) sed -n '2,5s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
prefix="${prefix%/}"
manifest="$prefix/share/swift-keychain/installed-files"
[ -f "$manifest" ] || die "nothing of swift-keychain is installed under $prefix (no $manifest)"
[ "$(id -u)" = 0 ] || die "run it as root (sudo $0)"

# PAM first: a profile that is on must be turned off before its module goes.
if grep -qx /usr/share/pam-configs/swift-keychain "$manifest" && command -v pam-auth-update >/dev/null; then
    pam-auth-update --package --remove swift-keychain
fi
removed=0
made=()
groups=()
while IFS= read -r path; do
    case "$path" in
        */) made+=("${path%/}") ;;
        group:*) groups+=("${path#group:}") ;;
        /*) if [ -f "$path" ] || [ -L "$path" ]; then rm -f -- "$path"; removed=$((removed + 1)); fi ;;
    esac
done < "$manifest"
# The directories the install made, deepest first, if nothing else was put in them since.
if [ ${#made[@]} -gt 0 ]; then
    printf '%s\n' "${made[@]}" | sort -r | while IFS= read -r directory; do rmdir -- "$directory" 2>/dev/null || true; done
fi
# A group the install made (keychaind's), once no installed file has it any more.
for group in "${groups[@]}"; do
    getent group "$group" >/dev/null || continue
    in_use=""
    for other in /usr/bin/keychaind /usr/local/bin/keychaind; do
        if [ -e "$other" ] && [ "$(stat -c %G "$other")" = "$group" ]; then in_use="$other"; fi
    done
    if [ -n "$in_use" ]; then echo "kept the group $group: $in_use still has it"; else groupdel "$group"; fi
done
echo "removed swift-keychain from $prefix: $removed files; the users' keychains are untouched"
