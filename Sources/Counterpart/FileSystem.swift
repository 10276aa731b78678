import Glibc

/// The few file-system operations the server needs, with errors that say what failed.
enum FileSystem {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The absolute path of `path` with symlinks resolved.
    static func realPath(_ path: String) throws -> String {
        guard let resolved = realpath(path, nil) else {
            throw Failure(description: "\(path): \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// Creates `path` and its missing parents.
    static func makeFolders(_ path: String) throws {
        if isFolder(path) { return }
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0, errno != EEXIST {
                throw Failure(description: "cannot create the folder \(current): \(String(cString: strerror(errno)))")
            }
        }
        guard isFolder(path) else { throw Failure(description: "\(path) is not a folder") }
    }

    /// The names in a folder, `.` and `..` excluded.
    static func names(in folder: String) -> [String] {
        guard let handle = opendir(folder) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
