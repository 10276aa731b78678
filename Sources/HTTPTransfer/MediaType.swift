/// A media type with its parameters (RFC 9110 §8.3.1): `multipart/form-data; boundary=x`.
public struct MediaType: Equatable, Sendable {
    /// Lowercased, e.g. `multipart`.
    public var type: String
    /// Lowercased, e.g. `form-data`.
    public var subtype: String
    public var parameters: [ParameterizedValue.Parameter]

    public init(type: String, subtype: String, parameters: [ParameterizedValue.Parameter] = []) {
        self.type = ASCII.lowercased(type)
        self.subtype = ASCII.lowercased(subtype)
        self.parameters = parameters
    }

    public init(parsing text: String) throws(HeaderValueError) {
        let parsed = try ParameterizedValue(parsing: text)
        let parts = parsed.value.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2,
              let type = parts.first.map({ ASCII.trimmed($0) }), !type.isEmpty,
              let subtype = parts.last.map({ ASCII.trimmed($0) }), !subtype.isEmpty,
              type.utf8.allSatisfy(ASCII.isTokenChar), subtype.utf8.allSatisfy(ASCII.isTokenChar)
        else {
            throw HeaderValueError("\"\(parsed.value)\" is not a media type of the form type/subtype")
        }
        self.init(type: String(type), subtype: String(subtype), parameters: parsed.parameters)
    }

    /// `type/subtype`, lowercased.
    public var essence: String { "\(type)/\(subtype)" }

    public subscript(parameter name: String) -> String? {
        ParameterizedValue.value(of: ASCII.lowercased(name), in: parameters)
    }
}

/// The boundary of a `multipart/form-data` body (RFC 2046 §5.1.1, RFC 7578 §4.1).
public struct MultipartBoundary: Equatable, Sendable, CustomStringConvertible {
    /// The boundary without the leading `--`.
    public let value: String

    /// Validates a boundary: 1–70 characters of RFC 2046 `bchars`, not ending in a space.
    public init(_ value: String) throws(MultipartBoundaryError) {
        guard !value.isEmpty else { throw .invalidBoundary("the boundary is empty") }
        guard value.utf8.count <= 70 else {
            throw .invalidBoundary("the boundary is \(value.utf8.count) characters long; RFC 2046 allows at most 70")
        }
        if let bad = value.unicodeScalars.first(where: { !Self.isBoundaryChar($0) }) {
            throw .invalidBoundary("the boundary contains \(Self.describe(bad)), which RFC 2046 does not allow in a boundary")
        }
        guard value.last != " " else { throw .invalidBoundary("the boundary ends with a space") }
        self.value = value
    }

    /// The size of a part's content that starts at `contentOffset` of a body of `bodyLength`
    /// bytes, if it is the body's last part and the body ends as curl, browsers and
    /// `MultipartWriter` end one: `CRLF--boundary--CRLF`, nothing after. A guess to plan
    /// with, never to trust: another part may follow, or an epilogue, or no final CRLF.
    public func sizeIfLastPart(startingAt contentOffset: Int, bodyLength: UInt64) -> UInt64? {
        let closing = UInt64(value.utf8.count + 8)
        guard contentOffset >= 0, bodyLength >= UInt64(contentOffset) + closing else { return nil }
        return bodyLength - UInt64(contentOffset) - closing
    }

    /// The boundary of a request's `Content-Type`, which must be `multipart/form-data`.
    public init(contentType: String?) throws(MultipartBoundaryError) {
        guard let contentType, !contentType.isEmpty else { throw .notFormData(nil) }
        let mediaType: MediaType
        do {
            mediaType = try MediaType(parsing: contentType)
        } catch {
            // A broken parameter list still tells us the media type the client meant.
            let essence = contentType.split(separator: ";").first.map { ASCII.lowercased(String(ASCII.trimmed($0))) }
            guard essence == "multipart/form-data" else { throw .notFormData(contentType) }
            throw .invalidBoundary("the Content-Type header cannot be parsed: \(error)")
        }
        guard mediaType.essence == "multipart/form-data" else { throw .notFormData(mediaType.essence) }
        guard let boundary = mediaType[parameter: "boundary"] else { throw .missingBoundary }
        try self.init(boundary)
    }

    public var description: String { value }

    /// RFC 2046 `bchars`: DIGIT / ALPHA / "'()+_,-./:=?" / " ".
    static func isBoundaryChar(_ c: Unicode.Scalar) -> Bool {
        switch c.value {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return "'()+_,-./:=? ".unicodeScalars.contains(c)
        }
    }

    static func describe(_ c: Unicode.Scalar) -> String {
        c.value < 0x20 || c.value == 0x7F
            ? "the control character U+\(String(c.value, radix: 16, uppercase: true))"
            : "\"\(c)\""
    }
}

public enum MultipartBoundaryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The request is not `multipart/form-data` (what it is, if it said).
    case notFormData(String?)
    case missingBoundary
    case invalidBoundary(String)

    public var description: String {
        switch self {
        case .notFormData(nil):
            return "the request has no Content-Type; uploads must be multipart/form-data"
        case .notFormData(let type?):
            return "the request's Content-Type is \(type); uploads must be multipart/form-data"
        case .missingBoundary:
            return "the Content-Type multipart/form-data has no boundary parameter"
        case .invalidBoundary(let why):
            return "invalid multipart boundary: \(why)"
        }
    }
}
