import Synchronization

/// Uploads kept as objects of an S3 bucket (under a prefix), so that several servers share
/// them. The promises are the local folder's:
///
/// - An object appears only when all of it is stored: a small file is one `PUT`, a larger
///   one a multipart upload of `partSize` parts completed at the end. A failed or cut upload
///   aborts its multipart upload and leaves nothing.
/// - A name is never replaced. S3 has no conditional completion of a multipart upload (RGW
///   16.2 ignores `If-None-Match` there), so an upload first claims its name: it creates
///   `.counterpart/names/NAME` with `If-None-Match: *`, which the store decides atomically
///   (one of many racing servers wins), and skips a name whose object exists already. A
///   taken name gets `-1`, `-2`, … as on disk (`StoredNames`).
/// - Durable when answered: the store acknowledges a `PUT` or a completion once it holds
///   the object.
final class S3UploadStore: UploadStorage {
    let client: S3Client
    /// Bytes of one part of a multipart upload (S3's least is 5 MiB but for the last part).
    static let partSize = 8 << 20
    /// What the object store's uploads of this process may hold in memory at once, all
    /// together: an upload that would go past it gets 503.
    let buffers: ByteBudget

    /// Where the claims on names are kept (hidden: names starting with a dot are never
    /// uploads, nor served).
    static let namesPrefix = ".counterpart/names/"

    init(client: S3Client, bufferBudget: Int = 64 << 20) {
        self.client = client
        buffers = ByteBudget(bytes: bufferBudget)
    }

    func makeSink(named name: String) throws(StorageError) -> UploadSink {
        UploadSink(destination: S3ObjectDestination(store: self, name: name)) { _ throws(StorageError) in }
    }

    /// The store acknowledges each object once it holds it: nothing is left to make durable.
    func syncNames() throws(StorageError) {}

    /// An object store says nothing of its free space; a full one refuses the write (507).
    func ensureRoom(for bytes: UInt64) throws(StorageError) {}

    func remove(_ name: String) {
        try? client.deleteObject(name)
        try? client.deleteObject(Self.namesPrefix + name)
    }

    func removeStoredFiles() -> Int {
        var removed = 0
        var token: String?
        repeat {
            guard let page = try? client.listObjects(prefix: "", delimiter: nil, continuationToken: token) else { break }
            for object in page.objects where !object.key.hasPrefix(".") {
                remove(object.key)
                removed += 1
            }
            token = page.nextContinuationToken
        } while token != nil
        return removed
    }

    func importFile(at path: String, as name: String) throws(StorageError) -> String {
        let sink = try makeSink(named: name)
        do throws(StorageError) {
            try StorageError.readFile(path, inPiecesOf: UploadWriter.chunkSize, "read \(path)") { piece throws(StorageError) in
                try sink.write(piece)
            }
            return try sink.commit()
        } catch {
            sink.discard()
            throw error
        }
    }

    /// Claims `name` or the first free variant of it (see the type's comment); the name.
    /// The claims of its variants are listed first, so that a name used a hundred times
    /// costs one listing, not a hundred refused creations.
    func claimName(_ name: String) throws(StorageError) -> String {
        let stem = name.lastIndex(of: ".").map { String(name[..<$0]) } ?? name
        var claimed: Set<String> = []
        var token: String?
        repeat {
            guard let page = try? client.listObjects(prefix: Self.namesPrefix + stem, continuationToken: token) else { break }
            claimed.formUnion(page.objects.map { String($0.key.dropFirst(Self.namesPrefix.count)) })
            token = page.nextContinuationToken
        } while token != nil
        return try StoredNames.first(for: name) { candidate throws(StorageError) in
            if claimed.contains(candidate) { return false }
            do {
                try client.putObject(Self.namesPrefix + candidate, bytes: [], condition: .ifNoneMatch)
            } catch S3Error.preconditionFailed {
                return false
            } catch {
                throw Self.storageError(error, doing: "claim the name \(candidate)")
            }
            // An object put there by another tool, without a claim: the name is taken all the same.
            do {
                return try client.headObject(candidate) == nil
            } catch {
                throw Self.storageError(error, doing: "look up \(candidate)")
            }
        }
    }

    /// Lets go of a claimed name whose upload failed.
    func releaseName(_ name: String) {
        try? client.deleteObject(Self.namesPrefix + name)
    }

    /// The object store's failure as the one a client is told: unreachable or slowing down
    /// is 503, a quota 507, anything else 500.
    static func storageError(_ error: any Error, doing operation: String) -> StorageError {
        let message = "the object store could not \(operation): \(error)"
        switch error as? S3Error {
        case .transport?: return StorageError(.unavailable, message)
        case .status(let status, let code, _)? where status == 503 || code == "SlowDown": return StorageError(.unavailable, message)
        case .status(_, let code, _)? where code == "QuotaExceeded" || code == "EntityTooLarge": return StorageError(.outOfSpace, message)
        default: return StorageError(.failed, message)
        }
    }
}

