import Foundation
import HTTPTransfer
import Synchronization

/// `/uploads/…` served from the object store: the same answers as from a folder (validators,
/// preconditions, `Range` and multi-range, `?download`, listings as HTML or JSON), each made
/// from the object's `HEAD` and ranged `GET`s.
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
        do {
            guard let found = try client.headObject(key) else { return folderOrNotFound(head, segments) }
            info = found
        } catch {
            return Self.failure(error, doing: "look up \(head.path)")
        }
        let representation = Representation(length: UInt64(info.size), validators: Self.validators(of: info),
                                            contentType: info.contentType ?? ContentTypes.forName(key), name: segments.last ?? "",
                                            source: StoredObjectSource(client: client, key: key, length: UInt64(info.size), budget: readAheadBudget))
        return RepresentationResponder(head: head, representation: representation, extraHeaders: fileHeaders, rangePolicy: rangePolicy).respond()
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

/// An object's bytes for a response, read by ranged `GET`s of up to `window` bytes ahead,
/// so that a large download costs a request per window, not one per piece the response
/// asks for. While one window is sent, the next is fetched on a thread of its own (as curl
/// reading the object straight from the store keeps its connection busy), when the store's
/// buffer budget has room for a second window while more than half free: else each window
/// is fetched when it is needed. Memory: one window per response, two while reading ahead,
/// mapped for the response and reused from window to window, unmapped when it ends (as the
/// upload parts are), so that what a download held is given back.
final class StoredObjectSource: ByteSource, @unchecked Sendable {
    static let window = 4 << 20
    private let client: S3Client
    private let key: String
    private let length: UInt64
    /// What a second window is taken from (the store's upload buffers).
    private let budget: ByteBudget?
    private var holdsSecondWindow = false
    /// The window read from, and where it starts in the object.
    private var ahead: PartBuffer?
    private var aheadOffset: UInt64 = 0
    /// The next window, on its way; or the second buffer, waiting to be filled.
    private var next: WindowFetch?
    private var spare: PartBuffer?
    /// Where the response's reads end: no byte past it is read ahead.
    private var readEnd: UInt64

    init(client: S3Client, key: String, length: UInt64, budget: ByteBudget? = nil) {
        self.client = client
        self.key = key
        self.length = length
        self.budget = budget
        readEnd = length
    }

    deinit {
        if holdsSecondWindow { budget?.give(Self.window) }
    }

    func willRead(from offset: UInt64, length: UInt64) {
        readEnd = min(self.length, offset + length)
    }

    func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard offset < length else { return nil }
        if ahead == nil || offset < aheadOffset || offset >= aheadOffset + UInt64(ahead!.count) {
            guard fill(from: offset, wanted: buffer.count) else { return nil }
        }
        let bytes = ahead!.bytes
        let start = Int(offset - aheadOffset)
        let count = min(buffer.count, bytes.count - start)
        buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + start, byteCount: count)
        return count
    }

    /// Makes the window at `offset` the one read from: the one fetched ahead if it starts
    /// there, else read now (what is wanted, and up to `window` ahead of it within the
    /// response's reads); then starts fetching the one after it.
    private func fill(from offset: UInt64, wanted: Int) -> Bool {
        let previous = ahead
        ahead = nil
        aheadOffset = offset
        if let fetch = next, fetch.range.lowerBound == offset, fetch.range.count >= wanted {
            next = nil
            guard let filled = fetch.wait() else { return false }
            ahead = filled
            spare = previous
        } else {
            next = nil  // a window fetched for reads that went elsewhere: its buffer stays with it
            let end = min(length, max(offset + UInt64(wanted), min(readEnd, offset + UInt64(Self.window))))
            guard let buffer = previous ?? PartBuffer(capacity: Self.window),
                  Self.fetch(client, key, offset..<end, into: buffer) else { return false }
            ahead = buffer
        }
        let following = offset + UInt64(ahead!.count)
        guard following < readEnd, let buffer = secondWindow() else { return true }
        next = WindowFetch(client: client, key: key, range: following..<min(readEnd, following + UInt64(Self.window)), into: buffer)
        return true
    }

    /// The buffer to read ahead into: the spare one, or a new one if the budget allows.
    private func secondWindow() -> PartBuffer? {
        if let spare {
            self.spare = nil
            return spare
        }
        guard !holdsSecondWindow, let budget, budget.take(Self.window, leaving: budget.total / 2) else { return nil }
        holdsSecondWindow = true
        return PartBuffer(capacity: Self.window)
    }

    /// Reads `range` of the object into `buffer` (emptied first); false when the store failed,
    /// sent nothing, or sent more than was asked.
    fileprivate static func fetch(_ client: S3Client, _ key: String, _ range: Range<UInt64>, into buffer: PartBuffer) -> Bool {
        buffer.empty()
        guard !range.isEmpty, range.count <= buffer.capacity else { return false }
        do {
            _ = try client.getObject(key, range: Int64(range.lowerBound)...Int64(range.upperBound - 1)) { piece in
                guard buffer.count + piece.count <= buffer.capacity else { throw S3Error.invalidRequest("the store sent more than the range asked") }
                buffer.append(piece)
            }
        } catch {
            return false
        }
        return buffer.count > 0
    }
}

/// One window of an object fetched into its buffer on a thread of its own.
private final class WindowFetch: @unchecked Sendable {
    let range: Range<UInt64>
    private let buffer: PartBuffer
    private var fetched = false
    private let done = DispatchSemaphore(value: 0)

    init(client: S3Client, key: String, range: Range<UInt64>, into buffer: PartBuffer) {
        self.range = range
        self.buffer = buffer
        let thread = Thread { [self] in
            fetched = StoredObjectSource.fetch(client, key, range, into: buffer)
            done.signal()
        }
        thread.name = "counterpart-s3-read-ahead"
        thread.start()
    }

    /// The buffer once the window is in it; nil when the store failed.
    func wait() -> PartBuffer? {
        done.wait()
        return fetched ? buffer : nil
    }
}
