#define _GNU_SOURCE
#include "CKeychainLinux.h"
#include <errno.h>

#if defined(__linux__)
#include <sys/prctl.h>

int ckeychain_set_non_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int ckeychain_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
#else
int ckeychain_set_non_dumpable(void) { errno = ENOSYS; return -1; }

int ckeychain_get_dumpable(void) { return -1; }
#endif
