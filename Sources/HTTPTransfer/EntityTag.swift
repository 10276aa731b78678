/// An entity tag (RFC 9110 §8.8.3): `"opaque"` or weak `W/"opaque"`.
public struct EntityTag: Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The tag between the quotes.
    public var opaque: String
    public var isWeak: Bool

    /// A tag; `opaque` must hold only `etagc` characters (no `"`, no spaces or controls).
    public init?(_ opaque: String, weak: Bool = false) {
        guard opaque.utf8.allSatisfy(Self.isTagChar) else { return nil }
        self.opaque = opaque
        isWeak = weak
    }

    /// A tag whose `opaque` the caller knows holds only `etagc` characters (hex digits and
    /// punctuation it wrote itself), without checking them again.
    package init(checkedOpaque opaque: String) {
        self.opaque = opaque
        isWeak = false
    }

    /// Parses one entity tag, surrounding whitespace allowed.
    public init?(parsing text: String) {
        var bytes = ArraySlice(Array(text.utf8))
        bytes = ASCII.trimmed(bytes)
        guard let (tag, rest) = Self.parse(bytes), rest.isEmpty else { return nil }
        self = tag
    }

    /// The header value: `"opaque"` or `W/"opaque"`.
    public var description: String {
        var text = isWeak ? "W/\"" : "\""
        text.reserveCapacity(opaque.utf8.count + 4)
        text += opaque
        text += "\""
        return text
    }

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong and the same opaque tag.
    public func strongMatches(_ other: EntityTag) -> Bool {
        !isWeak && !other.isWeak && opaque == other.opaque
    }

    /// Weak comparison: the same opaque tag, weak or not.
    public func weakMatches(_ other: EntityTag) -> Bool { opaque == other.opaque }

    /// One tag at the start of `bytes`, and what follows it.
    static func parse(_ bytes: ArraySlice<UInt8>) -> (EntityTag, ArraySlice<UInt8>)? {
        var rest = bytes
        var weak = false
        if rest.count >= 2, rest[rest.startIndex] == 0x57, rest[rest.startIndex + 1] == 0x2F {  // "W/"
            weak = true
            rest = rest.dropFirst(2)
        }
        guard rest.first == ASCII.quote else { return nil }
        rest = rest.dropFirst()
        guard let close = rest.firstIndex(of: ASCII.quote) else { return nil }
        let opaque = rest[..<close]
        guard opaque.allSatisfy(isTagChar) else { return nil }
        return (EntityTag(uncheckedOpaque: headerText(opaque), weak: weak), rest[(close + 1)...])
    }

    private init(uncheckedOpaque: String, weak: Bool) {
        opaque = uncheckedOpaque
        isWeak = weak
    }

    /// `etagc = %x21 / %x23-7E / obs-text`
    static func isTagChar(_ b: UInt8) -> Bool { b == 0x21 || (b >= 0x23 && b != 0x7F) }
}

/// The value of `If-Match` or `If-None-Match`: `*` or a list of entity tags.
public enum EntityTagCondition: Equatable, Sendable {
    case any
    case tags([EntityTag])

    /// Parses the field. Members are read up to the first one that is not a valid
    /// entity tag; the rest is dropped, as Go does: so an unreadable `If-Match` matches
    /// nothing (412) and an unreadable `If-None-Match` matches nothing (no 304).
    public init(parsing text: String) {
        let bytes = ASCII.trimmed(ArraySlice(Array(text.utf8)))
        if bytes.count == 1, bytes.first == 0x2A {
            self = .any
            return
        }
        var tags: [EntityTag] = []
        var rest = bytes
        while true {
            rest = ASCII.trimmed(rest)
            while rest.first == ASCII.comma { rest = ASCII.trimmed(rest.dropFirst()) }
            guard !rest.isEmpty, let (tag, after) = EntityTag.parse(rest) else { break }
            tags.append(tag)
            rest = ASCII.trimmed(after)
            guard rest.isEmpty || rest.first == ASCII.comma else { break }
        }
        self = .tags(tags)
    }

    /// Whether the condition holds for a representation with `current` as its tag
    /// (nil: it has none), with strong or weak comparison.
    public func matches(_ current: EntityTag?, weakComparison: Bool) -> Bool {
        switch self {
        case .any:
            return true
        case .tags(let tags):
            guard let current else { return false }
            return tags.contains { weakComparison ? $0.weakMatches(current) : $0.strongMatches(current) }
        }
    }
}
