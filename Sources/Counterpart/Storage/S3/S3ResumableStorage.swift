import Foundation

/// Resumable uploads in the object store, so that any server sharing it takes any request
/// of an upload. As tusd's S3 store lays them out, under `.counterpart/resumable/`:
///
/// - `ID.json`: the upload's state (`ResumableStore`'s);
/// - `ID.parts`: this layer's record: the S3 multipart upload the bytes go into, its parts
///   (each `S3UploadStore.partSize`), and how many bytes wait in `ID.pending`;
/// - `ID.pending`: the bytes past the last whole part (a part must be 5 MiB but the last),
///   so that they are durable in the store, never only in one server's memory;
/// - `ID.data`: the whole upload once complete (the multipart upload completed), to read
///   back or to copy under its name.
///
/// The record is written after the bytes it counts, and the state after the record, so the
/// record never counts bytes the store does not hold and the offset never passes it.
final class S3ResumableStorage: ResumableStorage {
    let client: S3Client
    let uploads: S3UploadStore
    static let prefix = ".counterpart/resumable/"

    let leases: (any ResumableLeases)?

    init(client: S3Client, uploads: S3UploadStore) {
        self.client = client
        self.uploads = uploads
        leases = S3Leases(client: client)
    }

    var isShared: Bool { true }

    /// What `ID.parts` holds.
    struct Record: Codable, Equatable {
        struct Part: Codable, Equatable {
            var number: Int
            var etag: String
            var size: UInt64
        }

        var uploadID: String?
        var parts: [Part] = []
        var pendingSize: UInt64 = 0
        /// Whether the bytes are `ID.data` now (complete): nothing more is appended.
        var sealed = false

        var partsSize: UInt64 { parts.reduce(0) { $0 + $1.size } }
        var durableLength: UInt64 { partsSize + pendingSize }
    }

    static func stateKey(_ id: String) -> String { prefix + id + ".json" }
    static func recordKey(_ id: String) -> String { prefix + id + ".parts" }
    static func pendingKey(_ id: String) -> String { prefix + id + ".pending" }
    static func dataKey(_ id: String) -> String { prefix + id + ".data" }

    // MARK: - State

    func loadStates() -> [String: [UInt8]] {
        var states: [String: [UInt8]] = [:]
        client.forEachObject(prefix: Self.prefix) { object in
            guard object.key.hasSuffix(".json") else { return }
            let id = String(object.key.dropFirst(Self.prefix.count).dropLast(5))
            if let state = try? loadState(of: id) { states[id] = state }
        }
        return states
    }

    func loadState(of id: String) throws(StorageError) -> [UInt8]? {
        try store("read the upload's state") { try client.getObject(Self.stateKey(id)) }
    }

    func saveState(_ state: [UInt8], of id: String) throws(StorageError) {
        try store("save the upload's state") { try client.putObject(Self.stateKey(id), bytes: state) }
    }

    // MARK: - Data

    func ensureRoom(for bytes: UInt64) throws(StorageError) {}

    func createData(of id: String) throws(StorageError) {
        try save(Record(), of: id)
    }

    func durableLength(of id: String) throws(StorageError) -> UInt64? {
        guard let bytes = try storedRecordBytes(of: id) else { return nil }
        return (try? JSONDecoder().decode(Record.self, from: Data(bytes)))?.durableLength
    }

    func appender(of id: String, at offset: UInt64) throws(StorageError) -> any ResumableAppender {
        let record = try record(of: id)
        guard !record.sealed else { throw StorageError(.failed, "the upload is complete: it takes no more bytes") }
        let appender = S3ResumableAppender(storage: self, id: id, record: record)
        // Bytes past the offset were never acknowledged: they go.
        appender.truncate(to: offset)
        if let failure = appender.failure { throw failure }
        return appender
    }

    func readData(of id: String, _ body: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) {
        try seal(id)
        var failure: StorageError?
        do {
            try client.getObject(Self.dataKey(id), range: nil) { piece in
                do throws(StorageError) { try body(piece) } catch { failure = error; throw error }
            }
        } catch {
            throw failure ?? S3UploadStore.storageError(error, doing: "read the upload back")
        }
    }

    func moveData(of id: String, into uploads: any UploadStorage, as name: String) throws(StorageError) -> String {
        try seal(id)
        let stored: String
        if let sameStore = uploads as? S3UploadStore, sameStore === self.uploads {
            // A copy inside the store: the bytes do not travel through this server.
            let claim = try sameStore.claimName(name)
            do {
                try client.copyObject(from: Self.dataKey(id), to: claim.name, condition: .ifNoneMatch)
            } catch {
                sameStore.release(claim, objectMayAppear: S3UploadStore.mayHaveBeenCarriedOut(error))
                throw S3UploadStore.storageError(error, doing: "store \(claim.name)")
            }
            stored = claim.name
        } else {
            let sink = try uploads.makeSink(named: name, likelySize: nil)
            do throws(StorageError) {
                try readData(of: id) { bytes throws(StorageError) in try sink.write(bytes) }
                stored = try sink.commit()
            } catch {
                sink.discard()
                throw error
            }
        }
        removeData(of: id)
        return stored
    }

    func removeData(of id: String) {
        if let record = try? record(of: id), let uploadID = record.uploadID, !record.sealed {
            try? client.abortMultipartUpload(Self.dataKey(id), uploadID: uploadID)
        }
        for key in [Self.dataKey(id), Self.pendingKey(id), Self.recordKey(id)] { try? client.deleteObject(key) }
    }

    func remove(_ id: String) {
        removeData(of: id)
        try? client.deleteObject(Self.stateKey(id))
    }

    // MARK: - The record

