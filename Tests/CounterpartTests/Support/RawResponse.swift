import Foundation

/// The tests' one reading of a raw HTTP response: what came back on a connection (and how
/// long it took), split into the first response's head and body.
struct RawResponse {
    /// The empty line that ends a head.
    static let headEnd = Array("\r\n\r\n".utf8)

    let bytes: [UInt8]
    let seconds: Double

    var text: String { String(decoding: bytes, as: UTF8.self) }

    /// The first response head (status line and headers).
    var head: String {
        guard let end = bytes.firstRange(of: Self.headEnd) else { return text }
        return String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
    }

    /// The status of the first response; nil when nothing came back.
    var status: Int? { bytes.isEmpty ? nil : statusCode(of: head) }

    /// Status lines at line starts: 1 for one response; more for a second response on the
    /// connection (a smuggled request answered) or a head sent twice. (Counted on bytes: in
    /// a String, "\r\n" is one Character, which "\n" does not match.)
    var statusLineCount: Int {
        let all = [0x0A] + bytes
        let pattern = Array("\nHTTP/1.".utf8)
        guard all.count >= pattern.count else { return 0 }
        return (0...(all.count - pattern.count)).count { all[$0..<($0 + pattern.count)].elementsEqual(pattern) }
    }

    func header(_ name: String) -> String? { headerValue(name, in: head + "\r\n") }

    /// The first response's body (by its Content-Length when it has one).
    var body: [UInt8] {
        guard let end = bytes.firstRange(of: Self.headEnd) else { return [] }
        let rest = bytes[end.upperBound...]
        if let length = header("Content-Length").flatMap(Int.init) { return Array(rest.prefix(length)) }
        return Array(rest)
    }

    func json() -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
    }

    /// The `error` sentence of a JSON error body.
    var error: String? { json()?["error"] as? String }
}

extension RawResponse: CustomStringConvertible {
    /// Short, for failure messages (the bytes may be megabytes).
    var description: String { "\(bytes.count) bytes, \(head.prefix(100).debugDescription)" }
}

/// The value of a header in a response head.
func headerValue(_ name: String, in head: String) -> String? {
    head.split(separator: "\r\n").dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
        .map { String($0.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces) }
}

/// The status code of a response head.
func statusCode(of head: String) -> Int? {
    head.split(separator: " ").dropFirst().first.flatMap { Int($0) }
}
