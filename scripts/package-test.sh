#!/usr/bin/env bash
# The installed product, end to end (CI; needs root, changes this machine and puts it back):
#   1. builds the Debian package and installs it with apt;
#   2. as a fresh user with nothing but the installed files: keychaind started by D-Bus activation from the
#      installed service file (the README's opt-in step) for secret-tool; the README's example with the installed
#      `security`; git through the installed helper; docker's helper; every tool's --version; a login over SSH
#      with the installed PAM module (scripts/ssh-login-test.sh); the installed sync server's unit (enabled by
#      nothing) and the server itself answering /health from a PostgreSQL cluster;
#   3. purges the package: no file of it is left, nor dpkg's record of it; the user's keychain is;
#   4. the same files through scripts/install.sh --prefix and scripts/uninstall.sh, which leaves nothing behind.
#
#   sudo scripts/package-test.sh [--no-build]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ "$(id -u)" = 0 ] || { echo "package-test.sh: run as root (it installs and removes a package)" >&2; exit 1; }
build=()
[ "${1:-}" = --no-build ] && build=(--no-build)
version="$(tr -d ' \n' < "$root/VERSION")"
user=kc-package-test
home="$(mktemp -d /tmp/kc-package-test.XXXXXX)"
prefix_test=/opt/kc-package-test
failures=0
check() {  # check DESCRIPTION COMMAND...: runs the command, reports it, counts a failure
    local description="$1"; shift
    if "$@"; then echo "ok   $description"; else echo "FAIL $description"; failures=$((failures + 1)); fi
}
as_user() {  # a login-like environment with only the installed programs on PATH
    runuser -u "$user" -- env -i HOME="$home" PATH=/usr/bin:/bin LANG=C.UTF-8 USER="$user" "$@"
}
cleanup() {
    pkill -KILL -u "$user" 2>/dev/null || true
    sleep 0.2
    userdel "$user" 2>/dev/null || true
    rm -rf "$home"
    if [ -n "$(package_state)" ]; then DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq swift-keychain >/dev/null 2>&1 || true; fi
    if [ -f "$prefix_test/share/swift-keychain/installed-files" ]; then "$root/scripts/uninstall.sh" --prefix "$prefix_test" || true; fi
    # The package's system group stays after removal (Debian's rule); this test made it, so it takes it away.
    if [ "${group_existed:-1}" = 0 ] && getent group keychaind >/dev/null; then groupdel keychaind || true; fi
}
package_state() {  # dpkg's state of the package: "" when dpkg knows nothing of it
    local state; state="$(dpkg-query -W -f='${db:Status-Status}' swift-keychain 2>/dev/null || true)"
    [ "$state" = not-installed ] && state=""
    echo "$state"
}
if id "$user" >/dev/null 2>&1; then echo "package-test.sh: user $user exists already; not touching it" >&2; exit 1; fi
case "$(package_state)" in
    "") ;;
    # Removed but not purged: only dpkg's record is left (the package has no conffiles). An earlier version's
    # postrm kept it so; purging it changes no file a user has.
    config-files) echo "package-test.sh: purging what a removed swift-keychain left in dpkg's database"
                  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq swift-keychain >/dev/null ;;
    *) echo "package-test.sh: swift-keychain is installed already ($(package_state)); not touching it" >&2; exit 1 ;;
esac
trap cleanup EXIT

# 1. The package.
package="$("$root/scripts/build-deb.sh" "${build[@]}" | tail -1)"
echo "built $(basename "$package") ($(du -h "$package" | cut -f1))"
# Debian's own checks of a package: no error or warning (the few lintian says with reason are overridden inside
# the package, each with why; informational tags are not counted).
lintian_clean() {  # prints what lintian said (errors and warnings; as root it also says so, which is not counted)
    local out status=0
    out="$(lintian --fail-on error,warning "$package" 2>&1)" || status=$?
    grep -v '^running with root' <<<"$out" | sed 's/^/  /'
    return "$status"
}
if command -v lintian >/dev/null; then
    check "lintian: no error or warning" lintian_clean
