import Synchronization

/// Who writes to which resumable upload: one request at a time holds an upload's claim,
/// and a newer request may take it over from one gone silent. In the memory of this
/// process (as tusd's memory locker): the uploads of one server.
final class ResumableLocker: Sendable {
    private let holders = Mutex<[String: Claim]>([:])

    /// The right to write to one upload, held by one request at a time until it is given
    /// back (`release`; an append gives it back at the latest when it is dropped).
    ///
    /// While its request reads the body and has received nothing for a second, a newer
    /// request for the upload may take it over (a client whose network changed resumes on a
    /// new connection while the old one has gone silent, without a FIN): the holder's
    /// `yield` runs under the claim's lock — never in the middle of a write — and from then
    /// on the old request writes nothing.
    final class Claim: @unchecked Sendable {
        let id: String
        private let locker: ResumableLocker
        /// Whether the upload was taken over; also the lock `yield` and `lastBytes` are set,
        /// read and run under.
        private let takenOver = Mutex(false)
        private var yield: (() -> Void)?
        /// When the holder last received bytes: only a silent one is taken over, so that two
        /// clients writing at once still see one of them refused (423/409).
        private var lastBytes = ContinuousClock.now

        fileprivate init(_ id: String, _ locker: ResumableLocker) {
            self.id = id
            self.locker = locker
        }

        func release() {
            locker.holders.withLock { all in
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
                guard !takenOver, let yield, ContinuousClock.now - lastBytes >= ResumableLocker.silenceBeforeTakeover else { return false }
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
    func claim(_ id: String, takingOver: Bool = false) -> Claim? {
        let claim = Claim(id, self)
        let holder = holders.withLock { all -> Claim? in
            if let holder = all[id] { return holder }
            all[id] = claim
            return nil
        }
        guard let holder else { return claim }
        guard takingOver, holder.takeOver() else { return nil }
        // The old holder let go as it saved its offset (or is still listed): the upload is this
        // request's, unless a third one got in between.
        return holders.withLock { all -> Claim? in
            guard all[id] == nil || all[id] === holder else { return nil }
            all[id] = claim
            return claim
        }
    }

    /// Before an offset is told (HEAD): a writer gone silent is made to let go and save
    /// what it wrote, so that the offset is where the client resumes. Whether one did (the
    /// upload has then changed).
    @discardableResult
    func takeOverIfSilent(_ id: String) -> Bool {
        guard let holder = holders.withLock({ $0[id] }), holder.takeOver() else { return false }
        holder.release()
        return true
    }

    /// Whether a request is writing to the upload.
    func isHeld(_ id: String) -> Bool {
        holders.withLock { $0[id] != nil }
    }
}
