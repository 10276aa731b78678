@testable import Counterpart
import Foundation
import Synchronization
import Testing

@Suite("Byte pipe: an upload's bytes handed to the store's request")
struct BytePipeTests {
    /// Keeps no mapping once a pipe is done with it: the shared one is for real pipes.
    let memory = PartMemory(idleBytes: 0)

    /// Bytes written in pieces of one size come out whole and in order in pieces of another,
    /// across many turns of the ring.
    @Test func bytesComeOutInOrderAcrossTheRingsTurns() throws {
        let pipe = try #require(BytePipe(capacity: 1_000, memory: memory))
        let data = [UInt8](testBytes(count: 100_000, seed: 3))
        let received = Mutex<[UInt8]>([])
        let reader = Thread {
            var piece = [UInt8](repeating: 0, count: 77)
            while true {
                let count = piece.withUnsafeMutableBytes { pipe.read(into: $0) }
                guard let count, count > 0 else { return }
                received.withLock { $0 += piece[..<count] }
            }
        }
        reader.start()
        var from = 0
        while from < data.count {
            let count = min(333, data.count - from)
            let outcome = data[from..<(from + count)].withUnsafeBytes { pipe.write($0, patience: 5) }
            #expect(outcome == .written)
            from += count
        }
        pipe.close()
        #expect(waitUntil { received.withLock { $0.count } == data.count })
        #expect(received.withLock { $0 } == data)
    }

    @Test func aClosedPipeReadsToItsEndThenGivesZero() throws {
        let pipe = try #require(BytePipe(capacity: 16, memory: memory))
        #expect([UInt8](repeating: 7, count: 10).withUnsafeBytes { pipe.write($0, patience: 1) } == .written)
        pipe.close()
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(buffer.withUnsafeMutableBytes { pipe.read(into: $0) } == 10)
        #expect(buffer.withUnsafeMutableBytes { pipe.read(into: $0) } == 0)
    }

    /// A writer waiting for room gives up after its patience (the store takes nothing), and
    /// one waiting when the pipe is cancelled (the request ended) returns at once.
    @Test func aWriterWaitingForRoomStallsOrIsCancelled() throws {
        let pipe = try #require(BytePipe(capacity: 8, memory: memory))
        let bytes = [UInt8](repeating: 1, count: 12)
        let start = Date()
        #expect(bytes.withUnsafeBytes { pipe.write($0, patience: 0.2) } == .stalled)
        #expect(Date().timeIntervalSince(start) >= 0.2)

        let cancelled = try #require(BytePipe(capacity: 8, memory: memory))
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { cancelled.cancel() }
        #expect(bytes.withUnsafeBytes { cancelled.write($0, patience: 30) } == .cancelled)
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(buffer.withUnsafeMutableBytes { cancelled.read(into: $0) } == nil)
    }

    @Test func aReaderWaitingForBytesReturnsWhenCancelled() throws {
        let pipe = try #require(BytePipe(capacity: 8, memory: memory))
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { pipe.cancel() }
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(buffer.withUnsafeMutableBytes { pipe.read(into: $0) } == nil)
    }
}
