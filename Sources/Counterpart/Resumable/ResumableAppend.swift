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
        /// More bytes came than the upload may hold; they were discarded.
        case tooLarge(ResumableStore.Upload, limit: UInt64)
        /// The bytes since the last sync were dropped.
        case failed(ResumableStore.Failure)
    }

    private let store: ResumableStore
    private let claim: ResumableStore.WriteClaim
    private var id: String { claim.id }
    private let start: UInt64
    private let limit: UInt64
    private let maxDrainBytes: UInt64
    private let file: OpenFile
    private let checksum: (digest: MessageDigest, expected: [UInt8])?
    private let conclude: (Outcome) -> (Response, [ReceivedPart])
    /// The request's connection, shut down when a newer request takes the upload over.
    private let connection = WatchedConnection.current
    private var written: UInt64 = 0
    /// Of `written`, what is durable already.
    private var committed: UInt64 = 0
    private var discarded: UInt64 = 0
    private var checkedSpaceAt: UInt64 = 0
    private var failure: ResumableStore.Failure?
    private var ended = false
    private(set) var receivedParts: [ReceivedPart] = []

    /// Appends to `upload`, taken for writing by `claim` (let go of when the answer is
    /// made, or when this is dropped or fails to begin), from its durable offset, at most
    /// `limit` bytes; `declared` (the request's `Content-Length`) must fit on the disk.
    init(store: ResumableStore, claim: ResumableStore.WriteClaim, upload: ResumableStore.Upload, limit: UInt64, declared: UInt64?,
         maxDrainBytes: UInt64, checksum: (MessageDigest, [UInt8])?,
         conclude: @escaping (Outcome) -> (Response, [ReceivedPart])) throws(ResumableStore.Failure) {
        self.store = store
        self.claim = claim
        start = upload.offset
        self.limit = limit
        self.maxDrainBytes = maxDrainBytes
        self.checksum = checksum.map { ($0.0, $0.1) }
        self.conclude = conclude
        try store.ensureRoom(for: min(declared ?? 0, limit))
        file = OpenFile(try store.openForAppending(upload.id, at: upload.offset))
        claim.allowTakeover { [weak self] in self?.yieldToNewer() }
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        // A request whose upload a newer one took over writes nothing more: its connection closes.
        var intake = BodyIntake.close
        _ = claim.whileHeld { intake = write(chunk) }
        return intake
    }

    private func write(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
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
        do throws(ResumableStore.Failure) {
            try ResumableStore.writeAll(file.borrowed, chunk)
        } catch {
            failure = error
            return .consumed
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
        defer { claim.release() }
        guard claim.endTakeover() else { return conclude(.failed(.takenOver)).0 }
        let outcome = end(keepingWhatCame: false)
        let (response, parts) = conclude(outcome)
        receivedParts = parts
        return response
    }

    func abandon() {
        // The client left: what came stays, so that it can resume after it — unless a
        // checksum was to vouch for the chunk, which now cannot be checked.
        if claim.endTakeover() { _ = end(keepingWhatCame: true) }
        claim.release()
    }

    /// A newer request takes the upload over: this one stops here and saves what it wrote,
    /// as if its client had left, and its connection is shut down: its client sees it end
    /// at once, and libmicrohttpd ends the request as cut (run under the claim's lock, on
    /// the newer request's thread).
    private func yieldToNewer() {
        _ = end(keepingWhatCame: true)
        connection?.shutDown()
    }

    private func end(keepingWhatCame: Bool) -> Outcome {
        guard !ended else { return .failed(.io("the request ended twice")) }
        ended = true
        if let failure {
            ResumableStore.truncate(file.borrowed, to: start + committed)
            return .failed(failure)
        }
        do throws(ResumableStore.Failure) {
            if discarded > 0 {
                ResumableStore.truncate(file.borrowed, to: start + committed)
                return .tooLarge(try store.commitWrite(id, file: file.borrowed, offset: start + committed), limit: limit)
            }
            if let checksum {
                guard !keepingWhatCame, checksum.digest.finish() == checksum.expected else {
                    ResumableStore.truncate(file.borrowed, to: start)
                    return .checksumMismatch(try store.commitWrite(id, file: file.borrowed, offset: start))
                }
            }
            // A client that left resumes with a HEAD then a PATCH: the offset it reads must come
            // with the upload free to write (otherwise 409/423 by a hair), so the commit lets go
            // of it. A request that goes on to conclude keeps it until it has answered.
            return .appended(try store.commitWrite(id, file: file.borrowed, offset: start + written,
                                                   releasing: keepingWhatCame ? claim : nil))
        } catch {
            return .failed(error)
        }
    }
}
