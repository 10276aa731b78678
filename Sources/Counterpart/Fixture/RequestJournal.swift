import Foundation
import HTTPTransfer
import Synchronization

/// The last requests a server answered, oldest first, so that a test can check what its
/// client really sent. Shared by every server thread.
public final class RequestJournal: Sendable {
    /// One request, as the server saw it.
    public struct Entry: Sendable, Equatable {
        /// 1 for the server's first request, then counting up (clearing does not restart it).
        public var sequence: Int
        public var method: String
        /// The path and query as sent.
        public var target: String
        /// The path, percent-decoded.
        public var path: String
        public var headers: [Header]
        /// Body bytes the request carried, as far as they were read.
        public var requestBodyBytes: UInt64
        /// The parts of an upload, in order.
        public var parts: [Part]
        public var status: Int
        /// Body bytes of the response (0 for HEAD).
        public var responseBodyBytes: UInt64
        /// Body bytes that went out, when known (all when completed; less when cut).
        public var bytesSent: UInt64?
        /// Whether the connection ended before the response was sent in full.
        public var clientHungUp: Bool
        public var receivedAt: HTTPDate
        public var durationSeconds: Double
        public var clientAddress: String

        /// The first value of a request header, compared case-insensitively.
        public func header(_ name: String) -> String? {
            headers.first { ASCII.equalsIgnoringCase($0.name, name) }?.value
        }
    }

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    /// One part of an upload.
    public struct Part: Sendable, Equatable {
        public var name: String
        /// nil for a text field.
        public var filename: String?
        public var contentType: String
        public var size: UInt64
        /// For a stored file.
        public var sha256: String?
    }

    public let capacity: Int
    /// The most bytes of text the entries may hold together (see `Entry.textBytes`).
    public let maxBytes: Int
    private let state: Mutex<(entries: [Entry], next: Int, bytes: Int)>

    init(capacity: Int, maxBytes: Int = 16 << 20) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        state = Mutex(([], 1, 0))
    }

    /// The requests kept, oldest first; only those to `path` (decoded, exact) and with
    /// `method` when given.
    public func requests(path: String? = nil, method: String? = nil) -> [Entry] {
        state.withLock { $0.entries }.filter { entry in
            (path.map { entry.path == $0 } ?? true) && (method.map { entry.method == $0 } ?? true)
        }
    }

    /// Like `requests(path:method:)`, waiting up to `timeout` for at least `count` of them:
    /// a request is journaled when it completes, a moment after its client got the answer.
    public func waitForRequests(path: String? = nil, method: String? = nil, count: Int = 1,
                                timeout: Duration = .seconds(5)) -> [Entry] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let found = requests(path: path, method: method)
            if found.count >= count || ContinuousClock.now >= deadline { return found }
            Thread.sleep(forTimeInterval: 0.005)
        }
    }

    public func clear() {
        state.withLock { state in
            state.entries.removeAll()
            state.bytes = 0
        }
    }

    func record(_ request: CompletedRequest) {
        guard capacity > 0 else { return }
        let head = request.head
        let path: String
        if case .segments(let segments) = RequestPath(head.path) { path = "/" + segments.joined(separator: "/") } else { path = head.path }
        state.withLock { state in
            let entry = Entry(
                sequence: state.next, method: head.method, target: head.target, path: path,
                headers: head.headers.map { Header(name: $0.name, value: $0.value) },
                requestBodyBytes: request.requestBodyBytes,
                parts: request.parts.map { Part(name: $0.name, filename: $0.filename, contentType: $0.contentType, size: $0.size, sha256: $0.sha256) },
                status: request.status, responseBodyBytes: request.bodyBytes, bytesSent: request.bytesSent,
                clientHungUp: !request.completed, receivedAt: request.receivedAt, durationSeconds: request.seconds,
                clientAddress: head.clientAddress)
            state.entries.append(entry)
            state.bytes += entry.textBytes
            state.next += 1
            // The oldest go, past the count or the bytes (the newest always stays).
            var dropped = 0
            while state.entries.count - dropped > 1,
                  state.entries.count - dropped > capacity || state.bytes > maxBytes {
                state.bytes -= state.entries[dropped].textBytes
                dropped += 1
            }
            state.entries.removeFirst(dropped)
        }
    }
}

extension RequestJournal.Entry {
    /// The entry's text in bytes, with a little for each string's own overhead: what it
    /// costs to keep, near enough.
    var textBytes: Int {
        let overhead = 16
        return target.utf8.count + path.utf8.count + method.utf8.count + clientAddress.utf8.count + 4 * overhead
            + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 * overhead }
            + parts.reduce(0) { $0 + $1.name.utf8.count + ($1.filename?.utf8.count ?? 0) + $1.contentType.utf8.count + ($1.sha256?.utf8.count ?? 0) + 4 * overhead }
    }
}

extension RequestJournal.Entry {
    var json: JSON {
        .object([
            ("sequence", .number(Int64(sequence))),
            ("method", .string(method)),
            ("target", .string(target)),
            ("path", .string(path)),
            ("headers", .array(headers.map { .array([.string($0.name), .string($0.value)]) })),
            ("requestBodyBytes", .unsigned(requestBodyBytes)),
            ("parts", .array(parts.map { part in
                .object([
                    ("name", .string(part.name)),
                    ("filename", part.filename.map(JSON.string) ?? .null),
                    ("contentType", .string(part.contentType)),
                    ("size", .unsigned(part.size)),
                    ("sha256", part.sha256.map(JSON.string) ?? .null),
                ])
            })),
            ("status", .number(Int64(status))),
            ("responseBodyBytes", .unsigned(responseBodyBytes)),
            ("bytesSent", bytesSent.map(JSON.unsigned) ?? .null),
            ("clientHungUp", .bool(clientHungUp)),
            ("receivedAt", .string(receivedAt.description)),
            ("durationMilliseconds", .number(Int64((durationSeconds * 1000).rounded()))),
            ("clientAddress", .string(clientAddress)),
        ])
    }
}
