#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Byte searches over raw buffers. The hot paths of the parsers go through these so
/// that the C library's vectorised `memchr`/`memmem` do the scanning, not Swift loops.
enum ByteSearch {
    /// Index of the first `byte` in `buffer[from...]`, or nil.
    @inline(__always)
    static func first(_ byte: UInt8, in buffer: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard from < buffer.count, let base = buffer.baseAddress else { return nil }
        guard let hit = memchr(base + from, Int32(byte), buffer.count - from) else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// Index of the first occurrence of `needle` in `buffer[from...]`, or nil.
    @inline(__always)
    static func first(
        _ needle: UnsafeRawBufferPointer, in buffer: UnsafeRawBufferPointer, from: Int
    ) -> Int? {
        guard from < buffer.count, let base = buffer.baseAddress,
              let needleBase = needle.baseAddress, needle.count > 0 else { return nil }
        guard let hit = memmem(base + from, buffer.count - from, needleBase, needle.count) else {
            return nil
        }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    #if canImport(Glibc)
    // Glibc declares memmem only under _GNU_SOURCE, which Swift's Glibc module does not
    // set, and a package cannot set it without unsafe flags. So look the symbol up once;
    // should that fail (a static binary), fall back to memchr + memcmp.
    private typealias Memmem = @convention(c) (
        UnsafeRawPointer?, Int, UnsafeRawPointer?, Int
    ) -> UnsafeMutableRawPointer?

    private static let libcMemmem: Memmem? = dlsym(nil, "memmem").map { unsafeBitCast($0, to: Memmem.self) }

    private static func memmem(
        _ haystack: UnsafeRawPointer, _ haystackCount: Int, _ needle: UnsafeRawPointer, _ needleCount: Int
    ) -> UnsafeMutableRawPointer? {
        if let libcMemmem { return libcMemmem(haystack, haystackCount, needle, needleCount) }
        let first = Int32(needle.load(as: UInt8.self))
        var start = haystack
        let end = haystack + haystackCount
        while end - start >= needleCount,
              let hit = memchr(start, first, end - start - needleCount + 1) {
            if memcmp(hit, needle, needleCount) == 0 { return hit }
            start = UnsafeRawPointer(hit) + 1
        }
        return nil
    }
    #endif

    /// Whether `buffer[at ..< at + pattern.count]` equals `pattern` (false when it runs past the end).
    @inline(__always)
    static func matches(
        _ pattern: UnsafeRawBufferPointer, in buffer: UnsafeRawBufferPointer, at: Int
    ) -> Bool {
        guard at >= 0, at + pattern.count <= buffer.count else { return false }
        if pattern.isEmpty { return true }
        return memcmp(buffer.baseAddress! + at, pattern.baseAddress!, pattern.count) == 0
    }
}

/// ASCII helpers shared by the header parsers (RFC 9110 §5.6), and by the server module
/// (`package`), so that both read header text the same way.
package enum ASCII {
    package static let cr: UInt8 = 0x0D
    package static let lf: UInt8 = 0x0A
    package static let space: UInt8 = 0x20
    package static let tab: UInt8 = 0x09
    package static let dash: UInt8 = 0x2D
    package static let quote: UInt8 = 0x22
    package static let backslash: UInt8 = 0x5C
    package static let semicolon: UInt8 = 0x3B
    package static let comma: UInt8 = 0x2C
    package static let equals: UInt8 = 0x3D
    package static let colon: UInt8 = 0x3A

    @inline(__always) package static func isWhitespace(_ b: UInt8) -> Bool { b == space || b == tab }
    @inline(__always) package static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// RFC 9110 §5.6.2 `tchar`.
    @inline(__always) package static func isTokenChar(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: return true
        default: return false
        }
    }

    @inline(__always) package static func lower(_ b: UInt8) -> UInt8 {
        (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
    }

    /// Case-insensitive comparison of ASCII text; other bytes must match exactly.
    package static func equalsIgnoringCase<A: Collection, B: Collection>(_ a: A, _ b: B) -> Bool
    where A.Element == UInt8, B.Element == UInt8 {
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { lower($0) == lower($1) }
    }

    /// The same for bytes in memory against a constant: concrete, so that other modules
    /// call it as it is (the generic one, run unspecialized from another module, costs
    /// some hundreds of instructions a byte).
    package static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ text: [UInt8]) -> Bool {
        guard bytes.count == text.count else { return false }
        for index in 0..<bytes.count where lower(bytes[index]) != lower(text[index]) { return false }
        return true
    }

    package static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Borrowed views of both strings' bytes: no copy, and no reference counting, which
        // `withUTF8` on a `var` copy of each would cost (this runs for every header lookup).
        let compared = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                for i in 0..<x.count where lower(x[i]) != lower(y[i]) { return false }
                return true
            }
        }
        return (compared ?? nil) ?? zip(a.utf8, b.utf8).allSatisfy { lower($0) == lower($1) }
    }

    package static func lowercased(_ s: String) -> String {
        if !s.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) { return s }
        return String(decoding: s.utf8.map(lower), as: UTF8.self)
    }

    /// `bytes` with leading and trailing spaces and tabs removed: a slice, not a copy.
    package static func trimmed<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end, isWhitespace(bytes[start]) { bytes.formIndex(after: &start) }
        while end > start, isWhitespace(bytes[bytes.index(before: end)]) { bytes.formIndex(before: &end) }
        return bytes[start..<end]
    }

    /// `text` without leading and trailing spaces and tabs.
    package static func trimmed<S: StringProtocol>(_ text: S) -> S.SubSequence {
        let start = text.firstIndex { $0 != " " && $0 != "\t" } ?? text.endIndex
        let end = text.lastIndex { $0 != " " && $0 != "\t" }.map { text.index(after: $0) } ?? start
        return text[start..<end]
    }

    /// A field value that is `1*DIGIT`, as a number: nil for a sign, spaces or anything
    /// else, and past 2^64 − 1 (`UInt64("+5")` alone would take the sign).
    package static func decimalNumber(_ text: some StringProtocol) -> UInt64? {
        guard !text.isEmpty, text.utf8.allSatisfy(isDigit) else { return nil }
        return UInt64(text)
    }
}

/// Text from header bytes: UTF-8 when it is valid, otherwise ISO-8859-1, byte for byte,
/// so that no byte a client sent is lost or replaced.
func headerText<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    if let fast = bytes.withContiguousStorageIfAvailable({ buffer -> String? in
        var all: UInt8 = 0
        for b in buffer { all |= b }
        return all < 0x80 ? String(decoding: buffer, as: UTF8.self) : nil
    }), let fast { return fast }
    if let utf8 = String(validating: bytes, as: UTF8.self) { return utf8 }
    var text = String()
    text.unicodeScalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
    return text
}
