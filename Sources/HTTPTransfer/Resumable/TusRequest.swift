/// A tus 1.0.0 request (https://tus.io/protocols/resumable-upload), told from its head
/// alone: what it asks, with its parameters, or why it is refused. No state, no I/O; what
/// depends on the upload as it stands (its offset, its length, whether it is final) is
/// the session's.
public enum TusRequest: Equatable, Sendable {
    case options
    case create(Creation)
    /// `HEAD /files/<id>`.
    case offset(id: String)
    /// `PATCH /files/<id>`.
    case append(id: String, Append)
    /// `DELETE /files/<id>` (termination).
    case cancel(id: String)

    public struct Creation: Equatable, Sendable {
        /// nil: `Upload-Defer-Length: 1` (or a final concatenation, whose parts give it).
        public var length: UInt64?
        /// `Upload-Metadata`: key → base64 value (nil for a key without one).
        public var metadata: [String: String?]
        public var concatenation: Concatenation?
        /// creation-with-upload: the body is the first chunk.
        public var hasBody: Bool
        public var checksum: Checksum?
    }

    public enum Concatenation: Equatable, Sendable {
        case partial
        /// The partial uploads' URLs, in order.
        case final([String])
    }

    public struct Append: Equatable, Sendable {
        public var offset: UInt64
        /// `Upload-Length` sent with the append (creation-defer-length): not yet checked
        /// against the upload's; nil when absent.
        public var length: UInt64?
        public var checksum: Checksum?
    }

    /// `Upload-Checksum: <algorithm> <base64 digest>`.
    public struct Checksum: Equatable, Sendable {
        public var algorithm: String
        public var digest: [UInt8]
    }

    public static let version = "1.0.0"
    public static let offsetContentType = "application/offset+octet-stream"

    /// Classifies a request to `/files/` + `segments`. `maxSize` is the largest upload the
    /// server takes, `digestLengths` its checksum algorithms with their digests' lengths.
    public init(_ head: ResumableRequestHead, segments: [String], maxSize: UInt64,
                digestLengths: [String: Int]) throws(TusRefusal) {
        // Clients that cannot send PATCH or DELETE send POST with the method they mean.
        let method = head.method == "POST" ? (head.field("X-HTTP-Method-Override") ?? "POST") : head.method
        if method == "OPTIONS" {
            self = .options
            return
        }
        guard head.field("Tus-Resumable") == Self.version else { throw .versionMismatch }
        switch (method, segments.count) {
        case ("POST", 0):
            self = .create(try Self.creation(head, maxSize: maxSize, digestLengths: digestLengths))
        case ("HEAD", 1):
            self = .offset(id: segments[0])
        case ("PATCH", 1):
            guard head.field("Content-Type") == Self.offsetContentType else { throw .notOffsetStream(creation: false) }
            guard case .value(let offset) = head.number("Upload-Offset") else { throw .missingOffset }
            let length = try head.optionalNumber("Upload-Length", invalid: TusRefusal.invalidLength(maxSize: maxSize))
            self = .append(id: segments[0], Append(offset: offset, length: length,
                                                   checksum: try Self.checksum(head, digestLengths: digestLengths)))
        case ("DELETE", 1):
            self = .cancel(id: segments[0])
        case (_, 0):
            throw .methodNotAllowed(method, allowed: ["POST", "OPTIONS"])
        case (_, 1):
            throw .methodNotAllowed(method, allowed: ["HEAD", "PATCH", "DELETE", "OPTIONS"])
        default:
            throw .notAnUpload
        }
    }

    private static func creation(_ head: ResumableRequestHead, maxSize: UInt64, digestLengths: [String: Int]) throws(TusRefusal) -> Creation {
        let metadata = try metadata(head.field("Upload-Metadata"))
        var concatenation: Concatenation?
        switch head.field("Upload-Concat") {
        case nil: break
        case "partial": concatenation = .partial
        case let text? where text.hasPrefix("final"):
            let references = text.dropFirst("final;".count).split(separator: " ").map(String.init)
            guard text.hasPrefix("final;"), !references.isEmpty else { throw .finalWithoutParts }
            return Creation(length: nil, metadata: metadata, concatenation: .final(references), hasBody: false, checksum: nil)
        case let text?: throw .invalidConcatenation(text)
        }
        let length: UInt64?
        switch (head.number("Upload-Length"), head.field("Upload-Defer-Length")) {
        case (.value(let value), nil):
            guard value <= maxSize else { throw .tooLarge(value, limit: maxSize) }
            length = value
        case (.invalid, nil): throw .invalidLength(maxSize: maxSize)
        case (.absent, "1"): length = nil
        case (.absent, nil): throw .missingLength
        default: throw .ambiguousLength
        }
        let hasBody = head.announcesBody
        if hasBody, head.field("Content-Type") != offsetContentType { throw .notOffsetStream(creation: true) }
        return Creation(length: length, metadata: metadata, concatenation: concatenation, hasBody: hasBody,
                        checksum: hasBody ? try checksum(head, digestLengths: digestLengths) : nil)
    }