else
    echo "skip lintian (Debian: apt-get install lintian)"
fi
before="$(mktemp)"; find /usr /etc -xdev 2>/dev/null | sort > "$before"
group_existed=0; getent group keychaind >/dev/null && group_existed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
files="$(dpkg -L swift-keychain)"
check "the package installs its tools root-owned and not writable by others; keychaind set-group-ID keychaind" \
    bash -c 'for f in /usr/bin/security /usr/bin/keychain-embedded /usr/bin/git-credential-keychain /usr/bin/docker-credential-keychain /usr/bin/keychain-sync-server; do
        [ "$(stat -c %U:%a "$f")" = root:755 ] || { echo "  $f: $(stat -c %U:%a "$f")"; exit 1; }; done
        [ "$(stat -c %U:%G:%a /usr/bin/keychaind)" = root:keychaind:2755 ] || { echo "  keychaind: $(stat -c %U:%G:%a /usr/bin/keychaind)"; exit 1; }'
check "installing turned nothing on (no Secret Service file on the bus's path, PAM profile off)" \
    bash -c '[ ! -e /usr/share/dbus-1/services/org.freedesktop.secrets.service ] || ! grep -q swift-keychain /usr/share/dbus-1/services/org.freedesktop.secrets.service; ! grep -rqs pam_keychain /etc/pam.d'

# 2. A fresh user.
useradd -M -d "$home" -s /bin/bash "$user"
chown "$user:" "$home"; chmod 0700 "$home"
for tool in security keychaind keychain-embedded git-credential-keychain keychain-sync-server; do
    check "$tool --version names $version" bash -c "as_out=\$(runuser -u $user -- /usr/bin/$tool --version); echo \"  \$as_out\"; [[ \"\$as_out\" == *'$version'* ]]"
done
check "every installed program has a manual page" \
    bash -c 'for tool in security keychaind keychain-embedded git-credential-keychain docker-credential-keychain keychain-sync-server; do
        man -w "$tool" >/dev/null 2>&1 || { echo "  no manual page for $tool"; exit 1; }; done'
check "docker-credential-keychain version names $version" bash -c "[[ \$(/usr/bin/docker-credential-keychain version) == *'$version'* ]]"

# The desktop's Secret Service, opted in as the README says; the first client of the session starts keychaind
# through D-Bus activation from the installed file (no systemd user manager here: the bus runs Exec= itself). Its
# command line shows it (keychaind is not dumpable: its /proc/PID/exe is root's to read).
as_user mkdir -p "$home/.local/share/dbus-1/services"
as_user ln -s /usr/share/swift-keychain/dbus-1/services/org.freedesktop.secrets.service "$home/.local/share/dbus-1/services/"
if command -v secret-tool >/dev/null && command -v dbus-run-session >/dev/null; then
    # The activated keychaind inherits the bus's standard output: the results go to a file, not to a pipe that would
    # stay open as long as keychaind runs.
    as_user dbus-run-session -- bash -c '
        { printf from-libsecret | secret-tool store --label=Package app package-test && secret-tool lookup app package-test
          echo; tr "\0" " " < "/proc/$(pgrep -u "$USER" -x keychaind | head -1)/cmdline"; } > "$HOME/activation.out" 2>&1' \
        < /dev/null > /dev/null 2>&1 || true
    check "secret-tool stores and finds through keychaind started by D-Bus activation" \
        bash -c "out=\$(tr '\n' ' ' < $home/activation.out); echo \"  \$out\"; [ \"\$out\" = 'from-libsecret /usr/bin/keychaind --secret-service ' ]"
    pkill -TERM -u "$user" -x keychaind || true
    for _ in $(seq 50); do pgrep -u "$user" -x keychaind >/dev/null || break; sleep 0.1; done
else
    echo "skip secret-tool (libsecret-tools or dbus-run-session missing)"
fi

