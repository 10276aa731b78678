@testable import Counterpart
import Foundation
import Testing

/// A new, empty file in `folder`, open for writing.
private func createFile(_ name: String, in folder: URL) throws -> (path: String, descriptor: Int32) {
    let path = folder.appendingPathComponent(name).path
    let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    try #require(descriptor >= 0)
    return (path, descriptor)
}

/// Writes `bytes` through an `UploadWriter` into a new file, in pieces of the given sizes
/// (round and round), and returns the digest and what the file then holds.
private func writeThrough(_ bytes: [UInt8], pieces: [Int], budget: ChunkBudget, in folder: URL) throws -> (digest: String, file: [UInt8]) {
    let (path, descriptor) = try createFile(UUID().uuidString, in: folder)
    defer { close(descriptor) }
    let writer = UploadWriter(destination: fileDestination(descriptor), budget: budget)
    var from = 0, index = 0
    try bytes.withUnsafeBytes { all in
        while from < all.count {
            let count = min(pieces[index % pieces.count], all.count - from)
            try writer.append(UnsafeRawBufferPointer(rebasing: all[from..<(from + count)]))
            from += count
            index += 1
        }
    }
    #expect(writer.size == UInt64(bytes.count))
    let digest = try writer.finish()
    return (digest, [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
}

@Suite("Upload writer: chunks hashed and written beside receiving")
struct UploadWriterTests {
    static let chunk = UploadWriter.chunkSize
    static let head = Int(UploadWriter.unchunkedBytes)

    /// Sizes around the bytes written before any chunk, the chunk and the direct-I/O block,
    /// written in pieces that never line up with either, and in one piece.
    static let sizes = [0, 1, 4097, head - 1, head, head + 1, head + chunk - 1, head + chunk, head + chunk + 1,
                        head + 2 * chunk, head + 3 * chunk + 4096 + 17, 5 * chunk + 1]

    /// With all the chunks an upload takes, and with one spare only.
    @Test(arguments: sizes)
    func theFileAndTheDigestAreTheBytesAppendedWhileThreadsHashAndWrite(size: Int) throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let bytes = [UInt8](testBytes(count: size, seed: UInt64(size)))
        for chunks in [1 + UploadWriter.spares, 2] {
            let budget = ChunkBudget(chunks: chunks)
            for pieces in [[1000, 7, 65_536, 3], [size == 0 ? 1 : size]] {
                let written = try writeThrough(bytes, pieces: pieces, budget: budget, in: folder)
                #expect(written.file == bytes, "\(chunks) chunks")
                #expect(written.digest == SHA256.hex(of: bytes))
                #expect(budget.unused == chunks, "every chunk is given back")
            }
        }
    }

    @Test(arguments: [0, 1, 4097, head + 1, head + chunk + 1, 3 * chunk + 5])
    func withOneChunkOrNoneTheUploadIsWrittenAllTheSame(size: Int) throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let bytes = [UInt8](testBytes(count: size, seed: 7))
        for chunks in [0, 1] {
            let budget = ChunkBudget(chunks: chunks)
            let written = try writeThrough(bytes, pieces: [12_345, 1], budget: budget, in: folder)
            #expect(written.file == bytes, "\(chunks) chunk(s)")
            #expect(written.digest == SHA256.hex(of: bytes))
            #expect(budget.unused == chunks)
        }
    }

    @Test func uploadsAtOnceShareTheBudgetAndNoneIsRefused() throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        // Three uploads, 2 + spares chunks: the first overlaps (a chunk and its spares), the
        // second gets one chunk, the third none; all three are written right.
        let budget = ChunkBudget(chunks: 2 + UploadWriter.spares)
        let contents = (0..<3).map { [UInt8](testBytes(count: Self.head + 2 * Self.chunk + 99, seed: UInt64($0))) }
        let files = try (0..<3).map { try createFile("file-\($0)", in: folder) }
        let (paths, descriptors) = (files.map(\.path), files.map(\.descriptor))
        defer { descriptors.forEach { close($0) } }
        let writers = descriptors.map { UploadWriter(destination: fileDestination($0), budget: budget) }
        var sent = [0, 0, 0]
        func send(_ index: Int, upTo end: Int) throws {
            try contents[index][sent[index]..<end].withUnsafeBytes { try writers[index].append($0) }
            sent[index] = end
        }
        try send(0, upTo: Self.head + Self.chunk + 1)
        #expect(budget.unused == 1)
        try send(1, upTo: Self.head + Self.chunk + 1)
        #expect(budget.unused == 0)
        try send(2, upTo: Self.head + Self.chunk + 1)
        for offset in stride(from: Self.head + Self.chunk + 1, to: contents[0].count, by: 50_000) {
            for index in 0..<3 { try send(index, upTo: min(offset + 50_000, contents[index].count)) }
        }
        for (index, writer) in writers.enumerated() {
            #expect(try writer.finish() == SHA256.hex(of: contents[index]))
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: paths[index]))) == contents[index])
        }
        #expect(budget.unused == 2 + UploadWriter.spares)
    }

    /// Where the file system can, whole chunks really bypass the page cache, and the tail
    /// turns it off again.
    @Test func wholeChunksGoPastThePageCacheAndTheTailThroughIt() throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, descriptor) = try createFile("direct", in: folder)
        defer { close(descriptor) }
        let supported = Platform.setPageCacheBypass(descriptor, true) && Platform.setPageCacheBypass(descriptor, false)
        let writer = UploadWriter(destination: fileDestination(descriptor), budget: ChunkBudget(chunks: 3))
        let bytes = [UInt8](testBytes(count: Self.head + 2 * Self.chunk + 100))
        try bytes[0..<(Self.head + Self.chunk + 1)].withUnsafeBytes { try writer.append($0) }
        #expect(Platform.bypassesPageCache(descriptor) == (supported && !Platform.usesPortableFallbacks))
        try bytes[(Self.head + Self.chunk + 1)...].withUnsafeBytes { try writer.append($0) }
        #expect(try writer.finish() == SHA256.hex(of: bytes))
        #expect(!Platform.bypassesPageCache(descriptor))
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        if !Platform.usesPortableFallbacks {
            #expect(supported, "the test folder's file system takes O_DIRECT (Linux 6.6 and later do, tmpfs too)")
        }
    }

    /// The receiving thread hands the last chunk over and reads on; the digest waits for it,
    /// and asking again gives the same answer (a failure stays a failure).
    @Test(arguments: [head / 2, head + chunk / 2, head + 3 * chunk + 7])
    func finishingStartsAtOnceAndTheDigestWaitsForIt(size: Int) throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (path, descriptor) = try createFile("finishing", in: folder)
        defer { close(descriptor) }
        let budget = ChunkBudget(chunks: 1 + UploadWriter.spares)
        let writer = UploadWriter(destination: fileDestination(descriptor), budget: budget)
        let bytes = [UInt8](testBytes(count: size, seed: 9))
        try bytes.withUnsafeBytes { try writer.append($0) }
        try writer.startFinishing()
        try writer.startFinishing()
        let digest = try writer.finish()
        #expect(digest == SHA256.hex(of: bytes))
        #expect(try writer.finish() == digest)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        #expect(budget.unused == 1 + UploadWriter.spares)

        let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
        defer { close(full) }
        let failing = UploadWriter(destination: fileDestination(full), budget: budget)
        #expect(Self.failure(appending: bytes, to: failing)?.isOutOfSpace == true)
        #expect(throws: StorageError.self) { try failing.finish() }
        #expect(budget.unused == 1 + UploadWriter.spares)
    }

    @Test func theBudgetKeepsOneUploadsWorthOfChunksForTheNext() throws {
        let budget = ChunkBudget(chunks: 5, kept: 2)
        let taken = (0..<5).compactMap { _ in budget.take() }
        #expect(taken.count == 5)
        #expect(budget.take() == nil, "the budget is spent")
        taken.forEach { budget.give($0) }
        #expect(budget.unused == 5)
        // The first two given back were kept and come back first; the others were freed.
        let again = (0..<3).compactMap { _ in budget.take() }
        let kept = Set(taken.prefix(2).map { UInt(bitPattern: $0.baseAddress) })
        #expect(Set(again.prefix(2).map { UInt(bitPattern: $0.baseAddress) }) == kept)
        #expect(again.allSatisfy { $0.count == UploadWriter.chunkSize && Int(bitPattern: $0.baseAddress) % LocalFileDestination.blockSize == 0 })
        #expect(budget.unused == 2)
        again.forEach { budget.give($0) }
    }

    @Test func aCancelledUploadLetsGoOfItsFileAndItsChunks() throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let budget = ChunkBudget(chunks: 1 + UploadWriter.spares)
        let (path, descriptor) = try createFile("cancelled", in: folder)
        defer { close(descriptor) }
        let writer = UploadWriter(destination: fileDestination(descriptor), budget: budget)
        let bytes = [UInt8](testBytes(count: Self.head + 3 * Self.chunk + 10))
        try bytes.withUnsafeBytes { try writer.append($0) }
        #expect(budget.unused == 0)
        writer.cancel()
        #expect(budget.unused == 1 + UploadWriter.spares)
        // What was written is the head and whole chunks, never the partial last one, and
        // nothing is written after cancel returns.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size >= Self.head && size <= Self.head + 3 * Self.chunk && (size - Self.head) % Self.chunk == 0, "\(size)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == Array(bytes[0..<size]))
        Thread.sleep(forTimeInterval: 0.05)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == size)
    }

    /// /dev/full takes no byte: ENOSPC, which the server answers with 507.
    @Test(arguments: [0, 1, 3])
    func aWriteThatFailsIsReportedWithItsErrno(chunks: Int) throws {
        let descriptor = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let budget = ChunkBudget(chunks: chunks)
        let writer = UploadWriter(destination: fileDestination(descriptor), budget: budget)
        #expect(Self.failure(appending: [UInt8](testBytes(count: 4 * Self.chunk)), to: writer)?.isOutOfSpace == true)
        writer.cancel()
        #expect(budget.unused == chunks)
    }

    /// The disk fills once chunks are on their way: a failure on the upload's own writing
    /// thread comes back on the receiving thread, at the next hand-over or at the end (a
    /// single chunk past the head can only fail there), never lost, and no chunk is kept.
    /// Whole chunks only: no tail, which the receiving thread would write (and fail) itself.
    @Test(arguments: [head + chunk, head + 4 * chunk])
    func aWriteThatFailsOnTheUploadsThreadIsReportedWithItsErrno(size: Int) throws {
        let folder = try makeTemporaryFolder("upload-writer")
        defer { try? FileManager.default.removeItem(at: folder) }
        let descriptor = try createFile("filling", in: folder).descriptor
        defer { close(descriptor) }
        let budget = ChunkBudget(chunks: 1 + UploadWriter.spares)
        let writer = UploadWriter(destination: fileDestination(descriptor), budget: budget)
        let bytes = [UInt8](testBytes(count: size))
        try bytes[0..<Self.head].withUnsafeBytes { try writer.append($0) }
        // From here on every write of this descriptor goes to /dev/full.
        let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
        try #require(full >= 0)
        #expect(dup2(full, descriptor) == descriptor)
        close(full)
        #expect(Self.failure(appending: Array(bytes[Self.head...]), to: writer)?.isOutOfSpace == true)
        writer.cancel()
        #expect(budget.unused == 1 + UploadWriter.spares)
    }

    /// Appends `bytes` in 100,000-byte pieces and finishes: the failure, if any.
    private static func failure(appending bytes: [UInt8], to writer: UploadWriter) -> StorageError? {
        do {
            for offset in stride(from: 0, to: bytes.count, by: 100_000) {
                try bytes[offset..<min(offset + 100_000, bytes.count)].withUnsafeBytes { try writer.append($0) }
            }
            _ = try writer.finish()
            return nil
        } catch {
            return error as? StorageError
        }
    }
}

/// A local file destination over `descriptor`, outside any store (these tests never commit).
private func fileDestination(_ descriptor: Int32) -> LocalFileDestination {
    LocalFileDestination(path: "/dev/null", descriptor: descriptor, sync: .none) { _ throws(StorageError) in
        throw StorageError(.failed, "not in a store")
    }
}
