/// Why a multipart body was rejected, where, and in which part.
///
/// `offset` is the byte offset in the body where the problem was found; `part` is the
/// 1-based number of the part concerned, when there is one. `description` is one
/// sentence a client developer can act on.
public struct MultipartError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable {
        /// The body never contains a `--boundary` line. Carries the body's first line, to
        /// show a client that used another boundary than the one it declared.
        case noDelimiter(firstLine: String)
        /// The only delimiter is the close delimiter `--boundary--`, after text: the parts
        /// were written with another boundary (theirs went by as preamble). Carries the
        /// body's first line, which shows the boundary they used.
        case onlyCloseDelimiter(firstLine: String)
        /// A delimiter line continues with something other than padding and a line end.
        case malformedDelimiter
        /// The body ended before the close delimiter `--boundary--`.
        case truncated(Location)
        case headerSectionTooLarge(limit: Int)
        case malformedHeader(String)
        case missingContentDisposition
        case invalidContentDisposition(String)
        case duplicateHeader(String)
        case tooManyParts(limit: Int)
        case fieldBytesExceeded(limit: Int)
    }

    /// Where in the body a truncation happened.
    public enum Location: Equatable, Sendable {
        case delimiterLine, headers, data
    }

    public var kind: Kind
    public var offset: Int
    public var part: Int?
    /// The boundary in force, for the messages.
    public var boundary: String

    public init(_ kind: Kind, offset: Int, part: Int?, boundary: String) {
        self.kind = kind
        self.offset = offset
        self.part = part
        self.boundary = boundary
    }

    /// Whether the body is refused for its size (HTTP 413) rather than for its form (400).
    public var isSizeLimit: Bool {
        switch kind {
        case .tooManyParts, .fieldBytesExceeded: return true
        default: return false
        }
    }

    public var description: String {
        let inPart = part.map { "part \($0)" } ?? "the body"
        switch kind {
        case .noDelimiter(let firstLine):
            let start = firstLine.isEmpty ? "the body is empty" : "the body starts with \"\(firstLine)\""
            return "the body contains no delimiter line \"--\(boundary)\" (the boundary from Content-Type); \(start)"
        case .onlyCloseDelimiter(let firstLine):
            return "the body's only delimiter is the close delimiter \"--\(boundary)--\" at byte \(offset), after text that starts with \"\(firstLine)\": were the parts written with another boundary than \"\(boundary)\", the one in Content-Type?"
        case .malformedDelimiter:
            return "the delimiter line \"--\(boundary)\" before \(inPart) is followed by other text at byte \(offset); only spaces, tabs and a line end may follow it"
        case .truncated(let location):
            let where_: String
            switch location {
            case .delimiterLine: where_ = "inside a delimiter line"
            case .headers: where_ = "inside the headers of \(inPart)"
            case .data: where_ = "inside the data of \(inPart)"
            }
            return "the body is truncated: it ends at byte \(offset) \(where_), before the close delimiter \"--\(boundary)--\""
        case .headerSectionTooLarge(let limit):
            return "the headers of \(inPart) (at byte \(offset)) are larger than the limit of \(limit) bytes, or never end with an empty line"
        case .malformedHeader(let why):
            return "\(inPart) has a malformed header at byte \(offset): \(why)"
        case .missingContentDisposition:
            return "\(inPart) (at byte \(offset)) has no Content-Disposition header; every form-data part needs \"Content-Disposition: form-data; name=...\""
        case .invalidContentDisposition(let why):
            return "\(inPart) (at byte \(offset)) has an invalid Content-Disposition: \(why)"
        case .duplicateHeader(let name):
            return "\(inPart) (at byte \(offset)) has more than one \(name) header"
        case .tooManyParts(let limit):
            return "the body has more than \(limit) parts (the limit); \(inPart) starts at byte \(offset)"
        case .fieldBytesExceeded(let limit):
            return "the form's text fields exceed the limit of \(limit) bytes in all (at \(inPart), byte \(offset))"
        }
    }
}