# The README's example, with the installed tools (keychaind started on demand by the first command).
check "README: add-generic-password, then find-generic-password -w prints it" \
    bash -c "[ \"\$(runuser -u $user -- env -i HOME=$home PATH=/usr/bin:/bin bash -c 'echo s3cret | security add-generic-password -a alice -s com.example.demo -w && security find-generic-password -a alice -s com.example.demo -w')\" = s3cret ]"
check "README: a missing item is exit status 44" \
    bash -c "runuser -u $user -- env -i HOME=$home PATH=/usr/bin:/bin security find-generic-password -s nothing-here 2>/dev/null; [ \$? = 44 ]"
check "the keychaind serving the user is the installed one" \
    bash -c "pid=\$(pgrep -u $user -x keychaind | head -1); [ \"\$(readlink /proc/\$pid/exe)\" = /usr/bin/keychaind ]"
check "the secret is not on disk in the clear" bash -c "! grep -rqa s3cret $home"
as_user git config --global credential.helper keychain
check "git stores and fills a credential through the installed helper" \
    bash -c "runuser -u $user -- env -i HOME=$home PATH=/usr/bin:/bin bash -c '
        printf \"protocol=https\nhost=git.example.com\nusername=bob\npassword=hunter2\n\n\" | git credential approve
        printf \"protocol=https\nhost=git.example.com\n\n\" | git credential fill' | grep -qx password=hunter2"
check "docker's helper stores and gets a credential" \
    bash -c "runuser -u $user -- env -i HOME=$home PATH=/usr/bin:/bin bash -c '
        echo \"{\\\"ServerURL\\\":\\\"https://registry.example\\\",\\\"Username\\\":\\\"u\\\",\\\"Secret\\\":\\\"tok\\\"}\" | docker-credential-keychain store
        echo https://registry.example | docker-credential-keychain get' | grep -q '\"Secret\":\"tok\"'"
pkill -KILL -u "$user" 2>/dev/null || true

# Which keychaind a client talks to (docs/SECURITY.md): the installed one alone, known by the group it names in its
# greeting's credentials (the kernel lets no other process of the user name it). Whatever else of the user serves
# keychaind's socket (a program of its own, one relaying to the real keychaind, a copy of keychaind, the installed
# keychaind started with other directories or under a tracer) gets the 8 bytes of the client's greeting and nothing
# more from the installed clients, which say why.
socket="/tmp/keychain-$(id -u "$user")/keychaind.sock"
keychaind_group="$(getent group keychaind | cut -d: -f3)"
# The protocol version of this checkout's keychaind, for the stand-ins' greetings.
keychaind_protocol="$(sed -n 's/^public let keychainProtocolVersion = \([0-9]*\)$/\1/p' "$root/Sources/KeychainWire/Messages.swift")"
[ -n "$keychaind_protocol" ] || { echo "package-test.sh: no keychainProtocolVersion in Sources/KeychainWire/Messages.swift" >&2; exit 1; }
user_group="$(id -g "$user")"
stop_keychaind() {
    pkill -KILL -u "$user" -f 'keychaind|stand-in.py' 2>/dev/null || true
    for _ in $(seq 50); do pgrep -u "$user" -f 'keychaind|stand-in.py' >/dev/null || break; sleep 0.1; done
    rm -f "$socket"
}
wait_for_socket() { for _ in $(seq 100); do [ -S "$socket" ] && return 0; sleep 0.1; done; return 1; }
stand_in="$home/stand-in.py"
cat > "$stand_in" <<'PYTHON'
# stand-in.py greeting SOCKET: the group named in the credentials of keychaind's greeting.
# stand-in.py listen SOCKET RECORD [RELAY-TO]: serves SOCKET as keychaind would (its greeting, then it waits for
# requests), or relays each connection to RELAY-TO; writes to RECORD how many bytes its clients sent.
import os, socket, struct, sys, threading
mode, path = sys.argv[1], sys.argv[2]
if mode == "greeting":
    s = socket.socket(socket.AF_UNIX); s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1); s.connect(path)
    s.sendall(b"\0\0\0\4KCW" + bytes([int(os.environ["KEYCHAIND_PROTOCOL"])]))
    data, ancillary, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    print([struct.unpack("3i", d)[2] for level, kind, d in ancillary if kind == socket.SCM_CREDENTIALS][0])
    sys.exit(0)
