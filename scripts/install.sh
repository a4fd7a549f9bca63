#!/usr/bin/env bash
# Installs swift-keychain as a system component: release build with the Swift runtime linked in, root-owned files
# that no user can change (keychaind trusts its tools by that), and a list of what it installed for uninstall.sh.
#
#   sudo scripts/install.sh [--prefix /usr/local] [--enable-pam] [--secret-service]
#
#   --prefix DIR       where to install (default /usr/local)
#   --enable-pam       also turn pam_keychain on for every login (pam-auth-update): the login password unlocks the
#                      login keychain. Off by default; `pam-auth-update` turns it off again.
#   --secret-service   make keychaind the Secret Service (org.freedesktop.secrets) for every user of the machine.
#                      Off by default: each user opts in (README, "The desktop's Secret Service").
#   --destdir DIR      stage the files under DIR instead of installing them (packages; no root needed)
#   --no-build         install what the last run built
#
# Builds as the checkout's owner when run by root, so the checkout stays the user's. Never touches a keychain.
set -euo pipefail

prefix=/usr/local
destdir=""
enable_pam=0
secret_service=0
build=1
die() { echo "install.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --prefix=*) prefix="${1#*=}"; shift ;;
        --destdir) destdir="${2:?--destdir needs a directory}"; shift 2 ;;
        --destdir=*) destdir="${1#*=}"; shift ;;
        --enable-pam) enable_pam=1; shift ;;
        --secret-service) secret_service=1; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
