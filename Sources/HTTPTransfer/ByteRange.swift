/// An inclusive range of byte positions, resolved against a representation.
public struct ByteRange: Equatable, Hashable, Sendable, CustomStringConvertible {
    public var first: UInt64
    public var last: UInt64

    public init(first: UInt64, last: UInt64) {
        precondition(first <= last, "a byte range needs first <= last")
        self.first = first
        self.last = last
    }

    /// Number of bytes in the range.
    public var count: UInt64 { last - first + 1 }

    public var description: String { "\(first)-\(last)" }
}

/// One `range-spec` of a `Range` header (RFC 9110 §14.1.1).
public enum RangeSpec: Equatable, Hashable, Sendable {
    /// `first-last`
    case closed(first: UInt64, last: UInt64)
    /// `first-`
    case from(first: UInt64)
    /// `-length`: the last `length` bytes.
    case suffix(length: UInt64)

    /// The bytes this spec selects in a representation of `length` bytes, or nil when it
    /// selects none (it starts at or past the end, or is a zero-length suffix).
    public func resolved(length: UInt64) -> ByteRange? {
        switch self {
        case .closed(let first, let last):
            guard first < length else { return nil }
            return ByteRange(first: first, last: min(last, length - 1))
        case .from(let first):
            guard first < length else { return nil }
            return ByteRange(first: first, last: length - 1)
        case .suffix(let suffixLength):
            guard suffixLength > 0, length > 0 else { return nil }
            return ByteRange(first: length - min(suffixLength, length), last: length - 1)
        }
    }
}

/// A `Range` request header in the `bytes` unit (RFC 9110 §14.2).
public struct RangeHeader: Equatable, Sendable {
    public var specs: [RangeSpec]

    public init(specs: [RangeSpec]) { self.specs = specs }

    /// Parses `bytes=0-499`, `bytes=500-`, `bytes=-500`, `bytes=0-0,-1`. Returns nil when
    /// the header must be ignored (RFC 9110 §14.2): another range unit, or a range-set
    /// that is not valid — a spec with `last < first`, a sign, a missing number, junk.
    ///
    /// Leniencies, as nginx and Go have them: the unit is case-insensitive (`Bytes=`, as
    /// some iOS code sends); spaces and tabs are allowed around `=`, `-` and `,`; empty
    /// list members (`bytes=0-1,,5-6`) are skipped (RFC 9110 §5.6.1). A number too large
    /// for 64 bits saturates: as a first position it is past any end, as a last position it
    /// means "to the end".
    public init?(parsing text: String) {
        var text = text
        // Parsed over the value's own bytes (lent, not copied into an array): this runs for
        // every range request.
        guard let specs = text.withUTF8(Self.specs(in:)) else { return nil }
        self.specs = specs
    }

    private static let unit: [UInt8] = Array("bytes".utf8)

    private static func specs(in bytes: UnsafeBufferPointer<UInt8>) -> [RangeSpec]? {
        var index = 0
        func skipWhitespace() { while index < bytes.count, ASCII.isWhitespace(bytes[index]) { index += 1 } }
        func number() -> UInt64? {
            let start = index
            var value: UInt64 = 0
            while index < bytes.count, ASCII.isDigit(bytes[index]) {
                let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(UInt64(bytes[index] - 0x30))
                value = (overflow1 || overflow2) ? .max : sum
                index += 1
            }
            return index > start ? value : nil
        }

        skipWhitespace()
        guard index + unit.count <= bytes.count,
              ASCII.equalsIgnoringCase(UnsafeBufferPointer(rebasing: bytes[index..<(index + unit.count)]), unit) else {
            return nil
        }
        index += unit.count
        skipWhitespace()
        guard index < bytes.count, bytes[index] == ASCII.equals else { return nil }
        index += 1

        var specs: [RangeSpec] = []
        while true {
            skipWhitespace()
            if index < bytes.count, bytes[index] == ASCII.comma { index += 1; continue }
            if index == bytes.count { break }
            if bytes[index] == ASCII.dash {
                index += 1
                skipWhitespace()
                guard let length = number() else { return nil }
                specs.append(.suffix(length: length))
            } else {
                guard let first = number() else { return nil }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == ASCII.dash else { return nil }
                index += 1
                skipWhitespace()
                if let last = number() {
                    guard last >= first else { return nil }
                    specs.append(.closed(first: first, last: last))
                } else {
                    specs.append(.from(first: first))
                }
            }
            skipWhitespace()
            guard index == bytes.count || bytes[index] == ASCII.comma else { return nil }
        }
        return specs.isEmpty ? nil : specs
    }

    /// What to send for this header and a representation of `length` bytes.
    public func resolve(length: UInt64, policy: RangePolicy = RangePolicy()) -> RangeResolution {
        guard specs.count <= policy.maxRanges else { return .full }
        let ranges = specs.compactMap { $0.resolved(length: length) }
        guard !ranges.isEmpty else { return .unsatisfiable }
        if ranges.count > 1 {
            // The CVE-2011-3192 ("Apache Killer") pattern asks for far more bytes than the
            // file holds through overlapping ranges; like Go, answer with the file instead.
            var total: UInt64 = 0
            for range in ranges {
                let (sum, overflow) = total.addingReportingOverflow(range.count)
                total = overflow ? .max : sum
            }
            guard total <= length else { return .full }
        }
        return .partial(policy.coalesce ? Self.coalesced(ranges) : ranges)
    }

    /// Overlapping and adjacent ranges merged. Each merged range takes the place of the
    /// first of its members, so the parts keep the order the client asked for
    /// (RFC 9110 §14.6).
    static func coalesced(_ ranges: [ByteRange]) -> [ByteRange] {
        guard ranges.count > 1 else { return ranges }
        let byStart = ranges.indices.sorted { ranges[$0].first < ranges[$1].first }
        var groups: [(range: ByteRange, position: Int)] = []
        for index in byStart {
            let range = ranges[index]
            if let last = groups.last, range.first <= last.range.last &+ 1 {
                groups[groups.count - 1] = (
                    ByteRange(first: last.range.first, last: max(last.range.last, range.last)),
                    min(last.position, index)
                )
            } else {
                groups.append((range, index))
            }
        }
        return groups.sorted { $0.position < $1.position }.map(\.range)
    }
}

/// How range requests are served.
public struct RangePolicy: Equatable, Sendable {
    /// A `Range` with more specs than this is answered with the whole representation.
    public var maxRanges: Int
    /// Whether overlapping and adjacent ranges are merged into one part.
    public var coalesce: Bool

    public static let defaultMaxRanges = 100

    public init(maxRanges: Int = defaultMaxRanges, coalesce: Bool = true) {
        self.maxRanges = maxRanges
        self.coalesce = coalesce
    }
}

/// The answer to a `Range` request.
public enum RangeResolution: Equatable, Sendable {
    /// `200` with the whole representation: no usable `Range`, or one refused as abusive.
    case full
    /// `206` with these ranges: one range as a single part, several as `multipart/byteranges`.
    case partial([ByteRange])
    /// `416` with `Content-Range: bytes */length`.
    case unsatisfiable

    /// Resolves a raw `Range` header value (nil: none) against a representation.
    public init(rangeHeader: String?, length: UInt64, policy: RangePolicy = RangePolicy()) {
        guard let rangeHeader, let header = RangeHeader(parsing: rangeHeader) else {
            self = .full
            return
        }
        self = header.resolve(length: length, policy: policy)
    }
}