record, relay_to = sys.argv[3], (sys.argv[4] if len(sys.argv) > 4 else None)
os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(8); s.settimeout(30)
received = [0]
open(record, "w").write("0")
def pump(source, sink, count):
    try:
        while (chunk := source.recv(65536)):
            if count:
                received[0] += len(chunk)
                open(record, "w").write(str(received[0]))
            if sink:
                sink.sendall(chunk)
    except OSError:
        pass
    for end in (source, sink):
        try:
            if end: end.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
try:
    while True:
        client, _ = s.accept()
        upstream = None
        if relay_to:
            upstream = socket.socket(socket.AF_UNIX); upstream.connect(relay_to)
            threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()
        else:
            home = os.environ["HOME"]
            directories = b"".join(os.path.join(home, d).encode() + b"\0"
                                   for d in (".local/share/keychains", ".local/state/keychain", ".config/keychain"))
            # The installed keychaind's own protocol version, so that only the group is wrong.
            greeting = b"KCW" + bytes([int(os.environ["KEYCHAIND_PROTOCOL"])]) + directories
            client.sendall(len(greeting).to_bytes(4, "big") + greeting)
        threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
except OSError:
    pass
PYTHON
chmod 0644 "$stand_in"
keychaind_names_its_group_in_its_greeting() {
    stop_keychaind
    as_user security find-generic-password -a alice -s com.example.demo -w >/dev/null || return 1
    local named pid
    named="$(as_user env KEYCHAIND_PROTOCOL="$keychaind_protocol" /usr/bin/python3 "$stand_in" greeting "$socket")"
    pid="$(pgrep -u "$user" -x keychaind | head -1)"
    echo "  greeting's group $named (keychaind $keychaind_group); keychaind's $(grep '^Gid:' "/proc/$pid/status" | tr -s '\t' ' ')"
    # The group only as the saved one: real, effective and file-system groups are the user's (pinentry gets no other).
    [ "$named" = "$keychaind_group" ] && grep -qx "Gid:	$user_group	$user_group	$keychaind_group	$user_group" "/proc/$pid/status"
}
# refused_when WORDS SERVER...: SERVER (run as the user) serves the socket; the installed security must refuse it
# with a message containing WORDS, and send it nothing but its 8-byte greeting (when SERVER records what it got).
refused_when() {  # (after stop_keychaind: what runs of the user's, a keychaind to relay to, stays)
    local words="$1"; shift
    rm -f "$socket" "$home/received"
    as_user "$@" > "$home/server.out" 2>&1 &
    wait_for_socket || { echo "  nothing listened"; cat "$home/server.out"; return 1; }
    local out status=0
    out="$(as_user security find-generic-password -a alice -s com.example.demo -w 2>&1)" || status=$?
    sleep 0.2
    stop_keychaind
    echo "  exit $status: $out"
    [ "$status" != 0 ] && [[ "$out" == *"$words"* ]] && [[ "$out" != *s3cret* ]] || return 1
    if [ -f "$home/received" ]; then
        [ "$(cat "$home/received")" = 8 ] || { echo "  the server received $(cat "$home/received") bytes"; return 1; }
    fi
}
# The real keychaind on a socket of its own (another runtime directory), for the relay.
start_real_keychaind_elsewhere() {
    mkdir -p "$home/elsewhere-run" && chown "$user" "$home/elsewhere-run" && chmod 0700 "$home/elsewhere-run"
    as_user env XDG_RUNTIME_DIR="$home/elsewhere-run" /usr/bin/keychaind --foreground > "$home/real.out" 2>&1 &
    for _ in $(seq 100); do [ -S "$home/elsewhere-run/keychain/keychaind.sock" ] && return 0; sleep 0.1; done
    return 1
}
check "the installed keychaind names its group in its greeting and keeps it only as its saved group" \
    keychaind_names_its_group_in_its_greeting
