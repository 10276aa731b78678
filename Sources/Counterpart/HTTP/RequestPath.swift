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
        for raw in rawPath.split(separator: "/", omittingEmptySubsequences: true) {
            guard let bytes = PercentEncoding.decodeBytes(String(raw)) else {
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

    /// `/a/b%20c` for segments `a`, `b c`.
    static func encoded(_ segments: [String]) -> String {
        "/" + segments.map { PercentEncoding.encode($0) }.joined(separator: "/")
    }
}
