// Linux calls Swift's Glibc module does not give: system calls glibc 2.36 has no wrapper
// for (Swift cannot call the variadic syscall()) and GNU extensions.
// Only Counterpart's Support/Platform.swift uses it, and only on Linux; elsewhere it is empty.
#ifndef COUNTERPART_CLINUX_SHIM_H
#define COUNTERPART_CLINUX_SHIM_H
#ifdef __linux__

#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
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

/// Starts writing back the file's dirty pages in [offset, offset + count) without waiting.
static inline int cp_start_write_back(int file, long long offset, long long count) {
    return sync_file_range(file, offset, count, SYNC_FILE_RANGE_WRITE);
}

/// Turns O_DIRECT on or off for an open file: writes of whole aligned blocks then go to the
/// device without a copy into the page cache. 0, or -1 with errno set (EINVAL where the
/// file system has no direct I/O).
static inline int cp_set_direct_io(int file, int on) {
    int flags = fcntl(file, F_GETFL);
    if (flags < 0) return -1;
    return fcntl(file, F_SETFL, on ? (flags | O_DIRECT) : (flags & ~O_DIRECT));
}

/// 1 if O_DIRECT is on for an open file, 0 if not, -1 with errno set.
static inline int cp_direct_io_is_on(int file) {
    int flags = fcntl(file, F_GETFL);
    if (flags < 0) return -1;
    return (flags & O_DIRECT) != 0;
}

/// Whether the peer of a connected socket has shut its side down (FIN) or the socket has
/// failed, without waiting: POLLRDHUP (a GNU extension) sees a FIN even behind bytes not
/// read yet, where a peek for end of stream would see only the bytes.
static inline int cp_peer_has_closed(int socket) {
    struct pollfd descriptor = { .fd = socket, .events = POLLRDHUP, .revents = 0 };
    if (poll(&descriptor, 1, 0) != 1) return 0;
    return (descriptor.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

#endif
#endif
