
/// The system-call loops the server needs, written once. A signal may interrupt any of
/// them (EINTR): that is retried, never taken for a failure. Any other failure is reported
/// with its errno, never skipped.
enum POSIX {
    /// A failed system call: its errno.
    struct Failure: Error, CustomStringConvertible {
        var code: Int32

        /// The errno the last failed call left.
        static var last: Failure { Failure(code: errno) }

        var description: String { String(cString: strerror(code)) }

        /// The disk (or the user's quota) is full: 507, not 500.
        var isOutOfSpace: Bool { POSIX.isOutOfSpace(code) }
    }

    static func isOutOfSpace(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    /// `call` again while it fails with EINTR: its first other result (a negative one
    /// leaves its errno as it was).
    static func retryingInterrupts<Count: BinaryInteger>(_ call: () -> Count) -> Count {
        while true {
            let result = call()
            if result < 0, errno == EINTR { continue }
            return result
        }
    }

    /// Writes all of `bytes`: a short write (a pipe, a socket, a disk filling up) goes on
    /// from where it stopped, until every byte is written or a write fails.
    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let written = retryingInterrupts { write(descriptor, bytes.baseAddress! + offset, bytes.count - offset) }
            guard written >= 0 else { throw .last }
            offset += written
        }
    }
}
