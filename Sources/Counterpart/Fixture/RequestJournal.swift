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
        /// The fault it got (`--fault`, an armed rule's, its own), and the rule's id.
        public var fault: AppliedFault?

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
    /// The most bytes of text the entries may hold together (see `textBytes`).
    public let maxBytes: Int
    private let ring: Mutex<Ring>

    init(capacity: Int, maxBytes: Int = 16 << 20) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        ring = Mutex(Ring(capacity: max(capacity, 0)))
    }

    /// The requests kept, oldest first; only those to `path` (decoded, exact) and with
    /// `method` when given.
    public func requests(path: String? = nil, method: String? = nil) -> [Entry] {
        // Entries are made here, when a test reads them, not on the request path; only
        // for the requests asked for.
        ring.withLock { $0.oldestFirst() }.filter { kept in
            let head = kept.request.head
            return (path.map { Self.decodedPath(of: head) == $0 } ?? true) && (method.map { head.method == $0 } ?? true)
        }.map(Entry.init)
    }

    /// The path an entry shows and is looked up by: decoded, or as sent when it does not decode.
    fileprivate static func decodedPath(of head: RequestHead) -> String {
        head.decodedPath.decoded ?? head.path
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
        let dropped = ring.withLock { $0.removeAll() }
        _ = dropped  // released here, outside the lock
    }

    /// Keeps `request`: O(1). The entry is made before the lock is taken, which is then held
    /// only to move references in and out of the ring (the oldest entries it pushes out are
    /// released after it is let go): the server's threads all pass through here.
    /// Returns what it keeps (nil when the journal keeps nothing), which the request's
    /// event shares, and the request's `textBytes`, which that event counts too.
    @discardableResult
    func record(_ request: CompletedRequest) -> (kept: Kept?, bytes: Int) {
        let bytes = Self.textBytes(of: request)
        guard capacity > 0 else { return (nil, bytes) }
        let kept = Kept(request: request, bytes: bytes)
        let dropped = ring.withLock { $0.append(kept, maxBytes: maxBytes) }
        _ = dropped
        return (kept, bytes)
    }

    /// The text a kept request holds, in bytes, with a little for each string's own
    /// overhead: what it costs to keep, near enough.
    static func textBytes(of request: CompletedRequest) -> Int {
        let overhead = 16
        let head = request.head
        // Never less than the entry's own `textBytes`: the raw path stands for both the
        // target and the decoded path, which is never longer.
        var bytes = 2 * head.path.utf8.count + 1 + head.method.utf8.count + head.clientAddress.utf8.count + 4 * overhead
        // A query byte is at most three in the target (`%XX`).
        for (name, value) in head.query { bytes += 3 * (name.utf8.count + (value?.utf8.count ?? 0)) + 1 }
        for field in head.headers { bytes += field.name.utf8.count + field.value.utf8.count + 2 * overhead }
        for part in request.parts {
            bytes += part.name.utf8.count + (part.filename?.utf8.count ?? 0) + part.contentType.utf8.count
                + (part.sha256?.utf8.count ?? 0) + 4 * overhead
        }
        return bytes
    }

    /// A kept request and its place in the server's sequence (0 for one the journal does
    /// not keep). The request's event holds the same object: keeping it costs a reference,
    /// not a copy of the request. Unchecked: `sequence` is given under the ring's lock,
    /// before `record` returns it to anyone else.
    final class Kept: @unchecked Sendable {
        fileprivate(set) var sequence = 0
        let request: CompletedRequest
        let bytes: Int

        init(request: CompletedRequest, bytes: Int) {
            self.request = request
            self.bytes = bytes
        }
    }

    /// A fixed ring of the last `capacity` requests: appending and dropping the oldest are O(1),
    /// nothing is shifted or copied as it grows.
    fileprivate struct Ring: Sendable {
        private var slots: [Kept?]
        private var oldest = 0
        private var count = 0
        private var bytes = 0
        private var nextSequence = 1

        init(capacity: Int) { slots = Array(repeating: nil, count: capacity) }

        /// Adds `kept`, dropping the oldest past the count or the bytes (the newest always
        /// stays); returns what was dropped, for the caller to release outside the lock
        /// (one entry when the ring is full, more only past the byte bound: no array is
        /// made under the lock for the usual one).
        mutating func append(_ kept: Kept, maxBytes: Int) -> (Kept?, [Kept]) {
            var dropped: (Kept?, [Kept]) = (nil, [])
            while count > 0, count == slots.count || bytes + kept.bytes > maxBytes {
                let oldest = removeOldest()
                if dropped.0 == nil { dropped.0 = oldest } else { dropped.1.append(oldest) }
            }
            kept.sequence = nextSequence
            slots[(oldest + count) % slots.count] = kept
            count += 1
            bytes += kept.bytes
            nextSequence += 1
            return dropped
        }

        private mutating func removeOldest() -> Kept {
            let kept = slots[oldest]!
            slots[oldest] = nil
            oldest = (oldest + 1) % slots.count
            count -= 1
            bytes -= kept.bytes
            return kept
        }

        mutating func removeAll() -> [Kept] {
            var dropped: [Kept] = []
            dropped.reserveCapacity(count)
            while count > 0 { dropped.append(removeOldest()) }
            return dropped
        }

        func oldestFirst() -> [Kept] {
            (0..<count).map { slots[(oldest + $0) % slots.count]! }
        }
    }
}

extension RequestJournal.Entry {
    init(_ kept: RequestJournal.Kept) {
        self.init(kept.request, sequence: kept.sequence)
    }

