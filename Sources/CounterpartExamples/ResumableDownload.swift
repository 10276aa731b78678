import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer

/// Seeds 001 and 004: a download that survives pauses and cuts. Each `run()` compares the
/// local file with the server's (`HEAD`), as seed 001's `checkLocalFileInfo` does:
///
/// - the same size: the file is complete, nothing is fetched;
/// - smaller: the rest is asked for with `Range: bytes=N-` (N the local size) and appended;
/// - larger: the local file cannot be a prefix of this one; it is deleted and fetched again;
/// - no local file: fetched from the start (`bytes=0-`, as seed 004 sends it).
///
/// The body is streamed to disk through a `FileHandle` as it arrives (seed 004's output
/// stream): memory does not grow with the file, and whatever arrived before a cut, a
/// `pause()` or a crash is on disk for the next `run()`. A resumed request carries
/// `If-Range` with the `ETag` of the version the partial file came from (when this object
/// wrote it; otherwise, as the seeds know no better, the one `HEAD` gives now): if the file
/// changed on the server, it answers `200` with the whole new file, which then replaces the
/// local one from its first byte.
///
/// ```swift
/// let download = try ResumableDownload(baseURL: server, path: "/big.bin", to: local)
/// do {
///     let report = try await download.run { print($0.fraction) }
/// } catch ExampleError.interrupted {
///     _ = try await download.run()        // resumes with bytes=<local size>-
/// }
/// ```
///
/// Unchecked: `transfer` and `pauseRequested` are read and written under `lock`.
public final class ResumableDownload: @unchecked Sendable {
    public let url: URL
    public let destination: URL

    private let lock = NSLock()
    private var transfer: DelegatedTask?
    private var pauseRequested = false
    /// The `ETag` of the version the partial file was written from, when this object
    /// wrote it: sent as `If-Range` on resume, so a file that changed on the server between
    /// a pause and the resume is fetched whole instead of being spliced onto the old part.
    private var partialETag: String?

    /// Which of the local-size rules a run took.
    public enum Start: Sendable, Equatable {
        /// The local file has the server's size: nothing was fetched.
        case alreadyComplete
        /// There was no local file (or an empty one): fetched from byte 0.
        case fromStart
        /// The local file was smaller: fetched from this offset on and appended.
        case resumed(at: Int64)
        /// The local file was larger than the server's (this many bytes): deleted, fetched again.
        case restarted(discarded: Int64)
    }

    public struct Progress: Sendable, Equatable {
        /// Bytes of the file on disk: what earlier runs left plus what this one received.
        public var bytesOnDisk: Int64
        /// The whole file's size.
        public var expectedSize: Int64
        /// 0 to 1.
        public var fraction: Double { expectedSize == 0 ? 1 : Double(bytesOnDisk) / Double(expectedSize) }
    }

    public struct Report: Sendable, Equatable {
        public var start: Start
        /// The `Range` header sent (`bytes=N-`), nil when nothing was fetched.
        public var range: String?
        /// `206`, or `200` when the server sent the whole file (it changed since the
        /// partial copy was made); nil when nothing was fetched.
        public var status: Int?
        /// Body bytes received in this run.
        public var bytesReceived: Int64
        public var bytesOnDisk: Int64
        public var expectedSize: Int64
        /// `pause()` stopped this run; the partial file is kept for the next.
        public var paused: Bool
        public var isComplete: Bool { !paused && bytesOnDisk == expectedSize }
    }

    public init(url: URL, to destination: URL) {
        self.url = url
        self.destination = destination
    }

    /// `path` on the server at `baseURL`. The path may carry Counterpart's fault arguments,
    /// e.g. `/big.bin?cut=100000` to have the server cut the connection after 100,000
    /// body bytes.
    public convenience init(baseURL: URL, path: String, to destination: URL) throws {
        self.init(url: try ExampleURL.resolve(path, against: baseURL), to: destination)
    }

    /// Stops the run in progress (seed 004's `[self.connect cancel]`): it returns a report
    /// with `paused`, and the bytes received so far stay on disk for the next `run()`.
    public func pause() {
        let transfer: DelegatedTask? = lock.withLock {
            pauseRequested = true
            return self.transfer
        }
        transfer?.cancel()
    }

