import Foundation
import HTTPTransfer
import Synchronization

/// Uploads that arrive over several requests (tus, and the IETF resumable uploads that
/// URLSession speaks): the rules — offsets, expiry, limits — over a `ResumableStorage` that
/// keeps each one's state and bytes, so that an upload survives a restart and a `kill -9`.
///
/// The offset an upload reports is what is durably written: the data is synced before the
/// offset moves. One request at a time may write to an upload (`ResumableLocker`).
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
        /// The storage failed (507 when out of room).
        case storage(StorageError)
    }

    let limits: ResumableLimits
    let storage: any ResumableStorage
    /// Who writes to which upload, and the takeover of a silent writer.
    let locker: ResumableLocker
    private let uploads = Mutex<[String: Upload]>([:])
    /// Held while an upload's state is saved (locks in this order: saving, uploads, the locker's).
    private let saving = Mutex(())

    /// Told of each upload's changes (the live page).
    let events: ServerEvents?

    init(storage: any ResumableStorage, limits: ResumableLimits, events: ServerEvents? = nil) {
        self.storage = storage
        self.events = events
        self.limits = limits
        locker = ResumableLocker(leases: storage.leases)
        var loaded: [String: Upload] = [:]
        for (id, state) in storage.loadStates() {
            if let upload = try? decoded(state, of: id) { loaded[id] = upload }
        }
        uploads.withLock { $0 = loaded }
    }

    /// A stored state, brought up to the bytes stored: after a crash (or another server's
    /// death between saving bytes and state) the data may hold more than the state says,
    /// and what is there is durable.
    private func decoded(_ state: [UInt8], of id: String) throws(StorageError) -> Upload? {
        guard var upload = try? JSONDecoder().decode(Upload.self, from: Data(state)) else { return nil }
        if upload.storedName == nil, upload.answer == nil, let size = try storage.durableLength(of: id) {
            upload.offset = upload.length.map { min($0, size) } ?? size
        }
        return upload
    }

    /// The upload as this server knows it: with a shared store, as the store holds it now
    /// (another server may have moved it); nil when it is gone. A store that does not answer
    /// is a storage failure (503), never a missing upload.
    private func known(_ id: String) throws(Failure) -> Upload? {
        guard storage.isShared else { return uploads.withLock { $0[id] } }
        let stored: Upload?
        do throws(StorageError) {
            stored = try storage.loadState(of: id).flatMap { state throws(StorageError) in try decoded(state, of: id) }
        } catch {
            throw .storage(error)
        }
        uploads.withLock { $0[id] = stored }
        return stored
    }

    // MARK: - Uploads

    func create(kind: ResumableStore.Upload.Kind, length: UInt64?, metadata: [String: String?] = [:],
                concatenation: Upload.Concatenation? = nil, requestHeaders: [[String]]? = nil,
                interopVersion: Int? = nil, owner: String? = nil) throws(Failure) -> Upload {
        try ensureRoom(for: length ?? 0)
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
        do throws(StorageError) {
            try storage.createData(of: id)
        } catch {
            uploads.withLock { _ = $0.removeValue(forKey: id) }
            throw .storage(error)
        }
        try save(upload)
        events?.resumable(.created, upload)
        return upload
    }

    /// Throws when `bytes` more would not fit (507).
    func ensureRoom(for bytes: UInt64) throws(Failure) {
        do { try storage.ensureRoom(for: bytes) } catch { throw .storage(error) }
    }

    /// The upload, if it exists and has not expired.
    func upload(_ id: String) throws(Failure) -> Upload {
        guard Self.isIdentifier(id), let upload = try known(id) else { throw .notFound }
        guard upload.expiresAt > Int64(time(nil)) || upload.storedName != nil || upload.answer != nil else { throw .expired }
        return upload
    }

    /// Changes an upload and saves its state, then shows the change; with `releasing`, the
    /// request writing to it lets go of it in the same step (also when the save fails), so
    /// that a client that sees the new offset (HEAD) can append at once instead of finding
    /// the upload still taken. Saves are one at a time, so the stored state always is the
    /// newest.
    func update(_ id: String, releasing claim: ResumableLocker.Claim? = nil, _ change: (inout Upload) -> Void) throws(Failure) -> Upload {
        defer { claim?.release() }
        return try saving.withLock { _ throws(Failure) -> Upload in
            guard var upload = try known(id) else { throw .notFound }
            change(&upload)
            try save(upload)
            let shown = uploads.withLock { all -> Bool in
                guard all[id] != nil else { return false }  // removed meanwhile
                all[id] = upload
                claim?.release()
                return true
            }
            guard shown else {
                storage.remove(id)
                throw .notFound
            }
            events?.resumable(upload.isComplete ? .completed : .offset, upload)
            return upload
        }
    }

    /// Removes an upload, its state and its data.
    func remove(_ id: String, because change: ServerEvent.ResumableChange.Change = .removed) {
        let removed = uploads.withLock { $0.removeValue(forKey: id) }
        events?.resumable(change, removed)
        storage.remove(id)
    }

    /// Removes uploads whose time has run out; returns how many.
    @discardableResult
    func removeExpired() -> Int {
        let now = Int64(time(nil))
        let expired = uploads.withLock { all in
            all.values.filter { upload in upload.expiresAt <= now && !locker.isHeld(upload.id) }.map(\.id)
        }
        // With a shared store another server may have kept it alive meanwhile.
        let stillExpired = expired.filter { id in (try? known(id)).map { $0.expiresAt <= now } ?? false }
        for id in stillExpired { remove(id, because: .expired) }
        return stillExpired.count
    }

    /// Takes the upload for writing (`ResumableLocker.claim`), telling the live page when a
    /// silent writer was taken over.
    func claim(_ id: String, takingOver: Bool = false) throws(Failure) -> ResumableLocker.Claim? {
        let wasHeld = locker.isHeld(id)
        let claim: ResumableLocker.Claim?
        do { claim = try locker.claim(id, takingOver: takingOver) } catch { throw .storage(error) }
        if claim != nil, wasHeld { events?.resumable(.takenOver, try? current(id)) }
        return claim
    }

    /// The upload as it stands, expired or not: what a claim checks it against.
    func current(_ id: String) throws(Failure) -> Upload? {
        try known(id)
    }

    // MARK: - Data

    /// Opens the upload's data to append at `offset` (what was durable).
    func appender(_ id: String, at offset: UInt64) throws(Failure) -> any ResumableAppender {
        do { return try storage.appender(of: id, at: offset) } catch { throw .storage(error) }
    }

    /// Makes what was written durable and moves the offset to it; extends the expiry.
    func commitWrite(_ id: String, _ appender: any ResumableAppender, offset: UInt64,
                     releasing claim: ResumableLocker.Claim? = nil) throws(Failure) -> Upload {
        do { try appender.sync() } catch { throw .storage(error) }
        let now = Int64(time(nil))
        return try update(id, releasing: claim) { upload in
            upload.offset = offset
            upload.expiresAt = now + Int64(limits.expirySeconds)
        }
    }

    /// Reads the upload's data from the start, in pieces.
    func readData(_ id: String, _ body: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(Failure) {
        do { try storage.readData(of: id, body) } catch { throw .storage(error) }
    }

    /// Removes the upload's data, keeping its state.
    func removeData(_ id: String) {
        storage.removeData(of: id)
    }

    /// Moves a complete upload's data into `uploads` under `name` or a variant; the name used.
    func moveData(_ id: String, into uploads: any UploadStorage, as name: String) throws(Failure) -> String {
        do { return try storage.moveData(of: id, into: uploads, as: name) } catch { throw .storage(error) }
    }

    /// Saves the upload's state durably.
    private func save(_ upload: Upload) throws(Failure) {
        guard let data = try? JSONEncoder().encode(upload) else { throw .storage(StorageError(.failed, "cannot encode the upload's state")) }
        do { try storage.saveState(Array(data), of: upload.id) } catch { throw .storage(error) }
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
