#!/usr/bin/env bash
# Runs git's own conformance test for external credential helpers (t/t0303-credential-external.sh) against
# git-credential-keychain, with the git installed on this machine. git's test suite comes from Debian's source
# package of that same git; only its test harness (test-tool) is built.
#   scripts/git-credential-conformance.sh            (after `swift build`)
#   KEYCHAIN_BACKEND=daemon scripts/git-credential-conformance.sh     (the helper through keychaind, started on
#                                                     demand in a runtime directory of this run, stopped after it)
#   KEYCHAIN_BACKEND=secret-service scripts/git-credential-conformance.sh   (git's own git-credential-libsecret,
#                                                     built from the sources Debian ships, against keychaind's Secret
#                                                     Service on a private session bus)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(swift build --show-bin-path)"
test -x "$bin/git-credential-keychain" || { echo "build first: swift build" >&2; exit 1; }

work="${GIT_CONFORMANCE_DIR:-/tmp/swift-keychain-git-conformance}"
mkdir -p "$work"
version="$(dpkg-query -W -f='${Version}' git | sed 's/^[0-9]*://; s/-.*//')"
src="$work/git-$version"

if [ ! -x "$src/t/helper/test-tool" ]; then
    if ! ls "$work"/git_"$version".orig.tar.* >/dev/null 2>&1; then
        if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
            # Debian's source packages, same mirrors as the binary ones.
            for f in /etc/apt/sources.list.d/*.sources; do
                [ -f "$f" ] || continue
                sed 's/^Types: deb$/Types: deb-src/' "$f" > "/etc/apt/sources.list.d/src-$(basename "$f")"
            done
        fi
        apt-get update -qq
        (cd "$work" && apt-get source --download-only -qq "git=$(dpkg-query -W -f='${Version}' git)" >/dev/null 2>&1)
    fi
    tar -C "$work" -xf "$work"/git_"$version".orig.tar.*
    opts=(NO_CURL=1 NO_EXPAT=1 NO_TCLTK=1 NO_GETTEXT=1 NO_PERL=1 NO_PYTHON=1 NO_OPENSSL=1)
    make -C "$src" -j"$(nproc)" "${opts[@]}" t/helper/test-tool GIT-BUILD-OPTIONS >/dev/null
    make -C "$src/templates" NO_PERL=1 >/dev/null
fi

backend="${KEYCHAIN_BACKEND:-embedded}"
helper=keychain
setup="export PATH=$bin:\$PATH KEYCHAIN_BACKEND=$backend"
runner=(sh)
if [ "$backend" = secret-service ]; then
    contrib=/usr/share/doc/git/contrib/credential/libsecret
    mkdir -p "$work/libsecret"
    if [ ! -x "$work/libsecret/git-credential-libsecret" ]; then
        cp "$contrib/git-credential-libsecret.c" "$contrib/Makefile" "$work/libsecret/"
        make -C "$work/libsecret" >/dev/null
    fi
    helper=libsecret
    setup="export PATH=$work/libsecret:\$PATH"
    runtime="$(mktemp -d)"
    chmod 700 "$runtime"
    # keychaind serves the private bus from a home of its own; the helper only speaks D-Bus to it.
    cat > "$runtime/with-keychaind.sh" <<EOF
export HOME="$runtime/home" XDG_DATA_HOME="$runtime/home/data" XDG_STATE_HOME="$runtime/home/state" \\
    XDG_CONFIG_HOME="$runtime/home/config" XDG_RUNTIME_DIR="$runtime"
"$bin/keychaind" --secret-service --notify-ready > "$runtime/ready" &
for _ in \$(seq 1 200); do [ -s "$runtime/ready" ] && break; sleep 0.05; done
[ "\$(cat "$runtime/ready")" = ready ] || { echo "keychaind: \$(cat "$runtime/ready")" >&2; exit 1; }
sh "\$@"
status=\$?
for lock in "$runtime"/keychain/*.lock; do [ -f "\$lock" ] && kill "\$(cat "\$lock")" 2>/dev/null; done
exit \$status
EOF
    runner=(dbus-run-session -- sh "$runtime/with-keychaind.sh")
    trap 'rm -rf "$runtime"' EXIT
elif [ "$backend" = daemon ]; then
    runtime="$(mktemp -d)"
    chmod 700 "$runtime"
    setup="$setup XDG_RUNTIME_DIR=$runtime"
    stop_daemons() {
        for lock in "$runtime"/keychain/*.lock; do [ -f "$lock" ] && kill "$(cat "$lock")" 2>/dev/null || true; done
        for _ in $(seq 1 100); do ls "$runtime"/keychain/*.sock >/dev/null 2>&1 || break; sleep 0.05; done
        rm -rf "$runtime"
    }
    trap stop_daemons EXIT
fi

cd "$src/t"
rm -rf "trash directory.t0303-credential-external"
out="$(GIT_TEST_INSTALLED="$(dirname "$(command -v git)")" GIT_TEST_CREDENTIAL_HELPER=$helper \
    GIT_TEST_CREDENTIAL_HELPER_SETUP="$setup" "${runner[@]}" t0303-credential-external.sh 2>&1)" || true
if [ "$backend" = daemon ] && ! ls "$runtime"/keychain/*.sock >/dev/null 2>&1; then
    echo "no keychaind served the run (nothing in $runtime/keychain)" >&2
    exit 1
fi
echo "$out" | grep -E '^(ok|not ok|# )' || true
passed=$(echo "$out" | grep -c '^ok ' || true)
failed=$(echo "$out" | grep -c '^not ok ' || true)
echo "git t0303-credential-external (helper conformance, $backend): $passed of $((passed + failed)) checks passed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
