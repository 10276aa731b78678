import Foundation
import Synchronization

/// Writes an upload's file and its SHA-256, hashing the bytes in memory on their way to the
/// disk: the file is never read back.
///
/// Bytes gather in a chunk of `chunkSize`. When a file outgrows its first chunk, a thread of
/// the upload's own takes a second one: from then on one chunk fills on the receiving thread
/// while the other is hashed and written, so that receiving, hashing and writing overlap.
/// Whole chunks are written past the page cache (O_DIRECT, Linux): an upload is written once
/// and not read back, and copying it into the cache was the largest cost of taking one, the
/// more so the colder the machine's memory. A file's last bytes, and a small file's all, go
/// through the cache.
///
/// Memory is bounded by a process-wide budget of chunks. An upload that finds none writes
/// each piece as it comes; one that finds a single chunk hashes and writes each full chunk
/// on the receiving thread.
final class UploadWriter {
    static let chunkSize = 512 * 1024
    /// 16 MiB: 16 uploads overlapping at once.
    static let budget = ChunkBudget(chunks: 32)

    private let output: ChunkOutput
    private let budget: ChunkBudget
    /// Bytes appended so far.
    private(set) var size: UInt64 = 0
    /// The chunk filling, its file offset and how much of it holds bytes.
    private var chunk: UnsafeMutableRawBufferPointer?
    private var chunkOffset: UInt64 = 0
    private var filled = 0
    private var worker: ChunkWriter?
    private var askedForChunk = false
    private var askedForWorker = false
    private var ended = false

    init(descriptor: Int32, budget: ChunkBudget = UploadWriter.budget) {
        output = ChunkOutput(descriptor: descriptor)
        self.budget = budget
    }

    deinit { cancel() }

    func append(_ bytes: UnsafeRawBufferPointer) throws(POSIX.Failure) {
        if !askedForChunk {
            askedForChunk = true
            chunk = budget.take()
        }
        guard chunk != nil else {
            try output.write(bytes, at: size)
            size += UInt64(bytes.count)
            return
        }
        var from = 0
        while from < bytes.count {
            let count = min(bytes.count - from, Self.chunkSize - filled)
            chunk!.baseAddress!.advanced(by: filled).copyMemory(from: bytes.baseAddress!.advanced(by: from), byteCount: count)
            filled += count
            from += count
            size += UInt64(count)
            if filled == Self.chunkSize { try handOver() }
        }
    }

    /// Writes what is left and returns the digest of the whole file. Call once.
    func finish() throws(POSIX.Failure) -> String {
        let failure = stopWorker()
        defer { releaseChunks() }
        if let failure { throw failure }
        if let chunk, filled > 0 {
            try output.write(UnsafeRawBufferPointer(rebasing: chunk[0..<filled]), at: chunkOffset)
        }
        return output.hasher.finish()
    }

    /// Stops writing (the file is being discarded): when this returns, no thread uses the file.
    func cancel() {
        _ = stopWorker()
        releaseChunks()
    }

    /// The chunk is full: hands it to the upload's thread for an empty one, or writes it here.
    private func handOver() throws(POSIX.Failure) {
        output.startBypassingPageCache()
        if !askedForWorker {
            askedForWorker = true
            if let spare = budget.take() { worker = ChunkWriter(output: output, spare: spare) }
        }
        if let worker {
            chunk = try worker.exchange(full: chunk!, count: filled, offset: chunkOffset)
        } else {
            try output.write(UnsafeRawBufferPointer(chunk!), at: chunkOffset)
        }
        chunkOffset += UInt64(filled)
        filled = 0
    }

    /// Waits until the upload's thread has written what it was given and ended; its failure, if any.
    private func stopWorker() -> POSIX.Failure? {
        guard let worker else { return nil }
        self.worker = nil
        let (spare, failure) = worker.stop()
        budget.give(spare)
        return failure
    }

    private func releaseChunks() {
        guard !ended else { return }
        ended = true
        if let chunk { budget.give(chunk) }
        chunk = nil
    }
}

/// How many chunks uploads may hold at once, process-wide; a chunk's memory exists only
/// while an upload holds it.
final class ChunkBudget: Sendable {
    private let available: Atomic<Int>

    init(chunks: Int) { available = Atomic(chunks) }

    /// Chunks not held by any upload.
    var unused: Int { available.load(ordering: .relaxed) }

    /// A chunk of `UploadWriter.chunkSize` bytes aligned for direct I/O, or nil if the budget is spent.
    func take() -> UnsafeMutableRawBufferPointer? {
        guard available.subtract(1, ordering: .relaxed).newValue >= 0 else {
            available.add(1, ordering: .relaxed)
            return nil
        }
        return .allocate(byteCount: UploadWriter.chunkSize, alignment: ChunkOutput.blockSize)
    }

