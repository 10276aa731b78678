@testable import Counterpart
import Foundation
import Testing

/// What a failed upload's unanswered writes may leave is cleared, and only if it is its own:
/// each case writes what a stalled store would carry out late, then waits for the clean-up.
@Suite("Leftovers of failed uploads against Ceph RGW", .enabled(if: S3TestEngine.isAvailable, S3TestEngine.skipReason))
struct S3LeftoversTests {
    let client: S3Client
    let store: S3UploadStore

    init() throws {
        client = try S3TestEngine.client()
        store = S3UploadStore(client: client)
    }

    private func keys() throws -> [String] {
        try client.listObjects().objects.map(\.key).sorted()
    }

    private func putClaim(_ claim: NameClaim) throws {
        try client.putObject(S3UploadStore.namesPrefix + claim.name, bytes: [], metadata: [NameClaim.tokenField: claim.token],
                             condition: .ifNoneMatch)
    }

    /// Waits until no job is pending (each settles within seconds of a store that answers).
    private func settled(within seconds: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while store.leftovers.pending > 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        return store.leftovers.pending == 0
    }

    /// A streamed file's staging object that outlived its upload (its node died between the
    /// `PUT` and the copy) goes when a node starts: an old one, not a young one.
    @Test func staleStagingObjectsAreRemovedAndYoungOnesKept() throws {
        let stale = S3UploadStore.stagingPrefix + "stale"
        try client.putObject(stale, bytes: [1, 2, 3])
        store.removeStaleStagingObjects(olderThan: 3600)
        Thread.sleep(forTimeInterval: 1)
        #expect(try keys() == [stale], "a young staging object stays")
        store.removeStaleStagingObjects(olderThan: -60)
        #expect(waitUntil(seconds: 10) { (try? keys()) == [] })
    }

    /// A stalled or dead store leaves a staging object's `PUT` unanswered: it is looked for
    /// and removed under the upload's claim, and the claim goes after it.
    @Test func aStagingObjectThatLandsLateIsRemoved() throws {
        let claim = NameClaim(name: "streamed.bin", token: UUID().uuidString)
        try putClaim(claim)
        store.leftovers.settle(.init(claim, stagedMayAppear: true))
        try client.putObject(S3UploadStore.stagingKey(for: claim), bytes: [UInt8](repeating: 7, count: 100))
        #expect(settled())
        #expect(try keys() == [])
    }

    @Test func aClaimWhoseCreationLandsLateIsRemoved() throws {
        let claim = NameClaim(name: "late.bin", token: UUID().uuidString)
        store.leftovers.settle(.init(claim, claimMayAppear: true))
        Thread.sleep(forTimeInterval: S3Leftovers.round * 1.5)
        try putClaim(claim)
        #expect(settled())
        #expect(try keys() == [])
    }

    @Test func anObjectAndAMultipartUploadThatLandLateAreRemovedWithTheClaim() throws {
        let claim = NameClaim(name: "landed.bin", token: UUID().uuidString)
        try putClaim(claim)
        let uploadID = try client.createMultipartUpload(claim.name)
        try client.putObject(claim.name, bytes: Array("stored after its client was told 503".utf8))
        store.release(claim, objectMayAppear: true, multipartMayAppear: true)
        #expect(settled())
        #expect(try keys() == [])
        #expect(try client.listMultipartUploads().map(\.uploadID).contains(uploadID) == false)
    }

    /// Another upload claimed the name since (its token, not the job's): nothing of it is touched.
    @Test func anotherUploadsClaimAndObjectAreLeftAlone() throws {
        let ours = NameClaim(name: "taken.bin", token: UUID().uuidString)
        try putClaim(NameClaim(name: ours.name, token: UUID().uuidString))
        try client.putObject(ours.name, bytes: Array("theirs".utf8))
        store.release(ours, objectMayAppear: true, multipartMayAppear: true)
        #expect(settled())
        #expect(try keys() == [S3UploadStore.namesPrefix + "taken.bin", "taken.bin"])
        #expect(try client.getObject("taken.bin") == Array("theirs".utf8))
    }

    /// A claim that never appears is given up once the store has answered a few rounds.
    @Test func aClaimThatNeverAppearsEndsTheJob() throws {
        store.leftovers.settle(.init(NameClaim(name: "never.bin", token: UUID().uuidString), claimMayAppear: true))
        #expect(settled(within: Double(S3Leftovers.quietRounds + 4) * S3Leftovers.round))
        #expect(try keys() == [])
    }
}
