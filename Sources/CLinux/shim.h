// Linux system calls glibc 2.36 has no wrapper for (Swift cannot call the variadic syscall()).
#ifndef COUNTERPART_CLINUX_SHIM_H
#define COUNTERPART_CLINUX_SHIM_H

#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

/// Opens `path` relative to the folder `folder` and only beneath it (openat2, Linux 5.6):
/// `..`, absolute paths and symlinks that would leave the folder fail with EXDEV, and
/// /proc-style magic links with ELOOP. Returns the descriptor, or -1 with errno set.
static inline int cp_open_beneath(int folder, const char *path, int flags) {
    struct open_how how = {
        .flags = (unsigned long long) flags,
        .mode = 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    return (int) syscall(SYS_openat2, folder, path, &how, sizeof how);
}

#endif
