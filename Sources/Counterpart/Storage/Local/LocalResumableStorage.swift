/// Resumable uploads in a hidden folder of the uploads folder (`.resumable/`): each one a
/// data file (`ID.data`) and a state file (`ID.json`), so that an upload survives a restart
/// and a `kill -9`. A state is saved by writing a temporary file, syncing it and renaming it
/// over the old one.
final class LocalResumableStorage: ResumableStorage {
    static let folderName = ".resumable"
    private static let temporarySuffix = ".tmp"
    private static let saves = AtomicCounter()

    let folder: String
    let sync: SyncMode
    /// The uploads folder's: resumable uploads share its disk.
    let freeSpace: FreeSpace

    init(uploadsFolder: String, freeSpace: FreeSpace, sync: SyncMode) {
        folder = uploadsFolder + "/" + Self.folderName
        self.freeSpace = freeSpace
        self.sync = sync
    }

    func ensureRoom(for bytes: UInt64) throws(StorageError) {
        try freeSpace.ensureRoom(for: bytes)
    }

    var isShared: Bool { false }
    var leases: (any ResumableLeases)? { nil }

    func loadState(of id: String) -> [UInt8]? {
        FileSystem.contents(of: statePath(id))
    }

    func loadStates() -> [String: [UInt8]] {
        for name in FileSystem.names(in: folder) where name.hasSuffix(Self.temporarySuffix) {
            // A save cut short by a crash: the state it was replacing is still there.
            unlink(folder + "/" + name)
        }
        var states: [String: [UInt8]] = [:]
        for name in FileSystem.names(in: folder) where name.hasSuffix(".json") {
            let id = String(name.dropLast(5))
            if let bytes = loadState(of: id) { states[id] = bytes }
        }
        return states
    }

    func saveState(_ state: [UInt8], of id: String) throws(StorageError) {
        // A name of its own per save: two saves of one upload may overlap (the writer that
        // just let go, and the next one).
        let temporary = statePath(id) + ".\(Self.saves.next())" + Self.temporarySuffix
        let file = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw StorageError(operation: "write the upload's state", code: errno) }
        let written = state.withUnsafeBytes { bytes in (try? POSIX.writeAll(file, bytes)) != nil }
        let synced = sync.syncFile(file)
        close(file)
        guard written, synced, rename(temporary, statePath(id)) == 0, sync.syncFolder(folder) else {
            let code = errno
            unlink(temporary)
            throw StorageError(operation: "write the upload's state", code: code)
        }
    }

    func createData(of id: String) throws(StorageError) {
        // Made with the first resumable upload: an uploads folder that never had one stays as it was.
        do { try FileSystem.makeFolders(folder) } catch { throw StorageError(.failed, error.description) }
        let file = open(dataPath(id), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw StorageError(operation: "create the upload's file", code: errno) }
        close(file)
    }

    func durableLength(of id: String) -> UInt64? {
        let file = OpenFile(open(dataPath(id), O_RDONLY | O_CLOEXEC))
        var info = stat()
        guard file.borrowed >= 0, sync.syncFile(file.borrowed), fstat(file.borrowed, &info) == 0 else { return nil }
        return UInt64(info.st_size)
    }

    func appender(of id: String, at offset: UInt64) throws(StorageError) -> any ResumableAppender {
        let file = OpenFile(open(dataPath(id), O_WRONLY | O_CLOEXEC))
        guard file.borrowed >= 0 else { throw StorageError(operation: "open the upload's file", code: errno) }
        // Bytes past the durable offset were never acknowledged: they go.
        guard ftruncate(file.borrowed, off_t(offset)) == 0, lseek(file.borrowed, off_t(offset), SEEK_SET) >= 0 else {
            throw StorageError(operation: "prepare the upload's file", code: errno)
        }
        return LocalResumableAppender(file: file, sync: sync)
    }

    func readData(of id: String, _ body: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) {
        try StorageError.readFile(dataPath(id), inPiecesOf: Self.readPieceBytes, "read the upload back", body)
    }

    /// The pieces data is read back in (as libmicrohttpd would hand a body over).
    static let readPieceBytes = 64 * 1024

    func moveData(of id: String, into uploads: any UploadStorage, as name: String) throws(StorageError) -> String {
        // A local uploads folder links the file (no copy); another store takes a copy.
        let stored = try uploads.importFile(at: dataPath(id), as: name)
        unlink(dataPath(id))
        return stored
    }

    func removeData(of id: String) {
        unlink(dataPath(id))
    }

    func remove(_ id: String) {
        unlink(dataPath(id))
        unlink(statePath(id))
    }

    private func dataPath(_ id: String) -> String { folder + "/" + id + ".data" }
    private func statePath(_ id: String) -> String { folder + "/" + id + ".json" }
}

/// A data file open at its end.
final class LocalResumableAppender: ResumableAppender {
    private let file: OpenFile
    private let syncMode: SyncMode

    init(file: OpenFile, sync: SyncMode) {
        self.file = file
        syncMode = sync
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        do {
            try POSIX.writeAll(file.borrowed, bytes)
        } catch {
            throw StorageError(operation: "store the bytes", error)
        }
    }

    func sync() throws(StorageError) {
        guard syncMode.syncFile(file.borrowed) else { throw StorageError(operation: "sync the upload's file", code: errno) }
    }

    func truncate(to offset: UInt64) {
        _ = ftruncate(file.borrowed, off_t(offset))
        _ = lseek(file.borrowed, off_t(offset), SEEK_SET)
    }
}
