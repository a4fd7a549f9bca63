#define _GNU_SOURCE
#include "CKeychainLinux.h"
#include <errno.h>
#include <unistd.h>

extern char **environ;

char *const *ckeychain_environment(void) { return environ; }

#if defined(__GLIBC__)
#include <malloc.h>
int ckeychain_return_free_memory(void) { return malloc_trim(0); }
#else
int ckeychain_return_free_memory(void) { return 0; }
#endif

#if defined(__linux__)
#include <sys/prctl.h>

int ckeychain_set_non_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int ckeychain_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

int ckeychain_set_dumpable_again(void) { return prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); }

int ckeychain_set_process_name(const char *name) { return prctl(PR_SET_NAME, name, 0, 0, 0); }
#else
int ckeychain_set_non_dumpable(void) { errno = ENOSYS; return -1; }

int ckeychain_get_dumpable(void) { return -1; }

int ckeychain_set_dumpable_again(void) { errno = ENOSYS; return -1; }

int ckeychain_set_process_name(const char *name) { (void)name; errno = ENOSYS; return -1; }
#endif

#if defined(__linux__)
int ckeychain_keep_group_saved_only(gid_t *kept) {
    gid_t real = getgid(), effective = getegid();
    *kept = (gid_t)-1;
    if (effective == real) return 0;
    if (setresgid(real, real, effective) != 0) return -1;
    gid_t r, e, saved;
    if (getresgid(&r, &e, &saved) != 0 || r != real || e != real || saved != effective) { errno = EPERM; return -1; }
    *kept = effective;
    return 0;
}

int ckeychain_keep_only_real_group(void) {
    gid_t real = getgid();
    if (setresgid(real, real, real) != 0) return -1;
    gid_t r, e, saved;
    if (getresgid(&r, &e, &saved) != 0 || r != real || e != real || saved != real) { errno = EPERM; return -1; }
    return 0;
}

int ckeychain_keeps_saved_group(void) {
    gid_t r, e, saved;
    return getresgid(&r, &e, &saved) == 0 && saved != r;
}
#else
int ckeychain_keep_group_saved_only(gid_t *kept) { *kept = (gid_t)-1; return 0; }

int ckeychain_keeps_saved_group(void) { return 0; }

int ckeychain_keep_only_real_group(void) { return 0; }
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

#if defined(__linux__)
#include <string.h>
#include <unistd.h>

enum { ckeychain_max_fds = 64 };

ssize_t ckeychain_recv_with_fds(int socket, void *buffer, size_t length, int *fds, int max_fds, int *fd_count) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int) * ckeychain_max_fds)];
    } control;
    struct iovec io = {.iov_base = buffer, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof(control.bytes);
    *fd_count = 0;
    ssize_t n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (n < 0) return -1;
    int overflow = (message.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (*fd_count < max_fds) fds[(*fd_count)++] = fd; else { close(fd); overflow = 1; }
        }
    }
    if (overflow) {
        for (int i = 0; i < *fd_count; i++) close(fds[i]);
        *fd_count = 0;
        errno = EPROTO;
        return -1;
    }
    return n;
}

ssize_t ckeychain_send_with_fds(int socket, const void *buffer, size_t length, const int *fds, int fd_count) {
    if (fd_count < 0 || fd_count > 16) { errno = EINVAL; return -1; }
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(int) * 16)];
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec io = {.iov_base = (void *)buffer, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    if (fd_count > 0) {
        message.msg_control = control.bytes;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)fd_count);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)fd_count);
        memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)fd_count);
    }
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}
#else
ssize_t ckeychain_recv_with_fds(int socket, void *buffer, size_t length, int *fds, int max_fds, int *fd_count) {
    (void)fds; (void)max_fds; *fd_count = 0;
    return recv(socket, buffer, length, 0);
}

ssize_t ckeychain_send_with_fds(int socket, const void *buffer, size_t length, const int *fds, int fd_count) {
    (void)fds;
    if (fd_count != 0) { errno = ENOSYS; return -1; }
    return send(socket, buffer, length, 0);
}
#endif

#if defined(__linux__)
#include <sys/ioctl.h>
#include <sys/socket.h>

