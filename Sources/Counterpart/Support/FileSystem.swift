/// The few file-system operations the server needs, with errors that say what failed.
enum FileSystem {
    /// `strerror(errno)`: what the last failed call says.
    static func lastError() -> String { POSIX.Failure.last.description }

    /// Makes the folder's entries durable (names linked, renamed or removed in it): fsync
    /// of a file makes its bytes durable, not its name. Returns whether it worked.
    static func syncFolder(_ path: String) -> Bool {
        let folder = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { return false }
        defer { close(folder) }
        return fsync(folder) == 0
    }

    /// The absolute path of `path` with symlinks resolved.
    static func realPath(_ path: String) throws(CounterpartServer.StartError) -> String {
        guard let resolved = realpath(path, nil) else { throw .unusableFolder(path: path, reason: lastError()) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// Creates `path` and its missing parents.
    static func makeFolders(_ path: String) throws(CounterpartServer.StartError) {
        if isFolder(path) { return }
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0, errno != EEXIST {
                throw .unusableFolder(path: path, reason: "cannot create \(current): \(lastError())")
            }
        }
        guard isFolder(path) else { throw .unusableFolder(path: path, reason: "it is not a folder") }
    }

    /// The names in a folder, `.` and `..` excluded.
    static func names(in folder: String) -> [String] {
        guard let handle = opendir(folder) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = entryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// A small file's whole contents (a state file); nil if it cannot be read.
    static func contents(of path: String) -> [UInt8]? {
        let file = OpenFile(open(path, O_RDONLY | O_CLOEXEC))
        guard file.borrowed >= 0 else { return nil }
        var contents: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                POSIX.retryingInterrupts { read(file.borrowed, bytes.baseAddress, bytes.count) }
            }
            guard count >= 0 else { return nil }
            if count == 0 { return contents }
            contents += buffer[0..<count]
        }
    }

    /// The name of a folder entry read with `readdir`.
    static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}
