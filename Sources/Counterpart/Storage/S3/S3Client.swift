import Foundation
import HTTPTransfer

/// A synchronous S3 client for one bucket and prefix, safe to call from any thread (the
/// server calls it from libmicrohttpd's workers): each call takes an easy handle from a pool,
/// so calls run in parallel and reuse their connections.
///
/// Requests are path-style (`ENDPOINT/BUCKET/PREFIX+KEY`) and signed by libcurl's own SigV4.
/// Keys are relative to `configuration.prefix`, and so are the keys a listing returns.
public final class S3Client: Sendable {
    public let configuration: S3Configuration
    private let pool: CurlHandlePool
    /// `ENDPOINT/BUCKET`, the start of every URL.
    private let bucketURL: String

    public init(_ configuration: S3Configuration) throws {
        self.configuration = configuration
        pool = try CurlHandlePool(signing: CurlSigning(provider: "aws:amz:\(configuration.region):s3",
                                                       accessKeyID: configuration.accessKeyID,
                                                       secretAccessKey: configuration.secretAccessKey),
                               stallSeconds: configuration.stallSeconds)
        bucketURL = configuration.endpoint + "/" + configuration.bucket
    }

    /// The TCP connections opened so far: with keep-alive, about one per thread that has
    /// called at once, not one per request.
    public var connectionsOpened: Int { pool.connectionsOpened }

    // MARK: Objects

    /// The object's info, or nil when there is no such key.
    public func headObject(_ key: String) throws -> S3ObjectInfo? {
        let response = try send(.head, key: key)
        if response.status == 404 { return nil }
        try Self.requireSuccess(response)
        return try Self.objectInfo(key: key, response)
    }

    /// A small object's bytes (held in memory), or nil when there is no such key.
    public func getObject(_ key: String) throws -> [UInt8]? {
        let response = try send(.get, key: key)
        if response.status == 404, Self.errorCode(response) != "NoSuchBucket" { return nil }
        try Self.requireSuccess(response)
        return response.body
    }

    /// Streams the whole object, or the bytes `first...last` of it, to `body` as they arrive,
    /// and returns the object's info from the response's headers: for a range, `size` is the
    /// whole object's length (from `Content-Range`). A range that ends past the object's end
    /// is cut to it; one that starts past it throws `.status(416, …)`. No such key throws
    /// `.notFound`. An error thrown by `body` ends the transfer and is rethrown. `announce`
    /// is given the same info as soon as the headers are in, before the first body bytes (not
    /// at all for an empty body), so that a caller can answer before the bytes have come.
    @discardableResult
    public func getObject(_ key: String, range: ClosedRange<Int64>?, announce: ((S3ObjectInfo) -> Void)? = nil,
                          body: (UnsafeRawBufferPointer) throws -> Void) throws -> S3ObjectInfo {
        var headers: [String] = []
        if let range {
            guard range.lowerBound >= 0 else { throw S3Error.invalidRequest("a byte range cannot start before 0") }
            headers.append("Range: bytes=\(range.lowerBound)-\(range.upperBound)")
        }
        let head = announce.map { announce in
            { (response: CurlResponse) in if let info = try? Self.readObjectInfo(key: key, response) { announce(info) } }
        }
        // The sink is held by the transfer only while it runs.
        let response = try withoutActuallyEscaping(body) { body in try send(.get, key: key, headers: headers, head: head, sink: body) }
        try Self.requireSuccess(response)
        return try Self.readObjectInfo(key: key, response)
    }

    /// The info of a `GET`'s object from its headers; the whole object's length from
    /// `Content-Range` when the answer is a range.
    private static func readObjectInfo(key: String, _ response: CurlResponse) throws -> S3ObjectInfo {
        var info = try objectInfo(key: key, response)
        if response.status == 206 {
            guard let contentRange = response.header("content-range").flatMap(ContentRange.init(parsing:)),
                  case .satisfied(_, let length?) = contentRange else {
                throw S3Error.status(206, code: "", message: "a partial response without a valid Content-Range")
            }
            info.size = Int64(length)
        }
        return info
    }