    /// Makes the local file complete, or as complete as the connection allows.
    /// `progress` is called (on a URLSession queue) as bytes reach the disk.
    /// Throws `ExampleError.interrupted` when the transfer stops early (the partial file
    /// stays; run again to resume), `ExampleError.httpStatus` for an error answer, and
    /// `CancellationError` when the calling task is cancelled (the partial file stays too).
    public func run(progress: @escaping @Sendable (Progress) -> Void = { _ in }) async throws -> Report {
        lock.withLock { pauseRequested = false }
        let info = try await FileInfo.fetch(url, askForFilename: false)
        let expected = info.size
        let local = localFileSize(destination)

        let start: Start
        switch local {
        case let size? where size == expected:
            progress(Progress(bytesOnDisk: size, expectedSize: expected))
            return Report(start: .alreadyComplete, range: nil, status: nil, bytesReceived: 0,
                          bytesOnDisk: size, expectedSize: expected, paused: false)
        case let size? where size > expected:
            try FileManager.default.removeItem(at: destination)
            start = .restarted(discarded: size)
        case let size? where size > 0:
            start = .resumed(at: size)
        default:
            start = .fromStart
        }
        let offset: Int64
        if case .resumed(let at) = start { offset = at } else { offset = 0 }
        if localFileSize(destination) == nil {
            guard FileManager.default.createFile(atPath: destination.path, contents: nil) else {
                throw ExampleError.localFile(destination.path, "cannot be created")
            }
        }
        if expected == 0 {
            progress(Progress(bytesOnDisk: 0, expectedSize: 0))
            return Report(start: start, range: nil, status: nil, bytesReceived: 0, bytesOnDisk: 0, expectedSize: 0, paused: false)
        }

        let range = "bytes=\(offset)-"
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 30)
        request.setValue(range, forHTTPHeaderField: "Range")
        if offset > 0, let etag = lock.withLock({ partialETag }) ?? info.etag {
            request.setValue(etag, forHTTPHeaderField: "If-Range")
        }

        let sink = DiskSink(url: url, destination: destination, offset: offset, expectedSize: expected, progress: progress)
        let transfer = DelegatedTask(onResponse: { [self] response in
            try sink.open(response)
            // What is written from now on comes from this version of the file.
            let etag = response.value(forHTTPHeaderField: "ETag") ?? info.etag
            lock.withLock { partialETag = etag }
        }, onData: sink.write)
        let pausedEarly: Bool = lock.withLock {
            self.transfer = transfer
            return pauseRequested
        }
        defer { lock.withLock { self.transfer = nil } }
        if pausedEarly {
            return Report(start: start, range: nil, status: nil, bytesReceived: 0,
                          bytesOnDisk: localFileSize(destination) ?? 0, expectedSize: expected, paused: true)
        }

        let response: HTTPURLResponse
        do {
            response = try await transfer.run(request)
            sink.close()
        } catch {
            sink.close()
            let state = sink.state
            if let error = error as? URLError, error.code == .cancelled, lock.withLock({ pauseRequested }) {
                let onDisk = localFileSize(destination) ?? 0
                return Report(start: start, range: range, status: state.status, bytesReceived: state.received,
                              bytesOnDisk: onDisk, expectedSize: state.expectedSize, paused: onDisk != state.expectedSize)
            }
            if error is CancellationError || error is ExampleError { throw error }
            throw ExampleError.interrupted(url, bytesOnDisk: localFileSize(destination) ?? 0,
                                           expectedSize: state.expectedSize, reason: Self.describe(error))
        }
        let state = sink.state
        guard response.statusCode == 200 || response.statusCode == 206 else {
            throw ExampleError.httpStatus(response.statusCode, method: "GET", url: url, message: Sessions.errorMessage(state.errorBody))
        }
        let onDisk = localFileSize(destination) ?? 0
        if response.expectedContentLength >= 0, state.received != response.expectedContentLength || onDisk != state.expectedSize {
            throw ExampleError.interrupted(url, bytesOnDisk: onDisk, expectedSize: state.expectedSize,
                                           reason: "the body ended after \(state.received) of \(response.expectedContentLength) bytes")
        }
        return Report(start: start, range: range, status: response.statusCode, bytesReceived: state.received,
                      bytesOnDisk: onDisk, expectedSize: state.expectedSize, paused: false)
    }

    static func describe(_ error: any Error) -> String {
        guard let error = error as? URLError else { return String(describing: error) }
        switch error.code {
        case .networkConnectionLost: return "the connection was lost"
        case .timedOut: return "the request timed out"
        case .cannotConnectToHost: return "could not connect to the server"
        case .cancelled: return "cancelled"
        default: return "\(error.localizedDescription); URLError \(error.code.rawValue)"
        }
    }
}

