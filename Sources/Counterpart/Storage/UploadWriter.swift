import Foundation
import Synchronization

/// Writes an upload's file and its SHA-256, hashing the bytes in memory on their way to
/// their storage (`UploadDestination`): the file is never read back.
///
/// A file's first `unchunkedBytes` are hashed and written as they come (most form uploads
/// are that small). Past them, bytes gather in chunks of `chunkSize`, and the file gets two
/// threads of its own: one hashes each full chunk, the other writes it, while the receiving
/// thread fills the next, so that receiving, hashing and writing overlap. Whole chunks are
/// written past the page cache (O_DIRECT, Linux): an upload is written once and not read
/// back, and copying it into the cache was the largest cost of taking one, the more so the
/// colder the machine's memory. The receiving thread then waits for the disk when it is the
/// slower (with the cache it would too, once the kernel's limit of dirty pages is reached).
/// A file's last bytes go through the cache.
///
/// Memory is bounded by a process-wide budget of chunks. An upload that finds none writes
/// each piece as it comes; one that finds a single chunk hashes and writes each full chunk
/// on the receiving thread.
final class UploadWriter {
    static let chunkSize = 512 * 1024
    /// Bytes of each file written as they come, before any chunk: a multiple of the
    /// direct-I/O block, so that the chunks after them start aligned.
    static let unchunkedBytes: UInt64 = 64 * 1024
    /// 24 MiB: 16 uploads overlapping at once.
    static let budget = ChunkBudget(chunks: 48)
    /// Chunks an upload takes beside the one filling, once it outgrows it.
    static let spares = 2

    private let output: ChunkOutput
    private let budget: ChunkBudget
    /// Bytes appended so far.
    private(set) var size: UInt64 = 0
    /// The chunk filling, its file offset and how much of it holds bytes.
    private var chunk: UnsafeMutableRawBufferPointer?
    private var chunkOffset: UInt64 = 0
    private var filled = 0
    private var pipeline: ChunkPipeline?
    private var askedForChunk = false
    private var askedForPipeline = false
    private var finishing = false
    private var outcome: Result<String, StorageError>?

    init(destination: any UploadDestination, budget: ChunkBudget = UploadWriter.budget) {
        output = ChunkOutput(destination: destination)
        self.budget = budget
    }

    /// Bytes that may be received and not yet on disk: what the free-space check must add.
    static var bytesInMemory: UInt64 { UInt64((1 + spares) * chunkSize) }

    deinit { cancel() }

    /// Appends `bytes`. After a failure every call fails the same way, `finish()` too.
    func append(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        try recordingFailure { () throws(StorageError) in try add(bytes) }
    }

    private func add(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        var from = 0
        if size < Self.unchunkedBytes {
            from = min(bytes.count, Int(Self.unchunkedBytes - size))
            try writeNow(UnsafeRawBufferPointer(rebasing: bytes[0..<from]))
        }
        guard from < bytes.count else { return }
        if !askedForChunk {
            askedForChunk = true
            chunk = budget.take()
            chunkOffset = size
        }
        guard chunk != nil else {
            try writeNow(UnsafeRawBufferPointer(rebasing: bytes[from...]))
            return
        }
        while from < bytes.count {
            let count = min(bytes.count - from, Self.chunkSize - filled)
            chunk!.baseAddress!.advanced(by: filled).copyMemory(from: bytes.baseAddress!.advanced(by: from), byteCount: count)
            filled += count
            from += count
            size += UInt64(count)
            if filled == Self.chunkSize { try handOver() }
        }
    }

    /// Hashes and writes `bytes` on this thread, at the end of the file.
    private func writeNow(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        try output.write(bytes, at: size)
        size += UInt64(bytes.count)
    }

    /// No byte comes after the ones appended: hands the last chunk to the upload's threads
    /// and returns at once, so that the receiving thread reads on while they hash and write
    /// it; without threads, writes it here. `finish()` then waits for the digest.
    func startFinishing() throws(StorageError) {
        try recordingFailure { () throws(StorageError) in try handOverTheRest() }
    }

    private func handOverTheRest() throws(StorageError) {
        guard !finishing else { return }
        finishing = true
        if let pipeline {
            if let chunk, filled > 0 {
                try pipeline.handOver(chunk, count: filled, offset: chunkOffset)
                self.chunk = nil
            }
            pipeline.requestStop(cancelling: false)
        } else {
            if let chunk, filled > 0 {
                try output.write(UnsafeRawBufferPointer(rebasing: chunk[0..<filled]), at: chunkOffset)
            }
            try output.endOfBytes()
        }
        filled = 0
    }

    /// Writes what is left, waits until it is written, and returns the digest of the whole
    /// file, or the failure; asked again, the same.
    func finish() throws(StorageError) -> String {
        if outcome == nil {
            outcome = Result { () throws(StorageError) -> String in
                defer { releaseChunks() }
                try startFinishing()
                if let failure = stopPipeline(cancelling: false) { throw failure }
                return output.digest()
            }
        }
        return try outcome!.get()
    }

