/*
 * pam_keychain: unlocks the user's login keychain at login, as pam_gnome_keyring does for gnome-keyring.
 *
 *   auth      optional  pam_keychain.so    keeps the password the user typed (wiped when PAM ends)
 *   session   optional  pam_keychain.so    unlocks `login` through keychaind (created with that password if missing)
 *   password  optional  pam_keychain.so    a password change changes the login keychain's password too
 *
 * The work is done by the user's own `security` command, run as the user (never as root), in a session of its own
 * with no terminal, the password written to its standard input over a socket: it never touches argv, the
 * environment or a file. `security` reaches keychaind (starting it when none runs), so the keychain stays unlocked
 * for every program of the session.
 *
 * Written in C, not Swift: a PAM module is loaded into login, sshd, gdm and su, which must not carry a language
 * runtime, and it only hands a password to a child process.
 *
 * Arguments: security=/path/to/security (default: /usr/local/bin/security, else /usr/bin/security; only a program
 * that root alone can change, since it is handed the login password), keychain=NAME (default login), debug.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define PAM_SM_AUTH
#define PAM_SM_SESSION
#define PAM_SM_PASSWORD
#include <security/pam_ext.h>
#include <security/pam_modules.h>

#define PASSWORD_DATA "pam_keychain.password"
#define MAXIMUM_PASSWORD 4096
/* How long a login waits for `security` (which may start keychaind) before going on without the keychain. */
#define TIMEOUT_SECONDS 20
/* security's exit code for errSecNoSuchKeychain (-25294 & 0xff). */
#define EXIT_NO_SUCH_KEYCHAIN 50

struct options {
    const char *security;
    const char *keychain;
    int debug;
};

static void parse_options(int argc, const char **argv, struct options *options) {
    options->security = NULL;
    options->keychain = "login";
    options->debug = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "security=", 9) == 0) options->security = argv[i] + 9;
        else if (strncmp(argv[i], "keychain=", 9) == 0) options->keychain = argv[i] + 9;
        else if (strcmp(argv[i], "debug") == 0) options->debug = 1;
    }
}

static void wipe_password(pam_handle_t *handle, void *data, int status) {
    (void)handle;
    (void)status;
    if (data == NULL) return;
    explicit_bzero(data, strlen(data));
    free(data);
}

/* The user's passwd entry, in a buffer the caller frees. */
static struct passwd *user_entry(pam_handle_t *handle, struct passwd *entry, char **buffer) {
    const char *user = NULL;
    if (pam_get_user(handle, &user, NULL) != PAM_SUCCESS || user == NULL || *user == '\0') return NULL;
    long size = sysconf(_SC_GETPW_R_SIZE_MAX);
    if (size < 16384) size = 16384;
    *buffer = malloc((size_t)size);
    if (*buffer == NULL) return NULL;
    struct passwd *found = NULL;
    if (getpwnam_r(user, entry, *buffer, (size_t)size, &found) != 0 || found == NULL) {
        free(*buffer);
        *buffer = NULL;
        return NULL;
    }
    return found;
}

/*
 * Whether `path` (symlinks resolved) is a program only root can change: it and every directory above it owned by
 * root and writable by nobody else (a root-owned sticky directory such as /tmp is fine). The login password is
 * handed to this program: one the user's own processes could replace (~/.local/bin) would let any of them catch it.
 */
static int is_root_controlled(const char *path, char *resolved) {
    if (realpath(path, resolved) == NULL) return 0;
    char walk[PATH_MAX];
    snprintf(walk, sizeof walk, "%s", resolved);
    for (;;) {
        struct stat info;
        if (stat(walk, &info) != 0 || info.st_uid != 0) return 0;
        int shared = (info.st_mode & (S_IWGRP | S_IWOTH)) != 0;
        if (shared && !(S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX))) return 0;
        char *slash = strrchr(walk, '/');
        if (slash == NULL || walk[1] == '\0') return 1;
        if (slash == walk) slash[1] = '\0'; else *slash = '\0';
    }
}

/* The `security` command to run: the module's argument, else the first installed of the usual places; in every case
 * only one that root controls. */
