import Synchronization
import Foundation

/// The SHA-256 of a file that is being written. The first `inlineBytes` are hashed as they
/// pass, on the writer's thread (small files never start a thread); past that, a thread of
/// the upload's own reads the file back from the page cache behind the writer and hashes
/// it, so that hashing runs beside receiving instead of after it. Memory stays bounded: the
/// bytes wait in the page cache, not in a queue.
final class FileHasher {
    static let inlineBytes: UInt64 = 1 << 20

    private let path: String
    private var inline: SHA256? = SHA256()
    private var background: BackgroundHasher?

    init(path: String) { self.path = path }

    /// `bytes` were just written, making the file `size` bytes long.
    func wrote(_ bytes: UnsafeRawBufferPointer, size: UInt64) {
        if let background {
            background.written(upTo: size)
        } else if size <= Self.inlineBytes, let inline {
            inline.update(bytes)
        } else if let inline {
            self.inline = nil
            background = BackgroundHasher(path: path, hasher: inline, from: size - UInt64(bytes.count), upTo: size)
        }
    }

    /// The digest of the whole file, once the writer is done; nil if it could not be read back.
    func finish() -> String? {
        if let background { return background.finish() }
        return inline?.finish()
    }

    /// Stops hashing (the file is being discarded).
    func cancel() {
        background?.cancel()
    }
}

/// The thread that hashes a file behind its writer.
/// Unchecked Sendable: every mutable property is read and written under `condition` (but
/// `cancelled`, an atomic the reading loop polls), and `hasher` and `descriptor` are used by
/// the hashing thread alone once it has started.
private final class BackgroundHasher: @unchecked Sendable {
    private let condition = NSCondition()
    private var written: UInt64
    private var writerDone = false
    /// While the thread sleeps: how far the file must have grown before it is worth waking
    /// it (a whole read), so that the writer does not wake it for every small write.
    private var wakeAt = UInt64.max
    private let cancelled = Atomic<Bool>(false)
    private var result: String??
    /// Set once the thread has closed its descriptor and ended.
    private var ended = false

    private let hasher: SHA256
    private let descriptor: Int32
    private static let readSize = 256 * 1024

    init(path: String, hasher: SHA256, from position: UInt64, upTo size: UInt64) {
        self.hasher = hasher
        written = size
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        let thread = Thread { [self] in run(from: position) }
        thread.name = "counterpart-sha256"
        thread.start()
    }

    func written(upTo size: UInt64) {
        condition.lock()
        written = size
        if size >= wakeAt { condition.signal() }
        condition.unlock()
    }

    func finish() -> String? {
        condition.lock()
        defer { condition.unlock() }
        writerDone = true
        condition.broadcast()
        while result == nil { condition.wait() }
        return result!
    }

    /// Stops the thread and waits until it has let go of the file: a discarded upload's
    /// disk space is free once its file is unlinked *and* closed, and that must be so before
    /// the request is answered (a client that retries at once after a 507 finds the room).
    func cancel() {
        condition.lock()
        cancelled.store(true, ordering: .relaxed)
        condition.broadcast()
        while !ended { condition.wait() }
        condition.unlock()
    }

    private func run(from start: UInt64) {
        let digest = hash(from: start)
        if descriptor >= 0 { close(descriptor) }
        condition.lock()
        result = .some(digest)
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// The digest once the writer is done; nil if the file cannot be read or hashing was cancelled.
    private func hash(from start: UInt64) -> String? {
        var position = start
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.readSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            condition.lock()
            while written - position < UInt64(Self.readSize), !writerDone, !cancelled.load(ordering: .relaxed) {
                wakeAt = position + UInt64(Self.readSize)
                condition.wait()
            }
            wakeAt = .max
            let target = written
            let done = writerDone
            condition.unlock()
            while position < target {
                if cancelled.load(ordering: .relaxed) { return nil }
                let count = POSIX.retryingInterrupts { pread(descriptor, buffer.baseAddress, min(Self.readSize, Int(target - position)), off_t(position)) }
                guard count > 0 else { return nil }
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                position += UInt64(count)
            }
            if cancelled.load(ordering: .relaxed) { return nil }
            if done { return hasher.finish() }
        }
    }
}
