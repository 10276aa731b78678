@testable import Counterpart
import Testing

/// The mappings that part and window buffers reuse (no engine): a buffer let go of leaves its
/// memory for the next one of its size, and no more than the pool's bound waits idle.
@Suite("Object store: buffers reuse their memory, within a bound")
struct PartMemoryTests {
    static let mebibyte = 1 << 20

    @Test func aBufferOfTheSameSizeGetsTheMemoryTheLastOneLeft() throws {
        let memory = PartMemory(idleBytes: 8 * Self.mebibyte)
        var first: PartBuffer? = try #require(PartBuffer(capacity: 4 * Self.mebibyte, memory: memory))
        let address = first!.baseAddress
        [UInt8]([1, 2, 3]).withUnsafeBytes { first!.append($0) }
        first = nil
        #expect(memory.kept.bytes == 4 * Self.mebibyte)

        let other = try #require(PartBuffer(capacity: 2 * Self.mebibyte, memory: memory))
        #expect(other.baseAddress != address, "another size maps memory of its own")
        let second = try #require(PartBuffer(capacity: 4 * Self.mebibyte, memory: memory))
        #expect(second.baseAddress == address)
        #expect(second.count == 0, "a reused buffer starts empty")
        #expect(memory.kept.bytes == 0)
    }

    @Test func theOldestKeptAreUnmappedPastTheBound() throws {
        let memory = PartMemory(idleBytes: 8 * Self.mebibyte)
        var buffers = try (0..<3).map { _ in try #require(PartBuffer(capacity: 3 * Self.mebibyte, memory: memory)) }
        let addresses = buffers.map { UInt(bitPattern: $0.baseAddress) }
        while !buffers.isEmpty { buffers.removeFirst() }  // released in order: the first is the oldest
        let kept = memory.kept
        #expect(kept.bytes == 6 * Self.mebibyte, "two of 3 MiB fit in 8 MiB, three do not")
        #expect(kept.addresses == Set(addresses.suffix(2)))

        // The memory is still usable after its round trip, to its last byte.
        let reused = try #require(PartBuffer(capacity: 3 * Self.mebibyte, memory: memory))
        let ones = [UInt8](repeating: 1, count: 3 * Self.mebibyte)
        ones.withUnsafeBytes { reused.append($0) }
        #expect(reused.bytes.last == 1 && reused.count == 3 * Self.mebibyte)
    }
}