    /// Runs `step`; a failure, its own or an earlier one, ends the file: its threads stop
    /// and the failure is the file's outcome.
    private func recordingFailure(_ step: () throws(StorageError) -> Void) throws(StorageError) {
        if case .failure(let failure)? = outcome { throw failure }
        do throws(StorageError) {
            try step()
        } catch {
            outcome = .failure(error)
            cancel()
            throw error
        }
    }

    /// Stops writing (the file is being discarded): when this returns, no thread uses the file.
    func cancel() {
        _ = stopPipeline(cancelling: true)
        releaseChunks()
    }

    /// The chunk is full: hands it to the upload's threads for an empty one, or hashes and
    /// writes it here.
    private func handOver() throws(StorageError) {
        output.startWholeChunks()
        if !askedForPipeline {
            askedForPipeline = true
            let spares = (0..<Self.spares).compactMap { _ in budget.take() }
            if !spares.isEmpty { pipeline = ChunkPipeline(output: output, spares: spares) }
        }
        if let pipeline {
            chunk = try pipeline.exchange(full: chunk!, count: filled, offset: chunkOffset)
        } else {
            try output.write(UnsafeRawBufferPointer(chunk!), at: chunkOffset)
        }
        chunkOffset += UInt64(filled)
        filled = 0
    }

    /// Waits until the upload's threads have written what they were given (or, cancelling,
    /// dropped it) and ended; their failure, if any.
    private func stopPipeline(cancelling: Bool) -> StorageError? {
        guard let pipeline else { return nil }
        self.pipeline = nil
        let (spares, failure) = pipeline.stop(cancelling: cancelling)
        spares.forEach { budget.give($0) }
        return failure
    }

    private func releaseChunks() {
        budget.give(chunk)
        chunk = nil
    }
}

/// How many chunks uploads may hold at once, process-wide. A chunk given back is kept for
/// the next upload, up to `kept` of them (one upload's worth), so that a body of many files
/// does not map, fault in and unmap fresh memory for each; the rest is freed.
final class ChunkBudget: Sendable {
    /// Unchecked Sendable: the free chunks are plain memory, handed from one thread to the
    /// next through the lock.
    private struct Pool: @unchecked Sendable {
        var available: Int
        var free: [UnsafeMutableRawBufferPointer] = []
    }

    private let pool: Mutex<Pool>
    private let kept: Int

    init(chunks: Int, kept: Int = 1 + UploadWriter.spares) {
        pool = Mutex(Pool(available: chunks))
        self.kept = kept
    }

    deinit {
        pool.withLock { $0.free.forEach { $0.deallocate() } }
    }

    /// Chunks not held by any upload.
    var unused: Int { pool.withLock { $0.available } }

    /// A chunk of `UploadWriter.chunkSize` bytes aligned for direct I/O, or nil if the budget is spent.
    func take() -> UnsafeMutableRawBufferPointer? {
        let (granted, chunk) = pool.withLock { (pool: inout Pool) -> (Bool, UnsafeMutableRawBufferPointer?) in
            guard pool.available > 0 else { return (false, nil) }
            pool.available -= 1
            return (true, pool.free.popLast())
        }
        guard granted else { return nil }
        return chunk ?? .allocate(byteCount: UploadWriter.chunkSize, alignment: LocalFileDestination.blockSize)
    }

    func give(_ chunk: UnsafeMutableRawBufferPointer?) {
        guard let chunk else { return }
        let keep = pool.withLock { (pool: inout Pool) -> Bool in
            pool.available += 1
            guard pool.free.count < kept else { return false }
            pool.free.append(chunk)
            return true
        }
        if !keep { chunk.deallocate() }
    }
}

/// An upload's hasher and destination. Bytes are hashed in the file's order, by one thread
/// at a time; they are stored by one thread at a time: the receiving thread, or the
/// upload's own while they run. The SHA-256 is taken here, above the storage seam, so that
/// every backend reports the same digest of the same bytes.
final class ChunkOutput: @unchecked Sendable {
    private let destination: any UploadDestination
    private let hasher = SHA256()

    init(destination: any UploadDestination) {
        self.destination = destination
    }

    /// From now on bytes come in whole chunks (see `UploadDestination.startWholeChunks`).
    func startWholeChunks() {
        destination.startWholeChunks()
    }

    func hash(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bytes)
    }

    /// Hashes `bytes` and stores them at `offset`, on one thread (no upload threads running).
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        hash(bytes)
        try store(bytes, at: offset)
    }

    /// The SHA-256 of everything hashed, as hex. Call once.
    func digest() -> String {
        hasher.finish()
    }

    func store(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError) {
        try destination.store(bytes, at: offset)
    }

    func endOfBytes() throws(StorageError) {
        try destination.endOfBytes()
    }
}

