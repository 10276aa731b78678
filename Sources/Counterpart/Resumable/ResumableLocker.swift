import Foundation
import Synchronization

/// Who writes to which resumable upload: one request at a time holds an upload's claim,
/// and a newer request may take it over from one gone silent. The claims of this process
/// are kept in its memory (as tusd's memory locker); servers that share an object store
/// also take a lease on the upload in the store (`ResumableLeases`), so that one request of
/// all of them writes.
final class ResumableLocker: Sendable {
    private let holders = Mutex<[String: Claim]>([:])
    let leases: (any ResumableLeases)?
    /// This process, as the leases name their holders.
    let node = UUID().uuidString.lowercased()
    private let claims = AtomicCounter()

    init(leases: (any ResumableLeases)? = nil) {
        self.leases = leases
    }

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
        /// This claim, as its lease names its holder.
        let owner: String
        private let locker: ResumableLocker
        /// The lease in the store while held (its version, to renew it), and when it was last
        /// renewed; a lock of its own, since a release may come while `takenOver` is held.
        fileprivate let lease = Mutex<(version: String?, renewed: ContinuousClock.Instant)>((nil, .now))
        /// Whether the upload was taken over; also the lock `yield` and `lastBytes` are set,
        /// read and run under.
        private let takenOver = Mutex(false)
        private var yield: (() -> Void)?
        /// When the holder last received bytes: only a silent one is taken over, so that two
        /// clients writing at once still see one of them refused (423/409).
        private var lastBytes = ContinuousClock.now
        /// Set once the holder stops taking bytes to save and let go: a request that finds
        /// the upload so held waits for it (`claim`) instead of being refused.
        private let concluding = Atomic(false)

        fileprivate var isConcluding: Bool { concluding.load(ordering: .acquiring) }

        fileprivate init(_ id: String, _ locker: ResumableLocker) {
            self.id = id
            self.locker = locker
            owner = locker.node + "/" + String(locker.claims.next())
        }

        func release() {
            concluding.store(true, ordering: .releasing)
            let version = lease.withLock { lease in
                defer { lease.version = nil }
                return lease.version
            }
            // The lease in the store goes first: a request of this process waiting for the
            // upload then finds it free in the store too.
            let held = locker.holders.withLock { $0[id] === self }
            if held, let leases = locker.leases, let version { leases.release(id, owner: owner, version: version) }
            locker.holders.withLock { all in
                if all[id] === self { all[id] = nil }
            }
        }

        /// Renews the lease in the store, saying whether a newer request may take the upload
        /// over from now on; false when another server took it (this request then writes
        /// nothing more). Throws when the store did not answer: whether the lease is still
        /// this request's is then unknown, so it is not renewed again and the request must
        /// write nothing more either. Run under `takenOver`'s lock.
        private func renewLease(allowingTakeover: Bool, now: ContinuousClock.Instant) throws(StorageError) -> Bool {
            guard let leases = locker.leases else { return true }
            return try lease.withLock { lease throws(StorageError) -> Bool in
                guard let version = lease.version else { return true }
                let renewed: String?
                do throws(StorageError) {
                    renewed = try leases.renew(id, owner: owner, version: version, allowingTakeover: allowingTakeover)
                } catch {
                    lease.version = nil
                    throw error
                }
                guard let renewed else {
                    lease.version = nil
                    return false
                }
                lease = (renewed, now)
                return true
            }
        }

        /// Whether the lease is due for renewal.
        private func leaseIsDue(_ now: ContinuousClock.Instant) -> Bool {
            lease.withLock { $0.version != nil && now - $0.renewed >= ResumableLocker.leaseRenewal }
        }

        /// From now until `endTakeover`, a newer request may take the upload over; `yield`
        /// stops this request's writing first.
        func allowTakeover(_ yield: @escaping () -> Void) {
            takenOver.withLock { _ in
                self.yield = yield
                lastBytes = .now
            }
        }