    /// The entry of `request`, `sequence`th of the server's requests.
    init(_ request: CompletedRequest, sequence: Int) {
        let head = request.head
        let path = RequestJournal.decodedPath(of: head)
        self.init(
            sequence: sequence, method: head.method, target: head.target, path: path,
            // Secrets (credentials, cookies) never leave through the journal.
            headers: head.headers.map { RequestJournal.Header(name: $0.name, value: JournalRedaction.value($0.value, ofHeader: $0.name)) },
            requestBodyBytes: request.requestBodyBytes,
            parts: request.parts.map { RequestJournal.Part(name: $0.name, filename: $0.filename, contentType: $0.contentType, size: $0.size, sha256: $0.sha256) },
            status: request.status, responseBodyBytes: request.bodyBytes, bytesSent: request.bytesSent,
            clientHungUp: !request.completed, receivedAt: request.receivedAt, durationSeconds: request.seconds,
            clientAddress: head.clientAddress, fault: head.fault)
    }
}

extension RequestJournal.Entry {
    /// The entry's text in bytes, as `RequestJournal.textBytes(of:)` counts it (that one is
    /// never less).
    var textBytes: Int {
        let overhead = 16
        return target.utf8.count + path.utf8.count + method.utf8.count + clientAddress.utf8.count + 4 * overhead
            + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 * overhead }
            + parts.reduce(0) { $0 + $1.name.utf8.count + ($1.filename?.utf8.count ?? 0) + $1.contentType.utf8.count + ($1.sha256?.utf8.count ?? 0) + 4 * overhead }
    }
}

extension RequestJournal {
    /// `{"requests":[…]}`: the entries kept, oldest first, to `path` and with `method` when
    /// given, as `/__counterpart/requests` answers.
    func requestsJSON(path: String? = nil, method: String? = nil) -> [UInt8] {
        let kept = ring.withLock { $0.oldestFirst() }.filter { kept in
            let head = kept.request.head
            return (path.map { Self.decodedPath(of: head) == $0 } ?? true) && (method.map { head.method == $0 } ?? true)
        }
        var out = JSONWriter(capacity: kept.reduce(64) { $0 + $1.bytes + 256 })
        out.beginObject()
        out.key("requests")
        out.beginArray()
        for entry in kept { Self.writeEntry(of: entry.request, sequence: entry.sequence, to: &out) }
        out.endArray()
        out.endObject()
        return out.bytes
    }

    /// The journal's JSON of `request`, `sequence`th of the server's requests, written
    /// straight from it (no entry, no value tree): the one writer of an entry's JSON, for
    /// `/__counterpart/requests` and for a `request` event. Its fields are the entry's
    /// (`Entry.init(_:sequence:)`), redacted the same way.
    static func writeEntry(of request: CompletedRequest, sequence: Int, to out: inout JSONWriter) {
        // Keys go in with the punctuation around them, as one literal each: this runs for
        // every request while someone watches the events.
        let head = request.head
        out.beginObject()
        out.raw("\"sequence\":")
        out.number(sequence)
        out.raw(",\"method\":")
        out.string(head.method)
        out.raw(",\"target\":")
        if head.query.isEmpty { out.string(head.path) } else { out.string(head.target) }
        out.raw(",\"path\":")
        if case .segments(let segments) = head.decodedPath {
            // The decoded path (`RequestPath.decoded`) in pieces.
            out.beginString()
            if segments.isEmpty { out.stringContent("/") }
            for segment in segments {
                out.stringContent("/")
                out.stringContent(segment)
            }
            out.endString()
        } else {
            out.string(head.path)
        }
        out.raw(",\"headers\":[")
        for field in head.headers {
            out.beginArray()
            out.string(field.name)
            if JournalRedaction.isSecret(field.name) { out.redacted(field.value) } else { out.string(field.value) }
            out.endArray()
        }
        out.raw("],\"requestBodyBytes\":")
        out.unsigned(request.requestBodyBytes)
        out.raw(",\"parts\":[")
        for part in request.parts {
            out.beginObject()
            out.raw("\"name\":")
            out.string(part.name)
            out.raw(",\"filename\":")
            out.string(part.filename)
            out.raw(",\"contentType\":")
            out.string(part.contentType)
            out.raw(",\"size\":")
            out.unsigned(part.size)
            out.raw(",\"sha256\":")
            out.string(part.sha256)
            out.endObject()
        }
        out.raw("],\"status\":")
        out.number(request.status)
        out.raw(",\"responseBodyBytes\":")
        out.unsigned(request.bodyBytes)
        out.raw(",\"bytesSent\":")
        out.unsigned(request.bytesSent)
        out.raw(request.completed ? ",\"clientHungUp\":false,\"receivedAt\":" : ",\"clientHungUp\":true,\"receivedAt\":")
        out.date(request.receivedAt)
        out.raw(",\"durationMilliseconds\":")
        out.number(Int64((request.seconds * 1000).rounded()))
        out.raw(",\"clientAddress\":")
        out.string(head.clientAddress)
        if let fault = head.fault {
            out.raw(",\"fault\":{\"fault\":")
            out.string(fault.fault)
            out.raw(",\"rule\":")
            if let rule = fault.rule { out.number(rule) } else { out.null() }
            out.raw("}}")
        } else {
            out.raw(",\"fault\":null}")
        }
        out.closedValue()
    }
}

extension JSONWriter {
    /// A secret header's value as the journal keeps it: `"<redacted 24 bytes>"`
    /// (`JournalRedaction.value(_:ofHeader:)`).
    mutating func redacted(_ value: String) {
        beginString()
        literal("<redacted ")
        digits(UInt64(value.utf8.count))
        literal(" bytes>")
        endString()
    }
}

