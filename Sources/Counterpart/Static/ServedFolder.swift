import CLinux
import Glibc

/// A folder opened once, whose files are opened only beneath it: the kernel resolves
/// each path (symlinks included) and refuses one that would leave the folder, in one
/// `openat2` call, with no window between checking and opening.
final class ServedFolder: Sendable {
    let path: String
    private let descriptor: Int32

    init(path: String) throws(CounterpartServer.StartError) {
        let resolved = try FileSystem.realPath(path)
        let descriptor = Glibc.open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw .unusableFolder(path: path, reason: FileSystem.lastError())
        }
        let probe = cp_open_beneath(descriptor, ".", O_RDONLY | O_CLOEXEC)
        guard probe >= 0 else {
            let reason = errno == ENOSYS ? "Counterpart needs Linux 5.6 or later (openat2)" : FileSystem.lastError()
            close(descriptor)
            throw .unusableFolder(path: path, reason: reason)
        }
        close(probe)
        self.path = resolved
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// Opens `relativePath` (`.` for the folder itself) for reading, beneath the folder;
    /// -1 with errno set otherwise (EXDEV or ELOOP for a path that would leave it).
    /// Non-blocking, so that a FIFO cannot hold a thread; regular files ignore the flag.
    func open(_ relativePath: String) -> Int32 {
        cp_open_beneath(descriptor, relativePath, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    }
}