case "$prefix" in /*) ;; *) die "--prefix must be an absolute path" ;; esac
prefix="${prefix%/}"
if [ -z "$destdir" ] && [ "$(id -u)" != 0 ]; then
    die "run it as root (sudo $0), so that no user can replace what keychaind trusts; --destdir stages without root"
fi
[ -z "$destdir" ] || [ "$enable_pam" = 0 ] || die "--enable-pam changes this machine's PAM: not with --destdir"

root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$root/.build-install"
version="$(tr -d ' \n' < "$root/VERSION")"
commit="$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if ! git -C "$root" diff --quiet HEAD 2>/dev/null; then commit="$commit+changes"; fi
multiarch="$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)"
tools=(security keychaind keychain-embedded git-credential-keychain docker-credential-keychain keychain-sync-server)

if [ "$build" = 1 ]; then
    owner="$(stat -c %U "$root")"
    as_owner=()
    if [ "$(id -u)" = 0 ] && [ "$owner" != root ]; then as_owner=(runuser -u "$owner" --); fi
    echo "building swift-keychain $version ($commit), release, Swift runtime linked in…"
    # The stamp reaches every tool's --version through CKeychainLinux (ckeychain_version / ckeychain_build).
    for tool in "${tools[@]}"; do
        "${as_owner[@]}" swift build --package-path "$root" --scratch-path "$scratch" -c release --static-swift-stdlib \
            -Xcc "-DKEYCHAIN_VERSION=\"$version\"" -Xcc "-DKEYCHAIN_BUILD=\"$commit\"" --product "$tool" 2>&1 \
            | sed -E '/^\[[0-9]+\/[0-9]+\]/d' >&2
    done
    for tool in "${tools[@]}"; do
        [ -x "$scratch/release/$tool" ] || die "the build did not produce $tool (see the output above)"
    done
    # pam_keychain.so is C (no language runtime in login, sshd or gdm); it needs libpam's headers.
    if [ -f /usr/include/security/pam_modules.h ]; then
        "${as_owner[@]}" mkdir -p "$scratch/pam"
        "${as_owner[@]}" make -s -C "$root/contrib/pam" BUILD_DIR="$scratch/pam" "$scratch/pam/pam_keychain.so" >&2
    else
        echo "install.sh: pam_keychain.so not built: libpam's headers are missing (Debian: libpam0g-dev)" >&2
    fi
fi
built="$scratch/release"
for tool in "${tools[@]}"; do [ -x "$built/$tool" ] || die "$built/$tool is missing: run without --no-build"; done
[ "$enable_pam" = 0 ] || [ -f "$scratch/pam/pam_keychain.so" ] || die "--enable-pam needs pam_keychain.so (libpam0g-dev)"

# Where each kind of file goes. /usr (a package) follows Debian's layout; any other prefix keeps everything under it
# except what PAM only looks for in one place.
if [ "$prefix" = /usr ]; then
    pam_module="$prefix/lib/$multiarch/security/pam_keychain.so"
    zsh_completions="$prefix/share/zsh/vendor-completions"
else
    pam_module="$prefix/lib/security/pam_keychain.so"
    zsh_completions="$prefix/share/zsh/site-functions"
fi
pam_profile=/usr/share/pam-configs/swift-keychain
data="$prefix/share/swift-keychain"
manifest="$data/installed-files"

installed=()
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
# put MODE SOURCE TARGET: one file, root-owned (when installing), recorded for uninstall.sh with the directories
# made for it (a trailing slash), so that uninstalling removes those and no directory that was there before.
put() {
    local mode="$1" source="$2" target="$3"
    local owner=() directory
    directory="$(dirname "$target")"
    while [ "$directory" != / ] && [ ! -d "$destdir$directory" ]; do
        installed+=("$directory/")
        directory="$(dirname "$directory")"
    done
    [ "$(id -u)" = 0 ] && owner=(-o root -g "${put_group:-root}")
    install -D "${owner[@]}" -m "$mode" "$source" "$destdir$target"
    installed+=("$target")
}
# text MODE TARGET < content
text() {
    local temporary
    temporary="$(mktemp -p "$staging")"
    cat > "$temporary"
    put "$1" "$temporary" "$2"
}

# keychaind runs set-group-ID to a system group of its own: installed clients accept only a greeting whose
# credentials name that group, which the kernel gives to nothing but this file started untraced (docs/SECURITY.md,
# "Which keychaind a client talks to"). Installed with its group and mode at once: a keychaind started in between
# would run without the group, and its clients would refuse it. A package does this in its postinst
# (dpkg-statoverride), not here.
daemon_group=""
if [ -z "$destdir" ] && [ "$(id -u)" = 0 ]; then
    if ! getent group keychaind >/dev/null; then
        groupadd --system keychaind
        installed+=("group:keychaind")
    fi
    daemon_group=keychaind
fi
for tool in "${tools[@]}"; do
    # Stripped: the symbols are for a debugger, and a release binary is several times smaller without them (the
    # compilers' .comment notes go too).
    strip --remove-section=.comment -o "$staging/$tool" "$built/$tool"
    if [ "$tool" = keychaind ] && [ -n "$daemon_group" ]; then
        put_group="$daemon_group" put 2755 "$staging/$tool" "$prefix/bin/$tool"
    else
        put 0755 "$staging/$tool" "$prefix/bin/$tool"
    fi
done

# systemd user units: the socket starts keychaind at the first client (systemctl --user enable --now keychaind.socket).
text 0644 "$prefix/lib/systemd/user/keychaind.service" < <(
    sed -e "s|^ExecStart=.*|ExecStart=$prefix/bin/keychaind --foreground|" -e '/^# Adjust the path/d' \
        "$root/contrib/systemd/keychaind.service")
put 0644 "$root/contrib/systemd/keychaind.socket" "$prefix/lib/systemd/user/keychaind.socket"

# The sync server (docs/SYNC.md): a system unit that nothing enables, its settings' example, and the guide.
text 0644 "$prefix/lib/systemd/system/keychain-sync-server.service" < <(
    sed -e "s|^ExecStart=.*|ExecStart=$prefix/bin/keychain-sync-server|" \
        -e "s|^Documentation=.*|Documentation=file:$prefix/share/doc/swift-keychain/SYNC.md|" \
        -e "s|/usr/share/swift-keychain/|$data/|" "$root/contrib/systemd/keychain-sync-server.service")
put 0644 "$root/contrib/systemd/sync-server.env.example" "$data/sync-server.env.example"
put 0644 "$root/docs/SYNC.md" "$prefix/share/doc/swift-keychain/SYNC.md"

# The Secret Service, for those who choose it: the D-Bus activation file and the unit's drop-in.
secret_service_file() {
    sed -e "s|^Exec=.*|Exec=$prefix/bin/keychaind --secret-service|" -e '/Adjust the path/d' \
        "$root/contrib/dbus/org.freedesktop.secrets.service"
}
secret_service_dropin() {
    sed -e "s|^ExecStart=%h.*|ExecStart=$prefix/bin/keychaind --foreground --secret-service|" \
        "$root/contrib/systemd/keychaind.service.d/secret-service.conf"
}
text 0644 "$data/dbus-1/services/org.freedesktop.secrets.service" < <(secret_service_file)
text 0644 "$data/systemd/keychaind.service.d/secret-service.conf" < <(secret_service_dropin)
put 0644 "$root/contrib/xdg-desktop-portal/keychain.portal" "$data/xdg-desktop-portal/portals/keychain.portal"
if [ "$secret_service" = 1 ]; then
    text 0644 "$prefix/share/dbus-1/services/org.freedesktop.secrets.service" < <(secret_service_file)
    text 0644 "$prefix/lib/systemd/user/keychaind.service.d/secret-service.conf" < <(secret_service_dropin)
    # The Secret portal's backend (docs/SECRET-SERVICE.md): used once portals.conf chooses it.
    put 0644 "$root/contrib/xdg-desktop-portal/keychain.portal" "$prefix/share/xdg-desktop-portal/portals/keychain.portal"
fi

if [ -f "$scratch/pam/pam_keychain.so" ]; then
    strip --strip-unneeded --remove-section=.comment -o "$staging/pam_keychain.so" "$scratch/pam/pam_keychain.so"
    put 0644 "$staging/pam_keychain.so" "$pam_module"
    # pam-auth-update's profile; "Default: no": installing it turns nothing on.
    text 0644 "$pam_profile" <<EOF
Name: Unlock the swift-keychain login keychain at login (pam_keychain)
Default: no
Priority: 0
Auth-Type: Additional
Auth:
	optional	$pam_module security=$prefix/bin/security
Session-Type: Additional
Session:
	optional	$pam_module security=$prefix/bin/security
Password-Type: Additional
Password:
	optional	$pam_module security=$prefix/bin/security
EOF
fi

# Manual pages, compressed as man-db reads them (-n: no name or time inside, so a rebuild is byte for byte the same):
# security's generated from the command table of the security just built, the others from docs/man/.
text 0644 "$prefix/share/man/man1/security.1.gz" < <("$built/security" --man | gzip -9n)
for page in "$root"/docs/man/*.[18]; do
    name="$(basename "$page")"
    text 0644 "$prefix/share/man/man${name##*.}/$name.gz" < <(gzip -9n < "$page")
done
# Completions, from the same command table.
text 0644 "$prefix/share/bash-completion/completions/security" < <("$built/security" --completions bash)
text 0644 "$zsh_completions/_security" < <("$built/security" --completions zsh)

installed+=("$manifest")
mkdir -p "$destdir$data"
printf '%s\n' "${installed[@]}" > "$destdir$manifest"
chmod 0644 "$destdir$manifest"

if [ "$enable_pam" = 1 ]; then pam-auth-update --enable swift-keychain; fi
if [ -z "$destdir" ]; then
    echo "installed swift-keychain $version ($commit) under $prefix: ${#installed[@]} files (listed in $manifest)"
fi
