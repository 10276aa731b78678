/// Writes multipart bodies (RFC 2046 §5.1) part by part, so a body of any size can be
/// streamed: `beginPart` gives the bytes before a part's content, the caller sends the
/// content itself, `finish` gives the close delimiter. Used for `multipart/form-data`
/// requests and for `multipart/byteranges` responses (RFC 9110 §14.6).
///
/// A part's content must not hold the delimiter `CRLF--boundary`, nor begin with
/// `--boundary` (the header section's CRLF comes before it: RFC 2046 §5.1.1 reads that as a
/// part with no body); a random boundary (`MultipartBoundary.random`) makes that unlikely.
public struct MultipartWriter: Sendable {
    public let boundary: MultipartBoundary
    public private(set) var partCount = 0

    public init(boundary: MultipartBoundary = .random()) {
        self.boundary = boundary
    }

    /// The delimiter line (after a CRLF that ends the previous part's content), the
    /// header lines and the empty line that opens a part's content.
    public mutating func beginPart(headers: [MultipartHeaders.Field]) -> [UInt8] {
        var text = partCount == 0 ? "--" : "\r\n--"
        text += boundary.value + "\r\n"
        for field in headers { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        partCount += 1
        return Array(text.utf8)
    }

    /// The close delimiter `--boundary--` and a final CRLF.
    public mutating func finish() -> [UInt8] {
        Array(((partCount == 0 ? "--" : "\r\n--") + boundary.value + "--\r\n").utf8)
    }

    /// The headers of a form-data part. `"` and `\` in the name and file name are
    /// backslash-escaped (RFC 2045 quoted-string); CR and LF, which a header cannot hold,
    /// are written `%0D` and `%0A` as browsers do (HTML Standard).
    public static func formDataHeaders(
        name: String, filename: String? = nil, contentType: String? = nil
    ) -> [MultipartHeaders.Field] {
        var disposition = "form-data; name=\"\(quotedContent(name))\""
        if let filename { disposition += "; filename=\"\(quotedContent(filename))\"" }
        var headers = [MultipartHeaders.Field(name: "Content-Disposition", value: disposition)]
        if let contentType { headers.append(.init(name: "Content-Type", value: contentType)) }
        return headers
    }

    /// A whole `multipart/form-data` body in memory, for tests and small requests.
    public static func formData(
        _ parts: [(headers: [MultipartHeaders.Field], content: [UInt8])],
        boundary: MultipartBoundary = .random()
    ) -> [UInt8] {
        var writer = MultipartWriter(boundary: boundary)
        var body: [UInt8] = []
        for part in parts {
            body += writer.beginPart(headers: part.headers)
            body += part.content
        }
        return body + writer.finish()
    }

    /// The `Content-Type` value announcing this writer's body.
    public func contentType(_ essence: String = "multipart/form-data") -> String {
        let isToken = boundary.value.utf8.allSatisfy(ASCII.isTokenChar)
        return "\(essence); boundary=" + (isToken ? boundary.value : "\"\(boundary.value)\"")
    }

    private static func quotedContent(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"", "\\": out += "\\"; out.unicodeScalars.append(scalar)
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

extension MultipartBoundary {
    /// A fresh boundary: `counterpart-` and 32 random letters and digits, which no real
    /// content is likely to contain.
    public static func random() -> MultipartBoundary {
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        var generator = SystemRandomNumberGenerator()
        let suffix = (0..<32).map { _ in alphabet[Int(generator.next(upperBound: UInt(alphabet.count)))] }
        // Built from bchars only, so validation cannot fail.
        return try! MultipartBoundary("counterpart-" + String(decoding: suffix, as: UTF8.self))
    }
}
