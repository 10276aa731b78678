import Synchronization

/// The uploads folder: files are written under a temporary name (hidden: it starts with
/// a dot) and linked into place under their final name only when complete, never over an
/// existing file.
final class UploadStore: Sendable {
    /// Absolute path, symlinks resolved.
    let folder: String
    let freeSpace: FreeSpace
    let sync: SyncMode

    /// Temporary files are `.counterpart-<pid>-<n>.part`: the pid tells a crashed
    /// server's leftovers from the files of live servers sharing the folder.
    static let temporaryPrefix = ".counterpart-"
    private static let counter = AtomicCounter()

    init(folder path: String, keepFree: UInt64, sync: SyncMode) throws(CounterpartServer.StartError) {
        self.sync = sync
        try FileSystem.makeFolders(path)
        folder = try FileSystem.realPath(path)
        freeSpace = FreeSpace(folder: folder, keep: keepFree)
    }

    /// Removes the temporary files of servers that are no longer running.
    func removeStaleTemporaryFiles() {
        for name in FileSystem.names(in: folder) where name.hasPrefix(Self.temporaryPrefix) && name.hasSuffix(".part") {
            let pid = name.dropFirst(Self.temporaryPrefix.count).prefix { $0.isNumber }
            if let pid = Int32(pid), kill(pid, 0) == 0 || errno == EPERM { continue }
            unlink(folder + "/" + name)
        }
    }

    /// A new temporary file to write an upload into.
    func makeSink() throws -> UploadSink {
        let path = "\(folder)/\(Self.temporaryPrefix)\(getpid())-\(Self.counter.next()).part"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StoreError(operation: "create a temporary file", code: errno) }
        return UploadSink(path: path, descriptor: descriptor, freeSpace: freeSpace, sync: sync)
    }

    /// Moves a complete sink into place under `name` or, if taken, `name-1`, `name-2`, ...
    /// up to `sequentialNames`, then `name-<random>`. Returns the name used. Its bytes are
    /// durable before its name exists, so that a crash never leaves a short file under a
    /// final name; the name itself is durable after `syncFolder()`.
    func commit(_ sink: UploadSink, as name: String) throws -> String {
        try sink.close()
        do {
            let stored = try place(sink.path, as: name)
            unlink(sink.path)
            return stored
        } catch {
            sink.discard()
            throw error
        }
    }

    /// Links the complete file at `path` into the folder under `name` (or a variant of it,
    /// never an existing name); the caller removes `path`. Returns the name used.
    func place(_ path: String, as name: String) throws(StoreError) -> String {
        var attempt = 0
        var candidate = name
        // link(2) fails if the name exists: no file is ever replaced, even by a
        // concurrent upload of the same name.
        while link(path, folder + "/" + candidate) != 0 {
            guard errno == EEXIST, attempt < Self.sequentialNames + Self.randomNames else {
                throw StoreError(operation: "store \(name)", code: errno)
            }
            attempt += 1
            let suffix = attempt <= Self.sequentialNames ? String(attempt) : Self.randomSuffix()
            candidate = SafeFilename.variant(of: name, suffix: suffix)
        }
        return candidate
    }

    /// `a-1.png` … `a-100.png` are tried in turn: readable names for the usual few
    /// repeats, without a linear search through thousands.
    static let sequentialNames = 100
    /// Then random suffixes: each is almost surely free.
    static let randomNames = 16

    private static func randomSuffix() -> String {
        String(UInt64.random(in: 0..<(1 << 48)), radix: 36)
    }

    /// Removes every stored upload (not the uploads in progress); returns how many.
    func removeStoredFiles() -> Int {
        var removed = 0
        for name in FileSystem.names(in: folder) where !name.hasPrefix(".") {
            var info = stat()
            guard lstat(folder + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            if unlink(folder + "/" + name) == 0 { removed += 1 }
        }
        return removed
    }

    func remove(_ name: String) {
        unlink(folder + "/" + name)
    }

    /// Makes the names committed so far durable: call once before answering for them.
    func syncFolder() throws(StoreError) {
        guard sync.syncFolder(folder) else { throw StoreError(operation: "sync the uploads folder", code: errno) }
    }
}

/// A temporary file being written, with the SHA-256 of what went in.
final class UploadSink {
    let path: String
    private var descriptor: Int32
    private let writer: UploadWriter
    private let freeSpace: FreeSpace
    private let sync: SyncMode
    private var checkedSpaceAt: UInt64 = 0

    init(path: String, descriptor: Int32, freeSpace: FreeSpace, sync: SyncMode) {
        self.sync = sync
        self.path = path
        self.descriptor = descriptor
        self.freeSpace = freeSpace
        writer = UploadWriter(descriptor: descriptor, sync: sync)
    }

    /// Bytes received so far (the last of them may still be in memory, on their way).
    var size: UInt64 { writer.size }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        if size - checkedSpaceAt >= FreeSpace.checkInterval {
            // The disk does not see yet what waits in the writer's chunks.
            try freeSpace.ensureRoom(for: UInt64(bytes.count) + UploadWriter.bytesInMemory)
            checkedSpaceAt = size
        }
        try writing { () throws(POSIX.Failure) in try writer.append(bytes) }
    }

    /// No byte comes after the ones written: the last are written while the caller goes on.
    func startFinishing() throws {
        try writing { () throws(POSIX.Failure) in try writer.startFinishing() }
    }

    /// Writes the last bytes and returns the SHA-256 of everything written (the same, or
    /// the same failure, when asked again).
    func digest() throws -> String {
        try writing { () throws(POSIX.Failure) in try writer.finish() }
    }

    /// `step`'s result; its failure as the error a client is told (507 when the disk is full).
    private func writing<Result>(_ step: () throws(POSIX.Failure) -> Result) throws(StoreError) -> Result {
        do {
            return try step()
        } catch {
            throw StoreError(operation: "write the upload", code: error.code)
        }
    }

    /// Syncs and closes the file.
    func close() throws {
        guard descriptor >= 0 else { return }
        if !sync.syncFile(descriptor) { throw StoreError(operation: "sync the upload to disk", code: errno) }
        let result = Platform.close(descriptor)
        descriptor = -1
        if result != 0 { throw StoreError(operation: "close the temporary file", code: errno) }
    }

    /// Closes and deletes the temporary file.
    func discard() {
        writer.cancel()
        if descriptor >= 0 { Platform.close(descriptor) }
        descriptor = -1
        unlink(path)
    }
}

struct StoreError: Error, CustomStringConvertible {
    var code: Int32
    var description: String

    init(code: Int32, description: String) {
        self.code = code
        self.description = description
    }

    init(operation: String, code: Int32) {
        self.init(code: code, description: "the server could not \(operation): \(String(cString: strerror(code)))")
    }

    var isOutOfSpace: Bool { POSIX.isOutOfSpace(code) }
}

/// A process-wide counter for unique temporary names.
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).newValue }
}
