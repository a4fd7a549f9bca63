#!/usr/bin/env bash
# A login over SSH on a machine without a desktop (docs/HEADLESS.md), end to end. Needs root and openssh-server; it
# creates a user and a PAM service file for the test and removes both.
#
# A real sshd listens on a free port of 127.0.0.1 with a host key and a configuration of its own. sshd names its PAM
# service after the name it runs under, so it runs as `sshd-keychain-test` with /etc/pam.d/sshd-keychain-test:
# Debian's common stacks plus pam_keychain.so, as docs/SECRET-SERVICE.md says to add it to /etc/pam.d/sshd. A user
# logs in with a password (the `password` method, as Debian's sshd_config has it: keyboard-interactive runs PAM's
# auth in a process of its own, whose kept password never reaches the session; docs/HEADLESS.md); in that session `security`, git through the helper and
# secret-tool through the Secret Service (on a session bus of its own, keychaind started by D-Bus activation) store
# and read; keychaind is stopped and a second login unlocks the keychain again; a question with nobody to ask (no
# terminal, no display) fails at once with errSecInteractionNotAllowed; with a terminal (ssh -t, driven through tmux)
# the question is asked on the SSH session's terminal, where Deny and Allow are answered, but only on a kernel that
# refuses TIOCSTI (the check sets dev.tty.legacy_tiocsti and puts it back; utmp is made if the machine has none).
#
#   sudo scripts/ssh-login-test.sh BIN_DIR PAM_MODULE      (exit 77: skipped, no sshd here)
#     BIN_DIR      where security, keychaind and git-credential-keychain are (root's, e.g. /usr/bin)
#     PAM_MODULE   pam_keychain.so (e.g. /usr/lib/x86_64-linux-gnu/security/pam_keychain.so)
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "ssh-login-test.sh: run as root (it adds a user and a PAM service)" >&2; exit 1; }
[ $# = 2 ] || { echo "usage: ssh-login-test.sh BIN_DIR PAM_MODULE" >&2; exit 2; }
bin="$(cd "$1" && pwd)"
module="$2"
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null; then
    echo "skip the SSH login test: no sshd (Debian: apt-get install openssh-server)"
    exit 77  # skipped, not passed
fi
for tool in security keychaind git-credential-keychain; do [ -x "$bin/$tool" ] || { echo "no $bin/$tool" >&2; exit 1; }; done
[ -f "$module" ] || { echo "no $module" >&2; exit 1; }

user=kc-ssh-test
password="Ssh-Login-$RANDOM-pw"
service=sshd-keychain-test
work="$(mktemp -d /tmp/kc-ssh-test.XXXXXX)"
chmod 755 "$work"
home="$work/home"
failures=0
sshd_pid=""
check() {  # check DESCRIPTION COMMAND...
    local description="$1"; shift
    if "$@"; then echo "ok   $description"; else echo "FAIL $description"; failures=$((failures + 1)); fi
}
if id "$user" >/dev/null 2>&1; then echo "ssh-login-test.sh: user $user exists already; not touching it" >&2; exit 1; fi
if [ -e "/etc/pam.d/$service" ]; then echo "ssh-login-test.sh: /etc/pam.d/$service exists already; not touching it" >&2; exit 1; fi
made_run_sshd=0
[ -d /run/sshd ] || made_run_sshd=1
# utmp, where sshd records a session's terminal as its login terminal (keychaind asks only on such a terminal):
# a booted system has it from boot (systemd-update-utmp); a container may not, and then it is made for the test.
made_utmp=0
tiocsti_was=""
[ -e /var/run/utmp ] || made_utmp=1
cleanup() {  # only what this script made
    if [ -n "$sshd_pid" ]; then kill "$sshd_pid" 2>/dev/null || true; wait "$sshd_pid" 2>/dev/null || true; fi
    if id "$user" >/dev/null 2>&1; then
        local uid
        uid="$(id -u "$user")"
        pkill -KILL -u "$user" 2>/dev/null || true
        sleep 0.2
        userdel "$user" 2>/dev/null || true
        rm -rf "/tmp/keychain-$uid"  # keychaind's directory where there is no XDG_RUNTIME_DIR
    fi
    if command -v tmux >/dev/null; then tmux -L "kc-ssh-$$" -f /dev/null kill-server 2>/dev/null || true; fi
    rm -f "/etc/pam.d/$service"
    [ "$made_run_sshd" = 0 ] || rmdir /run/sshd 2>/dev/null || true
    [ "$made_utmp" = 0 ] || rm -f /var/run/utmp
    [ -z "$tiocsti_was" ] || echo "$tiocsti_was" > /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

if [ "$made_utmp" = 1 ]; then install -m 664 -o root -g utmp /dev/null /var/run/utmp; fi

# The user, with a password and nothing else.
useradd -M -d "$home" -s /bin/bash "$user"
mkdir -p "$home" && chown "$user:" "$home" && chmod 0700 "$home"
echo "$user:$password" | chpasswd

# The PAM service: Debian's stacks for sshd, and the module where the docs put it.
cat > "/etc/pam.d/$service" <<EOF
@include common-auth
auth     optional  $module security=$bin/security
account  required  pam_nologin.so
@include common-account
@include common-session
session  optional  $module security=$bin/security
@include common-password
EOF

# sshd on a free port, under the name that selects that PAM service (sshd wants an absolute path to run again).
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ln -s /usr/sbin/sshd "$work/$service"
mkdir -p /run/sshd
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# OpenSSH 9.8 and later name the PAM service in the configuration (PAMServiceName); older ones take the program's name.
pam_service_line=""
if "$work/$service" -T -f /dev/null -o "PAMServiceName=$service" -o "HostKey=$work/host_key" >/dev/null 2>&1; then
    pam_service_line="PAMServiceName $service"
fi
cat > "$work/sshd_config" <<EOF
$pam_service_line
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
PidFile $work/sshd.pid
UsePAM yes
KbdInteractiveAuthentication no
PasswordAuthentication yes
PubkeyAuthentication no
AuthorizedKeysFile none
PermitRootLogin no
AllowUsers $user
X11Forwarding no
PrintMotd no
Subsystem sftp internal-sftp
EOF
"$work/$service" -D -e -f "$work/sshd_config" 2> "$work/sshd.log" &
sshd_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

# The client types the password through SSH_ASKPASS (no terminal of its own: setsid).
printf '#!/bin/sh\necho "%s"\n' "$password" > "$work/askpass"
chmod 755 "$work/askpass"
# How every session logs in: with the password, no host key kept (also for the terminal sessions of check 5).
ssh_options="-F /dev/null -p $port -o BatchMode=no -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -o PreferredAuthentications=password -o NumberOfPasswordPrompts=1"
login() {  # login COMMAND: runs COMMAND in a new SSH session of the user, without a terminal
    # shellcheck disable=SC2086  # the options are words
    SSH_ASKPASS="$work/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY= timeout 120 setsid -w ssh $ssh_options \
        "$user@127.0.0.1" "export PATH=$bin:\$PATH; $1" < /dev/null
}

# 1. The first login creates the login keychain with the login password and unlocks it: the shell's tools work.
first_login() {
    local out
    out="$(login 'echo from-ssh | security add-generic-password -a me -s ssh.example -w && security find-generic-password -a me -s ssh.example -w')"
    echo "  $out"
    [ "$out" = from-ssh ]
}
check "first login over SSH: security stores and reads in the session" first_login
login_password_opens() {
    login "security lock-keychain login && security unlock-keychain -p '$password' login && echo unlocked" | grep -qx unlocked
}
check "the login keychain has the login password (PAM made it with it)" login_password_opens
git_in_session() {
    login 'git config --global credential.helper keychain &&
        printf "protocol=https\nhost=git.example.com\nusername=bob\npassword=hunter2\n\n" | git credential approve &&
        printf "protocol=https\nhost=git.example.com\n\n" | git credential fill' | grep -qx password=hunter2
}
check "git stores and fills a credential through the helper in the session" git_in_session

# 2. libsecret programs: the Secret Service on the session's bus (here one of its own, dbus-run-session), keychaind
#    started by D-Bus activation from the user's service file as docs/HEADLESS.md says.
secret_tool_in_session() {
    local out
    out="$(login 'dbus-run-session -- sh -c "printf from-libsecret | secret-tool store --label=SSH app ssh-test && secret-tool lookup app ssh-test" 2>&1')"
    echo "  $(tr '\n' ' ' <<< "$out")"
    [[ "$out" == *from-libsecret ]]
}
if command -v secret-tool >/dev/null && command -v dbus-run-session >/dev/null; then
    runuser -u "$user" -- mkdir -p "$home/.local/share/dbus-1/services"
    printf '[D-BUS Service]\nName=org.freedesktop.secrets\nExec=%s/keychaind --secret-service\n' "$bin" \
        | runuser -u "$user" -- tee "$home/.local/share/dbus-1/services/org.freedesktop.secrets.service" >/dev/null
    check "secret-tool stores and finds through the Secret Service in the SSH session" secret_tool_in_session
else
    echo "skip secret-tool (libsecret-tools or dbus-run-session missing)"
fi

# 3. keychaind ends (its keys go with it); the next login unlocks the keychain again with the login password.
pkill -TERM -u "$user" -x keychaind || true
for _ in $(seq 50); do pgrep -u "$user" -x keychaind >/dev/null || break; sleep 0.1; done
second_login() { [ "$(login 'security find-generic-password -a me -s ssh.example -w')" = from-ssh ]; }
check "a second login unlocks the keychain again: the item reads without a question" second_login

# 4. Nobody to ask: no terminal (ssh without -t) and no display. A read that needs the user's yes (an item that
#    trusts no program, -T "") fails at once; it never waits for an answer.
nobody_to_ask() {
    local started status=0 elapsed
    started=$(date +%s)
    login "security add-generic-password -a other -s asks.example -w secret-of-nobody -T '' && security find-generic-password -a other -s asks.example -w" \
        > "$work/asks.out" 2> "$work/asks.err" || status=$?
    elapsed=$(( $(date +%s) - started ))
    echo "  exit $status after $elapsed s: $(tr '\n' ' ' < "$work/asks.err")"
    [ "$status" = 36 ] && [ "$elapsed" -lt 10 ] && ! grep -q secret-of-nobody "$work/asks.out"
}
check "with no terminal and no display, no question: errSecInteractionNotAllowed (exit 36) at once" nobody_to_ask

# 5. A terminal (ssh -t): the question goes to the SSH session's own terminal (sshd records it in utmp as the
#    session's login terminal), where pinentry asks; the person at the SSH client answers. The client's terminal is a
#    tmux pane of its own server here; the buttons are pinentry's (Allow, Always Allow, Deny).
if command -v tmux >/dev/null; then
    tmux_socket="kc-ssh-$$"
    tmuxc() { tmux -L "$tmux_socket" -f /dev/null "$@"; }
    # screen_until TEXT...: the pane's text once it shows one of the TEXTs, or after 60 s as it is then.
    screen_until() {
        local screen="" text
        for _ in $(seq 600); do
            screen="$(tmuxc capture-pane -p -t asks 2>/dev/null || true)"
            for text in "$@"; do [[ "$screen" == *"$text"* ]] && break 2; done
            sleep 0.1
        done
        printf '%s\n' "$screen"
    }
    # The button pinentry-curses shows in reverse video (`ESC[7m<Deny>`), empty while none is.
    highlighted() { tmuxc capture-pane -e -p -t asks | grep -o $'\e\\[7m<[^>]*>' | head -1 | sed $'s/\e\\[7m//'; }
    # ask_on_terminal BUTTON: in a new SSH session with a terminal, reads the item that trusts no program and
    # answers pinentry's question with BUTTON; prints the session's screen once it ended.
    ask_on_terminal() {
        local button="$1" screen before
        tmuxc kill-server 2>/dev/null || true
        tmuxc new-session -d -s asks -x 100 -y 30 \
            "SSH_ASKPASS='$work/askpass' SSH_ASKPASS_REQUIRE=force DISPLAY= ssh -t $ssh_options $user@127.0.0.1 \
             'export PATH=$bin:\$PATH; security find-generic-password -a other -s asks.example -w; echo session-exit=\$?'; \
             sleep 120"
        # The dialog is drawn once its buttons show; then Tab moves the focus to BUTTON, one redraw at a time.
        screen="$(screen_until "<Deny>" session-exit=)"
        if [[ "$screen" == *"<Deny>"* ]]; then
            echo "  asked on the SSH terminal: $(grep -o 'security[^.]*' <<< "$screen" | head -1)"
            for _ in $(seq 8); do
                before="$(highlighted)"
                [ "$before" = "<$button>" ] && break
                tmuxc send-keys -t asks Tab
                for _ in $(seq 100); do [ "$(highlighted)" != "$before" ] && break; sleep 0.1; done
            done
            tmuxc send-keys -t asks Enter
            screen="$(screen_until session-exit=)"
        fi
        tmuxc kill-server 2>/dev/null || true
        printf '%s\n' "$screen"
    }
    asked_on_ssh_terminal_deny() {
        local screen
        screen="$(ask_on_terminal Deny)"
        echo "  $(grep -E 'asked on|session-exit=' <<< "$screen" | tr '\n' ' ')"
        [[ "$screen" == *"asked on the SSH terminal"* ]] && [[ "$screen" == *session-exit=51* ]] \
            && [[ "$screen" != *secret-of-nobody* ]]
    }
    asked_on_ssh_terminal_allow() {
        local screen
        screen="$(ask_on_terminal Allow)"
        echo "  $(grep -E 'asked on|session-exit=' <<< "$screen" | tr '\n' ' ')"
        [[ "$screen" == *"asked on the SSH terminal"* ]] && [[ "$screen" == *session-exit=0* ]] \
            && grep -qx secret-of-nobody <<< "$(tr -d '\r' <<< "$screen")"
    }
    not_asked_where_typing_is_allowed() {
        local screen
        screen="$(ask_on_terminal Allow)"
        echo "  $(grep -E 'asked on|session-exit=' <<< "$screen" | tr '\n' ' ')"
        [[ "$screen" != *"asked on the SSH terminal"* ]] && [[ "$screen" == *session-exit=36* ]] \
            && [[ "$screen" != *secret-of-nobody* ]]
    }
    # A kernel that lets any program on a terminal type into it (TIOCSTI, dev.tty.legacy_tiocsti = 1, the default
    # before Linux 6.2 and on many kernels since) would let the asking program answer the question on its own
    # terminal: there keychaind asks nothing on a terminal. The setting is the machine's; it is put back at the end.
    tiocsti=/proc/sys/dev/tty/legacy_tiocsti
    if [ -w "$tiocsti" ] && tiocsti_was="$(cat "$tiocsti")" && echo 1 > "$tiocsti" 2>/dev/null; then
        check "ssh -t where programs may type into terminals (legacy_tiocsti = 1): no question, exit 36" \
            not_asked_where_typing_is_allowed
        echo 0 > "$tiocsti"
    fi
    if [ "$(cat "$tiocsti" 2>/dev/null)" = 0 ]; then
        check "ssh -t: the question is asked on the SSH session's terminal; Deny refuses (errSecAuthFailed, exit 51)" \
            asked_on_ssh_terminal_deny
        check "ssh -t: Allow on the SSH session's terminal reads the item" asked_on_ssh_terminal_allow
    else
        echo "skip the questions on an SSH terminal: this kernel lets programs type into terminals (legacy_tiocsti)"
    fi
else
    echo "skip the questions on an SSH terminal (tmux missing)"
fi

if [ "$failures" -gt 0 ]; then
    echo "ssh-login-test.sh: $failures checks failed; sshd's log:"
    tail -20 "$work/sshd.log"
    exit 1
fi
echo "ssh-login-test.sh: every check passed"
