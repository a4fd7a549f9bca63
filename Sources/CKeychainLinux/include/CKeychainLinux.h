#ifndef C_KEYCHAIN_LINUX_H
#define C_KEYCHAIN_LINUX_H

#include <stdint.h>
#include <sys/types.h>

/// Marks the process non-dumpable (PR_SET_DUMPABLE 0): no core file, and other processes of the same user can no
/// longer ptrace it or read /proc/PID/mem. prctl is variadic, which Swift cannot call, hence this shim.
/// Returns 0 on success, -1 with errno set otherwise (and on systems without prctl).
int ckeychain_set_non_dumpable(void);

/// The current PR_GET_DUMPABLE value (1 dumpable, 0 not), or -1 where prctl is not available.
int ckeychain_get_dumpable(void);

/// PR_SET_DUMPABLE 1 again: for a process that holds no secret and must be identified by another of the same user
/// (a keychaind that only hands the Secret Service over to the running one). Returns 0 or -1 with errno.
int ckeychain_set_dumpable_again(void);

/// Names the calling thread (PR_SET_NAME, 15 bytes kept); on the main thread that is the name ps, pgrep and
/// /proc/PID/status show for the process. Returns 0 or -1 with errno.
int ckeychain_set_process_name(const char *name);

/// Gives the memory malloc holds free back to the system (malloc_trim(0): every arena, not only the top of the
/// main heap). A daemon whose connection threads each used an arena keeps that memory otherwise. Returns 1 when
/// memory was released, 0 when none could be; 0 where glibc's malloc is not used.
int ckeychain_return_free_memory(void);

/// The process's environment block (`environ`), which may be NULL after clearenv(3): Swift imports the global itself
/// as never NULL.
char *const *ckeychain_environment(void);

/// For a program started set-group-ID (an installed keychaind): the real group becomes the effective one too, and
/// the group it was started with is kept only as the saved group (setresgid, every thread). Everything it does from
/// then on (files, /proc, the programs it starts, which get the effective group as their saved one) is the user's;
/// the kept group only lets it name that group in the credentials it sends (``ckeychain_send_as_group``), which
/// the kernel allows a process for its real, effective or saved group alone. `*kept` is the group, or (gid_t)-1
/// when not started set-group-ID. Returns 0, or -1 with errno set.
int ckeychain_keep_group_saved_only(gid_t *kept);

/// 1 when this process's saved group differs from its real one (a set-group-ID program that kept its group), else 0.
int ckeychain_keeps_saved_group(void);

/// The real group as effective and saved group too (setresgid, every thread): a program started set-group-ID that
/// no longer needs the group. Returns 0, or -1 with errno set when it could not be given up entirely.
int ckeychain_keep_only_real_group(void);

/// The peer of a connected Unix socket, as the kernel recorded it at connect time (SO_PEERCRED; struct ucred needs
/// _GNU_SOURCE, which Swift's Glibc module does not define). Returns 0 and fills pid, uid, gid; -1 with errno set.
int ckeychain_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// recv(2) that also takes the file descriptors passed along (SCM_RIGHTS, made close-on-exec): up to `max_fds`
/// are stored in `fds` and counted in `*fd_count`; more than that, or a truncated control message, closes every one
/// received and fails with EPROTO (the stream's descriptors can no longer be matched to its messages).
/// Returns the bytes read (0 at end of stream) or -1 with errno set.
ssize_t ckeychain_recv_with_fds(int socket, void *buffer, size_t length, int *fds, int max_fds, int *fd_count);

/// send(2) of `length` bytes with `fd_count` file descriptors attached (SCM_RIGHTS; at most 16), never raising
/// SIGPIPE. Returns the bytes sent or -1 with errno set.
ssize_t ckeychain_send_with_fds(int socket, const void *buffer, size_t length, const int *fds, int fd_count);

/// Asks the kernel to attach the sender's credentials to everything received on `socket` (SO_PASSCRED).
/// Returns 0, or -1 with errno set.
int ckeychain_pass_credentials(int socket);

/// recv(2) that also reports which process sent the bytes (SCM_CREDENTIALS, attached by the kernel once
/// SO_PASSCRED is on; a sender cannot name another process without privilege). The kernel never returns bytes of
/// two senders in one call. `*pid` is 0 when no credentials came. Returns the bytes read (0 at end of stream) or -1
/// with errno set.
ssize_t ckeychain_recv_with_sender(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid);

