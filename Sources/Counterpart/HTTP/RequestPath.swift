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
        var segments: [String] = []
        let bytes = rawPath.utf8
        let escaped = bytes.contains(0x25)
        // Split as bytes (splitting the String would find grapheme clusters first), without
        // an array of the pieces; empty segments (`//`) are skipped.
        var next = bytes.startIndex
        while next < bytes.endIndex {
            let end = bytes[next...].firstIndex(of: 0x2F) ?? bytes.endIndex
            let raw = bytes[next..<end]
            next = end < bytes.endIndex ? bytes.index(after: end) : end
            if raw.isEmpty { continue }
            guard escaped else {
                // Nothing to decode (most paths): the segment is as sent, valid UTF-8 already,
                // and cannot hold `/` or NUL; only `.` and `..` are refused.
                guard !(raw.count <= 2 && raw.allSatisfy { $0 == 0x2E }) else {
                    self = .refused
                    return
                }
                segments.append(String(Substring(raw)))
                continue
            }
            guard let bytes = PercentEncoding.decodeBytes(String(Substring(raw))) else {
                self = .malformed
                return
            }
            guard !bytes.contains(0x2F), !bytes.contains(0), bytes != [0x2E], bytes != [0x2E, 0x2E],
                  let segment = String(validating: bytes, as: UTF8.self) else {
                self = .refused
                return
            }
            segments.append(segment)
        }
        self = .segments(segments)
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