    private static func checksum(_ head: ResumableRequestHead, digestLengths: [String: Int]) throws(TusRefusal) -> Checksum? {
        guard let text = head.field("Upload-Checksum") else { return nil }
        let parts = text.split(separator: " ", maxSplits: 1).map(String.init)
        guard parts.count == 2, let length = digestLengths[parts[0]] else { throw .invalidChecksum(algorithms: digestLengths.keys.sorted()) }
        guard let digest = Base64.decode(parts[1]), digest.count == length else { throw .invalidDigest(parts[0]) }
        return Checksum(algorithm: parts[0], digest: digest)
    }

    /// `Upload-Metadata: key base64,key2 base64,flag` (keys unique, ASCII, no spaces or
    /// commas; values base64).
    static func metadata(_ text: String?) throws(TusRefusal) -> [String: String?] {
        guard let text, !text.isEmpty else { return [:] }
        var metadata: [String: String?] = [:]
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = ASCII.trimmed(pair).split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard (1...2).contains(pieces.count), let key = pieces.first,
                  key.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "," }) else {
                throw .invalidMetadata("Upload-Metadata must be \"key base64value\" pairs separated by commas")
            }
            if pieces.count == 2, Base64.decode(pieces[1]) == nil {
                throw .invalidMetadata("the Upload-Metadata value of \"\(key)\" is not base64")
            }
            guard metadata[key] == nil else { throw .invalidMetadata("the Upload-Metadata key \"\(key)\" is given twice") }
            metadata[key] = pieces.count == 2 ? pieces[1] : String?.none
        }
        return metadata
    }
}

/// Why a tus request is refused, before it touches any upload.
public enum TusRefusal: Error, Equatable, Sendable {
    /// No `Tus-Resumable: 1.0.0` (412, with `Tus-Version`).
    case versionMismatch
    case methodNotAllowed(String, allowed: [String])
    case notAnUpload
    case invalidMetadata(String)
    case invalidConcatenation(String)
    case finalWithoutParts
    case missingLength
    case ambiguousLength
    case invalidLength(maxSize: UInt64)
    case tooLarge(UInt64, limit: UInt64)
    case notOffsetStream(creation: Bool)
    case missingOffset
    case invalidChecksum(algorithms: [String])
    case invalidDigest(String)

    public var status: Int {
        switch self {
        case .versionMismatch: 412
        case .methodNotAllowed: 405
        case .notAnUpload: 404
        case .tooLarge: 413
        case .notOffsetStream: 415
        default: 400
        }
    }

    public var message: String {
        switch self {
        case .versionMismatch: "this server speaks tus \(TusRequest.version): send Tus-Resumable: \(TusRequest.version)"
        case .methodNotAllowed(let method, let allowed): "\(method) is not allowed here; use \(allowed.joined(separator: ", "))"
        case .notAnUpload: "not a tus upload"
        case .invalidMetadata(let reason): reason
        case .invalidConcatenation(let text): "Upload-Concat must be \"partial\" or \"final;<upload URLs>\", not \"\(text)\""
        case .finalWithoutParts: "Upload-Concat: final needs the partial uploads' URLs, space-separated: final;/files/a /files/b"
        case .missingLength: "a new upload needs Upload-Length (or Upload-Defer-Length: 1)"
        case .ambiguousLength:
            "send either Upload-Length or Upload-Defer-Length: 1, not both (and Upload-Defer-Length can only be 1)"
        case .invalidLength(let maxSize): "Upload-Length must be a number of bytes, at most \(maxSize)"
        case .tooLarge(let length, let limit): "the upload is \(length) bytes; this server takes at most \(limit)"
        case .notOffsetStream(let creation):
            creation ? "a body sent with the creation must be \(TusRequest.offsetContentType)"
                : "PATCH needs Content-Type: \(TusRequest.offsetContentType)"
        case .missingOffset: "PATCH needs Upload-Offset: the offset the bytes start at"
        case .invalidChecksum(let algorithms):
            "Upload-Checksum must be \"<algorithm> <base64 digest>\" with an algorithm of \(algorithms.joined(separator: ","))"
        case .invalidDigest(let algorithm): "the Upload-Checksum digest is not a base64 \(algorithm) digest"
        }
    }
}
