#!/usr/bin/env bash
# Builds the Debian package: swift-keychain_VERSION_ARCH.deb in OUTDIR (default .build-install/deb), from what
# scripts/install.sh stages for /usr. Installing it turns nothing on: the Secret Service and PAM stay opt-in, as with
# install.sh (README).
#
#   scripts/build-deb.sh [--no-build] [OUTDIR]
#   sudo apt install ./.build-install/deb/swift-keychain_*.deb     # apt remove swift-keychain takes it away
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build=()
if [ "${1:-}" = --no-build ]; then build=(--no-build); shift; fi
outdir="$(mkdir -p "${1:-$root/.build-install/deb}" && cd "${1:-$root/.build-install/deb}" && pwd)"
version="$(tr -d ' \n' < "$root/VERSION")"
arch="$(dpkg --print-architecture)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

"$root/scripts/install.sh" "${build[@]}" --prefix /usr --destdir "$stage/root"
# The package's own list of files is dpkg's; the installer's list would name a prefix dpkg owns.
rm -f "$stage/root/usr/share/swift-keychain/installed-files"

# What the binaries need, read once: the libraries they link against and the symbol versions they require.
dumps="$(for file in "$stage"/root/usr/bin/* "$stage"/root/usr/lib/*/security/*.so; do
        [ -f "$file" ] || continue
        objdump -p "$file"
    done)"
# The libraries, as Debian packages (the Swift runtime is inside the binaries).
depends="$(printf '%s\n' "$dumps" | awk '/NEEDED/ { print $2 }' | sort -u | while read -r library; do
        path="$(ldconfig -p | awk -v lib="$library" '$1 == lib { print $NF; exit }')"
        # dpkg knows a library by the path its package ships, which may be either side of the /usr merge.
        for candidate in "$path" "$(readlink -f "$path")" "/usr${path#/usr}" "${path#/usr}"; do
            owner="$(dpkg -S "$candidate" 2>/dev/null | cut -d: -f1 | head -1)"
            [ -n "$owner" ] && { echo "$owner"; break; }
        done
    done | sort -u | paste -sd, | sed 's/,/, /g')"
# The C library's version, as its symbol versions require it: the newest GLIBC_2.x named, and 2.36 for the packed
# relocations the release link uses (GLIBC_ABI_DT_RELR), which an older loader refuses to start.
glibc="$(printf '%s\n' "$dumps" | awk '/required from (libc|libm|ld-linux[-a-z0-9_]*)\.so/ { take = 1; next }
            /required from|file format/ { take = 0 } take && $4 ~ /^GLIBC_/ { print $4 }' \
    | sed -e 's/^GLIBC_ABI_DT_RELR$/GLIBC_2.36/' -e 's/^GLIBC_//' | { grep -E "^[0-9.]+$" || true; } | sort -uV | tail -1)"
if [ -n "$glibc" ]; then
    case ", $depends," in
        *", libc6,"*) depends="$(printf '%s\n' "$depends" | sed -E "s/(^|, )libc6(,|$)/\1libc6 (>= $glibc)\2/")" ;;
        *) depends="libc6 (>= $glibc)${depends:+, $depends}" ;;  # dpkg -S did not name it: say it anyway
    esac
fi

# Who built it, as Debian's own tools take it (DEBFULLNAME, DEBEMAIL), else the author of the commit packaged; and
# when: that commit's time, so that rebuilding the same commit gives the same changelog.
if [ -n "${DEBEMAIL:-}" ]; then
    maintainer="${DEBFULLNAME:-swift-keychain developers} <$DEBEMAIL>"
else
    maintainer="$(git -C "$root" log -1 --format='%an <%ae>' 2>/dev/null || true)"
fi
[ -n "$maintainer" ] || { echo "build-deb.sh: set DEBEMAIL (and DEBFULLNAME) to name the package's maintainer" >&2; exit 1; }
built_on="$(git -C "$root" log -1 --format=%aD 2>/dev/null || date -R)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
first_year="$(git -C "$root" log --format=%ad --date=format:%Y 2>/dev/null | tail -1)"
last_year="$(date -d "$built_on" +%Y)"
years="${first_year:-$last_year}"
[ "$years" = "$last_year" ] || years="$years-$last_year"