    /// Stores `bytes` under `key` in one request (S3 takes up to 5 GiB so) and returns the
    /// new ETag. Metadata names must be HTTP tokens (they are sent lower-cased); values are
    /// sent with `%`, spaces and every byte outside printable ASCII percent-encoded, since
    /// S3 carries only ASCII in headers, and `headObject` decodes them.
    @discardableResult
    public func putObject(_ key: String, body: S3Body, contentType: String? = nil,
                          metadata: [String: String] = [:], condition: S3WriteCondition = .none) throws -> String {
        var headers = try Self.objectHeaders(contentType: contentType, metadata: metadata)
        headers += Self.conditionHeaders(condition)
        let response = try send(.put, key: key, headers: headers, body: body)
        try Self.requireSuccess(response, conditional: condition != .none)
        return try Self.etag(response)
    }

    @discardableResult
    public func putObject(_ key: String, bytes: UnsafeRawBufferPointer, contentType: String? = nil,
                          metadata: [String: String] = [:], condition: S3WriteCondition = .none) throws -> String {
        try putObject(key, body: .bytes(bytes), contentType: contentType, metadata: metadata, condition: condition)
    }

    @discardableResult
    public func putObject(_ key: String, bytes: [UInt8], contentType: String? = nil,
                          metadata: [String: String] = [:], condition: S3WriteCondition = .none) throws -> String {
        try bytes.withUnsafeBytes {
            try putObject(key, bytes: $0, contentType: contentType, metadata: metadata, condition: condition)
        }
    }

    /// Deletes the key; deleting a key that is not there is not an error (S3's own rule).
    public func deleteObject(_ key: String) throws {
        let response = try send(.delete, key: key)
        if response.status == 404, Self.errorCode(response) != "NoSuchBucket" { return }
        try Self.requireSuccess(response)
    }

    /// Copies `source` to `destination` inside the bucket (server-side, metadata and content
    /// type too) and returns the copy's ETag. RGW 16.2 copies without moving the data (a
    /// 256 MiB object in 0.07 s, where its PUT took 1.3 s). `condition` is sent for the
    /// destination, but RGW 16.2 ignores it: there a copy is never conditional (measured:
    /// 8 racing copies with `If-None-Match: *` to a new key all won).
    @discardableResult
    public func copyObject(from source: String, to destination: String, condition: S3WriteCondition = .none) throws -> String {
        let headers = [copySource(source)] + Self.conditionHeaders(condition)
        let response = try send(.put, key: destination, headers: headers, body: .empty)
        try Self.requireSuccess(response, conditional: condition != .none)
        return try Self.copiedETag(response, "CopyObjectResult")
    }

    private func copySource(_ key: String) -> String {
        "x-amz-copy-source: /\(configuration.bucket)/\(Self.encodedPath(configuration.prefix + key))"
    }

    /// The ETag of a copy's answer (`result` names its document). A copy can fail after its
    /// 200 has been sent: the error is then the body.
    private static func copiedETag(_ response: CurlResponse, _ result: String) throws -> String {
        let document = try document(response)
        if document.name == "Error" { throw error(status: 200, document) }
        guard let etag = document["ETag"] else { throw malformed("\(result) without an ETag", response) }
        return unquoted(etag)
    }

    // MARK: Multipart uploads

    /// Starts a multipart upload and returns its id. Parts but the last must be at least
    /// 5 MiB (S3 refuses a completion otherwise, with `EntityTooSmall`).
    public func createMultipartUpload(_ key: String, contentType: String? = nil, metadata: [String: String] = [:]) throws -> String {
        let headers = try Self.objectHeaders(contentType: contentType, metadata: metadata)
        let response = try send(.post, key: key, query: ["uploads": ""], headers: headers, body: .empty)
        try Self.requireSuccess(response)
        guard let uploadID = try Self.document(response)["UploadId"], !uploadID.isEmpty else {
            throw Self.malformed("InitiateMultipartUploadResult without an UploadId", response)
        }
        return uploadID
    }

    /// Sends part `number` (1...10000) and returns its ETag, which completion needs.
    @discardableResult
    public func uploadPart(_ key: String, uploadID: String, number: Int, body: S3Body) throws -> String {
        guard (1...10_000).contains(number) else { throw S3Error.invalidRequest("part number \(number) is outside 1...10000") }
        let response = try send(.put, key: key, query: ["partNumber": String(number), "uploadId": uploadID], body: body)
        try Self.requireSuccess(response)
        return try Self.etag(response)
    }

    @discardableResult
    public func uploadPart(_ key: String, uploadID: String, number: Int, bytes: UnsafeRawBufferPointer) throws -> String {
        try uploadPart(key, uploadID: uploadID, number: number, body: .bytes(bytes))
    }

