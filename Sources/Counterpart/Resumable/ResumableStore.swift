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
        /// Why the upload is invalid, once it is (an IETF append past its length, from
        /// interop version 8): every later request on it but a cancellation is refused.
        var invalid: String?
        /// Once complete: the name it was stored under in the uploads folder (tus), or the
        /// answer the assembled request got (IETF).
        var storedName: String?
        var sha256: String?
        var answer: StoredAnswer?
        /// The user whose credentials created it (nil without credentials): only they may
        /// append to it, read it or cancel it.
        var owner: String?

        var isComplete: Bool { length.map { offset == $0 } ?? false }

        /// Whether this is `seen` as it was, but for its expiry (a writer that lets go moves
        /// it): nothing written, declared, completed or invalidated since. What an append
        /// must find to go on.
        func isUnchanged(since seen: Upload) -> Bool {
            var seen = seen
            seen.expiresAt = expiresAt
            return self == seen
        }
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
        /// A newer request took the upload over while this one was silent.
        case takenOver
        case tooMany(limit: Int)
        /// Writing would go below the free space kept on the disk (507).
        case insufficientStorage(String)
        case io(String)
    }

    let folder: String
    let limits: ResumableLimits
    let freeSpace: FreeSpace
    private let uploads = Mutex<[String: Upload]>([:])
    fileprivate let writers = Mutex<[String: WriteClaim]>([:])
    /// Held while an upload's state is saved (locks in this order: saving, uploads, writers).
    private let saving = Mutex(())

    /// Whether offsets and states are synced before they count (`full`) or not (`none`).
    let sync: SyncMode
    /// Told of each upload's changes (the live page).
    let events: ServerEvents?

    init(uploadsFolder: String, limits: ResumableLimits, freeSpace: FreeSpace, sync: SyncMode = .full, events: ServerEvents? = nil) {
        self.sync = sync
        self.events = events
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
            if upload.storedName == nil, upload.answer == nil, let size = Self.syncedSize(of: dataPath(id), sync: sync) {
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
                interopVersion: Int? = nil, owner: String? = nil) throws(Failure) -> Upload {
        try ensureRoom(for: length ?? 0)
        // Made with the first resumable upload: an uploads folder that never had one stays as it was.
        do { try FileSystem.makeFolders(folder) } catch { throw .io(error.description) }
        let now = Int64(time(nil))
        let id = Self.newIdentifier()
        let upload = Upload(id: id, kind: kind, length: length, offset: 0, metadata: metadata, concatenation: concatenation,
                            createdAt: now, expiresAt: now + Int64(limits.expirySeconds), requestHeaders: requestHeaders,
                            interopVersion: interopVersion, owner: owner)
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
        events?.resumable(.created, upload)
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

    /// Changes an upload and saves its state, then shows the change; with `releasing`, the
    /// request writing to it lets go of it in the same step (also when the save fails), so
    /// that a client that sees the new offset (HEAD) can append at once instead of finding
    /// the upload still taken. Saves are one at a time, so the state file always holds the
    /// newest state.
    func update(_ id: String, releasing claim: WriteClaim? = nil, _ change: (inout Upload) -> Void) throws(Failure) -> Upload {
        defer { claim?.release() }
        return try saving.withLock { _ throws(Failure) -> Upload in
            guard var upload = uploads.withLock({ $0[id] }) else { throw .notFound }
            change(&upload)
            try save(upload)
            let shown = uploads.withLock { all -> Bool in
                guard all[id] != nil else { return false }  // removed meanwhile
                all[id] = upload
                claim?.release()
                return true
            }
            guard shown else {
                unlink(statePath(id))
                throw .notFound
            }
            events?.resumable(upload.isComplete ? .completed : .offset, upload)
            return upload
        }
    }

    /// Removes an upload and its files.
    func remove(_ id: String, because change: ServerEvent.ResumableChange.Change = .removed) {
        let removed = uploads.withLock { $0.removeValue(forKey: id) }
        events?.resumable(change, removed)
        unlink(dataPath(id))
        unlink(statePath(id))
    }

    /// Removes uploads whose time has run out; returns how many.
    @discardableResult
    func removeExpired() -> Int {
        let now = Int64(time(nil))
        let expired = uploads.withLock { all in
            all.values.filter { upload in upload.expiresAt <= now && writers.withLock { $0[upload.id] == nil } }.map(\.id)
        }
        for id in expired { remove(id, because: .expired) }
        return expired.count
    }

    // MARK: - Writing

    /// The right to write to one upload, held by one request at a time until it is given
    /// back (`release`; an append gives it back at the latest when it is dropped).
    ///
    /// While its request reads the body and has received nothing for a second, a newer
    /// request for the upload may take it over (a client whose network changed resumes on a
    /// new connection while the old one has gone silent, without a FIN): the holder's
    /// `yield` runs under the claim's lock — never in the middle of a write — and from then
    /// on the old request writes nothing.
    final class WriteClaim: @unchecked Sendable {
        let id: String
        private let store: ResumableStore
        /// Whether the upload was taken over; also the lock `yield` and `lastBytes` are set,
        /// read and run under.
        private let takenOver = Mutex(false)
        private var yield: (() -> Void)?
        /// When the holder last received bytes: only a silent one is taken over, so that two
        /// clients writing at once still see one of them refused (423/409).
        private var lastBytes = ContinuousClock.now

        fileprivate init(_ id: String, _ store: ResumableStore) {
            self.id = id
            self.store = store
        }

        func release() {
            store.writers.withLock { all in
                if all[id] === self { all[id] = nil }
            }
        }

        /// From now until `endTakeover`, a newer request may take the upload over; `yield`
        /// stops this request's writing first.
        func allowTakeover(_ yield: @escaping () -> Void) {
            takenOver.withLock { _ in
                self.yield = yield
                lastBytes = .now
            }
        }

        /// Closes the window of `allowTakeover`: false when the upload was taken over.
        func endTakeover() -> Bool {
            takenOver.withLock { takenOver in
                yield = nil
                return !takenOver
            }
        }

        /// Runs `write` unless the upload was taken over (false then), never while a takeover runs.
        func whileHeld(_ write: () -> Void) -> Bool {
            takenOver.withLock { takenOver in
                guard !takenOver else { return false }
                write()
                lastBytes = .now
                return true
            }
        }

        fileprivate func takeOver() -> Bool {
            takenOver.withLock { takenOver in
                guard !takenOver, let yield, ContinuousClock.now - lastBytes >= ResumableStore.silenceBeforeTakeover else { return false }
                yield()
                takenOver = true
                self.yield = nil
                return true
            }
        }
    }

    /// How long a request reading into an upload must have received nothing before a newer
    /// request may take the upload over.
    static let silenceBeforeTakeover = Duration.seconds(1)

    /// Takes the upload for writing; nil when another request is writing to it and, with
    /// `takingOver`, will not let go (it is concluding, or not reading a body).
    func claim(_ id: String, takingOver: Bool = false) -> WriteClaim? {
        let claim = WriteClaim(id, self)
        let holder = writers.withLock { all -> WriteClaim? in
            if let holder = all[id] { return holder }
            all[id] = claim
            return nil
        }
        guard let holder else { return claim }
        guard takingOver, holder.takeOver() else { return nil }
        // The old holder let go as it saved its offset (or is still listed): the upload is this
        // request's, unless a third one got in between.
        let taken = writers.withLock { all -> WriteClaim? in
            guard all[id] == nil || all[id] === holder else { return nil }
            all[id] = claim
            return claim
        }
        if taken != nil { events?.resumable(.takenOver, current(id)) }
        return taken
    }

    /// Before an offset is told (HEAD): a writer gone silent is made to let go and save
    /// what it wrote, so that the offset is where the client resumes. Whether one did (the
    /// upload has then changed).
    @discardableResult
    func takeOverIfSilent(_ id: String) -> Bool {
        guard let holder = writers.withLock({ $0[id] }), holder.takeOver() else { return false }
        holder.release()
        return true
    }

    /// The upload as it stands, expired or not: what a claim checks it against.
    func current(_ id: String) -> Upload? {
        uploads.withLock { $0[id] }
    }

    /// Opens the data file to append at `offset` (what was durable).
    func openForAppending(_ id: String, at offset: UInt64) throws(Failure) -> OpenFile {
        let file = OpenFile(open(dataPath(id), O_WRONLY | O_CLOEXEC))
        guard file.borrowed >= 0 else { throw .io("cannot open the upload's file: \(FileSystem.lastError())") }
        // Bytes past the durable offset were never acknowledged: they go.
        guard ftruncate(file.borrowed, off_t(offset)) == 0, lseek(file.borrowed, off_t(offset), SEEK_SET) >= 0 else {
            throw .io("cannot prepare the upload's file: \(FileSystem.lastError())")
        }
        return file
    }

    /// Makes what was written durable and moves the offset to it; extends the expiry.
    func commitWrite(_ id: String, file: Int32, offset: UInt64, releasing claim: WriteClaim? = nil) throws(Failure) -> Upload {
        guard sync.syncFile(file) else { throw .io("cannot sync the upload's file: \(FileSystem.lastError())") }
        let now = Int64(time(nil))
        return try update(id, releasing: claim) { upload in
            upload.offset = offset
            upload.expiresAt = now + Int64(limits.expirySeconds)
        }
    }

    /// `POSIX.writeAll`, its failure as the store's (507 for a full disk).
    static func writeAll(_ file: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) {
        do {
            try POSIX.writeAll(file, bytes)
        } catch {
            let reason = "the server could not store the bytes: \(error)"
            throw error.isOutOfSpace ? .insufficientStorage(reason) : .io(reason)
        }
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
        let written = data.withUnsafeBytes { bytes in (try? POSIX.writeAll(file, bytes)) != nil }
        let synced = sync.syncFile(file)
        close(file)
        guard written, synced, rename(temporary, statePath(upload.id)) == 0,
              sync.syncFolder(folder) else {
            throw .io("cannot write the upload's state: \(FileSystem.lastError())")
        }
    }

    private static func syncedSize(of path: String, sync: SyncMode) -> UInt64? {
        let file = OpenFile(open(path, O_RDONLY | O_CLOEXEC))
        var info = stat()
        guard file.borrowed >= 0, sync.syncFile(file.borrowed), fstat(file.borrowed, &info) == 0 else { return nil }
        return UInt64(info.st_size)
    }

    private static func newIdentifier() -> String {
        var generator = SystemRandomNumberGenerator()
        return ASCIIWriter.string(capacity: 32) { out in
            out.number(generator.next(), radix: 16, minimumDigits: 16)
            out.number(generator.next(), radix: 16, minimumDigits: 16)
        }
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