int ckeychain_pass_credentials(int socket) {
    int on = 1;
    return setsockopt(socket, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
}

ssize_t ckeychain_recv_with_sender(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid) {
    gid_t gid;
    return ckeychain_recv_with_credentials(socket, buffer, length, pid, uid, &gid);
}

ssize_t ckeychain_send_as_group(int socket, const void *buffer, size_t length, gid_t group) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    memset(&control, 0, sizeof control);
    struct ucred cred = {.pid = getpid(), .uid = getuid(), .gid = group};
    struct iovec io = {.iov_base = (void *)buffer, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof(control.bytes);
    struct cmsghdr *c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_CREDENTIALS;
    c->cmsg_len = CMSG_LEN(sizeof cred);
    memcpy(CMSG_DATA(c), &cred, sizeof cred);
    return sendmsg(socket, &message, MSG_NOSIGNAL);
}

static ssize_t recv_with_credentials(int socket, void *buffer, size_t length, int flags, pid_t *pid, uid_t *uid,
                                     gid_t *gid);

ssize_t ckeychain_recv_with_credentials(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid, gid_t *gid) {
    return recv_with_credentials(socket, buffer, length, 0, pid, uid, gid);
}

ssize_t ckeychain_recv_available_with_sender(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid) {
    gid_t gid;
    return recv_with_credentials(socket, buffer, length, MSG_DONTWAIT, pid, uid, &gid);
}

static ssize_t recv_with_credentials(int socket, void *buffer, size_t length, int flags, pid_t *pid, uid_t *uid,
                                     gid_t *gid) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    struct iovec io = {.iov_base = buffer, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof(control.bytes);
    *pid = 0;
    *uid = (uid_t)-1;
    *gid = (gid_t)-1;
    ssize_t n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC | flags);
    if (n <= 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred cred;
            memcpy(&cred, CMSG_DATA(c), sizeof cred);
            *pid = cred.pid;
            *uid = cred.uid;
            *gid = cred.gid;
        }
    }
    return n;
}

int ckeychain_accept_cloexec(int socket) { return accept4(socket, NULL, NULL, SOCK_CLOEXEC); }

int ckeychain_queued_bytes(int socket) {
    int queued = 0;
    if (ioctl(socket, FIONREAD, &queued) != 0) return -1;
    return queued;
}
#else
int ckeychain_pass_credentials(int socket) { (void)socket; errno = ENOSYS; return -1; }
ssize_t ckeychain_recv_with_sender(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid) {
    (void)socket; (void)buffer; (void)length; *pid = 0; *uid = (uid_t)-1; errno = ENOSYS; return -1;
}
ssize_t ckeychain_send_as_group(int socket, const void *buffer, size_t length, gid_t group) {
    (void)socket; (void)buffer; (void)length; (void)group; errno = ENOSYS; return -1;
}
ssize_t ckeychain_recv_with_credentials(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid, gid_t *gid) {
    (void)socket; (void)buffer; (void)length; *pid = 0; *uid = (uid_t)-1; *gid = (gid_t)-1; errno = ENOSYS; return -1;
}
ssize_t ckeychain_recv_available_with_sender(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid) {
    (void)socket; (void)buffer; (void)length; *pid = 0; *uid = (uid_t)-1; errno = ENOSYS; return -1;
}
int ckeychain_accept_cloexec(int socket) { (void)socket; errno = ENOSYS; return -1; }
int ckeychain_queued_bytes(int socket) { (void)socket; errno = ENOSYS; return -1; }
#endif

#ifndef KEYCHAIN_VERSION
#define KEYCHAIN_VERSION "development"
#endif
#ifndef KEYCHAIN_BUILD
#define KEYCHAIN_BUILD "built with swift build from a checkout"
#endif
const char *ckeychain_version(void) { return KEYCHAIN_VERSION; }
const char *ckeychain_build(void) { return KEYCHAIN_BUILD; }

#if defined(__linux__)
#include <fcntl.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>

#ifndef TFD_TIMER_CANCEL_ON_SET
#define TFD_TIMER_CANCEL_ON_SET (1 << 1)
#endif

static int arm_far_future(int fd) {
    struct itimerspec spec = {0};
    spec.it_value.tv_sec = (time_t)1 << 40;  // never reached: only the cancellation matters
    return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &spec, NULL);
}

