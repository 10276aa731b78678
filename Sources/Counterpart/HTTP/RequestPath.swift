import HTTPTransfer

/// A request path split into percent-decoded segments, once, for every endpoint.
enum RequestPath {
    case segments([String])
    /// A `%` escape that is not two hex digits.
    case malformed
    /// A segment that decodes to `.` or `..`, or holds `/` or NUL: only an escape attempt
    /// does that.
    case refused

    init(_ rawPath: String) {
        var path = rawPath
        // One pass over the path's own bytes (a native string's, lent without a copy).
        self = path.withUTF8(Self.split)
    }

    private static func split(_ bytes: UnsafeBufferPointer<UInt8>) -> RequestPath {
        var segments: [String] = []
        let escaped = bytes.contains(0x25)
        // Empty segments (`//`) are skipped.
        var next = 0
        while next < bytes.count {
            var end = next
            while end < bytes.count, bytes[end] != 0x2F { end += 1 }
            let raw = UnsafeBufferPointer(rebasing: bytes[next..<end])
            next = end + 1
            if raw.isEmpty { continue }
            guard escaped else {
                // Nothing to decode (most paths): the segment is as sent, valid UTF-8 already,
                // and cannot hold `/` or NUL; only `.` and `..` are refused.
                guard !(raw.count <= 2 && raw.allSatisfy { $0 == 0x2E }) else { return .refused }
                segments.append(String(decoding: raw, as: UTF8.self))
                continue
            }
            guard let decoded = PercentEncoding.decodeBytes(String(decoding: raw, as: UTF8.self)) else { return .malformed }
            guard !decoded.contains(0x2F), !decoded.contains(0), decoded != [0x2E], decoded != [0x2E, 0x2E],
                  let segment = String(validating: decoded, as: UTF8.self) else {
                return .refused
            }
            segments.append(segment)
        }
        return .segments(segments)
    }

    /// `/a/b c` for segments `a`, `b c`; nil for a path that does not decode.
    var decoded: String? {
        guard case .segments(let segments) = self else { return nil }
        return "/" + segments.joined(separator: "/")
    }

    /// `/a/b%20c` for segments `a`, `b c`.
    static func encoded(_ segments: [String]) -> String {
        "/" + segments.map { PercentEncoding.encode($0) }.joined(separator: "/")
    }
}
