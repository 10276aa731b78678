/// One request's bytes appended to a resumable upload: written as they arrive, synced
/// before the upload's offset moves, checked against a checksum when the client sent one
/// (a chunk that does not match is cut off again). What happens once the bytes are in —
/// the answer, finishing a complete upload — is the protocol's, given as `conclude`.
final class ResumableAppend: RequestBodyReceiver {
    /// How the request ended.
    enum Outcome {
        /// The bytes are in; the upload as it now stands.
        case appended(ResumableStore.Upload)
        /// The chunk did not match its checksum and was discarded (tus: 460).
        case checksumMismatch(ResumableStore.Upload)
        /// More bytes came than the upload may hold; they were discarded (413).
        case tooLarge(ResumableStore.Upload, limit: UInt64)
        /// The bytes since the last sync were dropped.
        case failed(ResumableStore.Failure)
    }

    private let store: ResumableStore
    private let id: String
    private let start: UInt64
    private let limit: UInt64
    private let maxDrainBytes: UInt64
    private let file: OpenFile
    private let checksum: (digest: MessageDigest, expected: [UInt8])?
    private let conclude: (Outcome) -> (Response, [ReceivedPart])
    private var written: UInt64 = 0
    /// Of `written`, what is durable already.
    private var committed: UInt64 = 0
    private var discarded: UInt64 = 0
    private var checkedSpaceAt: UInt64 = 0
    private var failure: ResumableStore.Failure?
    private var ended = false
    private var holdsUpload = true
    private(set) var receivedParts: [ReceivedPart] = []

    /// Appends to `upload` (taken for writing by the caller, who lets go of it if this
    /// throws) from its durable offset, at most `limit` bytes; `declared` (the request's
    /// `Content-Length`) must fit on the disk.
    init(store: ResumableStore, upload: ResumableStore.Upload, limit: UInt64, declared: UInt64?, maxDrainBytes: UInt64,
         checksum: (MessageDigest, [UInt8])?, conclude: @escaping (Outcome) -> (Response, [ReceivedPart])) throws(ResumableStore.Failure) {
        self.store = store
        id = upload.id
        start = upload.offset
        self.limit = limit
        self.maxDrainBytes = maxDrainBytes
        self.checksum = checksum.map { ($0.0, $0.1) }
        self.conclude = conclude
        try store.ensureRoom(for: min(declared ?? 0, limit))
        file = OpenFile(try store.openForAppending(upload.id, at: upload.offset))
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        guard failure == nil, written + UInt64(chunk.count) <= limit else {
            discarded += UInt64(chunk.count)
            return discarded <= maxDrainBytes ? .consumed : .close
        }
        if written - checkedSpaceAt >= FreeSpace.checkInterval {
            do throws(ResumableStore.Failure) {
                try store.ensureRoom(for: UInt64(chunk.count))
                checkedSpaceAt = written
            } catch {
                failure = error
                return .consumed
            }
        }
        checksum?.digest.update(chunk)
        var offset = 0
        while offset < chunk.count {
            let count = Platform.write(file.borrowed, chunk.baseAddress! + offset, chunk.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                let reason = "the server could not store the bytes: \(FileSystem.lastError())"
                failure = errno == ENOSPC || errno == EDQUOT ? .insufficientStorage(reason) : .io(reason)
                return .consumed
            }
            offset += count
        }
        written += UInt64(chunk.count)
        // A long request moves the durable offset as it goes, so that a client that
        // loses its connection resumes near where it was — unless a checksum must vouch
        // for the whole chunk first.
        if checksum == nil, written - committed >= Self.commitInterval {
            do throws(ResumableStore.Failure) {
                _ = try store.commitWrite(id, file: file.borrowed, offset: start + written)
                committed = written
            } catch {
                failure = error
            }
        }
        return .consumed
    }

    /// Bytes between syncs of a long request.
    static let commitInterval: UInt64 = 16 << 20

    func finish() -> Response {
        // The upload stays taken until the answer is made: concluding (storing a complete
        // tus upload, processing a complete IETF one) must not race another append or a cancel.
        defer { letGo() }
        let outcome = end(keepingWhatCame: false)
        let (response, parts) = conclude(outcome)
        receivedParts = parts
        return response
    }

    func abandon() {
        // The client left: what came stays, so that it can resume after it — unless a
        // checksum was to vouch for the chunk, which now cannot be checked.
        _ = end(keepingWhatCame: true)
        letGo()
    }

    /// Lets go of the upload (taken for this request by its caller), once.
    private func letGo() {
        guard holdsUpload else { return }
        holdsUpload = false
        store.endWriting(id)
    }

    private func end(keepingWhatCame: Bool) -> Outcome {
        guard !ended else { return .failed(.io("the request ended twice")) }
        ended = true
        if let failure {
            store.truncate(id, file: file.borrowed, to: start + committed)
            return .failed(failure)
        }
        do throws(ResumableStore.Failure) {
            if discarded > 0 {
                store.truncate(id, file: file.borrowed, to: start + committed)
                return .tooLarge(try store.commitWrite(id, file: file.borrowed, offset: start + committed), limit: limit)
            }
            if let checksum {
                guard !keepingWhatCame, checksum.digest.finish() == checksum.expected else {
                    store.truncate(id, file: file.borrowed, to: start)
                    return .checksumMismatch(try store.commitWrite(id, file: file.borrowed, offset: start))
                }
            }
            // A client that left resumes with a HEAD then a PATCH: the offset it reads must come
            // with the upload free to write (otherwise 409/423 by a hair), so the commit lets go
            // of it. A request that goes on to conclude keeps it until it has answered.
            if keepingWhatCame { holdsUpload = false }
            return .appended(try store.commitWrite(id, file: file.borrowed, offset: start + written, endingWrite: keepingWhatCame))
        } catch {
            return .failed(error)
        }
    }
}
