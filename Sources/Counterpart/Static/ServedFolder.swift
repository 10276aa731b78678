/// A folder opened once, whose files are opened only beneath it: each path (symlinks
/// included) is resolved beneath the folder and one that would leave it is refused, with no
/// window between checking and opening (`Platform.openBeneath`: one `openat2` call on Linux,
/// or, where the kernel or a container refuses that call, a walk of the path).
final class ServedFolder: Sendable {
    let path: String
    private let descriptor: Int32

    init(path: String) throws(CounterpartServer.StartError) {
        let resolved = try FileSystem.realPath(path)
        let descriptor = Platform.open(resolved, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw .unusableFolder(path: path, reason: FileSystem.lastError())
        }
        let probe = Platform.openBeneath(descriptor, ".", flags: O_RDONLY | O_CLOEXEC)
        guard probe >= 0 else {
            let reason = FileSystem.lastError()
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
        Platform.openBeneath(descriptor, relativePath, flags: O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    }
}
