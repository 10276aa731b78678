#if canImport(Glibc)
@_exported import Glibc
#elseif canImport(Darwin)
@_exported import Darwin
#endif
#if os(Linux)
import CLinux
#endif

/// Every call Counterpart makes that only Linux has, beside its portable fallback, so that
/// the rest of the server is plain POSIX. This file is also the only one that imports the
/// C library (Glibc or Darwin) for the whole module.
///
/// The fallbacks are what macOS runs. On Linux they run when `COUNTERPART_PORTABLE_FALLBACKS`
/// is set to 1 (read once, at first use), which is how `make test` runs them.
enum Platform {
    /// Whether this process uses the portable fallbacks: always off Linux; on Linux when
    /// `COUNTERPART_PORTABLE_FALLBACKS=1`.
    static let usesPortableFallbacks: Bool = {
        #if os(Linux)
        return getenv("COUNTERPART_PORTABLE_FALLBACKS").map { String(cString: $0) == "1" } ?? false
        #else
        return true
        #endif
    }()

    // MARK: Opening a file beneath a folder

    /// Opens `path` (relative, `/`-separated; `.` for the folder itself) beneath the folder
    /// `folder` for reading with `flags`, following symlinks only while they stay beneath it.
    /// -1 with errno set otherwise: EXDEV for a path or symlink that would leave the folder
    /// (an absolute symlink, or `..` above it), ELOOP for too many symlinks.
    static func openBeneath(_ folder: Int32, _ path: String, flags: Int32,
                            portable: Bool = usesPortableFallbacks || kernelRefusesOpenat2) -> Int32 {
        #if os(Linux)
        // openat2 with RESOLVE_BENEATH (Linux 5.6): the kernel resolves the whole path in one
        // call, with no window between a check and the open.
        // withCString lends a native string's bytes (a small one's from the stack); passing
        // the String itself would copy it into a new array on every request.
        if !portable { return path.withCString { cp_open_beneath(folder, $0, flags) } }
        #endif
        return ConfinedPath.open(path, beneath: folder, flags: flags)
    }

    /// Whether this Linux kernel refuses the process openat2, found once: a kernel before
    /// 5.6 lacks it (ENOSYS), and a container's seccomp profile may refuse it (older Docker
    /// answers EPERM). Files are then opened beneath their folder by the portable walk,
    /// which gives the same answers with a call per path component. Never on other systems,
    /// which have no openat2 to refuse and always walk.
    static let kernelRefusesOpenat2: Bool = {
        #if os(Linux)
        let root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return false }
        defer { close(root) }
        return !opensBeneath(probe: cp_open_beneath(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), errno: errno)
        #else
        return false
        #endif
    }()

    /// What an openat2 probe that returned `result` (with `errno` when negative) says:
    /// false only for a call the kernel or a filter refused outright.
    static func opensBeneath(probe result: Int32, errno: Int32) -> Bool {
        if result >= 0 {
            close(result)
            return true
        }
        return errno != ENOSYS && errno != EPERM
    }

    // MARK: Calls whose names types here also use

    #if canImport(Glibc)
    static func open(_ path: String, _ flags: Int32) -> Int32 { Glibc.open(path, flags) }
    @discardableResult static func close(_ file: Int32) -> Int32 { Glibc.close(file) }
    #else
    static func open(_ path: String, _ flags: Int32) -> Int32 { Darwin.open(path, flags) }
    @discardableResult static func close(_ file: Int32) -> Int32 { Darwin.close(file) }
    #endif

    // MARK: Sockets

    /// `SOCK_STREAM` as `addrinfo.ai_socktype` takes it (an enum in Glibc, a number in Darwin).
    static var streamSocketType: Int32 {
        #if canImport(Glibc)
        return Int32(SOCK_STREAM.rawValue)
        #else
        return SOCK_STREAM
        #endif
    }

    /// Whether the peer of a connected socket has shut its side down (FIN) or the socket
    /// has failed, without waiting.
    ///
    /// Linux: poll for POLLRDHUP, which sees a FIN even behind bytes not read yet (a stalled
    /// upload's rest). Fallback: POLLHUP/POLLERR, or a peek that finds the end of the stream;
    /// a FIN behind unread bytes is then seen only once they are read, so such a connection
    /// lasts until the idle timeout.
    static func peerHasClosed(_ socket: Int32, portable: Bool = usesPortableFallbacks) -> Bool {
        #if os(Linux)
        if !portable { return cp_peer_has_closed(socket) != 0 }
        #endif
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) == 1 else { return false }
        if Int32(descriptor.revents) & (Int32(POLLHUP) | Int32(POLLERR) | Int32(POLLNVAL)) != 0 { return true }
        var byte: UInt8 = 0
        return recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
    }

    /// Flags for `send` on a socket libmicrohttpd owns: no SIGPIPE when the peer has gone.
    /// Darwin has no MSG_NOSIGNAL; libmicrohttpd sets SO_NOSIGPIPE on its sockets there.
    static var sendFlags: Int32 {
        #if os(Linux)
        return Int32(MSG_NOSIGNAL)
        #else
        return 0
        #endif
    }

    /// Bytes written to the socket that have not left yet (Linux TIOCOUTQ, Darwin SO_NWRITE);
    /// nil when it cannot tell.
    static func unsentBytes(_ socket: Int32) -> Int? {
        var unsent: Int32 = 0
        #if os(Linux)
        guard ioctl(socket, UInt(TIOCOUTQ), &unsent) == 0 else { return nil }
        #else
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socket, SOL_SOCKET, SO_NWRITE, &unsent, &size) == 0 else { return nil }
        #endif
        return Int(unsent)
    }

    /// Makes the connection end with a TCP reset (RST) instead of a FIN.
    ///
    /// Linux: connect(AF_UNSPEC) disconnects a TCP socket with a RST (tcp_disconnect), and
    /// libmicrohttpd then closes what is left; SO_LINGER 0 would not do, as libmicrohttpd
    /// shuts the socket down (a FIN) before it closes it. Elsewhere: SO_LINGER 0, so the
    /// close sends a RST, after that FIN.
    static func resetConnection(_ socket: Int32) {
        #if os(Linux)
        var unspecified = sockaddr()
        unspecified.sa_family = sa_family_t(AF_UNSPEC)
        _ = connect(socket, &unspecified, socklen_t(MemoryLayout<sockaddr>.size))
        #else
        var linger = Darwin.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Darwin.linger>.size))
        #endif
    }

    // MARK: Files

    /// Starts writing back a file's dirty pages in [offset, offset + count) without waiting
    /// (Linux sync_file_range), so that the fsync before an answer has little left to do.
    /// Fallback: nothing; the fsync alone makes the file durable, it only waits longer.
    static func startWriteBack(_ file: Int32, offset: Int64, count: Int64, portable: Bool = usesPortableFallbacks) {
        #if os(Linux)
        if !portable { _ = cp_start_write_back(file, offset, count) }
        #endif
    }

    /// Makes writes to `file` bypass the page cache (`on`) or go through it again: Linux
    /// O_DIRECT, for an upload's whole blocks, which are written once and not read back, so
    /// copying them into the cache would only cost CPU and memory. Whether the file is now
    /// as asked (false, with errno set, where the file system refuses direct I/O).
    /// Fallback: never on; asking for on is false, for off true.
    static func setPageCacheBypass(_ file: Int32, _ on: Bool, portable: Bool = usesPortableFallbacks) -> Bool {
        #if os(Linux)
        if !portable { return cp_set_direct_io(file, on ? 1 : 0) == 0 }
        #endif
        return !on
    }

    /// Whether writes to `file` bypass the page cache now (for tests). Fallback: never.
    static func bypassesPageCache(_ file: Int32, portable: Bool = usesPortableFallbacks) -> Bool {
        #if os(Linux)
        if !portable { return cp_direct_io_is_on(file) == 1 }
        #endif
        return false
    }

    /// A file's modification time (`st_mtim` on Linux, `st_mtimespec` on Darwin).
    static func modificationTime(_ info: stat) -> timespec {
        #if os(Linux)
        return info.st_mtim
        #else
        return info.st_mtimespec
        #endif
    }

    /// When the file's inode last changed (its data, size, name or times): set by the
    /// kernel, never by a caller.
    static func statusChangeTime(_ info: stat) -> timespec {
        #if os(Linux)
        return info.st_ctim
        #else
        return info.st_ctimespec
        #endif
    }
}