        /// Closes the window of `allowTakeover`: false when the upload was taken over (here,
        /// or by another server: the lease is renewed first, which fences this request's
        /// last save against a newer holder's). Throws when the store did not answer the renewal.
        func endTakeover() throws(StorageError) -> Bool {
            concluding.store(true, ordering: .releasing)
            return try takenOver.withLock { takenOver throws(StorageError) -> Bool in
                yield = nil
                if !takenOver, !(try renewLease(allowingTakeover: false, now: .now)) { takenOver = true }
                return !takenOver
            }
        }

        /// Runs `write` unless the upload was taken over (false then), never while a takeover runs.
        /// The lease is renewed every `leaseRenewal` while bytes come; throws, without writing,
        /// when the store did not answer the renewal.
        func whileHeld(_ write: () -> Void) throws(StorageError) -> Bool {
            try takenOver.withLock { takenOver throws(StorageError) -> Bool in
                guard !takenOver else { return false }
                let now = ContinuousClock.now
                if leaseIsDue(now), !(try renewLease(allowingTakeover: true, now: now)) {
                    takenOver = true
                    return false
                }
                write()
                lastBytes = now
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
    /// How often a writer renews its lease while bytes come: well within the silence, so
    /// that a lease renewed before a save outlasts the save.
    static let leaseRenewal = Duration.milliseconds(250)
    /// How long a request waits for a holder of this process that is saving and letting go
    /// (a client that resumes the moment its connection broke finds the old request saving
    /// what came): a save is a sync or a round trip to the store, well within this.
    static let concludingWait = Duration.seconds(2)

    /// Takes the upload for writing; nil when another request is writing to it and, with
    /// `takingOver`, will not let go (it is concluding, or not reading a body). Throws when
    /// the store did not answer for the lease.
    func claim(_ id: String, takingOver: Bool = false) throws(StorageError) -> Claim? {
        guard let claim = claimHereOnceConcluded(id, takingOver: takingOver) else { return nil }
        guard let leases else { return claim }
        // Then across servers: the lease in the store, fresh or taken over from a holder gone
        // silent (or dead).
        let lease: String?
        do {
            lease = try leases.acquire(id, owner: claim.owner, takingOver: takingOver)
        } catch {
            claim.release()
            throw error
        }
        guard let lease else {
            claim.release()
            return nil
        }
        claim.lease.withLock { $0 = (lease, .now) }
        return claim
    }

    /// The claim among this process's requests, once a holder that is concluding has let go
    /// (waiting `concludingWait` at most).
    private func claimHereOnceConcluded(_ id: String, takingOver: Bool) -> Claim? {
        let deadline = ContinuousClock.now + Self.concludingWait
        while true {
            if let claim = claimHere(id, takingOver: takingOver) { return claim }
            guard holders.withLock({ $0[id]?.isConcluding }) == true, ContinuousClock.now < deadline else { return nil }
            Thread.sleep(forTimeInterval: 0.002)
        }
    }

    /// The claim among this process's requests.
    private func claimHere(_ id: String, takingOver: Bool) -> Claim? {
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

/// Leases on resumable uploads kept in a store that several servers share: what makes one
/// request of all of them the writer of an upload. A lease names its holder and when it last
/// received bytes; it is taken over when that holder has been silent for
/// `ResumableLocker.silenceBeforeTakeover` while reading a body, or has renewed nothing for
/// `leaseTimeout` (a server that died).
protocol ResumableLeases: Sendable {
    /// Takes the lease of `id` for `owner`; its version, or nil when another holder keeps it.
    /// Throws when the store does not answer (not the same as a lease held: 503, not 423/409).
    func acquire(_ id: String, owner: String, takingOver: Bool) throws(StorageError) -> String?
    /// Renews `owner`'s lease at `version`; the new version, or nil when it was taken. Throws
    /// when the store does not answer.
    func renew(_ id: String, owner: String, version: String, allowingTakeover: Bool) throws(StorageError) -> String?
    /// Gives the lease back, if it is still `owner`'s.
    func release(_ id: String, owner: String, version: String)
}