    func record(of id: String) throws(StorageError) -> Record {
        guard let bytes = try storedRecordBytes(of: id) else { throw StorageError(.failed, "the upload's data is gone from the object store") }
        guard let record = try? JSONDecoder().decode(Record.self, from: Data(bytes)) else {
            throw StorageError(.failed, "the upload's record in the object store cannot be read")
        }
        return record
    }

    /// `ID.parts` as stored, or nil when there is none.
    private func storedRecordBytes(of id: String) throws(StorageError) -> [UInt8]? {
        try store("read the upload's parts") { try client.getObject(Self.recordKey(id)) }
    }

    func save(_ record: Record, of id: String) throws(StorageError) {
        guard let bytes = try? JSONEncoder().encode(record) else { throw StorageError(.failed, "cannot encode the upload's record") }
        try store("save the upload's parts") { try client.putObject(Self.recordKey(id), bytes: Array(bytes)) }
    }

    /// The bytes waiting in `ID.pending`: the first `size` of it (a save cut short by a
    /// crash may have left more, never counted).
    func pending(of id: String, size: UInt64) throws(StorageError) -> [UInt8] {
        guard size > 0 else { return [] }
        let bytes: [UInt8]?
        do { bytes = try client.getObject(Self.pendingKey(id)) } catch { throw S3UploadStore.storageError(error, doing: "read the upload's last bytes") }
        guard let bytes, UInt64(bytes.count) >= size else { throw StorageError(.failed, "the upload's last bytes are gone from the object store") }
        return Array(bytes.prefix(Int(size)))
    }

    /// The upload is complete: its parts and pending bytes become `ID.data`.
    private func seal(_ id: String) throws(StorageError) {
        var record = try record(of: id)
        guard !record.sealed else { return }
        let tail = try pending(of: id, size: record.pendingSize)
        let key = Self.dataKey(id)
        try store("complete the upload") {
            if let uploadID = record.uploadID {
                var parts = record.parts.map { (number: $0.number, etag: $0.etag) }
                if !tail.isEmpty || parts.isEmpty {
                    let number = (record.parts.last?.number ?? 0) + 1
                    parts.append((number, try tail.withUnsafeBytes { try client.uploadPart(key, uploadID: uploadID, number: number, bytes: $0) }))
                }
                _ = try client.completeMultipartUpload(key, uploadID: uploadID, parts: parts)
            } else {
                try client.putObject(key, bytes: tail)
            }
        }
        record.sealed = true
        try save(record, of: id)
        try? client.deleteObject(Self.pendingKey(id))
    }

    /// Runs one call to the store, its failure as a `StorageError`.
    @discardableResult
    func store<Result>(_ operation: String, _ call: () throws -> Result) throws(StorageError) -> Result {
        do { return try call() } catch { throw S3UploadStore.storageError(error, doing: operation) }
    }
}

/// One request's bytes appended to an upload in the store. Whole parts go as parts of the
/// upload's multipart upload as soon as they fill; `sync` stores what is left in
/// `ID.pending` and then the record that counts it all.
final class S3ResumableAppender: ResumableAppender {
    private let storage: S3ResumableStorage
    private let id: String
    /// As last saved: what is durable.
    private var synced: S3ResumableStorage.Record
    /// Parts sent since, and the bytes past the last part.
    private var parts: [S3ResumableStorage.Record.Part]
    private var tail: [UInt8] = []
    private(set) var failure: StorageError?
    private var client: S3Client { storage.client }

    init(storage: S3ResumableStorage, id: String, record: S3ResumableStorage.Record) {
        self.storage = storage
        self.id = id
        synced = record
        parts = record.parts
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        if let failure { throw failure }
        tail.append(contentsOf: bytes)
        while tail.count >= S3UploadStore.partSize {
            try sendPart(count: S3UploadStore.partSize)
        }
    }

    private func sendPart(count: Int) throws(StorageError) {
        let key = S3ResumableStorage.dataKey(id)
        let number = (parts.last?.number ?? 0) + 1
        do throws(StorageError) {
            if synced.uploadID == nil {
                synced.uploadID = try storage.store("start the upload's parts") { try client.createMultipartUpload(key) }
                // Saved at once: a multipart upload nobody knows of could never be aborted.
                try storage.save(synced, of: id)
            }
            let uploadID = synced.uploadID!
            let etag = try storage.store("store a part of the upload") {
                try tail.withUnsafeBytes { try client.uploadPart(key, uploadID: uploadID, number: number, bytes: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            }
            parts.append(.init(number: number, etag: etag, size: UInt64(count)))
            tail.removeFirst(count)
        } catch {
            failure = error
            throw error
        }
    }

    func sync() throws(StorageError) {
        if let failure { throw failure }
        do throws(StorageError) {
            if !tail.isEmpty {
                try storage.store("store the upload's last bytes") { try client.putObject(S3ResumableStorage.pendingKey(id), bytes: tail) }
            }
            var record = synced
            record.parts = parts
            record.pendingSize = UInt64(tail.count)
            try storage.save(record, of: id)
            synced = record
        } catch {
            failure = error
            throw error
        }
    }

    /// Back to `offset`, which is never before what was last synced: parts sent since are
    /// dropped from the record (their numbers are used again), the bytes past the synced
    /// parts read back from `ID.pending`.
    func truncate(to offset: UInt64) {
        let partsSize = synced.partsSize
        guard offset >= partsSize else {
            failure = StorageError(.failed, "the upload cannot go back to \(offset): \(partsSize) bytes are stored in whole parts")
            return
        }
        parts = synced.parts
        do throws(StorageError) {
            let pending = try storage.pending(of: id, size: synced.pendingSize)
            let kept = Int(min(UInt64(pending.count), offset - partsSize))
            tail = Array(pending.prefix(kept))
            failure = nil
        } catch {
            failure = error
        }
    }
}