    /// Part `number` copied inside the store from the whole of `source`: no byte travels
    /// through this server. Its ETag. A range of the source is not offered: curl 7.88 signs
    /// `x-amz-copy-source-range` beside `x-amz-copy-source` in the wrong order, and RGW
    /// answers `SignatureDoesNotMatch` (tried by hand with curl's own `--aws-sigv4`).
    @discardableResult
    public func uploadPartCopy(_ key: String, uploadID: String, number: Int, from source: String) throws -> String {
        guard (1...10_000).contains(number) else { throw S3Error.invalidRequest("part number \(number) is outside 1...10000") }
        let response = try send(.put, key: key, query: ["partNumber": String(number), "uploadId": uploadID],
                                headers: [copySource(source)], body: .empty)
        try Self.requireSuccess(response)
        return try Self.copiedETag(response, "CopyPartResult")
    }

    /// Joins the parts into the object. Returns its ETag when the answer carries one; RGW
    /// 16.2 answers with an empty one (then `headObject` gives it). RGW ignores
    /// `If-None-Match` here, so this takes no condition.
    @discardableResult
    public func completeMultipartUpload(_ key: String, uploadID: String, parts: [(number: Int, etag: String)]) throws -> String? {
        var xml = "<CompleteMultipartUpload>"
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\"\(S3XMLText.escaped(Self.unquoted(part.etag)))\"</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let body = Array(xml.utf8)
        let response = try body.withUnsafeBytes {
            try send(.post, key: key, query: ["uploadId": uploadID], headers: ["Content-Type: application/xml"], body: .bytes($0))
        }
        try Self.requireSuccess(response)
        // Like a copy, a completion can fail after its 200: the error is the body.
        let document = try Self.document(response)
        if document.name == "Error" { throw Self.error(status: 200, document) }
        return document["ETag"].map(Self.unquoted).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Drops the upload and its parts. An upload that is not there (any more) is not an error.
    public func abortMultipartUpload(_ key: String, uploadID: String) throws {
        let response = try send(.delete, key: key, query: ["uploadId": uploadID])
        if response.status == 404, Self.errorCode(response) == "NoSuchUpload" { return }
        try Self.requireSuccess(response)
    }

    /// The parts an upload holds so far, in order, every page of them: what resuming after a
    /// restart needs when the part list was not kept elsewhere. No such upload (completed,
    /// aborted or never made) throws `.notFound`: RGW 16.2 answers NoSuchKey, S3 NoSuchUpload.
    public func listParts(_ key: String, uploadID: String) throws -> [(number: Int, etag: String, size: Int64)] {
        try listParts(key, uploadID: uploadID, pageSize: 1000)
    }

    /// `pageSize` parts a request (S3's most is 1000): smaller in tests of the paging.
    func listParts(_ key: String, uploadID: String, pageSize: Int) throws -> [(number: Int, etag: String, size: Int64)] {
        var parts: [(number: Int, etag: String, size: Int64)] = []
        var marker: String?
        repeat {
            var query = ["max-parts": String(pageSize), "uploadId": uploadID]
            if let marker { query["part-number-marker"] = marker }
            let response = try send(.get, key: key, query: query)
            if response.status == 404 { throw S3Error.notFound }
            try Self.requireSuccess(response)
            let document = try Self.document(response)
            for part in document.children("Part") {
                guard let number = part["PartNumber"].flatMap({ Int($0) }), let size = part["Size"].flatMap({ Int64($0) }) else {
                    throw Self.malformed("a part without a PartNumber or Size", response)
                }
                parts.append((number, Self.unquoted(part["ETag"] ?? ""), size))
            }
            let next = document["NextPartNumberMarker"]
            marker = document["IsTruncated"] == "true" && next != marker ? next : nil
        } while marker != nil
        return parts
    }

    /// The multipart uploads in progress under `prefix` (relative to the client's), as key and
    /// upload id: what a clean-up of abandoned uploads needs. One page of up to 1000.
    public func listMultipartUploads(prefix: String = "") throws -> [(key: String, uploadID: String)] {
        let response = try send(.get, key: nil, query: ["prefix": configuration.prefix + prefix, "uploads": ""])
        try Self.requireSuccess(response)
        return try Self.document(response).children("Upload").compactMap { upload in
            guard let key = upload["Key"], let id = upload["UploadId"], key.hasPrefix(configuration.prefix) else { return nil }
            return (String(key.dropFirst(configuration.prefix.count)), id)
        }
    }

    // MARK: Listing and the bucket

    /// Every object under `prefix`, page after page, given to `body`. A listing that fails
    /// ends the walk where it is: for sweeps and loads that take what they can get.
    func forEachObject(prefix: String, _ body: (S3ObjectInfo) -> Void) {
        var token: String?
        repeat {
            guard let page = try? listObjects(prefix: prefix, continuationToken: token) else { return }
            page.objects.forEach(body)
            token = page.nextContinuationToken
        } while token != nil
    }

    /// One page of ListObjectsV2 under `prefix` (relative to the client's). With a
    /// `delimiter`, keys holding it after the prefix are rolled up into `commonPrefixes`.
    /// The listed objects have no content type or metadata (S3 does not list them).
    public func listObjects(prefix: String = "", delimiter: String? = nil, continuationToken: String? = nil,
                            maxKeys: Int = 1000) throws -> (objects: [S3ObjectInfo], commonPrefixes: [String], nextContinuationToken: String?) {
        var query = ["list-type": "2", "max-keys": String(maxKeys), "prefix": configuration.prefix + prefix]
        if let delimiter { query["delimiter"] = delimiter }
        if let continuationToken { query["continuation-token"] = continuationToken }
        let response = try send(.get, key: nil, query: query)
        try Self.requireSuccess(response)
        let document = try Self.document(response)
        let base = configuration.prefix
        func relative(_ key: String) -> String? { key.hasPrefix(base) ? String(key.dropFirst(base.count)) : nil }
        let objects = try document.children("Contents").compactMap { entry -> S3ObjectInfo? in
            guard let fullKey = entry["Key"], let key = relative(fullKey) else { return nil }
            guard let size = entry["Size"].flatMap({ Int64($0) }),
                  let modified = entry["LastModified"].flatMap(Self.secondsSince1970(iso8601:)) else {
                throw Self.malformed("a listing entry without a Size or LastModified", response)
            }
            return S3ObjectInfo(key: key, size: size, etag: Self.unquoted(entry["ETag"] ?? ""), lastModified: modified)
        }
        let prefixes = document.children("CommonPrefixes").compactMap { $0["Prefix"].flatMap(relative) }
        let truncated = document["IsTruncated"] == "true"
        let next = truncated ? document["NextContinuationToken"] : nil
        return (objects, prefixes, next)
    }

    /// Creates the bucket unless it is there already (and ours). Without a location
    /// constraint: the endpoint's default region (what RGW and us-east-1 take).
    public func createBucketIfMissing() throws {
        let head = try send(.head, key: nil)
        if (200...299).contains(head.status) { return }
        if head.status != 404 { try Self.requireSuccess(head) }
        let response = try send(.put, key: nil, body: .empty)
        if response.status == 409, Self.errorCode(response) == "BucketAlreadyOwnedByYou" { return }
        try Self.requireSuccess(response)
    }

    // MARK: Requests

    /// `key` nil: the bucket itself. The query's keys are sorted and every key and value
    /// percent-encoded, each with `=`: curl 7.88 signs the query as written, and SigV4's
    /// canonical form is exactly that.
    private func send(_ method: CurlRequest.Method, key: String?, query: [String: String] = [:], headers: [String] = [],
                      body: S3Body? = nil, head: ((CurlResponse) -> Void)? = nil,
                      sink: ((UnsafeRawBufferPointer) throws -> Void)? = nil) throws -> CurlResponse {
        var url = bucketURL
        if let key {
            let fullKey = configuration.prefix + key
            guard !fullKey.isEmpty, fullKey.utf8.count <= 1024 else {
                throw S3Error.invalidRequest("an S3 key must be 1 to 1024 bytes long: \"\(fullKey)\"")
            }
            url += "/" + Self.encodedPath(fullKey)
        }
        if !query.isEmpty {
            url += "?" + query.sorted { $0.key < $1.key }
                .map { PercentEncoding.encode($0.key) + "=" + PercentEncoding.encode($0.value) }
                .joined(separator: "&")
        }
        return try pool.perform(CurlRequest(method: method, url: url, headers: headers, body: body), head: head, sink: sink)
    }

    /// A key in the path: every byte but the unreserved ones and `/` percent-encoded (S3's
    /// URI encoding; `/` separates nothing in S3 but reads better and is signed as sent).
    static func encodedPath(_ key: String) -> String {
        PercentEncoding.encode(key, keepingSlashes: true)
    }

    private static func objectHeaders(contentType: String?, metadata: [String: String]) throws -> [String] {
        var headers: [String] = []
        if let contentType {
            guard contentType.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
                throw S3Error.invalidRequest("a content type must be printable ASCII: \"\(contentType)\"")
            }
            headers.append("Content-Type: \(contentType)")
        }
        for (name, value) in metadata.sorted(by: { $0.key < $1.key }) {
            guard !name.isEmpty, name.utf8.allSatisfy(ASCII.isTokenChar) else {
                throw S3Error.invalidRequest("a metadata name must be an HTTP token (ASCII letters, digits, -, _ …): \"\(name)\"")
            }
            headers.append("x-amz-meta-\(name.lowercased()): \(S3Metadata.encoded(value))")
        }
        return headers
    }

