import Foundation
import HTTPTransfer
import Synchronization

/// `/uploads/…` served from the object store: the same answers as from a folder (validators,
/// preconditions, `Range` and multi-range, `?download`, listings as HTML or JSON), each made
/// from ranged `GET`s of the object (and its `HEAD` where a `GET` cannot tell).
///
/// The validators come from the store, so every server sharing it gives the same: the
/// strong ETag is the object's own ETag (its content's digest) with its modification time,
/// and `Last-Modified` the store's time.
struct StoredObjectFiles: FileServing {
    let client: S3Client
    let urlPrefix: [String]
    /// Headers added to every file response (as for the uploads folder).
    let fileHeaders: [HTTPField]
    let rangePolicy: RangePolicy
    /// What downloads may hold to read the next window ahead (the upload buffers' budget).
    var readAheadBudget: ByteBudget? = nil

    func respond(to head: RequestHead, segments: [String]) -> Response {
        guard head.method == "GET" || head.method == "HEAD" else {
            return Response.methodNotAllowed(head.method, allowed: ["GET", "HEAD"], on: "\(head.path) (a static path)")
        }
        // Hidden names (the claims on names, resumable uploads' state) are never served.
        guard !segments.contains(where: { $0.hasPrefix(".") }) else { return notFound(head) }
        if segments.isEmpty || head.path.hasSuffix("/") { return listing(head, segments) }
        let key = segments.joined(separator: "/")
        let info: S3ObjectInfo
        let firstWindow: WindowFetch?
        do {
            guard let found = try open(key, for: head) else { return folderOrNotFound(head, segments) }
            (info, firstWindow) = found
        } catch {
            return Self.failure(error, doing: "look up \(head.path)")
        }
        let source = StoredObjectSource(client: client, key: key, length: UInt64(info.size), budget: readAheadBudget, first: firstWindow)
        let representation = Representation(length: UInt64(info.size), validators: Self.validators(of: info),
                                            contentType: info.contentType ?? ContentTypes.forName(key), name: segments.last ?? "",
                                            source: source)
        return RepresentationResponder(head: head, representation: representation, extraHeaders: fileHeaders, rangePolicy: rangePolicy).respond()
    }

    /// The object's info (nil when there is no such key) and, for most GETs, the first bytes
    /// the answer needs already on their way: one ranged GET gives both, where a HEAD and then
    /// a GET would wait for the store twice. A HEAD when a GET cannot tell: an empty object or
    /// a range past its end (416), a request whose preconditions may leave the bytes unsent.
    private func open(_ key: String, for head: RequestHead) throws -> (S3ObjectInfo, WindowFetch?)? {
        if let range = Self.firstWindow(for: head), let buffer = PartBuffer(capacity: StoredObjectSource.window) {
            let fetch = WindowFetch(client: client, key: key, range: range, into: buffer)
            switch fetch.objectInfo() {
            case .success(let info): return (info, fetch)
            case .failure(let error as S3Error) where error == .notFound: return nil
            case .failure: fetch.cancel()
            }
        }
        guard let info = try client.headObject(key) else { return nil }
        return (info, nil)
    }

    /// The bytes a GET's answer starts with, when they are known before the object's length:
    /// the first window of the object, or of the one range asked for (`first-last`, `first-`).
    /// None for a suffix or several ranges, nor with a precondition (If-Range aside), which
    /// may answer without them (304, 412).
    static func firstWindow(for head: RequestHead) -> Range<UInt64>? {
        guard head.method == "GET" else { return nil }
        if head.hasConditionalFields {
            let preconditions = ["If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"]
            guard preconditions.allSatisfy({ head.header($0) == nil }) else { return nil }
        }
        let window = UInt64(StoredObjectSource.window)
        guard let text = head.range else { return 0..<window }
        guard let specs = RangeHeader(parsing: text)?.specs, specs.count == 1 else { return nil }
        switch specs[0] {
        case .closed(let first, let last) where first < UInt64(Int64.max) - window:
            return first..<(first + min(last - first, window - 1) + 1)
        case .from(let first) where first < UInt64(Int64.max) - window:
            return first..<(first + window)
        default:
            return nil
        }
    }

    /// An object's validators, the same from every server.
    static func validators(of info: S3ObjectInfo) -> RepresentationValidators {
        let opaque = info.etag.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") } + "-" + String(info.lastModified, radix: 16)
        return RepresentationValidators(entityTag: EntityTag(checkedOpaque: opaque),
                                        lastModified: HTTPDate(secondsSince1970: info.lastModified))
    }