stop_keychaind
check "a program of the user serving keychaind's socket gets only the greeting from the installed security, which says why" \
    refused_when "not the installed keychaind" env KEYCHAIND_PROTOCOL="$keychaind_protocol" \
        /usr/bin/python3 "$stand_in" listen "$socket" "$home/received"
stop_keychaind
if start_real_keychaind_elsewhere; then
    check "a program relaying to the real keychaind gets only the greeting: the relayed greeting carries its own group" \
        refused_when "not the installed keychaind" /usr/bin/python3 "$stand_in" listen "$socket" "$home/received" \
        "$home/elsewhere-run/keychain/keychaind.sock"
else
    check "the installed keychaind starts on a runtime directory of its own (for the relay)" false
    cat "$home/real.out"
fi
stop_keychaind
rm -f "$home/received"
as_user cp /usr/bin/keychaind "$home/keychaind"
check "a copy of keychaind run by the user (no group) is refused" \
    refused_when "not the installed keychaind" "$home/keychaind" --foreground
stop_keychaind
check "the installed keychaind started with another HOME is refused: it would keep the user's items elsewhere" \
    refused_when "started with other directories" env HOME="$home/elsewhere" /usr/bin/keychaind --foreground
if as_user strace -f -o /dev/null true 2>/dev/null; then
    check "the installed keychaind under a tracer will not start: it would run without its group" \
        bash -c "out=\$(runuser -u $user -- env -i HOME=$home PATH=/usr/bin:/bin strace -f -o /dev/null /usr/bin/keychaind --foreground 2>&1); status=\$?; echo \"  exit \$status: \${out##*keychaind}\"; [ \$status != 0 ] && [[ \$out == *\"without keychaind's group\"* ]]"
else
    echo "skip keychaind under a tracer (strace cannot trace here)"
fi
check "with the stand-ins gone, the installed keychaind serves again" \
    bash -c "[ \"\$(runuser -u $user -- env -i HOME=$home PATH=/usr/bin:/bin security find-generic-password -a alice -s com.example.demo -w)\" = s3cret ]"
stop_keychaind
rm -rf "$home/keychaind" "$stand_in" "$home/server.out" "$home/real.out" "$home/elsewhere-run" "$home/elsewhere"

# A login over SSH (docs/HEADLESS.md): a real sshd whose PAM service has the installed pam_keychain.so, a user with
# a password, and in that session security, git and secret-tool with the installed tools (its own user and files).
if [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null; then
    check "an SSH login with a password unlocks the keychain for the session's tools (scripts/ssh-login-test.sh)" \
        "$root/scripts/ssh-login-test.sh" /usr/bin "/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/security/pam_keychain.so"
else
    echo "skip the SSH login (no sshd here; Debian: apt-get install openssh-server)"
fi

# The sync server: its system unit names the installed binary and reads /etc/swift-keychain/sync-server.env; nothing
# enabled it. Then the installed server itself, configured as that file's example says, on a private cluster.
check "the sync server's unit is installed, names the installed server and is enabled by nothing" \
    bash -c "grep -qx 'ExecStart=/usr/bin/keychain-sync-server' /usr/lib/systemd/system/keychain-sync-server.service &&
        grep -qx 'EnvironmentFile=/etc/swift-keychain/sync-server.env' /usr/lib/systemd/system/keychain-sync-server.service &&
        [ -f /usr/share/swift-keychain/sync-server.env.example ] && [ ! -e /etc/swift-keychain ] &&
        ! find /etc/systemd -name keychain-sync-server.service 2>/dev/null | grep -q ."
cluster="$(mktemp -d /tmp/kc-package-pg.XXXXXX)"
chmod 755 "$cluster"  # PostgreSQL runs as nobody (it refuses root)
sync_server_health() {
    local started pg_socket pg_user port="" server
    started="$("$root/scripts/sync-postgres.sh" start "$cluster/pg" | tail -1)" || return 1
    pg_socket="$(sed -n 's/.*socket=\([^ ]*\).*/\1/p' <<< "$started")"
    pg_user="$(sed -n 's/.*user=\([^ ]*\).*/\1/p' <<< "$started")"
    KEYCHAIN_SYNC_DATABASE_SOCKET="$pg_socket" KEYCHAIN_SYNC_DATABASE_USER="$pg_user" \
        KEYCHAIN_SYNC_DATABASE_NAME=postgres KEYCHAIN_SYNC_PORT=0 \
        /usr/bin/keychain-sync-server > "$cluster/server.out" 2> "$cluster/server.err" &
    server=$!
    for _ in $(seq 100); do
        port="$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$cluster/server.out")"
        [ -n "$port" ] && break
        sleep 0.1
    done
    local answer=""
    if [ -n "$port" ] && exec 3<>"/dev/tcp/127.0.0.1/$port"; then
        printf 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
        answer="$(timeout 10 head -1 <&3 | tr -d '\r')"
        exec 3<&-
    fi
    kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
    "$root/scripts/sync-postgres.sh" stop "$cluster/pg"
    echo "  $answer"
    [[ "$answer" == "HTTP/1.1 200"* ]] || { cat "$cluster/server.err" >&2; return 1; }
}
if command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    check "the installed sync server, set up from the environment as the example says, answers /health" sync_server_health
else
    echo "skip the installed sync server's /health: no PostgreSQL server here (Debian: apt-get install postgresql)"
