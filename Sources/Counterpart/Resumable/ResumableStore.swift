import Foundation
import HTTPTransfer
import Synchronization

/// Uploads that arrive over several requests (tus, and the IETF resumable uploads that
/// URLSession speaks): each one a data file and a small state file in a hidden folder of
/// the uploads folder, so that an upload survives a restart and a `kill -9`.
///
/// The offset an upload reports is what is durably written: the data file is synced
/// before the offset moves. One request at a time may write to an upload.
final class ResumableStore: Sendable {
    /// What is known of one upload.
    struct Upload: Codable, Equatable, Sendable {
        enum Kind: String, Codable, Sendable {
            case tus
            case ietf
        }

        /// tus concatenation (`Upload-Concat`).
        enum Concatenation: Codable, Equatable, Sendable {
            case partial
            case final(parts: [String])
        }

        var id: String
        var kind: Kind
        /// The total length, when the client has said it.
        var length: UInt64?
        /// Bytes durably written.
        var offset: UInt64
        /// tus `Upload-Metadata`: key → base64 value (nil for a key without one).
        var metadata: [String: String?]
        var concatenation: Concatenation?
        var createdAt: Int64
        var expiresAt: Int64
        /// For the IETF protocol: the headers of the request that began the upload, to
        /// handle its assembled body as if it had come in one piece, and the interop version.
        var requestHeaders: [[String]]?
        var interopVersion: Int?
        /// Whether the client has said it sent everything (IETF `Upload-Complete: ?1`).
        var clientCompleted: Bool
        /// Once complete: the name it was stored under in the uploads folder (tus), or the
        /// answer the assembled request got (IETF).
        var storedName: String?
        var sha256: String?
        var answer: StoredAnswer?

        var isComplete: Bool { length.map { offset == $0 } ?? false }
    }

    /// The answer a completed IETF upload got, to give again to a client that asks twice.
    struct StoredAnswer: Codable, Equatable, Sendable {
        var status: Int
        var headers: [[String]]
        var body: [UInt8]
    }

    enum Failure: Error, Equatable {
        case notFound
        case expired
        case locked
        case tooMany(limit: Int)
        /// Writing would go below the free space kept on the disk (507).
        case insufficientStorage(String)
        case io(String)
    }

    let folder: String
    let limits: ResumableLimits
    let freeSpace: FreeSpace
    private let uploads = Mutex<[String: Upload]>([:])
    private let writers = Mutex<Set<String>>([])
    /// Held while an upload's state is saved (locks in this order: saving, uploads, writers).
    private let saving = Mutex(())

