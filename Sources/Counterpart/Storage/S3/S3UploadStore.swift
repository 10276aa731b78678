import Foundation
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

    /// Where a file streamed as one `PUT` waits until it is complete (`StreamedPut`): one
    /// object for each claim, named by its token.
    static let stagingPrefix = ".counterpart/staging/"
    static func stagingKey(for claim: NameClaim) -> String {
        stagingPrefix + claim.token
    }

    /// Removes, in the background, staging objects older than `age` seconds: those of a node
    /// that died between a streamed file's `PUT` and its copy, or whose removal the store did
    /// not answer. A live one lasts seconds. Called when a node starts.
    func removeStaleStagingObjects(olderThan age: TimeInterval = 3600) {
        let thread = Thread { [client] in
            let cutoff = Int64(Date().timeIntervalSince1970 - age)
            client.forEachObject(prefix: Self.stagingPrefix) { object in
                if object.lastModified < cutoff { try? client.deleteObject(object.key) }
            }
        }
        thread.name = "counterpart-s3-staging"
        thread.start()
    }

    /// What failed uploads may have left, cleared in the background.
    let leftovers: S3Leftovers

    init(client: S3Client, bufferBudget: Int = 64 << 20) {
        self.client = client
        buffers = ByteBudget(bytes: bufferBudget)
        leftovers = S3Leftovers(client: client, namesPrefix: Self.namesPrefix)
    }

    func makeSink(named name: String, likelySize: UInt64?) throws(StorageError) -> UploadSink {
        UploadSink(destination: S3ObjectDestination(store: self, name: name, likelySize: likelySize)) { _ throws(StorageError) in }
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
        client.forEachObject(prefix: "") { object in
            guard !object.key.hasPrefix(".") else { return }
            remove(object.key)
            removed += 1
        }
        return removed
    }

    func importFile(at path: String, as name: String) throws(StorageError) -> String {
        var status = stat()
        let sink = try makeSink(named: name, likelySize: stat(path, &status) == 0 ? UInt64(status.st_size) : nil)
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

    /// Claims `name` or the first free variant of it (see the type's comment).
    /// Most names are free: `name` itself is claimed straight away. Only when it is taken
    /// are the claims of its variants listed, so that a name used a hundred times costs one
    /// listing, not a hundred refused creations. A listing that fails is the upload's
    /// failure: a store that does not answer it would not answer the claim either.
    ///
    /// With `checkingObjects`, a name whose object is there without a claim (another tool
    /// put it) is passed over. Without, the caller's own conditional `PUT` finds that out:
    /// a small file's upload is then two requests to the store, not three.
    func claimName(_ name: String, checkingObjects: Bool = true) throws(StorageError) -> NameClaim {
        let token = UUID().uuidString
        if try claim(name, token: token, checkingObject: checkingObjects) { return NameClaim(name: name, token: token) }
        var taken: Set<String> = [name]
        var continuation: String?
        repeat {
            let page: (objects: [S3ObjectInfo], commonPrefixes: [String], nextContinuationToken: String?)
            do {
                page = try client.listObjects(prefix: Self.namesPrefix + SafeFilename.variantPrefix(of: name), continuationToken: continuation)
            } catch {
                throw Self.storageError(error, doing: "look up the names taken like \(name)")
            }
            taken.formUnion(page.objects.map { String($0.key.dropFirst(Self.namesPrefix.count)) })
            continuation = page.nextContinuationToken
        } while continuation != nil
        let claimed = try StoredNames.first(for: name) { candidate throws(StorageError) in
            if taken.contains(candidate) { return false }
            return try claim(candidate, token: token, checkingObject: checkingObjects)
        }
        return NameClaim(name: claimed, token: token)
    }

    /// Whether `candidate` was free and is now this upload's: its claim created (atomically,
    /// `If-None-Match: *`) and, `checkingObject`, no object of that name put there by another
    /// tool, without a claim. A creation the store did not answer may still be carried out:
    /// it is left to `leftovers`.
    private func claim(_ candidate: String, token: String, checkingObject: Bool) throws(StorageError) -> Bool {
        let claim = NameClaim(name: candidate, token: token)
        do {
            try client.putObject(Self.namesPrefix + candidate, bytes: [], metadata: [NameClaim.tokenField: token], condition: .ifNoneMatch)
        } catch S3Error.preconditionFailed {
            return false
        } catch {
            if Self.mayHaveBeenCarriedOut(error) { leftovers.settle(.init(claim, claimMayAppear: true)) }
            throw Self.storageError(error, doing: "claim the name \(candidate)")
        }
        guard checkingObject else { return true }
        do {
            // An object there without a claim keeps it: the name stays taken in the listings.
            return try client.headObject(candidate) == nil
        } catch {
            release(claim)
            throw Self.storageError(error, doing: "look up \(candidate)")
        }
    }

    /// Lets go of the name of an upload that failed; with what its writes may have left, when
    /// the store did not answer them, cleared in the background (`S3Leftovers`).
    func release(_ claim: NameClaim, objectMayAppear: Bool = false, multipartMayAppear: Bool = false, stagedMayAppear: Bool = false) {
        if !objectMayAppear && !multipartMayAppear && !stagedMayAppear,
           (try? client.deleteObject(Self.namesPrefix + claim.name)) != nil { return }
        leftovers.settle(.init(claim, objectMayAppear: objectMayAppear, multipartMayAppear: multipartMayAppear,
                               stagedMayAppear: stagedMayAppear))
    }

    /// Whether a request that failed may still take effect: the store did not answer it.
    static func mayHaveBeenCarriedOut(_ error: any Error) -> Bool {
        if case .transport? = error as? S3Error { return true }
        return false
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
/// full part is sent as a part of a multipart upload under the claimed name, on a thread of
/// its own, while the next part fills: receiving and sending overlap, as they do between
/// curl and the store when a file is put straight into it. A file that ends within its first
/// part is one conditional `PUT`.
///
/// A large file whose size the request tells in advance (`likelySize`: the last part of a
/// body with a `Content-Length`, as curl and browsers send a file) is streamed instead, as
/// one `PUT` into a staging object, and copied under its name once complete (a copy inside
/// the store, which RGW makes without moving the data). One request instead of a part every
/// 8 MiB is what the store takes fastest, through a pipe of `pipeBytes`. The size is only a
/// guess. A file that turns out longer continues as a multipart upload whose first part is
/// a copy of the staged object. One that turns out shorter (another part after it, or an
/// epilogue) ends its `PUT` padded with zeros as soon as its last byte is in (`endOfBytes`),
/// and its start is read back and put under its name at `commit`.
///
/// Memory: the budget is taken as the part filling grows (doubling, up to `partSize`), so a
/// small file holds little. Each part on its way holds a buffer of its own; those come from
/// the shared budget only while it is more than half free, so that busy uploads never crowd
/// out new ones: short of one, an upload waits for its oldest part and reuses its buffer.
final class S3ObjectDestination: UploadDestination, @unchecked Sendable {
    /// Parts on their way at once, at most (the budget permitting). Two overlap receiving and
    /// sending; more sent faster on this project's two-core machine, but held more memory
    /// than a node may during a 1 GiB upload (see the README's figures).
    static let partsInFlight = 2
    /// S3's most parts in one multipart upload: a file is at most this many parts.
    static let mostParts = 10_000
    /// Files likely this large, and no larger than S3's largest `PUT`, are streamed.
    static let streamed: ClosedRange<UInt64> = 2 * UInt64(S3UploadStore.partSize)...(5 << 30)
    /// The pipe of a streamed file.
    static let pipeBytes = 8 << 20

    private let store: S3UploadStore
    private let name: String
    private let likelySize: UInt64?
    private var client: S3Client { store.client }
    /// The file on its way as one `PUT` to its staging object, while within its likely size.
    private var streaming: StreamedPut?
    /// The staging object of a streamed file, until it is copied and removed.
    private var staged: String?
    private var stagedMayAppear = false
    /// The file's size once its staging object is complete, and whether that object holds
    /// more (the file ended short of its likely size, and the `PUT` was filled with zeros).
    private var stagedFile: (size: UInt64, padded: Bool)?
    /// The part filling; nil before the first byte and once ended.
    private var buffer: PartBuffer?
    /// Bytes of the budget the filling buffer holds, and all of them together.
    private var bufferReserved = 0
    private var reserved = 0
    /// Buffers of parts sent, for the next parts.
    private var spares: [PartBuffer] = []
    private var claimed: NameClaim?
    private var uploadID: String?
    /// Writes the store did not answer, which may yet create a multipart upload or the object.
    private var multipartMayAppear = false
    private var objectMayAppear = false
    /// Parts sent, in order, and parts on their way, oldest first.
    private var parts: [(number: Int, etag: String)] = []
    private var inFlight: [PartInFlight] = []
    private var ended = false

    init(store: S3UploadStore, name: String, likelySize: UInt64?) {
        self.store = store
        self.name = name
        self.likelySize = likelySize
    }

    deinit {
        streaming?.cancel()
        for part in inFlight { _ = part.wait() }
        store.buffers.give(reserved)
    }

    func startWholeChunks() {}

    func store(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        if offset == 0, staged == nil, let likelySize, Self.streamed.contains(likelySize) { try startStreaming(likelySize) }
        var from = 0
        if let streaming {
            from = Int(min(UInt64(bytes.count), streaming.size - streaming.written))
            do {
                try streaming.write(UnsafeRawBufferPointer(rebasing: bytes[..<from]))
            } catch {
                try stopStreaming(failedWith: error)
            }
            guard from < bytes.count else { return }
            try continueAsMultipart()
        }
        while from < bytes.count {
            let filling = try fillingBuffer()
            let count = min(bytes.count - from, S3UploadStore.partSize - filling.count)
            try reserve(filling.count + count)
            filling.append(UnsafeRawBufferPointer(rebasing: bytes[from..<(from + count)]))
            from += count
            if filling.count == S3UploadStore.partSize { try sendPart() }
        }
    }

    private func fillingBuffer() throws(StorageError) -> PartBuffer {
        if let buffer { return buffer }
        guard let made = PartBuffer(capacity: S3UploadStore.partSize) else {
            throw StorageError(.unavailable, "the server could not map memory for a part of \(name): try again")
        }
        buffer = made
        return made
    }

    /// Takes from the shared budget what the filling buffer needs to hold `size` bytes (in
    /// doubling steps, to at most a part).
    private func reserve(_ size: Int) throws(StorageError) {
        guard size > bufferReserved else { return }
        let wanted = min(S3UploadStore.partSize, max(size, bufferReserved * 2, 64 * 1024))
        guard store.buffers.take(wanted - bufferReserved) else {
            throw StorageError(.unavailable, "the server holds as many uploads on their way to the object store as it may (\(store.buffers.total >> 20) MiB): try again")
        }
        reserved += wanted - bufferReserved
        bufferReserved = wanted
    }

    /// Starts the `PUT` of a file likely `size` bytes long to its staging object, unless the
    /// budget is more than half taken: busy, the file goes in parts.
    private func startStreaming(_ size: UInt64) throws(StorageError) {
        guard store.buffers.take(Self.pipeBytes, leaving: store.buffers.total / 2) else { return }
        reserved += Self.pipeBytes
        guard let pipe = BytePipe(capacity: Self.pipeBytes) else { return }
        let key = try claim()
        let staging = S3UploadStore.stagingKey(for: claimed!)
        streaming = StreamedPut(client: client, key: staging, size: size, contentType: ContentTypes.forName(key), pipe: pipe)
        staged = staging
    }

    /// The file has ended: a streamed file's `PUT` ends now, filled with zeros if the file is
    /// short of its likely size, rather than stay open while the rest of the body comes.
    func endOfBytes() throws(StorageError) {
        guard let streaming else { return }
        let size = streaming.written
        let padded = size < streaming.size
        try finishStreaming(padding: padded)
        stagedFile = (size, padded)
    }

    /// Ends the `PUT` of a streamed file (its rest zeros when `padding`): its staging object
    /// is then complete.
    private func finishStreaming(padding: Bool) throws(StorageError) {
        guard let streaming else { return }
        do {
            _ = try streaming.finish(padding: padding)
            self.streaming = nil
        } catch {
            try stopStreaming(failedWith: error)
        }
    }

    private func stopStreaming(failedWith error: any Error) throws(StorageError) -> Never {
        streaming?.cancel()
        streaming = nil
        stagedMayAppear = S3UploadStore.mayHaveBeenCarriedOut(error)
        throw S3UploadStore.storageError(error, doing: "store \(claimed?.name ?? name)")
    }

    /// The file is longer than it was likely to be: its staged start becomes the first part
    /// of a multipart upload, copied inside the store, and the rest goes in parts.
    private func continueAsMultipart() throws(StorageError) {
        try finishStreaming(padding: false)
        let key = try claim()
        let uploadID = try startMultipartUpload(key)
        do {
            parts.append((1, try client.uploadPartCopy(key, uploadID: uploadID, number: 1, from: staged!)))
        } catch {
            throw S3UploadStore.storageError(error, doing: "copy the start of \(key) into its first part")
        }
    }

    /// Sends the full buffer as the next part, on its way while the next one fills.
    private func sendPart() throws(StorageError) {
        guard let full = buffer else { return }
        let key = try claim()
        let uploadID = try startMultipartUpload(key)
        if inFlight.count == Self.partsInFlight { try collectOldestPart() }
        let number = try nextPartNumber(of: key)
        inFlight.append(PartInFlight(number: number, buffer: full) { [client] bytes in
            try client.uploadPart(key, uploadID: uploadID, number: number, bytes: bytes)
        })
        buffer = try emptyBuffer()
    }

    private func nextPartNumber(of key: String) throws(StorageError) -> Int {
        let number = parts.count + inFlight.count + 1
        guard number <= Self.mostParts else {
            throw StorageError(.outOfSpace, "a file in the object store is at most \(Self.mostParts) parts of \(S3UploadStore.partSize >> 20) MiB (\(Self.mostParts * (S3UploadStore.partSize >> 20) >> 10) GiB): \(key) is larger")
        }
        return number
    }

    private func startMultipartUpload(_ key: String) throws(StorageError) -> String {
        if let uploadID { return uploadID }
        do {
            let started = try client.createMultipartUpload(key, contentType: ContentTypes.forName(key))
            uploadID = started
            return started
        } catch {
            multipartMayAppear = S3UploadStore.mayHaveBeenCarriedOut(error)
            throw S3UploadStore.storageError(error, doing: "start the upload of \(key)")
        }
    }

    /// A buffer for the next part: one a sent part left, a new one while the budget is more
    /// than half free, or else the oldest part's once it is sent.
    private func emptyBuffer() throws(StorageError) -> PartBuffer {
        if spares.isEmpty {
            if store.buffers.take(S3UploadStore.partSize, leaving: store.buffers.total / 2),
               let fresh = PartBuffer(capacity: S3UploadStore.partSize) {
                reserved += S3UploadStore.partSize
                spares.append(fresh)
            } else {
                try collectOldestPart()
            }
        }
        bufferReserved = S3UploadStore.partSize
        let next = spares.removeLast()
        next.empty()
        return next
    }

    /// Waits for the oldest part on its way; keeps its ETag and its buffer.
    private func collectOldestPart() throws(StorageError) {
        let part = inFlight.removeFirst()
        let outcome = part.wait()
        spares.append(part.buffer)
        do {
            parts.append((part.number, try outcome.get()))
        } catch {
            throw S3UploadStore.storageError(error, doing: "store part \(part.number) of \(claimed?.name ?? name)")
        }
    }

    /// The name claimed for the object; claimed now if it was not, `checkingObjects` as
    /// `claimName` says.
    private func claim(checkingObjects: Bool = true) throws(StorageError) -> String {
        if let claimed { return claimed.name }
        let claim = try store.claimName(name, checkingObjects: checkingObjects)
        claimed = claim
        return claim.name
    }

    func commit() throws(StorageError) -> String {
        try endOfBytes()
        if let stagedFile, uploadID == nil {
            let key = try claim()
            if stagedFile.padded {
                try putStartOfStaged(stagedFile.size, as: key)
            } else {
                do {
                    try client.copyObject(from: staged!, to: key)
                } catch {
                    objectMayAppear = S3UploadStore.mayHaveBeenCarriedOut(error)
                    throw S3UploadStore.storageError(error, doing: "store \(key)")
                }
            }
            return ended(storing: key)
        }
        // A file within one part is one conditional PUT, which itself refuses a name whose
        // object is there without a claim: the claim need not look first.
        var key = try claim(checkingObjects: uploadID != nil)
        let last = buffer?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)
        if let uploadID {
            while !inFlight.isEmpty { try collectOldestPart() }
            if !last.isEmpty {
                let number = try nextPartNumber(of: key)
                do {
                    parts.append((number, try client.uploadPart(key, uploadID: uploadID, number: number, bytes: last)))
                } catch {
                    throw S3UploadStore.storageError(error, doing: "store part \(number) of \(key)")
                }
            }
            do {
                _ = try client.completeMultipartUpload(key, uploadID: uploadID, parts: parts)
            } catch {
                objectMayAppear = S3UploadStore.mayHaveBeenCarriedOut(error)
                throw S3UploadStore.storageError(error, doing: "complete \(key)")
            }
        } else {
            // The claim makes the name this upload's; the condition keeps an object another
            // tool put there, before or since. Such a name keeps the claim (it stays taken in
            // the listings) and the file goes under the next one, claimed as a multipart
            // upload's are: looking at the objects first.
            if try !putWhole(last, as: key) {
                claimed = nil
                key = try claim()
                guard try putWhole(last, as: key) else {
                    throw StorageError(.failed, "the object store could not store \(key): another tool's object took the name meanwhile")
                }
            }
        }
        return ended(storing: key)
    }

    /// The file is stored under `key`: what is left of it goes.
    private func ended(storing key: String) -> String {
        ended = true
        removeStaged()
        releaseBuffers()
        return key
    }

    /// The first `size` bytes of the padded staging object as the object `key`: read back
    /// and put again through this server, since the store cannot copy a range for us (see
    /// `S3Client.uploadPartCopy`).
    private func putStartOfStaged(_ size: UInt64, as key: String) throws(StorageError) {
        guard let pipe = BytePipe(capacity: Self.pipeBytes) else {
            throw StorageError(.unavailable, "the server could not map memory to store \(key): try again")
        }
        let copy = StreamedPut(client: client, key: key, size: size, contentType: ContentTypes.forName(key), pipe: pipe)
        do {
            if size > 0 {
                try client.getObject(staged!, range: 0...Int64(size - 1)) { piece in try copy.write(piece) }
            }
            _ = try copy.finish()
        } catch {
            copy.cancel()
            objectMayAppear = S3UploadStore.mayHaveBeenCarriedOut(error)
            throw S3UploadStore.storageError(error, doing: "store \(key)")
        }
    }

    /// Removes the staging object of a stored file. Should the store not answer, it stays, a
    /// hidden object with nothing of the file's name: `S3Leftovers` is not given it, since it
    /// would free the name with it.
    private func removeStaged() {
        guard let staging = staged else { return }
        staged = nil
        try? client.deleteObject(staging)
    }

    /// Puts a file within one part as the object `key`, if no object has that name: false
    /// when one has (the store answered 412).
    private func putWhole(_ bytes: UnsafeRawBufferPointer, as key: String) throws(StorageError) -> Bool {
        do {
            _ = try client.putObject(key, bytes: bytes, contentType: ContentTypes.forName(key), condition: .ifNoneMatch)
            return true
        } catch S3Error.preconditionFailed {
            return false
        } catch {
            objectMayAppear = S3UploadStore.mayHaveBeenCarriedOut(error)
            throw S3UploadStore.storageError(error, doing: "store \(key)")
        }
    }

    func discard() {
        guard !ended else { return }
        ended = true
        // Parts still on their way end first: an abort before them would leave them stored.
        for part in inFlight { _ = part.wait() }
        inFlight = []
        streaming?.cancel()
        streaming = nil
        if let staging = staged, (try? client.deleteObject(staging)) == nil { stagedMayAppear = true }
        staged = nil
        if let claimed {
            if let uploadID, (try? client.abortMultipartUpload(claimed.name, uploadID: uploadID)) == nil { multipartMayAppear = true }
            store.release(claimed, objectMayAppear: objectMayAppear, multipartMayAppear: multipartMayAppear,
                          stagedMayAppear: stagedMayAppear)
        }
        releaseBuffers()
    }

    private func releaseBuffers() {
        buffer = nil
        spares = []
        store.buffers.give(reserved)
        reserved = 0
        bufferReserved = 0
    }
}

/// A part's bytes, in memory mapped for it alone, so that it goes back to the system whole
/// when released: malloc keeps buffers this large in the process's heap once the first is
/// freed, and a node's memory crept up from upload to upload. The last few mappings let go
/// of wait in `PartMemory` for the next buffer of their size.
final class PartBuffer: @unchecked Sendable {
    let capacity: Int
    private let base: UnsafeMutableRawPointer
    private let memory: PartMemory
    private(set) var count = 0

    init?(capacity: Int, memory: PartMemory = .shared) {
        guard let mapped = memory.take(capacity) else { return nil }
        self.capacity = capacity
        self.memory = memory
        base = mapped
    }

    deinit { memory.give(base, capacity: capacity) }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
    /// The start of the memory, for a reader on another thread while this one appends: it
    /// reads up to a count it was told under a lock, not `count` or `bytes`, which move.
    var baseAddress: UnsafeRawPointer { UnsafeRawPointer(base) }

    func append(_ more: UnsafeRawBufferPointer) {
        precondition(count + more.count <= capacity, "a part buffer overfilled")
        guard let from = more.baseAddress else { return }
        (base + count).copyMemory(from: from, byteCount: more.count)
        count += more.count
    }

    func empty() { count = 0 }
}

/// One part of a multipart upload being sent on a thread of its own; its buffer is not
/// touched until `wait()` returns.
private final class PartInFlight: @unchecked Sendable {
    let number: Int
    let buffer: PartBuffer
    private var outcome: Result<String, any Error> = .failure(CancellationError())
    private let sent = DispatchSemaphore(value: 0)
    private var waited = false

    init(number: Int, buffer: PartBuffer, send: @escaping @Sendable (UnsafeRawBufferPointer) throws -> String) {
        self.number = number
        self.buffer = buffer
        let thread = Thread { [self] in
            outcome = Result { try send(buffer.bytes) }
            sent.signal()
        }
        thread.name = "counterpart-s3-part"
        thread.start()
    }

    /// Waits until the part is sent or failed (at once when waited for before): its ETag.
    func wait() -> Result<String, any Error> {
        if !waited {
            sent.wait()
            waited = true
        }
        return outcome
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

    /// Takes `bytes` if at least `leaving` would be left; false (and takes nothing) if not.
    func take(_ bytes: Int, leaving: Int = 0) -> Bool {
        left.withLock { left in
            guard left - bytes >= leaving else { return false }
            left -= bytes
            return true
        }
    }

    func give(_ bytes: Int) {
        left.withLock { $0 += bytes }
    }
}

/// The mappings of buffers let go of, kept for the next buffer of the same size. A fresh
/// mapping costs a page fault and a zeroed page for each 4 KiB written into it, and unmapping
/// it a TLB flush on each core. A node answering 1 MiB Range GETs from the store mapped a
/// window for each, and keeping them took a third off its CPU for those GETs. The most recently
/// released are kept, to at most `idleBytes` in all: what an idle node may hold the more
/// (outside the uploads' budget, which counts buffers in use).
final class PartMemory: Sendable {
    /// A part, or the two windows of a download.
    static let shared = PartMemory(idleBytes: max(S3UploadStore.partSize, 2 * StoredObjectSource.window))
    let idleBytes: Int
    /// Addresses and sizes, the most recently released last.
    private let idle = Mutex<[(address: UInt, capacity: Int)]>([])

    init(idleBytes: Int) { self.idleBytes = idleBytes }

    deinit {
        for mapping in idle.withLock({ $0 }) { munmap(UnsafeMutableRawPointer(bitPattern: mapping.address), mapping.capacity) }
    }

    /// A kept mapping of `capacity` bytes (the last released), else a new one; nil when the
    /// system has no memory to map.
    func take(_ capacity: Int) -> UnsafeMutableRawPointer? {
        let kept: UInt? = idle.withLock { idle in
            guard let index = idle.lastIndex(where: { $0.capacity == capacity }) else { return nil }
            return idle.remove(at: index).address
        }
        if let kept { return UnsafeMutableRawPointer(bitPattern: kept) }
        guard let mapped = mmap(nil, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              mapped != MAP_FAILED else { return nil }
        return mapped
    }

    /// Keeps the mapping, and unmaps the oldest kept ones past `idleBytes`.
    func give(_ base: UnsafeMutableRawPointer, capacity: Int) {
        let evicted: [(address: UInt, capacity: Int)] = idle.withLock { idle in
            idle.append((UInt(bitPattern: base), capacity))
            var held = idle.reduce(0) { $0 + $1.capacity }
            var count = 0
            while held > idleBytes {
                held -= idle[count].capacity
                count += 1
            }
            let evicted = Array(idle.prefix(count))
            idle.removeFirst(count)
            return evicted
        }
        for mapping in evicted { munmap(UnsafeMutableRawPointer(bitPattern: mapping.address), mapping.capacity) }
    }

    /// The bytes kept, and where.
    var kept: (bytes: Int, addresses: Set<UInt>) {
        idle.withLock { idle in (idle.reduce(0) { $0 + $1.capacity }, Set(idle.map(\.address))) }
    }
}
