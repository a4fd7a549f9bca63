#!/usr/bin/env bash
# Creates REAL password stores with the real tools, for the end-to-end tests of `security import-secrets --from SOURCE`.
# Everything is made under DIR; the caller's HOME, GnuPG home, D-Bus session and keyrings are never touched.
#
#   scripts/migration-sources.sh gnome-keyring-file DIR PASSWORD [WORK_PASSWORD]
#       A private session bus and a real gnome-keyring-daemon (HOME=DIR/home) make the "login" keyring under PASSWORD
#       a second keyring "work" (under WORK_PASSWORD, default PASSWORD) and a third, "unencrypted", with an empty
#       password (gnome-keyring then writes its textual format); items are stored through the Secret Service by
#       Chromium's libsecret call, git's git-credential-libsecret and python's secretstorage; then the daemon and the bus
#       are stopped. Leaves DIR/home/.local/share/keyrings/{login,work,unencrypted}.keyring, default and user.keystore.
#       stdout: the JSON manifest (also in DIR/manifest.json).
#   scripts/migration-sources.sh secret-service DIR [PASSWORD [WORK_PASSWORD]]
#       The same, but the bus and the daemon keep running, unlocked (PASSWORD defaults to "login-password").
#       stdout: shell lines to eval: export DBUS_SESSION_BUS_ADDRESS=..., MIGRATION_GNOME_KEYRING_PID=...,
#       MIGRATION_DBUS_DAEMON_PID=..., MIGRATION_MANIFEST=DIR/manifest.json. The pids are recorded in DIR/pids.env.
#   scripts/migration-sources.sh stop DIR
#       Stops what `secret-service DIR` started (by the pids in DIR/pids.env). Idempotent.
#   scripts/migration-sources.sh keepassxc DIR PASSWORD
#       keepassxc-cli makes DIR/db.kdbx (PASSWORD), with groups, entries, an attachment, history, a recycled entry and
#       custom attributes (keepassxc-cli 2.7 cannot set those itself: they go in through its own XML export + `import`),
#       then exports DIR/export.xml and DIR/export.csv (of the final KDBX 4.1 file) and DIR/export-kdbx3.xml (the same
#       database while it was still KDBX 3.1). stdout: the JSON manifest (also DIR/manifest.json).
#   scripts/migration-sources.sh pass DIR
#       A fresh GnuPG home DIR/gnupg with an unprotected key, and a pass store DIR/store. stdout: the JSON manifest, whose
#       "env" gives GNUPGHOME and PASSWORD_STORE_DIR (also as export lines in DIR/env.sh).
#
# Debian (bookworm) packages used — exact names:
#   gnome-keyring      gnome-keyring-daemon 42.1 (the Secret Service and the .keyring files)
#   dbus-daemon        dbus-daemon (a private session bus);  dbus-bin: dbus-send
#   libsecret-tools    secret-tool (not required by this script; handy to look at a live store)
#   git                git 2.39 and the sources of git-credential-libsecret in /usr/share/doc/git/contrib/credential/libsecret
#   libsecret-1-dev pkg-config gcc make   to build git-credential-libsecret and Chromium's libsecret call (else: a python
#                      stand-in that stores the same label and attributes, marked "created_by": "secretstorage (stand-in ...)")
#   python3-secretstorage (brings python3-jeepney)   for /usr/bin/python3; pip's secretstorage does as well
#   keepassxc          keepassxc-cli 2.7.4 (bookworm has no keepassxc-minimal/-full; those are trixie's)
#   pass               pass 1.7.4 (brings tree);  gnupg (gpg, gpg-agent, gpgconf)
#   MIGRATION_NO_BUILD=1 skips the two C builds (the stand-ins are used); GIT_CREDENTIAL_LIBSECRET=PATH uses a built helper.
#   install: apt-get install -y --no-install-recommends gnome-keyring dbus-daemon dbus-bin libsecret-tools git \
#            libsecret-1-dev pkg-config gcc make python3-secretstorage keepassxc pass gnupg
set -euo pipefail