    func give(_ chunk: UnsafeMutableRawBufferPointer?) {
        guard let chunk else { return }
        chunk.deallocate()
        available.add(1, ordering: .relaxed)
    }
}

/// An upload's file and hasher: hashes and writes bytes in the file's order. One thread at a
/// time uses it: the receiving thread, or the upload's own while it runs.
final class ChunkOutput: @unchecked Sendable {
    /// Direct I/O writes whole blocks from aligned memory at aligned offsets; 4 KiB suits
    /// every device.
    static let blockSize = 4096

    let descriptor: Int32
    let hasher = SHA256()
    /// Whether writes now bypass the page cache.
    private var bypassing = false
    private var triedBypassing = false

    init(descriptor: Int32) { self.descriptor = descriptor }

    /// From now on whole blocks bypass the page cache, if the file system allows it.
    func startBypassingPageCache() {
        guard !triedBypassing else { return }
        triedBypassing = true
        bypassing = Platform.bypassPageCache(descriptor, true)
    }

    /// Hashes `bytes` and writes them at `offset`: whole blocks past the page cache while
    /// allowed, a tail (the file's last bytes) through it.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(POSIX.Failure) {
        hasher.update(bytes)
        var written = 0
        while written < bytes.count {
            let start = bytes.baseAddress! + written
            var count = bytes.count - written
            if bypassing {
                count &= ~(Self.blockSize - 1)
                let aligned = Int(bitPattern: start) % Self.blockSize == 0 && (offset + UInt64(written)) % UInt64(Self.blockSize) == 0
                if count == 0 || !aligned {
                    stopBypassing()
                    continue
                }
            }
            let result = POSIX.retryingInterrupts { pwrite(descriptor, start, count, off_t(offset + UInt64(written))) }
            if result < 0 {
                // A file system may take the flag and still refuse a direct write.
                if bypassing, errno == EINVAL {
                    stopBypassing()
                    continue
                }
                throw .last
            }
            written += result
        }
    }

    private func stopBypassing() {
        bypassing = false
        Platform.bypassPageCache(descriptor, false)
    }
}

/// An upload's own thread: hashes and writes each full chunk handed to it, in order, and
/// hands it back empty. Two chunks go round: one filling, one being written.
/// Unchecked Sendable: every property is used under `condition`, but `output`, which only
/// the thread uses while it runs.
private final class ChunkWriter: @unchecked Sendable {
    private struct Job {
        var chunk: UnsafeMutableRawBufferPointer
        var count: Int
        var offset: UInt64
    }

    private let condition = NSCondition()
    private let output: ChunkOutput
    private var handed: Job?
    private var empty: UnsafeMutableRawBufferPointer?
    private var failure: POSIX.Failure?
    private var stopping = false
    private var ended = false

    init(output: ChunkOutput, spare: UnsafeMutableRawBufferPointer) {
        self.output = output
        empty = spare
        let thread = Thread { [self] in run() }
        thread.name = "counterpart-upload"
        thread.start()
    }

    /// Hands over a full chunk and returns an empty one, once the chunk before is written.
    func exchange(full chunk: UnsafeMutableRawBufferPointer, count: Int, offset: UInt64) throws(POSIX.Failure) -> UnsafeMutableRawBufferPointer {
        condition.lock()
        defer { condition.unlock() }
        while empty == nil, failure == nil { condition.wait() }
        if let failure { throw failure }
        let next = empty!
        empty = nil
        handed = Job(chunk: chunk, count: count, offset: offset)
        condition.broadcast()
        return next
    }

    /// Lets the thread write what it was handed, then end; returns the chunk it held and its
    /// failure, if any.
    func stop() -> (UnsafeMutableRawBufferPointer?, POSIX.Failure?) {
        condition.lock()
        defer { condition.unlock() }
        stopping = true
        condition.broadcast()
        while !ended { condition.wait() }
        return (empty, failure)
    }

    private func run() {
        condition.lock()
        while true {
            while handed == nil, !stopping { condition.wait() }
            guard let job = handed else { break }
            handed = nil
            let skip = failure != nil
            condition.unlock()
            var result: POSIX.Failure?
            if !skip {
                do throws(POSIX.Failure) {
                    try output.write(UnsafeRawBufferPointer(rebasing: job.chunk[0..<job.count]), at: job.offset)
                } catch {
                    result = error
                }
            }
            condition.lock()
            empty = job.chunk
            if let result { failure = result }
            condition.broadcast()
        }
        ended = true
        condition.broadcast()
        condition.unlock()
    }
}