    /// A path with no object may be a folder (a common prefix): redirect to it with its
    /// slash, as a folder on disk is.
    private func folderOrNotFound(_ head: RequestHead, _ segments: [String]) -> Response {
        let prefix = segments.joined(separator: "/") + "/"
        let page: (objects: [S3ObjectInfo], commonPrefixes: [String], nextContinuationToken: String?)
        do {
            page = try client.listObjects(prefix: prefix, delimiter: "/", continuationToken: nil, maxKeys: 1)
        } catch {
            return Self.failure(error, doing: "look up \(head.path)")
        }
        guard !page.objects.isEmpty || !page.commonPrefixes.isEmpty else { return notFound(head) }
        return Response(status: 301, headers: [HTTPField(name: "Location", value: RequestPath.encoded(urlPrefix + segments) + "/" + head.queryString)])
    }

    /// The objects and common prefixes under a folder's path, as a listing (ListObjectsV2).
    private func listing(_ head: RequestHead, _ segments: [String]) -> Response {
        let prefix = segments.isEmpty ? "" : segments.joined(separator: "/") + "/"
        var entries: [DirectoryListing.Entry] = []
        var token: String?
        do {
            repeat {
                let page = try client.listObjects(prefix: prefix, delimiter: "/", continuationToken: token)
                for object in page.objects {
                    let name = String(object.key.dropFirst(prefix.count))
                    guard !name.isEmpty, !name.hasPrefix(".") else { continue }
                    entries.append(.init(name: name, isFolder: false, size: UInt64(max(0, object.size)),
                                         modified: timespec(tv_sec: Int(object.lastModified), tv_nsec: 0)))
                }
                for folder in page.commonPrefixes {
                    let name = String(folder.dropFirst(prefix.count).dropLast())
                    guard !name.isEmpty, !name.hasPrefix(".") else { continue }
                    entries.append(.init(name: name, isFolder: true, size: 0, modified: timespec()))
                }
                token = page.nextContinuationToken
            } while token != nil
        } catch {
            return Self.failure(error, doing: "list \(head.path)")
        }
        if !segments.isEmpty, entries.isEmpty { return notFound(head) }
        let urlPath = RequestPath.encoded(urlPrefix + segments) + "/"
        return DirectoryListing(urlPath: urlPath, entries: entries).response(for: head)
    }

    private func notFound(_ head: RequestHead) -> Response {
        Response.error(404, "\(head.path) was not found")
    }

    private static func failure(_ error: any Error, doing operation: String) -> Response {
        let failure = S3UploadStore.storageError(error, doing: operation)
        return Response.error(failure.status, failure.description)
    }
}

/// An object's bytes for a response, read by ranged `GET`s of up to `window` bytes, each
/// on a thread of its own, so that a large download costs a request per window, not one per
/// piece the response asks for, and its bytes are sent on as they arrive. While one window is
/// sent, the next is fetched (as curl reading the object straight from the store keeps its
/// connection busy), when the store's buffer budget has room for a second window while more
/// than half free. Memory: one window per response, two while reading ahead, mapped for the
/// response and reused from window to window, unmapped when it ends (as the upload parts
/// are), so that what a download held is given back.
final class StoredObjectSource: ByteSource, @unchecked Sendable {
    static let window = 4 << 20
    private let client: S3Client
    private let key: String
    private let length: UInt64
    /// What a second window is taken from (the store's upload buffers).
    private let budget: ByteBudget?
    private var holdsSecondWindow = false
    /// The window read from (its bytes may still be arriving), and the one after it.
    private var current: WindowFetch?
    private var next: WindowFetch?
    private var readsAhead = true
    /// A finished window's buffer, for the next one.
    private var spare: PartBuffer?
    /// Where the response's reads end: no byte past it is read ahead.
    private var readEnd: UInt64

    /// `first`: a window already on its way (the one that told the object's length).
    init(client: S3Client, key: String, length: UInt64, budget: ByteBudget? = nil, first: WindowFetch? = nil) {
        self.client = client
        self.key = key
        self.length = length
        self.budget = budget
        readEnd = length
        current = first
    }

    deinit {
        current?.cancel()
        next?.cancel()
        if holdsSecondWindow { budget?.give(Self.window) }
    }

    func willRead(from offset: UInt64, length: UInt64) {
        readEnd = min(self.length, offset + length)
    }

