/// One request's bytes appended to a resumable upload: written as they arrive, synced
/// before the upload's offset moves, checked against a checksum when the client sent one
/// (a chunk that does not match is cut off again). What happens once the bytes are in —
/// the answer, finishing a complete upload — is the protocol's, given as `conclude`.
final class ResumableAppend: RequestBodyReceiver {
    /// How the bytes went in (a failure is thrown instead).
    enum Outcome {
        /// The bytes are in; the upload as it now stands.
        case appended(ResumableStore.Upload)
        /// The chunk did not match its checksum and was discarded (tus: 460).
        case checksumMismatch(ResumableStore.Upload)
        /// More bytes came than the upload may hold; they were discarded.
        case tooLarge(ResumableStore.Upload, limit: UInt64)
    }

    typealias Conclusion = (Outcome) throws(ResumableStore.Failure) -> (Response, [ReceivedPart])

    private let session: ResumableSession
    private var store: ResumableStore { session.store }
    private let claim: ResumableLocker.Claim
    private var id: String { claim.id }
    private let start: UInt64
    private let limit: UInt64
    private let appender: any ResumableAppender
    private let checksum: (digest: MessageDigest, expected: [UInt8])?
    private let conclude: Conclusion
    /// The request's connection, shut down when a newer request takes the upload over.
    private let connection: WatchedConnection?
    private var written: UInt64 = 0
    /// Of `written`, what is durable already.
    private var committed: UInt64 = 0
    private var discarded: UInt64 = 0
    private var checkedSpaceAt: UInt64 = 0
    private var failure: ResumableStore.Failure?
    private var ended = false
    private(set) var receivedParts: [ReceivedPart] = []

    /// Appends to `upload`, taken for writing by `claim` (let go of when the answer is
    /// made, or when this is dropped), from its durable offset, at most
    /// `limit` bytes; `declared` (the request's `Content-Length`) must fit on the disk.
    init(session: ResumableSession, claim: ResumableLocker.Claim, upload: ResumableStore.Upload, limit: UInt64, declared: UInt64?,
         connection: WatchedConnection?, checksum: (MessageDigest, [UInt8])?, conclude: @escaping Conclusion) throws(ResumableStore.Failure) {
        self.session = session
        self.connection = connection
        self.claim = claim
        start = upload.offset
        self.limit = limit
        self.checksum = checksum.map { ($0.0, $0.1) }
        self.conclude = conclude
        try session.store.ensureRoom(for: min(declared ?? 0, limit))
        appender = try session.store.appender(upload.id, at: upload.offset)
        claim.allowTakeover { [weak self] in self?.yieldToNewer() }
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        // A request whose upload a newer one took over writes nothing more: its connection closes.
        var intake = BodyIntake.close
        do {
            _ = try claim.whileHeld { intake = write(chunk) }
        } catch {
            // The store did not answer for the lease: nothing more is written, and the client
            // gets the store's failure (503) once its body is in.
            if failure == nil { failure = .storage(error) }
            return drain(chunk)
        }
        return intake
    }

    private func write(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        guard failure == nil, written + UInt64(chunk.count) <= limit else { return drain(chunk) }
        do throws(ResumableStore.Failure) {
            if written - checkedSpaceAt >= FreeSpace.checkInterval {
                try store.ensureRoom(for: UInt64(chunk.count))
                checkedSpaceAt = written
            }
            checksum?.digest.update(chunk)
            do { try appender.write(chunk) } catch { throw ResumableStore.Failure.storage(error) }
            written += UInt64(chunk.count)
            // A long request moves the durable offset as it goes, so that a client that
            // loses its connection resumes near where it was — unless a checksum must vouch
            // for the whole chunk first.
            if checksum == nil, written - committed >= Self.commitInterval {
                _ = try store.commitWrite(id, appender, offset: start + written)
                committed = written
            }
        } catch {
            failure = error
        }
        return .consumed
    }

    /// Reads `chunk` and drops it, so that the client gets the answer; a body that goes on
    /// too long is cut.
    private func drain(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        discarded += UInt64(chunk.count)
        return discarded <= session.maxDrainBytes ? .consumed : .close
    }

    /// Bytes between syncs of a long request.
    static let commitInterval: UInt64 = 16 << 20

    func finish() -> Response {
        // The upload stays taken until the answer is made: concluding (storing a complete
        // tus upload, processing a complete IETF one) must not race another append or a cancel.
        defer { claim.release() }
        do throws(ResumableStore.Failure) {
            let held: Bool
            do { held = try claim.endTakeover() } catch { throw .storage(error) }
            guard held else { throw .takenOver }
            let (response, parts) = try conclude(try end(keepingWhatCame: false))
            receivedParts = parts
            return response
        } catch {
            return session.failure(error)
        }
    }

    deinit { claim.release() }

    func abandon() {
        // The client left: what came stays, so that it can resume after it — unless a
        // checksum was to vouch for the chunk, which now cannot be checked.
        if (try? claim.endTakeover()) == true { _ = try? end(keepingWhatCame: true) }
        claim.release()
    }

    /// A newer request takes the upload over: this one stops here and saves what it wrote,
    /// as if its client had left, and its connection is shut down: its client sees it end
    /// at once, and libmicrohttpd ends the request as cut (run under the claim's lock, on
    /// the newer request's thread).
    private func yieldToNewer() {
        _ = try? end(keepingWhatCame: true)
        connection?.shutDown()
    }

    private func end(keepingWhatCame: Bool) throws(ResumableStore.Failure) -> Outcome {
        guard !ended else { throw .storage(StorageError(.failed, "the request ended twice")) }
        ended = true
        if let failure {
            truncate(to: start + committed)
            throw failure
        }
        if discarded > 0 {
            truncate(to: start + committed)
            return .tooLarge(try store.commitWrite(id, appender, offset: start + committed), limit: limit)
        }
        if let checksum, keepingWhatCame || checksum.digest.finish() != checksum.expected {
            truncate(to: start)
            return .checksumMismatch(try store.commitWrite(id, appender, offset: start))
        }
        // A client that left resumes with a HEAD then a PATCH: the offset it reads must come
        // with the upload free to write (otherwise 409/423 by a hair), so the commit lets go
        // of it. A request that goes on to conclude keeps it until it has answered.
        return .appended(try store.commitWrite(id, appender, offset: start + written,
                                               releasing: keepingWhatCame ? claim : nil))
    }

    /// Cuts the data back to `offset` (a rejected chunk).
    private func truncate(to offset: UInt64) {
        appender.truncate(to: offset)
    }
}