/// ``ckeychain_recv_with_sender`` that never waits (MSG_DONTWAIT): -1 with errno EAGAIN when nothing is queued.
ssize_t ckeychain_recv_available_with_sender(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid);

/// send(2) of `buffer` with this process's pid and real uid and `group` as its credentials (SCM_CREDENTIALS). The
/// kernel refuses a group that is not this process's real, effective or saved group (EPERM), so a receiver that
/// sees it knows the sender holds that group. Returns the bytes sent or -1 with errno set.
ssize_t ckeychain_send_as_group(int socket, const void *buffer, size_t length, gid_t group);

/// ``ckeychain_recv_with_sender`` that also reports the sender's group. `*pid` is 0 when no credentials came.
ssize_t ckeychain_recv_with_credentials(int socket, void *buffer, size_t length, pid_t *pid, uid_t *uid, gid_t *gid);

/// accept4(2) with SOCK_CLOEXEC (which Swift's Glibc module does not declare: it needs _GNU_SOURCE).
int ckeychain_accept_cloexec(int socket);

/// How many bytes are queued to be read on `socket` (FIONREAD), or -1 with errno set.
int ckeychain_queued_bytes(int socket);

/// The release this program was built as, and the commit it was built from: set by scripts/install.sh with
/// -Xcc -DKEYCHAIN_VERSION=… -DKEYCHAIN_BUILD=…; a plain `swift build` is a development build.
const char *ckeychain_version(void);
const char *ckeychain_build(void);

/// A descriptor that becomes readable when the wall clock is set or the machine wakes from suspend (a timerfd on
/// CLOCK_REALTIME, armed at the far future with TFD_TIMER_CANCEL_ON_SET: the kernel cancels such timers on both).
/// Non-blocking and close-on-exec. Returns the descriptor, or -1 with errno set.
int ckeychain_clock_change_open(void);

/// After `fd` (from ckeychain_clock_change_open) became readable: arms it again. Returns 1 when the clock was set or
/// the machine woke since it was armed, 0 when nothing happened, -1 with errno set.
int ckeychain_clock_change_rearm(int fd);

/// An inotify descriptor watching the directory `path` for entries created, deleted or moved, and for the directory
/// itself going (non-blocking, close-on-exec). Returns the descriptor, or -1 with errno set.
int ckeychain_directory_watch_open(const char *path);

/// An eventfd to wake a thread that polls it (non-blocking, close-on-exec), or -1 with errno set.
int ckeychain_wake_open(void);

/// Makes `fd` (an eventfd) readable. Returns 0, or -1 with errno set.
int ckeychain_wake(int fd);

/// Reads and drops everything `fd` (non-blocking) has to read now.
void ckeychain_drain(int fd);

/// A descriptor that names the process `pid` (pidfd_open, close-on-exec; Linux 5.3): it goes on naming that process,
/// never another one given the same pid later. -1 with errno set (ENOSYS on older kernels).
int ckeychain_pidfd_open(pid_t pid);

/// 1 when the process of `pidfd` has exited (the descriptor is readable), 0 while it runs, -1 with errno set.
int ckeychain_pidfd_exited(int pidfd);

/// A pidfd of the process that connected `socket` (SO_PEERPIDFD, Linux 6.5; close-on-exec): it names that process
/// however its pid is reused later, unlike the pid SO_PEERCRED gives. -1 with errno set where the kernel has none.
int ckeychain_peer_pidfd(int socket);


/// An epoll descriptor (close-on-exec), or -1 with errno set.
int ckeychain_poll_open(void);

/// Watches `fd` for input (EPOLLIN; with `once`, EPOLLONESHOT: after one report it is silent until rearmed, so one
/// thread at a time has it). Returns 0, or -1 with errno set.
int ckeychain_poll_add(int poll, int fd, int once);

/// Arms `fd` (added with `once`) for its next report. Returns 0, or -1 with errno set.
int ckeychain_poll_rearm(int poll, int fd);

/// Waits for one descriptor of `poll` to be ready, at most `milliseconds` (-1: without end), and returns it; -1 with
/// errno set otherwise (EAGAIN: none within the time; EINTR: try again).
int ckeychain_poll_next(int poll, int milliseconds);

/// How many CPUs this process may run on (sched_getaffinity), or -1 with errno set.
int ckeychain_cpu_count(void);

/// CLOCK_MONOTONIC in nanoseconds.
uint64_t ckeychain_monotonic_nanoseconds(void);
#endif