    private static func conditionHeaders(_ condition: S3WriteCondition) -> [String] {
        switch condition {
        case .none: return []
        case .ifNoneMatch: return ["If-None-Match: *"]
        case .ifMatch(let etag): return ["If-Match: \(unquoted(etag))"]
        }
    }

    // MARK: Responses

    private static func requireSuccess(_ response: CurlResponse, conditional: Bool = false) throws {
        if (200...299).contains(response.status) { return }
        // RGW 16.2 answers a loser of racing If-Match writers 500 as well as 412 (measured).
        if response.status == 412 || (conditional && response.status == 500) { throw S3Error.preconditionFailed }
        if response.status == 404, ["", "NoSuchKey"].contains(errorCode(response)) { throw S3Error.notFound }
        if let document = S3XMLElement.parse(response.body), document.name == "Error" {
            throw error(status: response.status, document)
        }
        throw S3Error.status(response.status, code: "", message: String(decoding: response.body.prefix(200), as: UTF8.self))
    }

    private static func error(status: Int, _ document: S3XMLElement) -> S3Error {
        .status(status, code: document["Code"] ?? "", message: document["Message"] ?? "")
    }

    private static func errorCode(_ response: CurlResponse) -> String {
        S3XMLElement.parse(response.body)?["Code"] ?? ""
    }