me="$(basename "$0")"
die() { echo "$me: $*" >&2; exit 1; }
usage() { sed -n '2,/^# Debian/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

absdir() { mkdir -p "$1" && (cd "$1" && pwd -P); }

# A python3 that can import what is asked (the pyenv shim of root is not readable by other users).
pick_python() {
    local mod="$1" py
    for py in "${PYTHON:-}" python3 /usr/bin/python3; do
        [ -n "$py" ] || continue
        if "$py" -c "import $mod" >/dev/null 2>&1; then echo "$py"; return 0; fi
    done
    return 1
}

# Alive and not a zombie (PID 1 of a container may never reap what it inherits).
alive() {
    local pid="$1" state
    [ -r "/proc/$pid/stat" ] || return 1
    state="$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)"
    [ "$state" != Z ] && [ "$state" != X ]
}

stop_pid() {
    local pid="$1"
    [ -n "$pid" ] || return 0
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do alive "$pid" || return 0; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do alive "$pid" || return 0; sleep 0.05; done
}

# ---------------------------------------------------------------- gnome-keyring ------------------------------------

private_env() {   # HOME and the XDG directories inside DIR; nothing of the caller's session leaks in
    local dir="$1"
    export HOME="$dir/home" XDG_DATA_HOME="$dir/home/.local/share" XDG_CONFIG_HOME="$dir/home/.config" \
        XDG_CACHE_HOME="$dir/home/.cache" XDG_STATE_HOME="$dir/home/.local/state"
    unset GNOME_KEYRING_CONTROL GNOME_KEYRING_PID SSH_AUTH_SOCK DBUS_SESSION_BUS_ADDRESS DISPLAY WAYLAND_DISPLAY \
        GNUPGHOME PASSWORD_STORE_DIR || true
    export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
    mkdir -p "$HOME" "$XDG_DATA_HOME" "$XDG_CONFIG_HOME" "$XDG_CACHE_HOME"
}

gk_stop() {   # DIR: stop what DIR/pids.env names, keyring first, then the bus
    local dir="$1"
    [ -f "$dir/pids.env" ] || return 0
    local MIGRATION_GNOME_KEYRING_PID="" MIGRATION_DBUS_DAEMON_PID="" MIGRATION_RUNTIME_DIR=""
    # shellcheck disable=SC1091
    . "$dir/pids.env"
    stop_pid "$MIGRATION_GNOME_KEYRING_PID"
    stop_pid "$MIGRATION_DBUS_DAEMON_PID"
    # a runtime directory outside DIR (only when DIR's path was too long for a socket) is ours to remove
    case "$MIGRATION_RUNTIME_DIR" in /tmp/migration-run.*) rm -rf "$MIGRATION_RUNTIME_DIR" ;; esac
    rm -f "$dir/pids.env"
}

build_helpers() {   # DIR: git-credential-libsecret (git's own sources) and Chromium's libsecret call, into DIR/bin
    local bin="$1/bin" contrib=/usr/share/doc/git/contrib/credential/libsecret
    mkdir -p "$bin"
    [ -z "${MIGRATION_NO_BUILD:-}" ] || { echo "$me: MIGRATION_NO_BUILD: python stand-ins store Chromium's and git's items" >&2; return 0; }
    if ! { command -v gcc && command -v pkg-config && pkg-config --exists libsecret-1 glib-2.0; } >/dev/null 2>&1; then
        echo "$me: gcc, pkg-config or libsecret-1-dev missing: python stand-ins store Chromium's and git's items" >&2
        return 0
    fi
    if [ -n "${GIT_CREDENTIAL_LIBSECRET:-}" ] && [ -x "$GIT_CREDENTIAL_LIBSECRET" ]; then
        ln -sf "$GIT_CREDENTIAL_LIBSECRET" "$bin/git-credential-libsecret"
    elif [ -f "$contrib/git-credential-libsecret.c" ]; then
        # shellcheck disable=SC2046
        gcc -O2 -o "$bin/git-credential-libsecret" "$contrib/git-credential-libsecret.c" \
            $(pkg-config --cflags --libs libsecret-1 glib-2.0) >&2
    fi
    # Chromium's KeyStorageLibsecret::AddRandomPasswordInLibsecret() (components/os_crypt/sync/key_storage_libsecret.cc):
    # the schema kKeystoreSchemaV2, the default collection, label KeyStorageLinux::kKey, attribute application.
    cat > "$bin/chromium-os-crypt-store.c" <<'EOF'
#include <libsecret/secret.h>
#include <stdio.h>
static const SecretSchema kKeystoreSchemaV2 = {
    "chrome_libsecret_os_crypt_password_v2",
    SECRET_SCHEMA_DONT_MATCH_NAME,
    {{"application", SECRET_SCHEMA_ATTRIBUTE_STRING}, {NULL, SECRET_SCHEMA_ATTRIBUTE_STRING}}};
int main(int argc, char **argv) {   /* argv: label application password */
    GError *error = NULL;
    if (argc != 4) return 2;
    if (!secret_password_store_sync(&kKeystoreSchemaV2, NULL, argv[1], argv[3], NULL, &error,
                                    "application", argv[2], NULL)) {
        fprintf(stderr, "store failed: %s\n", error ? error->message : "?");
        return 1;
    }
    return 0;
}
EOF
    # shellcheck disable=SC2046
    gcc -O2 -o "$bin/chromium-os-crypt-store" "$bin/chromium-os-crypt-store.c" $(pkg-config --cflags --libs libsecret-1) >&2
}

gk_check_clean() {   # DIR: refuse (before anything is started or trapped) a DIR in use or already filled
    local dir="$1" keyrings="$1/home/.local/share/keyrings"
    [ ! -f "$dir/pids.env" ] || die "$dir/pids.env exists: run '$me stop $dir' first"
    if [ -d "$keyrings" ] && [ -n "$(ls -A "$keyrings")" ]; then die "$keyrings is not empty: give a clean DIR"; fi
}