/// Where a `ResumableDownload`'s body goes: the local file, from the offset the answer
/// starts at, or (for an error answer) a small buffer for the message.
///
/// Unchecked: every stored property is read and written under `lock`; `open` and `write`
/// are called one at a time on the session's delegate queue.
final class DiskSink: @unchecked Sendable {
    struct State {
        var status: Int?
        var received: Int64 = 0
        var expectedSize: Int64
        var errorBody = Data()
    }

    private let url: URL
    private let destination: URL
    private let offset: Int64
    private let progress: @Sendable (ResumableDownload.Progress) -> Void
    private let lock = NSLock()
    private var handle: FileHandle?
    private var onDisk: Int64 = 0
    private var current: State

    init(url: URL, destination: URL, offset: Int64, expectedSize: Int64,
         progress: @escaping @Sendable (ResumableDownload.Progress) -> Void) {
        self.url = url
        self.destination = destination
        self.offset = offset
        self.progress = progress
        current = State(expectedSize: expectedSize)
    }

    var state: State { lock.withLock { current } }

    /// Checks the answer's head and opens the file where its body belongs.
    func open(_ response: HTTPURLResponse) throws {
        let start: Int64
        switch response.statusCode {
        case 206:
            guard let header = response.value(forHTTPHeaderField: "Content-Range"),
                  case .satisfied(let range, let length?) = ContentRange(parsing: header) else {
                throw ExampleError.unexpectedResponse(url, "a 206 without a valid Content-Range")
            }
            guard Int64(length) == lock.withLock({ current.expectedSize }) else { throw ExampleError.fileChanged(url) }
            guard Int64(range.first) == offset else {
                throw ExampleError.unexpectedResponse(url, "asked for bytes=\(offset)-, got Content-Range \(header)")
            }
            start = offset
        case 200:
            // The whole file: If-Range did not match (the file changed), or the server
            // ignored Range. Either way it replaces the local file.
            start = 0
        case 416:
            throw ExampleError.fileChanged(url)
        default:
            lock.withLock { current.status = response.statusCode }
            return
        }
        let handle = try FileHandle(forWritingTo: destination)
        try handle.truncate(atOffset: UInt64(start))
        let size = response.statusCode == 200 ? response.expectedContentLength : nil
        lock.withLock {
            self.handle = handle
            onDisk = start
            current.status = response.statusCode
            if let size, size >= 0 { current.expectedSize = size }
        }
        progress(ResumableDownload.Progress(bytesOnDisk: start, expectedSize: state.expectedSize))
    }

    /// Appends a piece of the body to the file (or to the error message).
    func write(_ data: Data) throws {
        let update: ResumableDownload.Progress? = try lock.withLock {
            guard let handle else {
                if current.errorBody.count < 65_536 { current.errorBody.append(data.prefix(65_536 - current.errorBody.count)) }
                return nil
            }
            try handle.write(contentsOf: data)
            onDisk += Int64(data.count)
            current.received += Int64(data.count)
            return ResumableDownload.Progress(bytesOnDisk: onDisk, expectedSize: current.expectedSize)
        }
        if let update { progress(update) }
    }

    func close() {
        let handle: FileHandle? = lock.withLock {
            defer { self.handle = nil }
            return self.handle
        }
        try? handle?.close()
    }
}