    private static func document(_ response: CurlResponse) throws -> S3XMLElement {
        guard let document = S3XMLElement.parse(response.body) else { throw malformed("an answer that is not XML", response) }
        return document
    }

    private static func malformed(_ what: String, _ response: CurlResponse) -> S3Error {
        .status(response.status, code: "", message: "\(what): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
    }

    private static func etag(_ response: CurlResponse) throws -> String {
        guard let etag = response.header("etag") else { throw malformed("a write answered without an ETag", response) }
        return unquoted(etag)
    }

    private static func unquoted(_ etag: String) -> String {
        etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"") ? String(etag.dropFirst().dropLast()) : etag
    }

    private static func objectInfo(key: String, _ response: CurlResponse) throws -> S3ObjectInfo {
        guard let size = response.header("content-length").flatMap({ Int64($0) }) else {
            throw malformed("an object's headers without a Content-Length", response)
        }
        var metadata: [String: String] = [:]
        for (name, value) in response.headers where name.hasPrefix("x-amz-meta-") {
            metadata[String(name.dropFirst(11))] = S3Metadata.decoded(value)
        }
        return S3ObjectInfo(key: key, size: size, etag: unquoted(response.header("etag") ?? ""),
                            lastModified: response.header("last-modified").flatMap { HTTPDate(parsing: $0) }?.secondsSince1970 ?? 0,
                            contentType: response.header("content-type"), metadata: metadata)
    }

    /// ListObjectsV2's `2026-12-04T15:10:33.000Z`.
    private static func secondsSince1970(iso8601 text: String) -> Int64? {
        let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        guard let date = (try? withFraction.parse(text)) ?? (try? Date.ISO8601FormatStyle().parse(text)) else { return nil }
        return Int64(date.timeIntervalSince1970.rounded(.down))
    }
}

/// User metadata values in headers: S3 carries only ASCII there, and SigV4 trims and folds
/// spaces in signed headers, so `%`, spaces and bytes outside printable ASCII go
/// percent-encoded (UTF-8), and are decoded on the way back.
enum S3Metadata {
    static func encoded(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            if byte > 0x20, byte < 0x7F, byte != UInt8(ascii: "%") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }

    /// The value decoded, or as given when it is not valid percent-encoded UTF-8 (set by
    /// another client).
    static func decoded(_ value: String) -> String {
        PercentEncoding.decode(value) ?? value
    }
}