/// One uploaded file on its way into the object store. Bytes gather in a part buffer; a
/// full part is sent as a part of a multipart upload under the claimed name, from the
/// upload writer's own thread for a large file (the connection's thread reads on). A file
/// that ends within its first part is one conditional `PUT`.
final class S3ObjectDestination: UploadDestination, @unchecked Sendable {
    private let store: S3UploadStore
    private let name: String
    private var client: S3Client { store.client }
    private var buffer: [UInt8] = []
    /// Bytes of the budget this upload holds (its buffer's capacity).
    private var reserved = 0
    private var claimed: String?
    private var multipart: (uploadID: String, parts: [(number: Int, etag: String)])?
    private var ended = false

    init(store: S3UploadStore, name: String) {
        self.store = store
        self.name = name
    }

    deinit { store.buffers.give(reserved) }

    func startWholeChunks() {}

    func store(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        var from = 0
        while from < bytes.count {
            let count = min(bytes.count - from, S3UploadStore.partSize - buffer.count)
            try reserve(buffer.count + count)
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[from..<(from + count)]))
            from += count
            if buffer.count == S3UploadStore.partSize { try sendPart() }
        }
    }

    /// Takes from the shared budget what a buffer of `size` bytes needs (it grows by
    /// doubling, to at most a part).
    private func reserve(_ size: Int) throws(StorageError) {
        guard size > reserved else { return }
        let wanted = min(S3UploadStore.partSize, max(size, reserved * 2, 64 * 1024))
        guard store.buffers.take(wanted - reserved) else {
            throw StorageError(.unavailable, "the server holds as many uploads on their way to the object store as it may (\(store.buffers.total >> 20) MiB): try again")
        }
        reserved = wanted
        buffer.reserveCapacity(wanted)
    }

    private func sendPart() throws(StorageError) {
        let key = try claim()
        do {
            if multipart == nil { multipart = (try client.createMultipartUpload(key, contentType: ContentTypes.forName(key)), []) }
            let number = multipart!.parts.count + 1
            let etag = try buffer.withUnsafeBytes { try client.uploadPart(key, uploadID: multipart!.uploadID, number: number, bytes: $0) }
            multipart!.parts.append((number, etag))
        } catch {
            throw S3UploadStore.storageError(error, doing: "store a part of \(key)")
        }
        buffer.removeAll(keepingCapacity: true)
    }

    private func claim() throws(StorageError) -> String {
        if let claimed { return claimed }
        let key = try store.claimName(name)
        claimed = key
        return key
    }

    func commit() throws(StorageError) -> String {
        let key = try claim()
        do {
            if let multipart {
                var parts = multipart.parts
                if !buffer.isEmpty || parts.isEmpty {
                    let etag = try buffer.withUnsafeBytes { try client.uploadPart(key, uploadID: multipart.uploadID, number: parts.count + 1, bytes: $0) }
                    parts.append((parts.count + 1, etag))
                }
                _ = try client.completeMultipartUpload(key, uploadID: multipart.uploadID, parts: parts)
            } else {
                // The claim makes the name this upload's; the condition still keeps an object
                // another tool put there meanwhile.
                try buffer.withUnsafeBytes { _ = try client.putObject(key, bytes: $0, contentType: ContentTypes.forName(key), condition: .ifNoneMatch) }
            }
        } catch {
            throw S3UploadStore.storageError(error, doing: "store \(key)")
        }
        ended = true
        releaseBuffer()
        return key
    }

    func discard() {
        guard !ended else { return }
        ended = true
        if let claimed, let multipart { try? client.abortMultipartUpload(claimed, uploadID: multipart.uploadID) }
        if let claimed { store.releaseName(claimed) }
        releaseBuffer()
    }

    private func releaseBuffer() {
        buffer = []
        store.buffers.give(reserved)
        reserved = 0
    }
}

/// Bytes that may be held at once, process-wide; taking more than is left fails at once.
final class ByteBudget: Sendable {
    let total: Int
    private let left: Mutex<Int>

    init(bytes: Int) {
        total = bytes
        left = Mutex(bytes)
    }

    func take(_ bytes: Int) -> Bool {
        left.withLock { left in
            guard left >= bytes else { return false }
            left -= bytes
            return true
        }
    }

    func give(_ bytes: Int) {
        left.withLock { $0 += bytes }
    }
}