static int security_path(pam_handle_t *handle, const struct options *options, char *path) {
    const char *candidates[] = {options->security, "/usr/local/bin/security", "/usr/bin/security"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (candidates[i] == NULL || access(candidates[i], X_OK) != 0) continue;
        if (is_root_controlled(candidates[i], path)) return 1;
        pam_syslog(handle, LOG_WARNING, "%s is not used: it or a directory above it can be changed by others than root",
                   candidates[i]);
        if (i == 0) return 0;  // the one the administrator named, and no other
    }
    return 0;
}

static void put_environment(char **environment, size_t *count, const char *name, const char *value) {
    if (value == NULL) return;
    size_t length = strlen(name) + strlen(value) + 2;
    char *entry = malloc(length);
    if (entry == NULL) return;
    snprintf(entry, length, "%s=%s", name, value);
    environment[(*count)++] = entry;
}

/*
 * The user's runtime directory, where keychaind's socket is: the session's (set by pam_systemd or pam_env), else
 * the calling process's own when it runs for that user (passwd in the user's session), else /run/user/UID. Only a
 * directory of the user's with mode 0700 is taken.
 */
static int runtime_directory(pam_handle_t *handle, const struct passwd *user, char *path, size_t size) {
    char fallback[64];
    snprintf(fallback, sizeof fallback, "/run/user/%lu", (unsigned long)user->pw_uid);
    const char *candidates[] = {pam_getenv(handle, "XDG_RUNTIME_DIR"),
                                getuid() == user->pw_uid ? getenv("XDG_RUNTIME_DIR") : NULL, fallback};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        struct stat info;
        const char *candidate = candidates[i];
        if (candidate == NULL || candidate[0] != '/' || stat(candidate, &info) != 0) continue;
        if (!S_ISDIR(info.st_mode) || info.st_uid != user->pw_uid || (info.st_mode & 0077) != 0) continue;
        if (snprintf(path, size, "%s", candidate) < (int)size) return 1;
    }
    return 0;
}

/* In the child: become the user for good (its groups read before fork: NSS is not safe in a forked child of a
 * threaded host), or end. */
static void become_user(const struct passwd *user, const gid_t *groups, int group_count) {
    if (getuid() != user->pw_uid || geteuid() != user->pw_uid) {
        if (setgroups((size_t)group_count, groups) != 0 || setgid(user->pw_gid) != 0 || setuid(user->pw_uid) != 0)
            _exit(126);
    }
    if (getuid() != user->pw_uid || geteuid() != user->pw_uid || getegid() != user->pw_gid) _exit(126);
}

/*
 * Runs `security ARGUMENTS` as the user with `input` on its standard input; returns its exit code, or -1 when it
 * could not run or did not end in time.
 */
