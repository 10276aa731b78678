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
                                            source: StoredObjectSource(client: client, key: key, length: UInt64(info.size)))
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
/// asks for, and memory stays at one window per response.
final class StoredObjectSource: ByteSource, @unchecked Sendable {
    static let window = 4 << 20
    private let client: S3Client
    private let key: String
    private let length: UInt64
    /// The bytes read ahead, and where they start in the object.
    private var ahead: [UInt8] = []
    private var aheadOffset: UInt64 = 0
    /// Where the response's reads end: no byte past it is read ahead.
    private var readEnd: UInt64

    init(client: S3Client, key: String, length: UInt64) {
        self.client = client
        self.key = key
        self.length = length
        readEnd = length
    }

    func willRead(from offset: UInt64, length: UInt64) {
        readEnd = min(self.length, offset + length)
    }

    func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard offset < length else { return nil }
        if offset < aheadOffset || offset >= aheadOffset + UInt64(ahead.count) {
            guard fill(from: offset, wanted: buffer.count) else { return nil }
        }
        let start = Int(offset - aheadOffset)
        let count = min(buffer.count, ahead.count - start)
        ahead.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + start, byteCount: count) }
        return count
    }

    /// Reads the window at `offset`: what is wanted now, and up to `window` ahead of it
    /// within the response's reads.
    private func fill(from offset: UInt64, wanted: Int) -> Bool {
        let end = max(offset + UInt64(wanted), min(readEnd, offset + UInt64(Self.window)))
        let last = min(length, end) - 1
        ahead.removeAll(keepingCapacity: true)
        aheadOffset = offset
        do {
            try client.getObject(key, range: Int64(offset)...Int64(last)) { piece in ahead.append(contentsOf: piece) }
        } catch {
            return false
        }
        return !ahead.isEmpty
    }
}