/// An upload's own two threads: one hashes each full chunk handed over, in order, the other
/// then writes it and hands it back empty. The receiving thread fills one chunk while the
/// others are hashed and written.
///
/// Each queue has a semaphore of its own, so that a hand-over wakes the one thread waiting
/// for it and no other: with one condition for all three, every hand-over woke every thread,
/// and switching between them cost a fifth of an upload's CPU.
private final class ChunkPipeline: Sendable {
    private enum Job {
        case chunk(UnsafeMutableRawBufferPointer, count: Int, offset: UInt64)
        /// Handed over last: the threads end once everything before it is written.
        case stop
    }

    /// The queues behind the semaphores. Unchecked Sendable: every property is used under
    /// `lock` (a pthread mutex, which ThreadSanitizer follows), and chunks are plain memory,
    /// handed from thread to thread through it.
    private final class Queues: @unchecked Sendable {
        private let lock = NSLock()
        var toHash: [Job] = []
        var toWrite: [Job] = []
        var empty: [UnsafeMutableRawBufferPointer] = []
        var failure: StorageError?
        /// The file is being discarded: chunks still queued are dropped, not hashed or written.
        var cancelled = false
        var stopRequested = false

        func withLock<Result>(_ body: (Queues) -> Result) -> Result {
            lock.lock()
            defer { lock.unlock() }
            return body(self)
        }
    }

    private let queues = Queues()
    private let toHash = DispatchSemaphore(value: 0)
    private let toWrite = DispatchSemaphore(value: 0)
    private let empty = DispatchSemaphore(value: 0)
    private let ended = DispatchSemaphore(value: 0)

    init(output: ChunkOutput, spares: [UnsafeMutableRawBufferPointer]) {
        queues.withLock { $0.empty = spares }
        for _ in spares { empty.signal() }
        Self.start("counterpart-sha256") { [self] in
            while true {
                toHash.wait()
                let (job, cancelled) = queues.withLock { ($0.toHash.removeFirst(), $0.cancelled) }
                if case .chunk(let chunk, let count, _) = job, !cancelled {
                    output.hash(UnsafeRawBufferPointer(rebasing: chunk[0..<count]))
                }
                queues.withLock { $0.toWrite.append(job) }
                toWrite.signal()
                if case .stop = job { return }
            }
        }
        Self.start("counterpart-write") { [self] in
            while true {
                toWrite.wait()
                guard case .chunk(let chunk, let count, let offset) = queues.withLock({ $0.toWrite.removeFirst() }) else {
                    // Stopped: past the last chunk, unless the file is being dropped or failed.
                    if queues.withLock({ $0.failure == nil && !$0.cancelled }) {
                        do throws(StorageError) {
                            try output.endOfBytes()
                        } catch {
                            queues.withLock { $0.failure = error }
                        }
                    }
                    ended.signal()
                    return
                }
                var result: StorageError?
                if queues.withLock({ $0.failure == nil && !$0.cancelled }) {
                    do throws(StorageError) {
                        try output.store(UnsafeRawBufferPointer(rebasing: chunk[0..<count]), at: offset)
                    } catch {
                        result = error
                    }
                }
                queues.withLock {
                    if let result { $0.failure = result }
                    $0.empty.append(chunk)
                }
                empty.signal()
            }
        }
    }

    /// Hands over a full chunk and returns an empty one, once one is.
    func exchange(full chunk: UnsafeMutableRawBufferPointer, count: Int, offset: UInt64) throws(StorageError) -> UnsafeMutableRawBufferPointer {
        try handOver(chunk, count: count, offset: offset)
        empty.wait()
        return queues.withLock { $0.empty.removeLast() }
    }

    /// Hands over a chunk for good: the file's last one stays with the threads until they
    /// end. After a failure the chunk stays the caller's, to give back with the others.
    func handOver(_ chunk: UnsafeMutableRawBufferPointer, count: Int, offset: UInt64) throws(StorageError) {
        if let failure = queues.withLock({ $0.failure }) { throw failure }
        queues.withLock { $0.toHash.append(.chunk(chunk, count: count, offset: offset)) }
        toHash.signal()
    }

    /// Tells the threads to end once they have hashed and written what they were handed
    /// (or, cancelling, dropped what they have not started). Asking again only cancels.
    func requestStop(cancelling: Bool) {
        let first = queues.withLock {
            if cancelling { $0.cancelled = true }
            guard !$0.stopRequested else { return false }
            $0.stopRequested = true
            $0.toHash.append(.stop)
            return true
        }
        if first { toHash.signal() }
    }

    /// Ends the threads (see `requestStop`) and waits for them; returns the chunks they
    /// held and their failure, if any.
    func stop(cancelling: Bool) -> ([UnsafeMutableRawBufferPointer], StorageError?) {
        requestStop(cancelling: cancelling)
        ended.wait()
        return queues.withLock { ($0.empty, $0.failure) }
    }

    private static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            Thread.current.name = name
            body()
        }
        thread.start()
    }
}