    init(uploadsFolder: String, limits: ResumableLimits, freeSpace: FreeSpace) {
        folder = uploadsFolder + "/" + Self.folderName
        self.limits = limits
        self.freeSpace = freeSpace
        var loaded: [String: Upload] = [:]
        for name in FileSystem.names(in: folder) where name.hasSuffix(Self.temporarySuffix) {
            // A save cut short by a crash: the state it was replacing is still there.
            unlink(folder + "/" + name)
        }
        for name in FileSystem.names(in: folder) where name.hasSuffix(".json") {
            let id = String(name.dropLast(5))
            guard var upload = try? JSONDecoder().decode(Upload.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))) else {
                continue
            }
            // After a crash the data file may hold more than the state says: what is there,
            // synced now, is durable.
            let data = folder + "/" + id + ".data"
            if upload.storedName == nil, upload.answer == nil, let size = Self.syncedSize(of: data) {
                upload.offset = upload.length.map { min($0, size) } ?? size
            }
            loaded[id] = upload
        }
        uploads.withLock { $0 = loaded }
    }

    static let folderName = ".resumable"
    private static let temporarySuffix = ".tmp"
    private static let saves = AtomicCounter()

    // MARK: - Uploads

    func create(kind: ResumableStore.Upload.Kind, length: UInt64?, metadata: [String: String?] = [:],
                concatenation: Upload.Concatenation? = nil, requestHeaders: [[String]]? = nil,
                interopVersion: Int? = nil) throws(Failure) -> Upload {
        try ensureRoom(for: length ?? 0)
        // Made with the first resumable upload: an uploads folder that never had one stays as it was.
        do { try FileSystem.makeFolders(folder) } catch { throw .io(error.description) }
        let now = Int64(time(nil))
        let id = Self.newIdentifier()
        let upload = Upload(id: id, kind: kind, length: length, offset: 0, metadata: metadata, concatenation: concatenation,
                            createdAt: now, expiresAt: now + Int64(limits.expirySeconds), requestHeaders: requestHeaders,
                            interopVersion: interopVersion, clientCompleted: false)
        try uploads.withLock { all throws(Failure) in
            guard all.values.filter({ $0.storedName == nil && $0.answer == nil }).count < limits.maxUploads else {
                throw .tooMany(limit: limits.maxUploads)
            }
            all[id] = upload
        }
        let file = open(dataPath(id), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard file >= 0 else {
            uploads.withLock { _ = $0.removeValue(forKey: id) }
            throw .io("cannot create the upload's file: \(FileSystem.lastError())")
        }
        close(file)
        try save(upload)
        return upload
    }

    /// Throws `insufficientStorage` when `bytes` more would go below the free space kept.
    func ensureRoom(for bytes: UInt64) throws(Failure) {
        do { try freeSpace.ensureRoom(for: bytes) } catch { throw .insufficientStorage(error.description) }
    }

    /// The upload, if it exists and has not expired.
    func upload(_ id: String) throws(Failure) -> Upload {
        guard Self.isIdentifier(id), let upload = uploads.withLock({ $0[id] }) else { throw .notFound }
        guard upload.expiresAt > Int64(time(nil)) || upload.storedName != nil || upload.answer != nil else { throw .expired }
        return upload
    }

    /// Changes an upload and saves its state, then shows the change; with `endingWrite`, the
    /// request writing to it lets go of it in the same step (also when the save fails), so
    /// that a client that sees the new offset (HEAD) can append at once instead of finding
    /// the upload still taken. Saves are one at a time, so the state file always holds the
    /// newest state.
    func update(_ id: String, endingWrite: Bool = false, _ change: (inout Upload) -> Void) throws(Failure) -> Upload {
        var released = false
        defer { if endingWrite, !released { endWriting(id) } }
        return try saving.withLock { _ throws(Failure) -> Upload in
            guard var upload = uploads.withLock({ $0[id] }) else { throw .notFound }
            change(&upload)
            try save(upload)
            let shown = uploads.withLock { all -> Bool in
                guard all[id] != nil else { return false }  // removed meanwhile
                all[id] = upload
                if endingWrite {
                    endWriting(id)
                    released = true
                }
                return true
            }
            guard shown else {
                unlink(statePath(id))
                throw .notFound
            }
            return upload
        }
    }

    /// Removes an upload and its files.
    func remove(_ id: String) {
        uploads.withLock { _ = $0.removeValue(forKey: id) }
        unlink(dataPath(id))
        unlink(statePath(id))
    }

    /// Removes uploads whose time has run out; returns how many.
    @discardableResult
    func removeExpired() -> Int {
        let now = Int64(time(nil))
        let expired = uploads.withLock { all in
            all.values.filter { $0.expiresAt <= now && !isWriting($0.id) }.map(\.id)
        }
        for id in expired { remove(id) }
        return expired.count
    }

    // MARK: - Writing

    /// Takes the upload for writing; nil when another request is writing to it.
    func beginWriting(_ id: String) -> Bool {
        writers.withLock { $0.insert(id).inserted }
    }

    /// How taking an upload to append to it went.
    enum AppendClaim {
        case taken
        /// Another request is writing to it.
        case busy
        /// It is no longer as the request saw it (another request appended, completed or
        /// removed it while this one was deciding): nil when it is gone.
        case changed(Upload?)
    }

    /// Takes the upload for writing, if no other request is writing to it and it is still
    /// as `seen`: a request that found it busy a moment ago must not append to bytes it did
    /// not see, nor to an upload another request has completed.
    func beginAppending(to seen: Upload) -> AppendClaim {
        guard beginWriting(seen.id) else { return .busy }
        let current = uploads.withLock { $0[seen.id] }
        guard current == seen else {
            endWriting(seen.id)
            return .changed(current)
        }
        return .taken
    }

    func endWriting(_ id: String) {
        writers.withLock { _ = $0.remove(id) }
    }

    private func isWriting(_ id: String) -> Bool {
        writers.withLock { $0.contains(id) }
    }

    /// Opens the data file to append at `offset` (what was durable).
    func openForAppending(_ id: String, at offset: UInt64) throws(Failure) -> Int32 {
        let file = open(dataPath(id), O_WRONLY | O_CLOEXEC)
        guard file >= 0 else { throw .io("cannot open the upload's file: \(FileSystem.lastError())") }
        // Bytes past the durable offset were never acknowledged: they go.
        guard ftruncate(file, off_t(offset)) == 0, lseek(file, off_t(offset), SEEK_SET) >= 0 else {
            let reason = FileSystem.lastError()
            close(file)
            throw .io("cannot prepare the upload's file: \(reason)")
        }
        return file
    }

    /// Makes what was written durable and moves the offset to it; extends the expiry.
    func commitWrite(_ id: String, file: Int32, offset: UInt64, endingWrite: Bool = false) throws(Failure) -> Upload {
        guard fsync(file) == 0 else { throw .io("cannot sync the upload's file: \(FileSystem.lastError())") }
        let now = Int64(time(nil))
        return try update(id, endingWrite: endingWrite) { upload in
            upload.offset = offset
            upload.expiresAt = now + Int64(limits.expirySeconds)
        }
    }

    /// Cuts the data file back to `offset` (a rejected chunk).
    func truncate(_ id: String, file: Int32, to offset: UInt64) {
        _ = ftruncate(file, off_t(offset))
    }

    func dataPath(_ id: String) -> String { folder + "/" + id + ".data" }
    private func statePath(_ id: String) -> String { folder + "/" + id + ".json" }

    /// Writes the state file durably: a temporary file, synced, renamed over the old one.
    private func save(_ upload: Upload) throws(Failure) {
        guard let data = try? JSONEncoder().encode(upload) else { throw .io("cannot encode the upload's state") }
        // A name of its own per save: two saves of one upload may overlap (the writer that
        // just let go, and the next one).
        let temporary = statePath(upload.id) + ".\(Self.saves.next())" + Self.temporarySuffix
        let file = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw .io("cannot write the upload's state: \(FileSystem.lastError())") }
        let written = data.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
        let synced = fsync(file)
        close(file)
        guard written == data.count, synced == 0, rename(temporary, statePath(upload.id)) == 0,
              FileSystem.syncFolder(folder) else {
            throw .io("cannot write the upload's state: \(FileSystem.lastError())")
        }
    }

    private static func syncedSize(of path: String) -> UInt64? {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var info = stat()
        guard fsync(file) == 0, fstat(file, &info) == 0 else { return nil }
        return UInt64(info.st_size)
    }

    /// 32 hex digits from the system's random generator.
    private static func newIdentifier() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let word = generator.next() as UInt64
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    static func isIdentifier(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// Limits of resumable uploads.
public struct ResumableLimits: Sendable, Equatable {
    /// Uploads in progress at once.
    public var maxUploads: Int
    /// Seconds an upload may go without a write before it expires and is removed.
    public var expirySeconds: Int

    public static let defaultMaxUploads = 1_000
    public static let defaultExpirySeconds = 24 * 3600

    public init(maxUploads: Int = defaultMaxUploads, expirySeconds: Int = defaultExpirySeconds) {
        self.maxUploads = maxUploads
        self.expirySeconds = expirySeconds
    }
}
