import Foundation

/// An object put into the store as one request whose size is given before its bytes come:
/// they are written as they arrive and go out through a `BytePipe`, the request running on a
/// thread of its own. Memory is the pipe's, whatever the size.
///
/// The request sends exactly `size` bytes. One that stops early is cut (curl aborts it) and
/// the store keeps nothing of it; `finish(padding:)` fills a short one with zeros instead.
final class StreamedPut: @unchecked Sendable {
    let size: UInt64
    /// Bytes written so far.
    private(set) var written: UInt64 = 0
    private let pipe: BytePipe
    /// How long a write waits for the store to take bytes before it gives up.
    private let patience: TimeInterval
    private var outcome: Result<String, any Error> = .failure(CancellationError())
    private let sent = DispatchSemaphore(value: 0)
    private var waited = false

    /// The request starts at once; its bytes go through `pipe`.
    init(client: S3Client, key: String, size: UInt64, contentType: String, pipe: BytePipe) {
        self.size = size
        self.pipe = pipe
        patience = TimeInterval(client.configuration.stallSeconds)
        let thread = Thread { [self] in
            outcome = Result { try client.putObject(key, body: .stream(pipe, count: Int64(size)), contentType: contentType) }
            // The request is over: a write waiting for room must not wait for ever.
            pipe.cancel()
            sent.signal()
        }
        thread.name = "counterpart-s3-put"
        thread.start()
    }

    /// Sends `bytes` on (no more than `size` in all); the request's failure if it ended.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard written + UInt64(bytes.count) <= size else {
            cancel()
            throw S3Error.invalidRequest("more than the \(size) bytes a PUT was started with")
        }
        switch pipe.write(bytes, patience: patience) {
        case .written:
            written += UInt64(bytes.count)
        case .cancelled:
            _ = try wait().get()
            throw S3Error.transport("the request to the object store ended before its body")
        case .stalled:
            cancel()
            throw S3Error.transport("the object store took no byte for \(Int(patience)) s")
        }
    }

    /// Ends the bytes, with zeros up to `size` when `padding` (else a short body is cut and
    /// fails), and waits for the store's answer: the object's ETag.
    func finish(padding: Bool = false) throws -> String {
        if padding {
            let zeros = [UInt8](repeating: 0, count: 64 << 10)
            try zeros.withUnsafeBytes { zeros in
                while written < size {
                    try write(UnsafeRawBufferPointer(rebasing: zeros[..<Int(min(UInt64(zeros.count), size - written))]))
                }
            }
        }
        pipe.close()
        return try wait().get()
    }

    /// Cuts the request (the store keeps nothing of it) and waits for it to end.
    func cancel() {
        pipe.cancel()
        _ = wait()
    }

    private func wait() -> Result<String, any Error> {
        if !waited {
            sent.wait()
            waited = true
        }
        return outcome
    }
}
