#define _GNU_SOURCE
#include "CKeychainLinux.h"
#include <errno.h>
#include <unistd.h>

extern char **environ;

char *const *ckeychain_environment(void) { return environ; }

#if defined(__linux__)
#include <sys/prctl.h>

int ckeychain_set_non_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int ckeychain_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

int ckeychain_set_process_name(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }
#else
int ckeychain_set_non_dumpable(void) { errno = ENOSYS; return -1; }

int ckeychain_get_dumpable(void) { return -1; }

int ckeychain_set_process_name(const char *name) { (void)name; errno = ENOSYS; return -1; }
#endif

#if defined(__linux__)
#include <sys/socket.h>

int ckeychain_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t length = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}
#else
int ckeychain_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) { errno = ENOSYS; return -1; }
#endif