int ckeychain_clock_change_open(void) {
    int fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return -1;
    if (arm_far_future(fd) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int ckeychain_clock_change_rearm(int fd) {
    uint64_t expirations;
    ssize_t got = read(fd, &expirations, sizeof(expirations));
    int changed = got < 0 && errno == ECANCELED;
    if (got < 0 && !changed && errno != EAGAIN) return -1;
    if (arm_far_future(fd) != 0) return -1;
    return changed;
}

int ckeychain_directory_watch_open(const char *path) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;
    if (inotify_add_watch(fd, path, mask) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int ckeychain_wake_open(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int ckeychain_wake(int fd) {
    uint64_t one = 1;
    return write(fd, &one, sizeof(one)) == sizeof(one) || errno == EAGAIN ? 0 : -1;
}

void ckeychain_drain(int fd) {
    char buffer[4096];
    while (read(fd, buffer, sizeof(buffer)) > 0) {}
}
#else
int ckeychain_clock_change_open(void) { errno = ENOSYS; return -1; }
int ckeychain_clock_change_rearm(int fd) { (void)fd; errno = ENOSYS; return -1; }
int ckeychain_directory_watch_open(const char *path) { (void)path; errno = ENOSYS; return -1; }
int ckeychain_wake_open(void) { errno = ENOSYS; return -1; }
int ckeychain_wake(int fd) { (void)fd; errno = ENOSYS; return -1; }
void ckeychain_drain(int fd) { (void)fd; }
#endif

#if defined(__linux__)
#include <poll.h>
#include <sys/syscall.h>
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  /* the same number on every architecture */
#endif

int ckeychain_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

#if !defined(SO_PEERPIDFD) && (defined(__x86_64__) || defined(__aarch64__))
#define SO_PEERPIDFD 77  /* asm-generic's number, which x86 and arm64 use; older headers lack it */
#endif

int ckeychain_peer_pidfd(int socket) {
#ifdef SO_PEERPIDFD
    int pidfd = -1;
    socklen_t length = sizeof(pidfd);
    if (getsockopt(socket, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) return -1;
    return pidfd;
#else
    (void)socket;
    errno = ENOSYS;
    return -1;
#endif
}

int ckeychain_pidfd_exited(int pidfd) {
    struct pollfd watched = { .fd = pidfd, .events = POLLIN, .revents = 0 };
    int ready;
    do { ready = poll(&watched, 1, 0); } while (ready < 0 && errno == EINTR);
    if (ready < 0) return -1;
    return ready > 0 ? 1 : 0;
}
#else
int ckeychain_pidfd_open(pid_t pid) { (void)pid; errno = ENOSYS; return -1; }
int ckeychain_pidfd_exited(int pidfd) { (void)pidfd; errno = ENOSYS; return -1; }
int ckeychain_peer_pidfd(int socket) { (void)socket; errno = ENOSYS; return -1; }
#endif

#if defined(__linux__)
#include <sys/epoll.h>

int ckeychain_poll_open(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int poll_control(int poll, int operation, int fd, int once) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = EPOLLIN | (once ? EPOLLONESHOT : 0);
    event.data.fd = fd;
    return epoll_ctl(poll, operation, fd, &event);
}

int ckeychain_poll_add(int poll, int fd, int once) { return poll_control(poll, EPOLL_CTL_ADD, fd, once); }

int ckeychain_poll_rearm(int poll, int fd) { return poll_control(poll, EPOLL_CTL_MOD, fd, 1); }

int ckeychain_poll_next(int poll, int milliseconds) {
    struct epoll_event event;
    int ready = epoll_wait(poll, &event, 1, milliseconds);
    if (ready < 0) return -1;
    if (ready == 0) { errno = EAGAIN; return -1; }
    return event.data.fd;
}
#else
int ckeychain_poll_open(void) { errno = ENOSYS; return -1; }
int ckeychain_poll_add(int poll, int fd, int once) { (void)poll; (void)fd; (void)once; errno = ENOSYS; return -1; }
int ckeychain_poll_rearm(int poll, int fd) { (void)poll; (void)fd; errno = ENOSYS; return -1; }
int ckeychain_poll_next(int poll, int milliseconds) { (void)poll; (void)milliseconds; errno = ENOSYS; return -1; }
#endif

#if defined(__linux__)
#include <sched.h>
int ckeychain_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}
#else
int ckeychain_cpu_count(void) { errno = ENOSYS; return -1; }
#endif

#include <time.h>
uint64_t ckeychain_monotonic_nanoseconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}