    func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard offset < length else { return nil }
        if current?.range.contains(offset) != true {
            guard move(to: offset, wanted: buffer.count) else { return nil }
        }
        if readsAhead {
            readsAhead = false
            readAhead()
        }
        guard let bytes = current!.bytes(from: offset, wanting: buffer.count) else { return nil }
        let count = min(buffer.count, bytes.count)
        buffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: count)
        return count
    }

    /// Makes the window at `offset` the one read from: the one fetched ahead if it holds
    /// `offset`, else one fetched now (what is wanted, and up to `window` ahead of it within
    /// the response's reads).
    private func move(to offset: UInt64, wanted: Int) -> Bool {
        if let left = current {
            current = nil
            if left.succeeded { spare = spare ?? left.buffer } else { left.cancel() }
        }
        readsAhead = true
        if let fetch = next, fetch.range.contains(offset) {
            next = nil
            current = fetch
            return true
        }
        next?.cancel()  // a window fetched for reads that went elsewhere: its buffer goes with it
        next = nil
        let end = min(length, max(offset + UInt64(wanted), min(readEnd, offset + UInt64(Self.window))))
        guard let buffer = takeSpare() ?? PartBuffer(capacity: Self.window) else { return false }
        current = WindowFetch(client: client, key: key, range: offset..<end, into: buffer)
        return true
    }

    /// Starts fetching the window after the current one, if the response reads on into it.
    private func readAhead() {
        guard next == nil, let following = current?.range.upperBound, following < readEnd,
              let buffer = secondWindow() else { return }
        next = WindowFetch(client: client, key: key, range: following..<min(readEnd, following + UInt64(Self.window)), into: buffer)
    }

    private func takeSpare() -> PartBuffer? {
        defer { spare = nil }
        return spare
    }

    /// The buffer to read ahead into: the spare one, or a new one if the budget allows.
    private func secondWindow() -> PartBuffer? {
        if let spare = takeSpare() { return spare }
        guard !holdsSecondWindow, let budget, budget.take(Self.window, leaving: budget.total / 2) else { return nil }
        holdsSecondWindow = true
        return PartBuffer(capacity: Self.window)
    }
}

/// One window of an object, fetched into its buffer on a thread of its own; its bytes can be
/// read as they arrive.
final class WindowFetch: @unchecked Sendable {
    let range: Range<UInt64>
    let buffer: PartBuffer
    private let state = NSCondition()
    /// What the response's headers told, once they are in.
    private var announced: S3ObjectInfo?
    /// The bytes in `buffer` so far (appended past it only, so those before it can be read
    /// without the lock).
    private var arrived = 0
    private var outcome: Result<Void, any Error>?
    private var cancelled = false

    init(client: S3Client, key: String, range: Range<UInt64>, into buffer: PartBuffer) {
        precondition(!range.isEmpty && range.count <= buffer.capacity, "a window larger than its buffer")
        self.range = range
        self.buffer = buffer
        buffer.empty()
        let thread = Thread { [self] in
            let result = Result {
                try client.getObject(key, range: Int64(range.lowerBound)...Int64(range.upperBound - 1), announce: { info in
                    self.update { $0.announced = info }
                }) { piece in
                    try self.receive(piece)
                }
            }
            update { fetch in
                if case .success(let info) = result, fetch.announced == nil { fetch.announced = info }
                fetch.outcome = result.map { _ in }
            }
        }
        thread.name = "counterpart-s3-window"
        thread.start()
    }

    private func receive(_ piece: UnsafeRawBufferPointer) throws {
        // The range fits the buffer (checked when made): more than the range is a store's error.
        guard buffer.count + piece.count <= range.count else {
            throw S3Error.invalidRequest("the store sent more than the range asked")
        }
        buffer.append(piece)
        let count = buffer.count
        try update { fetch in
            if fetch.cancelled { throw CancellationError() }
            fetch.arrived = count
        }
    }

    private func update<T>(_ change: (WindowFetch) throws -> T) rethrows -> T {
        state.lock()
        defer {
            state.broadcast()
            state.unlock()
        }
        return try change(self)
    }

    /// Waits until `done` holds.
    private func wait<T>(until done: (WindowFetch) -> T?) -> T {
        state.lock()
        defer { state.unlock() }
        while true {
            if let answer = done(self) { return answer }
            state.wait()
        }
    }

    /// The object's info from the answer's headers, once they are in; or why there is none.
    func objectInfo() -> Result<S3ObjectInfo, any Error> {
        wait { fetch in
            if let info = fetch.announced { return .success(info) }
            switch fetch.outcome {
            case .failure(let error): return .failure(error)
            case .success: return .failure(S3Error.invalidRequest("a ranged GET told nothing of its object"))
            case nil: return nil
            }
        }
    }

    /// The bytes from `offset` (in `range`) that have arrived, once `wanted` of them have (or
    /// the rest of the window, or the fetch has ended): a reader that keeps up with the store
    /// is woken once per block it sends, not once per piece curl hands over. Nil when no
    /// more will come (the store failed, or ended the window short).
    func bytes(from offset: UInt64, wanting wanted: Int = 1) -> UnsafeRawBufferPointer? {
        let start = Int(offset - range.lowerBound)
        let enough = start + max(1, min(wanted, range.count - start))
        let arrived: Int = wait { fetch in fetch.arrived >= enough || fetch.outcome != nil ? fetch.arrived : nil }
        guard arrived > start else { return nil }
        return UnsafeRawBufferPointer(start: buffer.baseAddress + start, count: arrived - start)
    }

    /// Whether every byte came (the window's buffer can then be reused).
    var succeeded: Bool {
        state.lock()
        defer { state.unlock() }
        if case .success = outcome { return true }
        return false
    }

    /// Ends the transfer at its next bytes; the buffer stays with it until it has ended.
    func cancel() {
        update { $0.cancelled = true }
    }
}