fi
rm -rf "$cluster"
pkill -KILL -u "$user" 2>/dev/null || true

# 3. Removal: every file of the package goes; the user's keychain stays. Purged, so that dpkg keeps no record of it
# either (a removed package with maintainer scripts stays "config-files" until purged).
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq swift-keychain >/dev/null
left="$(while IFS= read -r f; do [ -f "$f" ] && echo "$f"; done <<< "$files" || true)"
check "apt purge leaves no file of the package" bash -c "[ -z '$left' ] || { echo '  left: $left'; false; }"
after="$(mktemp)"; find /usr /etc -xdev 2>/dev/null | sort > "$after"
# Not the package's: the linker cache, and the backups shadow's useradd/userdel (this test's own user) leave beside
# the files they edit (/etc/subuid- appears the first time a machine's useradd allots subordinate ids).
new="$(comm -13 "$before" "$after" | grep -v -E '^/etc/(ld\.so\.cache|(passwd|group|shadow|gshadow|subuid|subgid)-)$' || true)"
check "nothing new under /usr and /etc after removal" bash -c "[ -z '$new' ] || { echo '  new: $new'; false; }"
check "the user's keychain is still there" bash -c "ls $home/.local/share/keychains/*.keychain-db >/dev/null 2>&1"

# 4. install.sh / uninstall.sh into a prefix of their own, from the same build.
"$root/scripts/install.sh" --no-build --prefix "$prefix_test" >/dev/null
check "install.sh: tools root-owned, the list of files complete" \
    bash -c "[ \"\$(stat -c %U:%a $prefix_test/bin/security)\" = root:755 ] && [ \"\$(stat -c %U:%G:%a $prefix_test/bin/keychaind)\" = root:keychaind:2755 ] && while read -r f; do [[ \$f == */ || \$f == group:* ]] || [ -f \"\$f\" ] || exit 1; done < $prefix_test/share/swift-keychain/installed-files"
check "install.sh: the unit and the activation file name the installed keychaind" \
    bash -c "grep -qx 'ExecStart=$prefix_test/bin/keychaind --foreground' $prefix_test/lib/systemd/user/keychaind.service && grep -qx 'Exec=$prefix_test/bin/keychaind --secret-service' $prefix_test/share/swift-keychain/dbus-1/services/org.freedesktop.secrets.service"
"$root/scripts/uninstall.sh" --prefix "$prefix_test" >/dev/null
check "uninstall.sh leaves nothing under the prefix" bash -c "[ ! -e $prefix_test ]"

rm -f "$before" "$after"
if [ "$failures" -gt 0 ]; then echo "package-test.sh: $failures checks failed"; exit 1; fi
echo "package-test.sh: every check passed"
