/// Every way storage fails, whatever the backend (a local folder or an object store): the
/// one error the endpoints map to a status (507 for no room, 503 for a store that is busy
/// or unreachable, 500 otherwise), with a message a user can act on.
struct StorageError: Error, CustomStringConvertible, Equatable {
    enum Kind: Equatable, Sendable {
        /// The disk, the quota or the space kept free is used up: 507.
        case outOfSpace
        /// The store is unreachable or at its limit for now; trying later may work: 503.
        case unavailable
        case failed
    }

    var kind: Kind
    var description: String

    init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }

    /// A failed system call while doing `operation`, as the server says it.
    init(operation: String, code: Int32) {
        self.init(POSIX.isOutOfSpace(code) ? .outOfSpace : .failed,
                  "the server could not \(operation): \(String(cString: strerror(code)))")
    }

    init(operation: String, _ failure: POSIX.Failure) {
        self.init(operation: operation, code: failure.code)
    }

    var isOutOfSpace: Bool { kind == .outOfSpace }

    /// Reads the file at `path` from the start in pieces of `pieceBytes`, handing each to
    /// `body`; a failure to open or read it is `operation`'s.
    static func readFile(_ path: String, inPiecesOf pieceBytes: Int, _ operation: String,
                         _ body: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) {
        let file = OpenFile(open(path, O_RDONLY | O_CLOEXEC))
        guard file.borrowed >= 0 else { throw StorageError(operation: operation, code: errno) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceBytes, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = POSIX.retryingInterrupts { read(file.borrowed, buffer.baseAddress, buffer.count) }
            guard count >= 0 else { throw StorageError(operation: operation, code: errno) }
            if count == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// The HTTP status a request that met this failure is answered with.
    var status: Int {
        switch kind {
        case .outOfSpace: 507
        case .unavailable: 503
        case .failed: 500
        }
    }
}