static int run_security(pam_handle_t *handle, const struct options *options, const struct passwd *user,
                        const char *const arguments[], const char *input, size_t input_length) {
    char program[PATH_MAX];
    if (!security_path(handle, options, program)) {
        pam_syslog(handle, LOG_WARNING, "no security command owned by root found (give security=PATH)");
        return -1;
    }
    /* A socket, not a pipe: send(MSG_NOSIGNAL) cannot raise SIGPIPE in the host process if the child dies. */
    int channel[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0) return -1;

    /* The environment is made here, before fork: only async-signal-safe calls run in the child. */
    char *environment[8] = {0};
    size_t count = 0;
    put_environment(environment, &count, "HOME", user->pw_dir);
    put_environment(environment, &count, "USER", user->pw_name);
    put_environment(environment, &count, "LOGNAME", user->pw_name);
    put_environment(environment, &count, "PATH", "/usr/local/bin:/usr/bin:/bin");
    char runtime[4096];
    if (runtime_directory(handle, user, runtime, sizeof runtime))
        put_environment(environment, &count, "XDG_RUNTIME_DIR", runtime);
    const char *argv[8] = {program};
    size_t argc = 1;
    for (size_t i = 0; arguments[i] != NULL && argc < 7; i++) argv[argc++] = arguments[i];
    gid_t groups[256];
    int group_count = 256;
    if (getgrouplist(user->pw_name, user->pw_gid, groups, &group_count) < 0) {
        group_count = 1;  // more than 256: the primary group alone, rather than root's
        groups[0] = user->pw_gid;
    }

    /* A host that ignores SIGCHLD (some daemons do) would have the kernel reap our child before waitpid sees it:
     * the default disposition for as long as the child runs, as pam_unix does around its helper. */
    struct sigaction default_child = {.sa_handler = SIG_DFL}, saved_child;
    sigemptyset(&default_child.sa_mask);
    sigaction(SIGCHLD, &default_child, &saved_child);
    pid_t child = fork();
    if (child == 0) {
        /* Dispositions the host set to "ignore" and its blocked signals would outlive exec: start clean. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int number = 1; number < NSIG; number++) signal(number, SIG_DFL);
        setsid();  // no controlling terminal: `security` reads standard input and asks nobody
        if (dup2(channel[1], STDIN_FILENO) < 0) _exit(127);
        int null = open("/dev/null", O_RDWR);
        if (null < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0) _exit(127);
        closefrom(STDERR_FILENO + 1);
        become_user(user, groups, group_count);
        if (chdir(user->pw_dir) != 0 && chdir("/") != 0) _exit(127);
        execve(program, (char *const *)argv, environment);
        _exit(127);
    }
    for (size_t i = 0; i < count; i++) free(environment[i]);
    close(channel[1]);
    if (child < 0) {
        close(channel[0]);
        sigaction(SIGCHLD, &saved_child, NULL);
        return -1;
    }
    size_t sent = 0;
    while (sent < input_length) {
        ssize_t n = send(channel[0], input + sent, input_length - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        sent += (size_t)n;
    }
    shutdown(channel[0], SHUT_WR);

    int status = 0;
    int result = -1;
    for (int tick = 0; tick < TIMEOUT_SECONDS * 50; tick++) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) {
            result = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            break;
        }
        if (done < 0 && errno != EINTR) break;  // reaped by the host's own SIGCHLD handler: outcome unknown
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        if (tick == TIMEOUT_SECONDS * 50 - 1) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            pam_syslog(handle, LOG_WARNING, "%s did not finish in %d seconds", program, TIMEOUT_SECONDS);
        }
    }
    close(channel[0]);
    sigaction(SIGCHLD, &saved_child, NULL);
    return result;
}

/* "first\n" or "first\nsecond\n" in a buffer the caller wipes and frees; NULL when a password holds a newline
 * (security reads a line per password) or is too long. */
static char *password_lines(const char *first, const char *second, size_t *length) {
    size_t a = strlen(first), b = second ? strlen(second) : 0;
    if (a > MAXIMUM_PASSWORD || b > MAXIMUM_PASSWORD || strchr(first, '\n') || (second && strchr(second, '\n')))
        return NULL;
    char *lines = malloc(a + b + 3);
    if (lines == NULL) return NULL;
    memcpy(lines, first, a);
    lines[a] = '\n';
    *length = a + 1;
    if (second != NULL) {
        memcpy(lines + a + 1, second, b);
        lines[a + 1 + b] = '\n';
        *length += b + 1;
    }
    return lines;
}

static void wipe_free(char *text, size_t length) {
    if (text == NULL) return;
    explicit_bzero(text, length);
    free(text);
}

/* auth: keep the password the user typed for the session to come. It authenticates nobody. */
PAM_EXTERN int pam_sm_authenticate(pam_handle_t *handle, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    parse_options(argc, argv, &options);
    const void *item = NULL;
    if (pam_get_item(handle, PAM_AUTHTOK, &item) != PAM_SUCCESS || item == NULL) {
        if (options.debug) pam_syslog(handle, LOG_DEBUG, "no password to keep");
        return PAM_IGNORE;
    }
    char *copy = strdup(item);
    if (copy == NULL) return PAM_IGNORE;
    if (pam_set_data(handle, PASSWORD_DATA, copy, wipe_password) != PAM_SUCCESS) {
        wipe_password(handle, copy, 0);
        return PAM_IGNORE;
    }
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *handle, int flags, int argc, const char **argv) {
    (void)handle, (void)flags, (void)argc, (void)argv;
    return PAM_IGNORE;
}

/* session: unlock the login keychain with the kept password (create it with that password when there is none). */
PAM_EXTERN int pam_sm_open_session(pam_handle_t *handle, int flags, int argc, const char **argv) {
    (void)flags;
    struct options options;
    parse_options(argc, argv, &options);
    const void *data = NULL;
    if (pam_get_data(handle, PASSWORD_DATA, &data) != PAM_SUCCESS || data == NULL) {
        if (options.debug) pam_syslog(handle, LOG_DEBUG, "no password kept by auth; keychain left as it is");
        return PAM_IGNORE;
    }
    struct passwd entry;
    char *buffer = NULL;
    const struct passwd *user = user_entry(handle, &entry, &buffer);
    if (user == NULL) {
        pam_set_data(handle, PASSWORD_DATA, NULL, NULL);
        return PAM_IGNORE;
    }
    size_t length = 0;
    char *input = password_lines(data, NULL, &length);
    /* The password is needed no more: wiped now, not when the session ends. */
    pam_set_data(handle, PASSWORD_DATA, NULL, NULL);
    int result = PAM_IGNORE;
    if (input != NULL) {
        const char *unlock[] = {"unlock-keychain", options.keychain, NULL};
        int code = run_security(handle, &options, user, unlock, input, length);
        if (code == EXIT_NO_SUCH_KEYCHAIN) {
            const char *create[] = {"create-keychain", options.keychain, NULL};
            code = run_security(handle, &options, user, create, input, length);
            if (code == 0) pam_syslog(handle, LOG_INFO, "created the %s keychain of %s", options.keychain, user->pw_name);
        }
        if (code == 0) {
            result = PAM_SUCCESS;
            if (options.debug) pam_syslog(handle, LOG_DEBUG, "unlocked the %s keychain of %s", options.keychain, user->pw_name);
        } else {
            pam_syslog(handle, LOG_NOTICE, "the %s keychain of %s was not unlocked (security exit %d)", options.keychain,
                       user->pw_name, code);
        }
    } else {
        pam_syslog(handle, LOG_NOTICE, "the password cannot be handed to security (newline or too long)");
    }
    wipe_free(input, length);
    free(buffer);
    return result;
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *handle, int flags, int argc, const char **argv) {
    (void)handle, (void)flags, (void)argc, (void)argv;
    return PAM_IGNORE;
}

/* password: when the login password changes, the login keychain's password changes with it (old → new). */
PAM_EXTERN int pam_sm_chauthtok(pam_handle_t *handle, int flags, int argc, const char **argv) {
    if (!(flags & PAM_UPDATE_AUTHTOK)) return PAM_IGNORE;  // the preliminary check: nothing to do yet
    struct options options;
    parse_options(argc, argv, &options);
    const void *old = NULL, *new = NULL;
    pam_get_item(handle, PAM_OLDAUTHTOK, &old);
    pam_get_item(handle, PAM_AUTHTOK, &new);
    if (old == NULL || new == NULL) {
        // root setting another user's password: the old one is not known, so the keychain keeps it.
        if (options.debug) pam_syslog(handle, LOG_DEBUG, "old or new password not known; keychain password unchanged");
        return PAM_IGNORE;
    }
    struct passwd entry;
    char *buffer = NULL;
    const struct passwd *user = user_entry(handle, &entry, &buffer);
    if (user == NULL) return PAM_IGNORE;
    size_t length = 0;
    char *input = password_lines(old, new, &length);
    int result = PAM_IGNORE;
    if (input != NULL) {
        const char *change[] = {"set-keychain-password", options.keychain, NULL};
        int code = run_security(handle, &options, user, change, input, length);
        if (code == 0) result = PAM_SUCCESS;
        else pam_syslog(handle, LOG_NOTICE, "the %s keychain's password of %s was not changed (security exit %d)",
                        options.keychain, user->pw_name, code);
    }
    wipe_free(input, length);
    free(buffer);
    return result;
}