doc="$stage/root/usr/share/doc/swift-keychain"
mkdir -p "$stage/root/DEBIAN" "$doc" "$stage/root/usr/share/lintian/overrides"
install -m 0644 "$root/README.md" "$doc/README.md"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: swift-keychain
Source: the swift-keychain repository

Files: *
Copyright: $years the swift-keychain authors
EOF
# A native package's changelog, in Debian's format (dpkg-parsechangelog reads it).
gzip -9n > "$doc/changelog.gz" <<EOF
swift-keychain ($version) unstable; urgency=medium

  * swift-keychain $version, built from commit $commit.

 -- $maintainer  $built_on
EOF
chmod 0644 "$doc/changelog.gz"
# What lintian says of the package and why it is so (scripts/package-test.sh runs lintian on it).
cat > "$stage/root/usr/share/lintian/overrides/swift-keychain" <<'EOF'
# swift-nio-extras' HTTP compression (the sync client in keychaind) carries its own zlib, with prefixed symbols.
swift-keychain: embedded-library zlib [usr/bin/keychaind]
# Installing enables nothing; a sync server an administrator enabled with systemctl is disabled with systemctl when
# the package goes (deb-systemd-helper knows only the links it made itself).
swift-keychain: maintainer-script-calls-systemctl [prerm:*]
EOF
chmod 0644 "$stage/root/usr/share/lintian/overrides/swift-keychain"
installed_size="$(du -sk --exclude=DEBIAN "$stage/root" | cut -f1)"
cat > "$stage/root/DEBIAN/control" <<EOF
Package: swift-keychain
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $depends, adduser
Recommends: pinentry-curses | pinentry, libnss-systemd
Suggests: libsecret-tools, git
Section: utils
Priority: optional
Homepage: https://github.com/swift-keychain/swift-keychain
Description: Apple's Keychain Services for Linux: security, keychaind, credential helpers
 An encrypted per-user database of small secrets (passwords, tokens, keys,
 certificates) with Apple's item model and status codes: the security command,
 the keychaind per-user service that decides which program reads what, git and
 docker credential helpers, an optional freedesktop Secret Service,
 pam_keychain, which unlocks the login keychain at login when turned on, and
 keychain-sync-server, the self-hosted end-to-end encrypted sync service on
 PostgreSQL (a system unit that nothing enables).
EOF
# pam-auth-update learns of the profile (Default: no, so nothing is turned on) and forgets it on removal.
# keychaind runs set-group-ID to a system group of its own, which clients check in its greeting (docs/SECURITY.md,
# "Which keychaind a client talks to"): the group is made here, and the mode is dpkg's statoverride, since a
# package's files cannot name a group that each machine numbers itself (as Debian's ssh-agent once was).
cat > "$stage/root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    getent group keychaind >/dev/null || addgroup --system --quiet keychaind
    if ! dpkg-statoverride --list /usr/bin/keychaind >/dev/null; then
        dpkg-statoverride --update --add root keychaind 2755 /usr/bin/keychaind
    fi
fi
if [ "$1" = configure ] && command -v pam-auth-update >/dev/null; then
    pam-auth-update --package
fi
EOF
# The statoverride goes with the package; the group stays (Debian's rule for system groups: a file may still have it).
cat > "$stage/root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
    if dpkg-statoverride --list /usr/bin/keychaind >/dev/null 2>&1; then
        dpkg-statoverride --remove /usr/bin/keychaind
    fi
fi
EOF
cat > "$stage/root/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] && command -v pam-auth-update >/dev/null; then
    pam-auth-update --package --remove swift-keychain
fi
# The sync server, if an administrator enabled it: stopped (through invoke-rc.d's policy) and disabled, so no unit
# runs a removed program. The package never enables it: only systemctl knows an administrator's links.
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v deb-systemd-invoke >/dev/null; then
    deb-systemd-invoke stop keychain-sync-server.service >/dev/null 2>&1 || true
fi
if [ "$1" = remove ] && command -v systemctl >/dev/null; then
    systemctl disable keychain-sync-server.service >/dev/null 2>&1 || true
fi
EOF
chmod 0755 "$stage/root/DEBIAN/postinst" "$stage/root/DEBIAN/prerm" "$stage/root/DEBIAN/postrm"
(cd "$stage/root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | sort | xargs md5sum) > "$stage/root/DEBIAN/md5sums"
chmod 0644 "$stage/root/DEBIAN/md5sums"

package="$outdir/swift-keychain_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage/root" "$package" >/dev/null
echo "$package"
