import Foundation
import Synchronization

/// A name claimed for an upload. The claim object carries `token` (in its metadata: a body
/// would cost the claim curl's wait for `100 Continue`), so that the clean-up after a failed
/// upload tells its own claim from one another upload made of the same name since.
struct NameClaim: Sendable, Equatable {
    static let tokenField = "claim"
    let name: String
    let token: String
}

/// Clears what a failed upload may have left in the store: its claim on the name, and what
/// a write the store did not answer may yet create. A request that timed out is not known
/// to have failed: a store that stalls (RGW with a full OSD, or stopped) carries out the
/// requests it holds once it goes on, so a claim, a multipart upload or the object itself
/// can appear seconds after the client was told 503. Each such upload is a job, worked on
/// a thread of its own every half second until it is settled:
///
/// - The claim is read first. Only while it holds the job's token is anything removed:
///   until then the name is no one's, or another upload's.
/// - What may appear (the object, multipart uploads under the name) is removed, and looked
///   for again until the store has answered `quietRounds` rounds in a row with nothing of
///   it: a write that timed out lands within moments of the store answering again.
/// - Then the claim goes, which frees the name.
///
/// A job the store does not answer for `patience` is given up: what it left stays, as it
/// would after the node's death, and costs a `-N` name, never a replaced file.
final class S3Leftovers: @unchecked Sendable {
    static let round: TimeInterval = 0.5
    static let quietRounds = 4
    static let patience: TimeInterval = 600

    struct Job {
        let claim: NameClaim
        /// The claim's creation went unanswered: it may not exist yet.
        var claimMayAppear: Bool
        var objectMayAppear: Bool
        var multipartMayAppear: Bool
        /// The staging object of a file streamed as one `PUT` (`S3UploadStore.stagingKey`).
        var stagedMayAppear: Bool
        var quiet = 0
        let givenUpAt: Date

        init(_ claim: NameClaim, claimMayAppear: Bool = false, objectMayAppear: Bool = false, multipartMayAppear: Bool = false,
             stagedMayAppear: Bool = false) {
            self.claim = claim
            self.claimMayAppear = claimMayAppear
            self.objectMayAppear = objectMayAppear
            self.multipartMayAppear = multipartMayAppear
            self.stagedMayAppear = stagedMayAppear
            givenUpAt = Date().addingTimeInterval(S3Leftovers.patience)
        }
    }

    private let client: S3Client
    private let namesPrefix: String
    /// Jobs waiting for the next round, those in the round under way, and whether the
    /// thread runs.
    private let state = Mutex<(jobs: [Job], inRound: Int, working: Bool)>(([], 0, false))

    init(client: S3Client, namesPrefix: String) {
        self.client = client
        self.namesPrefix = namesPrefix
    }

    /// Jobs not yet settled.
    var pending: Int { state.withLock { $0.jobs.count + $0.inRound } }

    func settle(_ job: Job) {
        let start = state.withLock { state -> Bool in
            state.jobs.append(job)
            defer { state.working = true }
            return !state.working
        }
        guard start else { return }
        let thread = Thread { [self] in work() }
        thread.name = "counterpart-s3-leftovers"
        thread.start()
    }

    private func work() {
        while true {
            Thread.sleep(forTimeInterval: Self.round)
            let jobs = state.withLock { state -> [Job] in
                defer { state.jobs = [] }
                state.inRound = state.jobs.count
                return state.jobs
            }
            let unsettled = jobs.compactMap { job -> Job? in
                var job = job
                return advance(&job) || Date() > job.givenUpAt ? nil : job
            }
            let done = state.withLock { state -> Bool in
                state.jobs += unsettled
                state.inRound = 0
                if state.jobs.isEmpty { state.working = false }
                return !state.working
            }
            if done { return }
        }
    }

    /// One round of `job`: true once it is settled.
    private func advance(_ job: inout Job) -> Bool {
        let claimKey = namesPrefix + job.claim.name
        do {
            guard let holder = try client.headObject(claimKey) else {
                // No claim: it may yet appear (then it is ours), or it has gone.
                guard job.claimMayAppear else { return true }
                job.quiet += 1
                return job.quiet >= Self.quietRounds
            }
            guard holder.metadata[NameClaim.tokenField] == job.claim.token else { return true }
            job.claimMayAppear = false
            var found = false
            if job.multipartMayAppear {
                for upload in try client.listMultipartUploads(prefix: job.claim.name) where upload.key == job.claim.name {
                    try client.abortMultipartUpload(upload.key, uploadID: upload.uploadID)
                    found = true
                }
            }
            if job.objectMayAppear, try client.headObject(job.claim.name) != nil {
                try client.deleteObject(job.claim.name)
                found = true
            }
            if job.stagedMayAppear, try client.headObject(S3UploadStore.stagingKey(for: job.claim)) != nil {
                try client.deleteObject(S3UploadStore.stagingKey(for: job.claim))
                found = true
            }
            job.quiet = found ? 0 : job.quiet + 1
            guard job.quiet >= Self.quietRounds || !(job.multipartMayAppear || job.objectMayAppear || job.stagedMayAppear) else { return false }
            try client.deleteObject(claimKey)
            return true
        } catch {
            // The store does not answer: nothing is known, wait for a quiet stretch anew.
            job.quiet = 0
            return false
        }
    }
}