gk_create() {   # DIR PASSWORD WORK_PASSWORD: bus + daemon + items; leaves them running; writes DIR/manifest.json
    local dir="$1" password="$2" work_password="$3"
    local py run keyrings bus_out pid
    py="$(pick_python secretstorage)" || die "no python3 with secretstorage (Debian: python3-secretstorage)"
    command -v gnome-keyring-daemon >/dev/null || die "gnome-keyring-daemon missing (Debian: gnome-keyring)"
    command -v dbus-daemon >/dev/null || die "dbus-daemon missing (Debian: dbus-daemon)"
    command -v dbus-send >/dev/null || die "dbus-send missing (Debian: dbus-bin)"
    keyrings="$dir/home/.local/share/keyrings"

    private_env "$dir"
    build_helpers "$dir"

    # The runtime directory (sockets: bus, keyring/control) must fit sun_path's 108 bytes.
    run="$dir/run"
    if [ ${#run} -gt 80 ]; then run="$(mktemp -d /tmp/migration-run.XXXXXX)"; fi
    mkdir -p "$run"; chmod 700 "$run"
    export XDG_RUNTIME_DIR="$run"

    # A private session bus without service activation: nothing but what we start can own a name on it.
    cat > "$run/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$run/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
    bus_out="$run/bus.out"
    dbus-daemon --config-file="$run/bus.conf" --fork --print-address=1 --print-pid=1 >"$bus_out" 2>"$run/dbus.log" </dev/null
    DBUS_SESSION_BUS_ADDRESS="$(sed -n 1p "$bus_out")"
    export DBUS_SESSION_BUS_ADDRESS
    local bus_pid
    bus_pid="$(sed -n 2p "$bus_out")"
    { echo "MIGRATION_DBUS_DAEMON_PID=$bus_pid"; echo "MIGRATION_RUNTIME_DIR='$run'"
      echo "DBUS_SESSION_BUS_ADDRESS='$DBUS_SESSION_BUS_ADDRESS'"; } > "$dir/pids.env"

    # The login keyring: --unlock reads the password on stdin and creates login.keyring when there is none;
    # --start then brings up the Secret Service (the "secrets" component) in that same daemon.
    printf '%s' "$password" | gnome-keyring-daemon --unlock --components=secrets >>"$run/gnome-keyring.log" 2>&1
    gnome-keyring-daemon --start --components=secrets </dev/null >>"$run/gnome-keyring.log" 2>&1
    for _ in $(seq 1 200); do
        dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.NameHasOwner \
            string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true' && break
        sleep 0.05
    done
    pid="$(dbus-send --session --print-reply --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '/uint32/ {print $2}')"
    [ -n "$pid" ] || die "gnome-keyring-daemon did not take org.freedesktop.secrets (see $run/gnome-keyring.log)"
    echo "MIGRATION_GNOME_KEYRING_PID=$pid" >> "$dir/pids.env"

    # a. Chromium's os_crypt key, by Chromium's own libsecret call: Base64 of 16 random bytes (24 characters).
    local chrome_secret created_by_chrome created_by_git
    chrome_secret="$(head -c 16 /dev/urandom | base64)"
    if [ -x "$dir/bin/chromium-os-crypt-store" ]; then
        "$dir/bin/chromium-os-crypt-store" "Chrome Safe Storage" chrome "$chrome_secret"
        created_by_chrome="libsecret secret_password_store_sync, Chromium's kKeystoreSchemaV2"
    else
        created_by_chrome=""
    fi
    # b. git's own helper, driven by git: `git credential approve` is what git runs after a successful push/fetch.
    if [ -x "$dir/bin/git-credential-libsecret" ]; then
        printf 'protocol=https\nhost=example.com\nusername=alice\npassword=git-pass-alice\n\n' |
            git -c credential.helper= -c credential.helper="$dir/bin/git-credential-libsecret" credential approve
        printf 'protocol=https\nhost=git.example.com:8443\npath=team/repo.git\nusername=bob\npassword=git-token-bob\n\n' |
            git -c credential.helper= -c credential.helper="$dir/bin/git-credential-libsecret" \
                -c credential.useHttpPath=true credential approve
        created_by_git="git credential approve -> git-credential-libsecret (git $(git --version | awk '{print $3}'))"
    else
        created_by_git=""
    fi

    # c./d. and the manifest, through the Secret Service with python's secretstorage (jeepney underneath).
    "$py" - "$dir" "$password" "$work_password" "$chrome_secret" "$created_by_chrome" "$created_by_git" <<'PYEOF'
import json, os, sys
import secretstorage
from secretstorage.util import DBusAddressWrapper, open_session, format_secret

dir_, password, work_password, chrome_secret, by_chrome, by_git = sys.argv[1:7]
conn = secretstorage.dbus_init()
svc = DBusAddressWrapper('/org/freedesktop/secrets', 'org.freedesktop.Secret.Service', conn)
login = secretstorage.Collection(conn, '/org/freedesktop/secrets/collection/login')
assert not login.is_locked(), "login keyring is locked"
created_by = {}
stored_attributes = {}   # what was sent; gnome-keyring's D-Bus view may add xdg:schema (see the manifest's note)

def store(col, label, attrs, secret, content_type='text/plain', by='secretstorage CreateItem'):
    it = col.create_item(label, attrs, secret, replace=False, content_type=content_type)
    created_by[it.item_path] = by
    stored_attributes[it.item_path] = dict(attrs)
    return it

if not by_chrome:   # stand-in: the same label and attributes libsecret would send
    store(login, 'Chrome Safe Storage', {'application': 'chrome', 'xdg:schema': 'chrome_libsecret_os_crypt_password_v2'},
          chrome_secret.encode(), by='secretstorage (stand-in for Chromium libsecret)')
if not by_git:      # stand-in: git-credential-libsecret's make_label/make_attr_list, SECRET_SCHEMA_COMPAT_NETWORK
    s = 'org.gnome.keyring.NetworkPassword'
    store(login, 'Git: https://example.com/', {'user': 'alice', 'protocol': 'https', 'server': 'example.com',
          'xdg:schema': s}, b'git-pass-alice', by='secretstorage (stand-in for git-credential-libsecret)')
    store(login, 'Git: https://git.example.com:8443/team/repo.git', {'user': 'bob', 'protocol': 'https',
          'server': 'git.example.com', 'port': '8443', 'object': 'team/repo.git', 'xdg:schema': s},
          b'git-token-bob', by='secretstorage (stand-in for git-credential-libsecret)')
for it in login.get_all_items():
    if it.item_path not in created_by:
        label = it.get_label()
        created_by[it.item_path] = by_chrome if label == 'Chrome Safe Storage' else by_git

# c. a non-UTF-8 secret, Unicode label and attribute values, an empty secret
store(login, 'Binary secret', {'app': 'migration-test', 'kind': 'binary'}, b'\x00\xff\x80\x0a',
      content_type='application/octet-stream')
store(login, 'Clé wifi – café', {'ssid': 'Café ☕', 'app': 'migration-test'}, 'mot de passe – été ☕'.encode())
store(login, 'Empty secret', {'app': 'migration-test', 'kind': 'empty'}, b'')
# a uint32 attribute, as libgnome-keyring's network passwords had for 'port': gnome-keyring stores an attribute as
# uint32 when the item also carries its marker field gkr:compat:uint32:NAME (never written to the file itself)
store(login, 'Legacy FTP password', {'user': 'dave', 'server': 'ftp.example.com', 'protocol': 'ftp', 'port': '2121',
      'gkr:compat:uint32:port': '', 'xdg:schema': 'org.gnome.keyring.NetworkPassword'}, b'ftp-pass-dave')

# the default alias, as a desktop leaves it (without this call gnome-keyring writes no 'default' file)
svc.call('SetAlias', 'so', 'default', login.collection_path)

# d. a second keyring without a prompt: gnome-keyring's CreateWithMasterPassword (CreateCollection would prompt
# through gcr's system prompter, which needs a display)
sess = open_session(conn)
guilt = DBusAddressWrapper('/org/freedesktop/secrets',
                           'org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface', conn)
work_path, = guilt.call('CreateWithMasterPassword', 'a{sv}(oayays)',
                        {'org.freedesktop.Secret.Collection.Label': ('s', 'work')},
                        format_secret(sess, work_password.encode(), 'text/plain'))
work = secretstorage.Collection(conn, work_path)
store(work, 'VPN token', {'service': 'vpn', 'user': 'carol'}, 'vpn-€-secret'.encode())

# e. a keyring with an empty password: gnome-keyring writes it unencrypted, in its textual (key file) format
plain_path, = guilt.call('CreateWithMasterPassword', 'a{sv}(oayays)',
                         {'org.freedesktop.Secret.Collection.Label': ('s', 'unencrypted')},
                         format_secret(sess, b'', 'text/plain'))
plain = secretstorage.Collection(conn, plain_path)
store(plain, 'Plain binary', {'app': 'migration-test', 'ssid': 'Café ☕'}, b'plain\x00\xff secret')
store(plain, 'Two lines\nsecond \\ é', {'note': ' leading space', 'app': 'migration-test'}, 'texte clair ☕'.encode())
store(plain, 'Legacy uint32', {'port': '2121', 'gkr:compat:uint32:port': '', 'app': 'migration-test'}, b'u32')
store(plain, 'Empty secret', {'app': 'migration-test', 'kind': 'empty'}, b'')

# an item of the 'session' collection: in memory only, never written to a file
session = secretstorage.Collection(conn, '/org/freedesktop/secrets/collection/session')
store(session, 'Session only', {'app': 'migration-test', 'kind': 'session'}, b'gone-at-logout')

keyrings_dir = os.path.join(dir_, 'home', '.local', 'share', 'keyrings')
passwords = {'login': password, 'work': work_password, 'unencrypted': ''}
manifest = {'kind': 'gnome-keyring', 'keyrings_dir': keyrings_dir,
            'default_alias': svc.call('ReadAlias', 's', 'default')[0].rsplit('/', 1)[-1],
            'note': "'attributes' are the ones stored (and in the .keyring file); those named in 'uint32_attributes' "
                    "are uint32 in the file (and their marker gkr:compat:uint32:NAME is not in it); 'file_item_type' is "
                    "the item type in the file (1 for xdg:schema org.gnome.keyring.NetworkPassword, else 0). Over D-Bus "
                    "gnome-keyring may show an extra xdg:schema=org.freedesktop.Secret.Generic on a type-0 item that has "
                    "none, once it has re-read the file, and shows the gkr:compat:uint32: markers; the 'session' "
                    "collection is in memory only; a keyring's own created/modified (D-Bus and file) are unreliable: "
                    "gnome-keyring swaps them each time it writes and re-reads the file.",
            'keyrings': [], 'items': []}
for col in secretstorage.get_all_collections(conn):
    cid = col.collection_path.rsplit('/', 1)[-1]
    props = DBusAddressWrapper(col.collection_path, 'org.freedesktop.Secret.Collection', conn)
    persistent = cid != 'session'
    manifest['keyrings'].append({
        'collection': cid, 'label': col.get_label(), 'persistent': persistent,
        'file': os.path.join(keyrings_dir, cid + '.keyring') if persistent else None,
        'format': None if not persistent else ('textual' if passwords.get(cid) == '' else 'binary'),
        'password': passwords.get(cid), 'created': props.get_property('Created'),
        'modified': props.get_property('Modified')})
    for it in col.get_all_items():
        # libsecret's items: libsecret sent xdg:schema itself, so what D-Bus shows is what was stored
        attrs = stored_attributes.get(it.item_path) or it.get_attributes()
        uint32 = sorted(k[len('gkr:compat:uint32:'):] for k in attrs if k.startswith('gkr:compat:uint32:'))
        attrs = {k: v for k, v in attrs.items() if not k.startswith('gkr:compat:')}
        item_type = 1 if attrs.get('xdg:schema') == 'org.gnome.keyring.NetworkPassword' else 0
        manifest['items'].append({
            'collection': cid, 'id': int(it.item_path.rsplit('/', 1)[-1]), 'path': it.item_path,
            'label': it.get_label(), 'attributes': dict(sorted(attrs.items())),
            'file_item_type': item_type if persistent else None, 'uint32_attributes': uint32,
            'secret_hex': it.get_secret().hex(), 'content_type': it.get_secret_content_type(),
            'created': it.get_created(), 'modified': it.get_modified(), 'persistent': persistent,
            'created_by': created_by.get(it.item_path, 'secretstorage CreateItem')})
manifest['keyrings'].sort(key=lambda k: k['collection'])
manifest['items'].sort(key=lambda i: (i['collection'], i['id']))
with open(os.path.join(dir_, 'manifest.json'), 'w', encoding='utf-8') as f:
    json.dump(manifest, f, indent=2, ensure_ascii=False)
    f.write('\n')
PYEOF
}

cmd_gnome_keyring_file() {
    if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi
    local dir
    dir="$(absdir "$1")"
    gk_check_clean "$dir"
    GK_DIR="$dir"
    trap 'gk_stop "$GK_DIR"' EXIT   # whatever fails, nothing started is left running
    gk_create "$dir" "$2" "${3:-$2}"
    gk_stop "$dir"
    trap - EXIT
    local f
    for f in login work unencrypted; do
        head -c 16 "$dir/home/.local/share/keyrings/$f.keyring" 2>/dev/null | grep -q -E '^(GnomeKeyring|\[keyring\])' \
            || die "$f.keyring was not written"
    done
    cat "$dir/manifest.json"
}

cmd_secret_service() {
    if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage; fi
    local dir password
    dir="$(absdir "$1")"
    password="${2:-login-password}"
    gk_check_clean "$dir"
    GK_DIR="$dir"
    trap 'gk_stop "$GK_DIR"' EXIT
    gk_create "$dir" "$password" "${3:-$password}"
    trap - EXIT
    # shellcheck disable=SC1091
    . "$dir/pids.env"
    printf "export DBUS_SESSION_BUS_ADDRESS='%s'\n" "$DBUS_SESSION_BUS_ADDRESS"
    printf 'export MIGRATION_GNOME_KEYRING_PID=%s\n' "$MIGRATION_GNOME_KEYRING_PID"
    printf 'export MIGRATION_DBUS_DAEMON_PID=%s\n' "$MIGRATION_DBUS_DAEMON_PID"
    printf "export MIGRATION_MANIFEST='%s'\n" "$dir/manifest.json"
}

cmd_stop() {
    [ $# -eq 1 ] || usage
    [ -d "$1" ] || return 0
    gk_stop "$(cd "$1" && pwd -P)"
}

# ---------------------------------------------------------------- KeePassXC ----------------------------------------

cmd_keepassxc() {
    [ $# -eq 2 ] || usage
    local dir password py stage db
    dir="$(absdir "$1")"
    password="$2"
    command -v keepassxc-cli >/dev/null || die "keepassxc-cli missing (Debian: keepassxc)"
    py="$(pick_python json)" || die "python3 missing"
    [ ! -e "$dir/db.kdbx" ] || die "$dir/db.kdbx exists: give a clean DIR"
    private_env "$dir"
    stage="$dir/stage"
    rm -rf "$stage"; mkdir -p "$stage"
    kp() { keepassxc-cli "$@" >>"$stage/keepassxc-cli.log" 2>&1 || { cat "$stage/keepassxc-cli.log" >&2; die "keepassxc-cli $1 failed"; }; }
    unlock() { printf '%s\n' "$password"; }
    db="$stage/stage.kdbx"
    # -t 100: a 100 ms key derivation (AES-KDF), so that each command below opens the database quickly
    printf '%s\n%s\n' "$password" "$password" | kp db-create -p -t 100 "$db"
    unlock | kp mkdir "$db" Internet
    unlock | kp mkdir "$db" Finance
    unlock | kp mkdir "$db" Finance/Cards
    printf '%s\n%s\n' "$password" 'Al1ce "pw", ok' | kp add -p -u alice --url 'https://login.example.com:8443/path' \
        --notes $'first line\nsecond, "quoted" line\nthird line' "$db" "Internet/Example Login"
    sleep 1   # a modification time later than the creation time
    printf '%s\n%s\n' "$password" 'alice-new-pass' | kp edit -p "$db" "Internet/Example Login"   # one History entry
    printf '%s\n%s\n' "$password" '0000' | kp add -p -u bob "$db" "Finance/Cards/Bank PIN"
    printf '%s\n%s\n' "$password" 'wifi-pass' | kp add -p -u guest "$db" "Internet/Café ☕ Wi-Fi"
    printf '%s\n%s\n' "$password" 'old-pass' | kp add -p -u olduser "$db" "Old entry"
    unlock | keepassxc-cli export -q -f xml "$db" > "$stage/stage.xml"
    # keepassxc-cli 2.7 has no command for custom attributes: add two to its own XML export, and let
    # keepassxc-cli import that into the final database.
    "$py" - "$stage/stage.xml" "$stage/custom.xml" <<'PYEOF'
import sys
x = open(sys.argv[1], encoding='utf-8').read()
i = x.index('<Value>Café ☕ Wi-Fi</Value>')
j = x.index('<AutoType>', i)
ind = x[x.rindex('\n', 0, j) + 1:j]
def string(key, value, protected):
    attr = ' ProtectInMemory="True"' if protected else ''
    return '<String>\n%s\t<Key>%s</Key>\n%s\t<Value%s>%s</Value>\n%s</String>\n%s' % (ind, key, ind, attr, value, ind, ind)
x = x[:j] + string('SSID', 'Café ☕', False) + string('Recovery code', 'R-123 &amp; &lt;x&gt;', True) + x[j:]
open(sys.argv[2], 'w', encoding='utf-8').write(x)
PYEOF
    db="$dir/db.kdbx"
    printf '%s\n%s\n' "$password" "$password" | kp import -p -t 100 "$stage/custom.xml" "$db"
    # after the import: keepassxc-cli 2.7.4's import keeps an attachment's name but drops its bytes
    printf 'card number 4111 1111 1111 1111\n' > "$dir/attachment-card.txt"
    unlock | kp attachment-import "$db" "Finance/Cards/Bank PIN" card.txt "$dir/attachment-card.txt"
    # Still a KDBX 3.1 file here: its XML export has ISO-8601 times and the attachment bytes in Meta/Binaries.
    unlock | keepassxc-cli export -q -f xml "$db" > "$dir/export-kdbx3.xml"
    # Into the Recycle Bin: PreviousParentGroup is a KDBX 4.1 field, so the file is saved as KDBX 4.1 from now on,
    # and its XML export has base64 times and no Meta/Binaries.
    unlock | kp rm "$db" "Old entry"
    unlock | keepassxc-cli export -q -f xml "$db" > "$dir/export.xml"
    unlock | keepassxc-cli export -q -f csv "$db" > "$dir/export.csv"
    local attachment
    attachment="$(unlock | keepassxc-cli attachment-export -q --stdout "$db" "Finance/Cards/Bank PIN" card.txt | od -An -tx1 | tr -d ' \n')"
    rm -rf "$stage"

    # The manifest: what was put in, checked against keepassxc's own exports (uuids and times come from them).
    "$py" - "$dir" "$password" "$attachment" <<'PYEOF'
import base64, datetime, gzip, json, os, sys, xml.etree.ElementTree as ET
dir_, password, attachment_hex = sys.argv[1:4]
card = b'card number 4111 1111 1111 1111\n'.hex()
assert attachment_hex == card, attachment_hex
expected = [
    {'group': ['Internet'], 'title': 'Example Login', 'username': 'alice', 'password': 'alice-new-pass',
     'url': 'https://login.example.com:8443/path', 'notes': 'first line\nsecond, "quoted" line\nthird line',
     'custom': {}, 'attachments': {}, 'history_passwords': ['Al1ce "pw", ok'], 'recycled': False},
    {'group': ['Internet'], 'title': 'Café ☕ Wi-Fi', 'username': 'guest', 'password': 'wifi-pass', 'url': '',
     'notes': '', 'custom': {'Recovery code': {'value': 'R-123 & <x>', 'protected': True},
                             'SSID': {'value': 'Café ☕', 'protected': False}},
     'attachments': {}, 'history_passwords': [], 'recycled': False},
    {'group': ['Finance', 'Cards'], 'title': 'Bank PIN', 'username': 'bob', 'password': '0000', 'url': '', 'notes': '',
     'custom': {}, 'attachments': {'card.txt': card}, 'history_passwords': ['0000'], 'recycled': False},
    {'group': ['Recycle Bin'], 'title': 'Old entry', 'username': 'olduser', 'password': 'old-pass', 'url': '',
     'notes': '', 'custom': {}, 'attachments': {}, 'history_passwords': [], 'recycled': True},
]
STANDARD = {'Title', 'UserName', 'Password', 'URL', 'Notes'}
EPOCH1 = datetime.datetime(1, 1, 1, tzinfo=datetime.timezone.utc)

def when(text):   # KDBX 3.1: ISO-8601 'Z'; KDBX 4.x: base64 of a little-endian int64, seconds since 0001-01-01 UTC
    if text and text.endswith('Z'):
        t = datetime.datetime.strptime(text, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    else:
        t = EPOCH1 + datetime.timedelta(seconds=int.from_bytes(base64.b64decode(text), 'little', signed=True))
    return t.strftime('%Y-%m-%dT%H:%M:%SZ')

def read(path):
    root = ET.parse(path).getroot()
    pool = {}
    for b in root.findall('Meta/Binaries/Binary'):
        raw = base64.b64decode(b.text or '')
        pool[b.get('ID')] = gzip.decompress(raw) if b.get('Compressed') == 'True' else raw
    found = {}
    def walk(group, path):
        for e in group.findall('Entry'):
            s = {st.findtext('Key'): st.find('Value') for st in e.findall('String')}
            title = s['Title'].text or ''
            found[title] = {
                'group': path, 'uuid': e.findtext('UUID'), 'uuid_hex': base64.b64decode(e.findtext('UUID')).hex(),
                'created': when(e.findtext('Times/CreationTime')),
                'modified': when(e.findtext('Times/LastModificationTime')),
                'username': s['UserName'].text or '', 'password': s['Password'].text or '',
                'url': s['URL'].text or '', 'notes': s['Notes'].text or '',
                'custom': {k: {'value': v.text or '', 'protected': v.get('ProtectInMemory') == 'True'}
                           for k, v in sorted(s.items()) if k not in STANDARD},
                'attachments': {b.findtext('Key'): (pool[b.find('Value').get('Ref')].hex()
                                                    if b.find('Value').get('Ref') in pool else None)
                                for b in e.findall('Binary')},
                'history_passwords': [next((st.findtext('Value') or '') for st in h.findall('String')
                                           if st.findtext('Key') == 'Password') for h in e.findall('History/Entry')]}
        for g in group.findall('Group'):
            walk(g, path + [g.findtext('Name')])
    top = root.find('Root/Group')
    walk(top, [])
    return root, top, found

root, top, found = read(os.path.join(dir_, 'export.xml'))
root3, top3, found3 = read(os.path.join(dir_, 'export-kdbx3.xml'))
entries = []
for exp in expected:
    got, got3 = found.pop(exp['title']), found3.pop(exp['title'])
    for k in ('group', 'username', 'password', 'url', 'notes', 'custom', 'history_passwords'):
        assert got[k] == exp[k], (exp['title'], k, got[k], exp[k])
        if k != 'group':
            assert got3[k] == exp[k], ('kdbx3', exp['title'], k, got3[k], exp[k])
    assert got3['group'] == ([] if exp['recycled'] else exp['group']), got3['group']
    assert got3['attachments'] == exp['attachments'], got3['attachments']              # bytes in Meta/Binaries
    assert got['attachments'] == {k: None for k in exp['attachments']}, got['attachments']  # KDBX 4: a Ref only
    assert (got['uuid'], got['created']) == (got3['uuid'], got3['created'])
    assert exp['recycled'] or got['modified'] == got3['modified']   # moving to the Recycle Bin touches the entry
    entries.append(dict(exp, uuid=got['uuid'], uuid_hex=got['uuid_hex'], created=got['created'],
                        modified=got['modified'], csv_group='/'.join([top.findtext('Name')] + exp['group'])))
assert not found and not found3, (found, found3)
manifest = {'kind': 'keepassxc', 'database': os.path.join(dir_, 'db.kdbx'), 'password': password,
            'export_xml': os.path.join(dir_, 'export.xml'), 'export_csv': os.path.join(dir_, 'export.csv'),
            'export_xml_kdbx3': os.path.join(dir_, 'export-kdbx3.xml'),
            'note': "export.xml and export.csv are of db.kdbx (KDBX 4.1: base64 times, attachments as a Ref with no "
                    "bytes); export-kdbx3.xml is the same database while still KDBX 3.1, before 'Old entry' was "
                    "moved to the Recycle Bin (it is then in the root group; ISO times; attachment bytes in "
                    "Meta/Binaries). Times here are UTC, to the second.",
            'root_group': top.findtext('Name'), 'recycle_bin_uuid': root.findtext('Meta/RecycleBinUUID'),
            'entries': entries}
with open(os.path.join(dir_, 'manifest.json'), 'w', encoding='utf-8') as f:
    json.dump(manifest, f, indent=2, ensure_ascii=False)
    f.write('\n')
PYEOF
    cat "$dir/manifest.json"
}

# ---------------------------------------------------------------- pass ---------------------------------------------

cmd_pass() {
    [ $# -eq 1 ] || usage
    local dir py fpr
    dir="$(absdir "$1")"
    command -v pass >/dev/null || die "pass missing (Debian: pass)"
    command -v gpg >/dev/null || die "gpg missing (Debian: gnupg)"
    py="$(pick_python json)" || die "python3 missing"
    if [ -e "$dir/store" ] || [ -e "$dir/gnupg" ]; then die "$dir/store or $dir/gnupg exists: give a clean DIR"; fi
    private_env "$dir"
    export GNUPGHOME="$dir/gnupg" PASSWORD_STORE_DIR="$dir/store"
    mkdir -m 700 "$GNUPGHOME"
    trap 'gpgconf --kill gpg-agent >/dev/null 2>&1 || true' EXIT
    gpg --batch --quiet --gen-key >&2 2>"$dir/gpg.log" <<'EOF'
%no-protection
Key-Type: eddsa
Key-Curve: ed25519
Key-Usage: sign
Subkey-Type: ecdh
Subkey-Curve: cv25519
Subkey-Usage: encrypt
Name-Real: Migration Test
Name-Email: migration-test@example.invalid
Expire-Date: 0
%commit
EOF
    fpr="$(gpg --batch --with-colons --list-keys 2>/dev/null | awk -F: '$1=="fpr" {print $10; exit}')"
    [ -n "$fpr" ] || die "no key was generated (see $dir/gpg.log)"
    pass init "$fpr" >&2
    printf 'p4ss w0rd\nlogin: alice\nurl: https://mail.example.com\n' | pass insert -m 'email/alice@example.com' >&2
    printf '%s\n' 'single-line-pw' | pass insert -e 'web/example.org' >&2
    printf '%s\n' 'ünï-pässwörd ☕' | pass insert -e 'Ünïcode/entry' >&2
    printf "export GNUPGHOME='%s'\nexport PASSWORD_STORE_DIR='%s'\n" "$GNUPGHOME" "$PASSWORD_STORE_DIR" > "$dir/env.sh"
    "$py" - "$dir" "$fpr" <<'PYEOF'
import json, os, subprocess, sys
dir_, fpr = sys.argv[1:3]
store = os.path.join(dir_, 'store')
expected = {'email/alice@example.com': b'p4ss w0rd\nlogin: alice\nurl: https://mail.example.com\n',
            'web/example.org': b'single-line-pw\n',
            'Ünïcode/entry': 'ünï-pässwörd ☕\n'.encode()}
entries = []
for name, plain in sorted(expected.items()):
    f = os.path.join(store, name + '.gpg')
    got = subprocess.run(['gpg', '--decrypt', '--batch', '--quiet', f], capture_output=True, check=True).stdout
    assert got == plain, (name, got, plain)
    text = plain.decode()
    lines = text.split('\n')
    entries.append({'name': name, 'file': f, 'plaintext_hex': plain.hex(), 'password': lines[0],
                    'extra_lines': [l for l in lines[1:] if l != '']})
manifest = {'kind': 'pass', 'env': {'GNUPGHOME': os.environ['GNUPGHOME'], 'PASSWORD_STORE_DIR': store},
            'env_file': os.path.join(dir_, 'env.sh'), 'gpg_id': fpr, 'entries': entries}
with open(os.path.join(dir_, 'manifest.json'), 'w', encoding='utf-8') as f:
    json.dump(manifest, f, indent=2, ensure_ascii=False)
    f.write('\n')
PYEOF
    gpgconf --kill gpg-agent >/dev/null 2>&1 || true
    trap - EXIT
    cat "$dir/manifest.json"
}

# ----------------------------------------------------------------------------------------------------------------------

[ $# -ge 1 ] || usage
command="$1"; shift
case "$command" in
    gnome-keyring-file) cmd_gnome_keyring_file "$@" ;;
    secret-service) cmd_secret_service "$@" ;;
    stop) cmd_stop "$@" ;;
    keepassxc) cmd_keepassxc "$@" ;;
    pass) cmd_pass "$@" ;;
    -h|--help|help) usage ;;
    *) usage ;;
esac
