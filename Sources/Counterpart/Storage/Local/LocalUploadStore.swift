import Synchronization

/// The uploads folder: files are written under a temporary name (hidden: it starts with
/// a dot) and linked into place under their final name only when complete, never over an
/// existing file.
final class LocalUploadStore: UploadStorage {
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

    func makeSink(named name: String, likelySize: UInt64?) throws(StorageError) -> UploadSink {
        let path = "\(folder)/\(Self.temporaryPrefix)\(getpid())-\(Self.counter.next()).part"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StorageError(operation: "create a temporary file", code: errno) }
        let destination = LocalFileDestination(path: path, descriptor: descriptor, sync: sync) { [self] path throws(StorageError) in
            try importFile(at: path, as: name)
        }
        return UploadSink(destination: destination) { [freeSpace] bytes throws(StorageError) in try freeSpace.ensureRoom(for: bytes) }
    }

    func ensureRoom(for bytes: UInt64) throws(StorageError) {
        try freeSpace.ensureRoom(for: bytes)
    }

    /// Links the complete file at `path` into the folder under `name` (or a variant of it,
    /// never an existing name); the caller removes `path`. Returns the name used.
    func importFile(at path: String, as name: String) throws(StorageError) -> String {
        // link(2) fails if the name exists: no file is ever replaced, even by a
        // concurrent upload of the same name.
        try StoredNames.first(for: name) { candidate throws(StorageError) in
            guard link(path, folder + "/" + candidate) != 0 else { return true }
            guard errno == EEXIST else { throw StorageError(operation: "store \(name)", code: errno) }
            return false
        }
    }

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

    func syncNames() throws(StorageError) {
        guard sync.syncFolder(folder) else { throw StorageError(operation: "sync the uploads folder", code: errno) }
    }
}

/// A temporary file in the uploads folder. Whole chunks are written past the page cache
/// (O_DIRECT, Linux): an upload is written once and not read back, and copying it into the
/// cache was the largest cost of taking one. Its bytes are durable (with `--sync full`)
/// before it gets its name, so that a crash never leaves a short file under a final name.
final class LocalFileDestination: UploadDestination, @unchecked Sendable {
    /// Direct I/O writes whole blocks from aligned memory at aligned offsets; 4 KiB suits
    /// every device.
    static let blockSize = 4096
    /// Bytes written through the page cache between two starts of write-back.
    static let writeBackInterval: UInt64 = 8 << 20

    let path: String
    private var descriptor: Int32
    private let sync: SyncMode
    /// Links the complete file at a path under the upload's name (`LocalUploadStore.importFile`).
    private let place: (_ path: String) throws(StorageError) -> String
    /// Whether writes now bypass the page cache.
    private var bypassing = false
    private var triedBypassing = false
    /// Bytes written through the page cache since write-back was last started, and where
    /// that write-back ended.
    private var cachedSinceWriteBack: UInt64 = 0
    private var writtenBackTo: UInt64 = 0

    init(path: String, descriptor: Int32, sync: SyncMode,
         place: @escaping (_ path: String) throws(StorageError) -> String) {
        self.path = path
        self.descriptor = descriptor
        self.sync = sync
        self.place = place
    }

    func startWholeChunks() {
        guard !triedBypassing else { return }
        triedBypassing = true
        bypassing = Platform.setPageCacheBypass(descriptor, true)
    }

    /// Writes `bytes` at `offset`: whole blocks past the page cache while allowed, a tail
    /// (the file's last bytes) through it.
    func store(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        var written = 0
        while written < bytes.count {
            let start = bytes.baseAddress! + written
            var count = bytes.count - written
            if bypassing {
                count &= ~(Self.blockSize - 1)
                let aligned = Int(bitPattern: start) % Self.blockSize == 0 && (offset + UInt64(written)) % UInt64(Self.blockSize) == 0
                if count == 0 || !aligned {
                    try stopBypassing()
                    continue
                }
            }
            let result = POSIX.retryingInterrupts { pwrite(descriptor, start, count, off_t(offset + UInt64(written))) }
            if result < 0, bypassing, errno == EINVAL {
                // A file system may take the flag and still refuse a direct write.
                try stopBypassing()
                continue
            }
            guard result > 0 else { throw StorageError(operation: "write the upload", code: result == 0 ? EIO : errno) }
            written += result
            if !bypassing { cachedSinceWriteBack += UInt64(result) }
        }
        if cachedSinceWriteBack >= Self.writeBackInterval {
            // Start writing the cached bytes out now (without waiting), so that the fsync at
            // the end has little left to do instead of all of them.
            let end = offset + UInt64(bytes.count)
            sync.startWriteBack(descriptor, offset: writtenBackTo, count: end - writtenBackTo)
            writtenBackTo = end
            cachedSinceWriteBack = 0
        }
    }

    private func stopBypassing() throws(StorageError) {
        bypassing = false
        guard Platform.setPageCacheBypass(descriptor, false) || Platform.usesPortableFallbacks else {
            throw StorageError(operation: "write the upload", code: errno)
        }
    }

    /// Syncs and closes the file, links it under its name and removes the temporary one.
    func commit() throws(StorageError) -> String {
        if !sync.syncFile(descriptor) { throw StorageError(operation: "sync the upload to disk", code: errno) }
        let result = Platform.close(descriptor)
        descriptor = -1
        if result != 0 { throw StorageError(operation: "close the temporary file", code: errno) }
        let stored = try place(path)
        unlink(path)
        return stored
    }

    func discard() {
        if descriptor >= 0 { Platform.close(descriptor) }
        descriptor = -1
        unlink(path)
    }
}

/// A process-wide counter for unique temporary names.
final class AtomicCounter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).newValue }
}
