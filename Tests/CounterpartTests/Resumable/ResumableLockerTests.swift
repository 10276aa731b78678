import Foundation
import Testing
@testable import Counterpart

/// The locker on its own: a request that finds an upload held by one that is saving and
/// letting go waits for it; one that finds it held by a writer is refused at once.
@Suite("Resumable uploads: who may write")
struct ResumableLockerTests {
    @Test func aHolderThatIsConcludingIsWaitedFor() throws {
        let locker = ResumableLocker()
        let holder = try #require(try locker.claim("u"))
        #expect(try holder.endTakeover())
        let started = ContinuousClock.now
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { holder.release() }
        let next = try #require(try locker.claim("u"), "refused while the holder was letting go")
        #expect(ContinuousClock.now - started >= .milliseconds(90))
        next.release()
        #expect(!locker.isHeld("u"))
    }

    @Test func aWriterIsNotWaitedFor() throws {
        let locker = ResumableLocker()
        let writer = try #require(try locker.claim("u"))
        let started = ContinuousClock.now
        #expect(try locker.claim("u") == nil)
        #expect(try locker.claim("u", takingOver: true) == nil)  // not silent: it is not taken over
        #expect(ContinuousClock.now - started < ResumableLocker.concludingWait)
        writer.release()
        #expect(try locker.claim("u") != nil)
    }

    @Test func aHolderThatNeverLetsGoIsWaitedForOnlySoLong() throws {
        let locker = ResumableLocker()
        let holder = try #require(try locker.claim("u"))
        #expect(try holder.endTakeover())
        let started = ContinuousClock.now
        #expect(try locker.claim("u") == nil)
        let waited = ContinuousClock.now - started
        #expect(waited >= ResumableLocker.concludingWait && waited < ResumableLocker.concludingWait + .seconds(2))
        holder.release()
    }
}