/// The portable confined open: the path is walked one component at a time from the folder,
/// each folder opened with `openat(…, O_DIRECTORY | O_NOFOLLOW)` on the descriptor of the one
/// before, so no component can be swapped for a symlink between a check and its use. A
/// symlink is read and its target walked the same way (a relative one from where it is, an
/// absolute one refused), and `..` goes back up the walked folders, never above the first:
/// what openat2's RESOLVE_BENEATH gives on Linux.
enum ConfinedPath {
    /// Symlinks followed in one path at most, as Linux's own limit.
    static let maxSymlinks = 40

    static func open(_ path: String, beneath folder: Int32, flags: Int32) -> Int32 {
        var pending = Array(components(of: path).reversed())
        // The folders walked so far; the last is where the next component is looked up.
        var walked: [Int32] = []
        defer { walked.forEach { _ = close($0) } }
        var symlinks = 0
        func current() -> Int32 { walked.last ?? folder }

        while let name = pending.popLast() {
            if name == ".." {
                guard let last = walked.popLast() else { errno = EXDEV; return -1 }
                _ = close(last)
                continue
            }
            let isLast = pending.isEmpty
            let descriptor = openat(current(), name, (isLast ? flags : O_RDONLY | O_DIRECTORY | O_CLOEXEC) | O_NOFOLLOW)
            if descriptor >= 0 {
                if isLast { return descriptor }
                walked.append(descriptor)
                continue
            }
            let failure = errno
            // O_NOFOLLOW fails on a symlink (ELOOP; ENOTDIR with O_DIRECTORY on some systems):
            // read it and walk its target instead.
            guard failure == ELOOP || failure == ENOTDIR || failure == EMLINK, let target = symlinkTarget(current(), name) else {
                errno = failure
                return -1
            }
            symlinks += 1
            guard symlinks <= maxSymlinks else { errno = ELOOP; return -1 }
            guard !target.hasPrefix("/") else { errno = EXDEV; return -1 }
            pending.append(contentsOf: components(of: target).reversed())
        }
        // The path named the folder itself (".", or a walk that came back to it).
        return openat(current(), ".", flags)
    }

    /// The components of a relative path, without empty ones and `.`.
    private static func components(of path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).filter { $0 != "." }
    }

    /// The target of the symlink `name` in `folder`; nil if it is not a symlink.
    private static func symlinkTarget(_ folder: Int32, _ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(folder, name, &buffer, buffer.count - 1)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
