/// A `Content-Range` field value (RFC 9110 §14.4), in the `bytes` unit.
public enum ContentRange: Equatable, Sendable, CustomStringConvertible {
    /// `bytes first-last/length`, or `bytes first-last/*` when the length is unknown.
    case satisfied(ByteRange, completeLength: UInt64?)
    /// `bytes */length`, sent with `416`.
    case unsatisfied(completeLength: UInt64)

    /// The header value.
    public var description: String {
        switch self {
        case .satisfied(let range, let length):
            return ASCIIWriter.string(capacity: 6 + 3 * 20 + 2) { out in
                out.text("bytes ")
                out.number(range.first)
                out.byte(0x2D)
                out.number(range.last)
                out.byte(0x2F)
                if let length { out.number(length) } else { out.byte(0x2A) }
            }
        case .unsatisfied(let length):
            return ASCIIWriter.string(capacity: 8 + 20) { out in
                out.text("bytes */")
                out.number(length)
            }
        }
    }

    /// Parses a header value; nil when it is not valid (including `last < first`, or a
    /// range that does not fit in the complete length).
    public init?(parsing text: String) {
        var rest = Substring(text).drop { $0 == " " || $0 == "\t" }
        guard rest.count >= 6, ASCII.equalsIgnoringCase(String(rest.prefix(6)), "bytes ") else { return nil }
        rest = rest.dropFirst(6).drop { $0 == " " }
        rest = ASCII.trimmed(rest)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let rangePart = rest[..<slash]
        let lengthPart = rest[rest.index(after: slash)...]
        let completeLength: UInt64?
        if lengthPart == "*" {
            completeLength = nil
        } else {
            guard let length = ASCII.decimalNumber(lengthPart) else { return nil }
            completeLength = length
        }
        if rangePart == "*" {
            guard let completeLength else { return nil }
            self = .unsatisfied(completeLength: completeLength)
            return
        }
        let bounds = rangePart.split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = ASCII.decimalNumber(bounds[0]), let last = ASCII.decimalNumber(bounds[1]),
              first <= last else { return nil }
        if let completeLength, last >= completeLength { return nil }
        self = .satisfied(ByteRange(first: first, last: last), completeLength: completeLength)
    }
}
