import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

// A corpus of hostile inputs, each sent over a real socket to a real server, each with
// the status the README / docs/http-reference.md documents (where they are silent: what nginx and
// RFC 9110/9112 do), and after each: nothing left in the uploads folder (no file, no
// `.counterpart-*.part`) and the server still serving (a follow-up GET works).
//
// What libmicrohttpd 0.9.75 (Debian 12) does itself, before Counterpart sees the request,
// and cannot be changed from outside it, is wrapped in `withKnownIssue` with what was
// expected: such a test passes while the library behaves so, and fails once it is fixed,
// so that the README's list of its limits is updated (README, "libmicrohttpd's own limits").

// MARK: - Fixture and helpers

/// A marker written to files outside the served root: no response may ever contain it.
private let corpusSecret = "COUNTERPART-SECRET-\(UUID().uuidString)"

/// A server whose root holds a few files, a folder literally named `%2e%2e`, and symlinks
/// that lead out (relative and absolute, to a file and to a folder); next to the root
/// (outside it), `secret.txt` and `secret-folder/secret.txt` hold `corpusSecret`.
private func makeCorpusServer() throws -> TestServer {
    try TestServer(populate: { root in
        let outside = root.deletingLastPathComponent()
        let manager = FileManager.default
        try Data(corpusSecret.utf8).write(to: outside.appendingPathComponent("secret.txt"))
        let secretFolder = outside.appendingPathComponent("secret-folder")
        try manager.createDirectory(at: secretFolder, withIntermediateDirectories: true)
        try Data(corpusSecret.utf8).write(to: secretFolder.appendingPathComponent("secret.txt"))

        try Data("hello\n".utf8).write(to: root.appendingPathComponent("hello.txt"))
        try sampleData.write(to: root.appendingPathComponent("data.bin"))
        let sub = root.appendingPathComponent("sub")
        try manager.createDirectory(at: sub, withIntermediateDirectories: true)
        try Data("inner\n".utf8).write(to: sub.appendingPathComponent("in.txt"))
        // A name that a double decoding of `%252e%252e` would turn into `..`.
        let literal = root.appendingPathComponent("%2e%2e")
        try manager.createDirectory(at: literal, withIntermediateDirectories: true)
        try Data("literal\n".utf8).write(to: literal.appendingPathComponent("literal.txt"))

        let links: [(String, String)] = [
            ("link-file-relative", "../secret.txt"),
            ("link-file-absolute", outside.appendingPathComponent("secret.txt").path),
            ("link-folder-relative", ".."),
            ("link-folder-absolute", secretFolder.path),
            ("sub/link-up", "../../secret.txt"),
        ]
        for (name, destination) in links {
            try manager.createSymbolicLink(atPath: root.appendingPathComponent(name).path, withDestinationPath: destination)
        }
    })
}

/// What came back on a raw connection, and how long it took.
private struct Reply {
    let raw: [UInt8]
    let seconds: Double

    var text: String { String(decoding: raw, as: UTF8.self) }

    /// The first response head (status line and headers).
    var head: String {
        guard let end = raw.firstRange(of: Array("\r\n\r\n".utf8)) else { return text }
        return String(decoding: raw[..<end.lowerBound], as: UTF8.self)
    }

    /// The status of the first response; nil when nothing came back.
    var status: Int? { raw.isEmpty ? nil : statusCode(of: head) }

    /// Status lines at line starts: 1 for one response; more for a second response on the
    /// connection (a smuggled request answered) or a head sent twice. (Counted on bytes: in
    /// a String, "\r\n" is one Character, which "\n" does not match.)
    var statusLineCount: Int {
        let bytes = [0x0A] + raw
        let pattern = Array("\nHTTP/1.".utf8)
        guard bytes.count >= pattern.count else { return 0 }
        return (0...(bytes.count - pattern.count)).count { bytes[$0..<($0 + pattern.count)].elementsEqual(pattern) }
    }

    func header(_ name: String) -> String? { headerValue(name, in: head + "\r\n") }

    /// The first response's body (by its Content-Length when it has one).
    var body: [UInt8] {
        guard let end = raw.firstRange(of: Array("\r\n\r\n".utf8)) else { return [] }
        let rest = raw[end.upperBound...]
        if let length = header("Content-Length").flatMap(Int.init) { return Array(rest.prefix(length)) }
        return Array(rest)
    }

    func json() -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
    }

    var error: String? { json()?["error"] as? String }

    var leaksSecret: Bool { text.contains(corpusSecret) }
}

extension Reply: CustomStringConvertible {
    /// Short, for failure messages (the bytes may be megabytes).
    var description: String { "\(raw.count) bytes, \(head.prefix(100).debugDescription)" }
}

/// Sends `request` on a new connection and reads until the server closes or `timeout`.
private func exchange(_ server: TestServer, _ request: [UInt8], timeout: Double = 5) throws -> Reply {
    let start = Date()
    let raw = try rawExchange(port: server.server.port, request, timeout: timeout)
    return Reply(raw: raw, seconds: Date().timeIntervalSince(start))
}

/// `POST /upload` with exactly these Content-Type bytes and body (and `Connection: close`,
/// so that an answered request ends the exchange at once).
private func uploadRequest(contentType: [UInt8], body: [UInt8], extraHeaders: String = "") -> [UInt8] {
    Array("POST /upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: ".utf8) + contentType
        + Array("\r\nContent-Length: \(body.count)\r\n\(extraHeaders)\r\n".utf8) + body
}

private func uploadRequest(boundary: String = "x", body: [UInt8]) -> [UInt8] {
    uploadRequest(contentType: Array("multipart/form-data; boundary=\(boundary)".utf8), body: body)
}

/// A well-formed file part (`ok.txt`): put before a malformed part, it is stored, and must
/// be removed again when the request fails.
private let goodFilePart = Array("--x\r\nContent-Disposition: form-data; name=\"good\"; filename=\"ok.txt\"\r\nContent-Type: text/plain\r\n\r\nfine\r\n".utf8)
private let closeDelimiter = Array("--x--\r\n".utf8)
/// A body with a single field `a=v` (nothing of it is stored on disk).
private let fieldOnlyBody = Array("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--x--\r\n".utf8)

private func chunked(_ body: [UInt8]) -> [UInt8] {
    Array((String(body.count, radix: 16) + "\r\n").utf8) + body + Array("\r\n0\r\n\r\n".utf8)
}

private func expectNothingLeftBehind(_ server: TestServer, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(server.eventually { server.uploadedNames().isEmpty }, "left behind in the uploads folder: \(server.uploadedNames())",
            sourceLocation: sourceLocation)
}

/// `expectNothingLeftBehind` for async tests: the wait runs on a thread of its own. After an
/// upload answered 200 its files are in place for good: no use waiting for them to go.
private func expectNothingLeftBehindAsync(_ server: TestServer, after reply: Reply,
                                          sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let clean = reply.status == 200 ? server.uploadedNames().isEmpty
        : try await offloaded { server.eventually { server.uploadedNames().isEmpty } }
    #expect(clean, "left behind in the uploads folder: \(server.uploadedNames())", sourceLocation: sourceLocation)
}

/// Runs blocking work (a socket read that may wait for a timeout) on a thread of its own and
/// suspends until it is done, so that a test that waits does not hold one of the few
/// threads the tests share (2 on a 2-core machine).
private func offloaded<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// `exchange` for async tests.
private func exchangeAsync(_ server: TestServer, _ request: [UInt8], timeout: Double) async throws -> Reply {
    try await offloaded { try exchange(server, request, timeout: timeout) }
}

private func expectStillServing(_ server: TestServer, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let result = try curl(["--max-time", "5", server.url("/hello.txt")])
    #expect(result.status == 200 && result.text == "hello\n", "the follow-up GET got \(result.status) (curl exit \(result.exitCode))",
            sourceLocation: sourceLocation)
}

private func expectFieldOnlyReceipt(_ reply: Reply, sourceLocation: SourceLocation = #_sourceLocation) {
    let fields = reply.json()?["fields"] as? [[String: Any]]
    #expect(fields?.count == 1 && fields?.first?["name"] as? String == "a" && fields?.first?["value"] as? String == "v",
            "not the receipt of a=v: \(reply.text.prefix(300))", sourceLocation: sourceLocation)
}

/// A client that reads a response at its own pace, to change a file while it is served.
private final class PacedClient {
    enum Read { case bytes([UInt8]), closed, timedOut }

    private let socket: Int32
    private var buffered: [UInt8] = []

    init(port: UInt16) throws {
        socket = try connectedSocket(port: port)
    }

    deinit { Glibc.close(socket) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func read(timeout: Double) -> Read {
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(socket, &chunk, chunk.count, 0)
        if count > 0 { return .bytes(Array(chunk[0..<count])) }
        return count == 0 ? .closed : .timedOut
    }

    /// The response head, and the body bytes after it once at least `minimumBody` came.
    func readHead(minimumBody: Int) -> (head: String, body: [UInt8])? {
        var received: [UInt8] = []
        while true {
            if let end = received.firstRange(of: Array("\r\n\r\n".utf8)), received.count - end.upperBound >= minimumBody {
                return (String(decoding: received[..<end.lowerBound], as: UTF8.self), Array(received[end.upperBound...]))
            }
            guard case .bytes(let bytes) = read(timeout: 5) else { return nil }
            received += bytes
        }
    }

    /// Everything until the server closes; `closed` is false when `timeout` passed first.
    func readToEnd(timeout: Double) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            switch read(timeout: max(0.05, deadline.timeIntervalSinceNow)) {
            case .bytes(let bytes): received += bytes
            case .closed: return (received, true)
            case .timedOut: return (received, false)
            }
        }
        return (received, false)
    }
}

// MARK: - Range

@Suite("Bad input corpus: Range headers")
struct BadInputCorpusRangeTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    /// CVE-2011-3192 ("Apache Killer") as it was sent: `bytes=0-,5-0,5-1,...,5-1299`.
    static let apacheKiller = "bytes=0-," + (0..<1_300).map { "5-\($0)" }.joined(separator: ",")
    /// The same shape without the invalid `5-0`: 51 overlapping ranges adding up past the file.
    static let overlapping = "bytes=0-," + (1...50).map { "5-\($0)" }.joined(separator: ",")
    static let thousandOneByteRanges = "bytes=" + (0..<1_000).map { "\($0 * 2)-\($0 * 2)" }.joined(separator: ",")
    /// About 30 KB of header: 7,600 ranges.
    static let thirtyKilobytes = "bytes=" + Array(repeating: "1-1", count: 7_600).joined(separator: ",")

    // README: a syntactically invalid header is ignored (200); more than 100 ranges, or
    // ranges adding up to more than the file, get the whole file (200).
    @Test(arguments: [
        ("CVE-2011-3192 as sent (with 5-0)", apacheKiller),
        ("51 overlapping ranges adding up past the file", overlapping),
        ("1,000 one-byte ranges", thousandOneByteRanges),
        ("a 30 KB Range header", thirtyKilobytes),
    ])
    func abusiveRangeSetsGetTheWholeFile(_ label: String, _ range: String) throws {
        let start = Date()
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(Date().timeIntervalSince(start) < 2, "\(label): slow")
        #expect(result.status == 200, "\(label)")
        #expect(result.header("Content-Range") == nil)
        #expect(result.body == sampleData, "\(label): not the whole file")
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    // README: a number too large for 64 bits counts as "past the end"; ranges past the end
    // are dropped, 416 if none is left; overlapping ranges are merged.
    @Test(arguments: [
        ("bytes=0-18446744073709551615", 206, "bytes 0-99999/100000"),
        ("bytes=0-99999999999999999999999999", 206, "bytes 0-99999/100000"),
        ("bytes=18446744073709551616-", 416, "bytes */100000"),
        ("bytes=99999999999999999999999999999-99999999999999999999999999999", 416, "bytes */100000"),
        ("bytes=9223372036854775807-", 416, "bytes */100000"),
        ("bytes=9223372036854775807-9223372036854775808", 416, "bytes */100000"),
        ("bytes=-18446744073709551616", 206, "bytes 0-99999/100000"),
        ("bytes=-99999999999999999999999", 206, "bytes 0-99999/100000"),
        ("bytes=0000000000000000000000000000000000000001-0000000000000000000000000000000000000002", 206, "bytes 1-2/100000"),
        ("bytes=18446744073709551615-18446744073709551615,0-0", 206, "bytes 0-0/100000"),
        ("bytes=" + Array(repeating: "0-99", count: 50).joined(separator: ","), 206, "bytes 0-99/100000"),
    ])
    func rangesWithHugeNumbers(_ range: String, _ status: Int, _ contentRange: String) throws {
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(result.status == status, "\(range.prefix(80))")
        #expect(result.header("Content-Range") == contentRange, "\(range.prefix(80))")
        if status == 206, let parsed = ContentRange(parsing: contentRange), case .satisfied(let range, _) = parsed {
            #expect(result.body == sampleData[Int(range.first)...Int(range.last)])
        } else {
            #expect(try result.json()["error"] is String)
        }
        try expectStillServing(server)
    }
}

// MARK: - Paths

@Suite("Bad input corpus: paths")
struct BadInputCorpusPathTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    // README: paths are percent-decoded once; a segment that decodes to `.` or `..`, or holds
    // `/` or NUL, is 404; a malformed escape is 400; the kernel keeps the rest beneath the root.
    @Test(arguments: [
        // Double encoding: decoded once, `%252e%252e` is the literal name `%2e%2e`.
        ("/%252e%252e/secret.txt", 404), ("/%252e%252e/%252e%252e/secret.txt", 404),
        ("/sub/%252e%252e/%252e%252e/secret.txt", 404), ("/%252e%252e%252fsecret.txt", 404),
        // Overlong UTF-8 for `.` and `/`: not UTF-8 at all, refused.
        ("/%c0%ae%c0%ae/secret.txt", 404), ("/%e0%80%ae%e0%80%ae/secret.txt", 404),
        ("/%c0%ae%c0%ae%c0%afsecret.txt", 404), ("/%f0%80%80%ae%f0%80%80%ae/secret.txt", 404),
        // Encoded NUL.
        ("/%00", 404), ("/hello.txt%00", 404), ("/hello.txt%00.png", 404), ("/..%00/secret.txt", 404),
        // Backslashes are plain characters on Linux.
        ("/..\\secret.txt", 404), ("/..%5csecret.txt", 404), ("/sub\\..\\..\\secret.txt", 404), ("/..%5c..%5csecret.txt", 404),
        // Dot segments, plain and encoded (README: refused, not normalized).
        ("/sub/./in.txt", 404), ("/sub/%2e/in.txt", 404), ("/./hello.txt", 404), ("/sub/../../secret.txt", 404),
        ("/sub/%2e%2e/%2e%2e/secret.txt", 404), ("/uploads/%2e%2e/%2e%2e/secret.txt", 404),
        // Malformed escapes.
        ("/%", 400), ("/%zz/secret.txt", 400), ("/%u002e%u002e/secret.txt", 400),
        // Very long paths (about 8 KB).
        ("/" + String(repeating: "a/", count: 4_000) + "x", 404),
        ("/" + String(repeating: "../", count: 2_700) + "secret.txt", 404),
        ("/" + String(repeating: "%2e%2e/", count: 1_200) + "secret.txt", 404),
    ])
    func nothingOutsideTheRootIsReachable(_ path: String, _ status: Int) throws {
        let result = try curl(["--path-as-is", server.url(path)])
        #expect(result.status == status, "\(path.prefix(60)) → \(result.status)")
        #expect(!result.text.contains(corpusSecret), "\(path.prefix(60)) leaked the secret")
        if status >= 400 { #expect(try result.json()["error"] is String) }
        try expectStillServing(server)
    }

    @Test func aDoubleEncodedDotDotIsALiteralNameNeverDecodedTwice() throws {
        let result = try curl(["--path-as-is", server.url("/%252e%252e/literal.txt")])
        #expect(result.status == 200)
        #expect(result.text == "literal\n")
    }

    // README: a relative symlink that stays inside is followed; one that leads out, and any
    // absolute symlink, is 404; listings leave them out.
    @Test(arguments: ["/link-file-relative", "/link-file-absolute", "/link-folder-relative/secret.txt", "/link-folder-relative/",
                      "/link-folder-absolute/secret.txt", "/link-folder-absolute/", "/link-folder-relative", "/sub/link-up"])
    func symlinksLeadingOutAre404(_ path: String) throws {
        let result = try curl(["--path-as-is", server.url(path)])
        #expect(result.status == 404, "\(path) → \(result.status)")
        #expect(!result.text.contains(corpusSecret))
        try expectStillServing(server)
    }

    @Test func symlinksLeadingOutAreNotListed() throws {
        let linkNames = ["link-file-relative", "link-file-absolute", "link-folder-relative", "link-folder-absolute"]
        let json = try curl(["-H", "Accept: application/json", server.url("/")]).json()
        let names = (json["entries"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
        #expect(names.contains("hello.txt"))
        #expect(names.filter { linkNames.contains($0) } == [])
        let html = try curl(["-H", "Accept: text/html", server.url("/")])
        #expect(html.status == 200)
        #expect(linkNames.allSatisfy { !html.text.contains($0) })
        let sub = try curl(["-H", "Accept: application/json", server.url("/sub/")]).json()
        #expect((sub["entries"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["in.txt"])
    }
}

// MARK: - Content-Type parameters built to make a parser backtrack

@Suite("Bad input corpus: Content-Type parameters (ReDoS shapes)")
struct BadInputCorpusContentTypeTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    static let base = "multipart/form-data; boundary=x; a="

    // CVE-2024-24762 (python-multipart) style. README: empty list members are skipped, an
    // unquoted value runs to the next `;`, at most 64 parameters; a malformed value is 400;
    // another media type is 415.
    @Test(arguments: [
        ("20,000 semicolons", base + String(repeating: ";", count: 20_000), 200),
        ("20,000 spaces", base + String(repeating: " ", count: 20_000), 200),
        ("20,000 \\\" in an unquoted value", base + String(repeating: "\\\"", count: 20_000), 200),
        ("20,000 \\\" in an unterminated quoted string", base + "\"" + String(repeating: "\\\"", count: 20_000), 400),
        ("20,000 \\\" in a terminated quoted string", base + "\"" + String(repeating: "\\\"", count: 20_000) + "\"", 200),
        ("20,000 quotes", base + String(repeating: "\"", count: 20_000), 400),
        ("3,000 parameters", "multipart/form-data; boundary=x" + (0..<3_000).map { "; p\($0)=v" }.joined(), 400),
        ("20,000 '='", "multipart/form-data; " + String(repeating: "=", count: 20_000), 400),
        ("a=a=a… 10,000 times", "multipart/form-data; boundary=x; a" + String(repeating: "=a", count: 10_000), 200),
        ("20,000 spaces before the first ';'", "multipart/form-data" + String(repeating: " ", count: 20_000) + "; boundary=x", 200),
        ("a quoted boundary of 20,000 backslashes", "multipart/form-data; boundary=\"" + String(repeating: "\\", count: 20_000) + "\"", 400),
        ("text/plain with 20,000 semicolons", "text/plain; a=" + String(repeating: ";", count: 20_000), 415),
    ])
    func answeredFastWithTheDocumentedStatus(_ label: String, _ contentType: String, _ status: Int) throws {
        let reply = try exchange(server, uploadRequest(contentType: Array(contentType.utf8), body: fieldOnlyBody))
        #expect(reply.seconds < 2, "\(label): took \(reply.seconds) s")
        #expect(reply.status == status, "\(label): \(reply.head.prefix(60)) \(reply.error ?? "")")
        if status == 200 { expectFieldOnlyReceipt(reply) } else { #expect(reply.error != nil, "\(label): no JSON error") }
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }
}

// MARK: - Malformed part headers

@Suite("Bad input corpus: malformed part headers")
struct BadInputCorpusPartHeaderTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    // CVE-2022-24434 (busboy/dicer) style and friends. Each bad part comes second, after a
    // complete file: README: a malformed header line, no or an invalid Content-Disposition,
    // two of one header, headers over 16 KiB are 400, and what the request stored is removed.
    @Test(arguments: [
        ("a header section of only CRLF", "--x\r\n\r\ndata\r\n", "has no Content-Disposition header"),
        ("CRLF CRLF right after the boundary", "--x\r\n\r\n\r\ndata\r\n", "has no Content-Disposition header"),
        ("Content-Disposition: with an empty value", "--x\r\nContent-Disposition:\r\n\r\ndata\r\n", "the value is empty"),
        ("Content-Disposition: with only spaces", "--x\r\nContent-Disposition:    \t \r\n\r\ndata\r\n", "the value is empty"),
        ("a header without colon", "--x\r\nContent-Disposition form-data; name=\"a\"\r\n\r\ndata\r\n", "has no colon"),
        ("a header name with NUL", "--x\r\nContent-Dis\0position: form-data; name=\"a\"\r\n\r\ndata\r\n", "NUL"),
        ("a filename with a raw NUL byte", "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\0.txt\"\r\n\r\ndata\r\n", "NUL"),
        ("a filename with a bare CR", "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\rb.txt\"\r\n\r\ndata\r\n", "carriage return"),
        ("a header line of 60 KB", "--x\r\nX-Long: " + String(repeating: "a", count: 60_000) + "\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ndata\r\n",
         "larger than the limit of 16384"),
        ("17 KB of headers", "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"h.txt\"\r\n"
            + (0..<170).map { "X-H\($0): " + String(repeating: "v", count: 100) + "\r\n" }.joined() + "\r\ndata\r\n",
         "larger than the limit of 16384"),
        ("a header name with a space", "--x\r\nContent Disposition: form-data; name=\"a\"\r\n\r\ndata\r\n", "is not a valid header name"),
        ("an empty header name", "--x\r\n: form-data\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ndata\r\n", "is not a valid header name"),
        ("a folded first line", "--x\r\n  folded\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\ndata\r\n", "starts with whitespace"),
        ("two Content-Disposition", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\ndata\r\n",
         "more than one Content-Disposition"),
        ("two Content-Type", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n\r\ndata\r\n",
         "more than one Content-Type"),
        ("another disposition type", "--x\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\ndata\r\n", "not \"form-data\""),
        ("no name", "--x\r\nContent-Disposition: form-data; filename=\"a.txt\"\r\n\r\ndata\r\n", "no name parameter"),
        ("an unterminated quote", "--x\r\nContent-Disposition: form-data; name=\"a\r\n\r\ndata\r\n", "no closing quote"),
        ("5,000 \\\" in an unterminated filename", "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\""
            + String(repeating: "\\\"", count: 5_000) + "\r\n\r\ndata\r\n", "no closing quote"),
    ])
    func aMalformedPartIs400AndRemovesWhatCameBefore(_ label: String, _ badPart: String, _ reason: String) throws {
        let body = goodFilePart + Array(badPart.utf8) + closeDelimiter
        let reply = try exchange(server, uploadRequest(body: body))
        #expect(reply.seconds < 2, "\(label): took \(reply.seconds) s")
        #expect(reply.status == 400, "\(label): \(reply.head.prefix(60))")
        let error = reply.error ?? ""
        #expect(error.contains(reason) && error.contains("part 2"), "\(label): \(error)")
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    @Test func aPartThatNeverEndsItsHeadersIs400() throws {
        // 60 KB without a line end, then the body ends.
        let reply = try exchange(server, uploadRequest(body: goodFilePart + Array("--x\r\n".utf8) + [UInt8](repeating: 0x61, count: 60_000)))
        #expect(reply.status == 400)
        #expect(reply.error?.contains("larger than the limit of 16384") == true, "\(reply.error ?? reply.head)")
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }
}

// MARK: - Many parts, big header sections

@Suite("Bad input corpus: many parts and big header sections")
struct BadInputCorpusPartLimitTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    @Test func tenThousandEmptyFieldsAre413() throws {
        // README: more than 1,000 parts is 413.
        let part = Array("--x\r\nContent-Disposition: form-data; name=\"\"\r\n\r\n\r\n".utf8)
        var body: [UInt8] = []
        body.reserveCapacity(part.count * 10_000 + 8)
        for _ in 0..<10_000 { body += part }
        body += closeDelimiter
        let reply = try exchange(server, uploadRequest(body: body))
        #expect(reply.seconds < 2, "took \(reply.seconds) s")
        #expect(reply.status == 413)
        #expect(reply.error?.contains("more than 1000 parts") == true, "\(reply.error ?? reply.head)")
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    @Test func aThousandAndOneEmptyFilesAre413AndTheThousandStoredAreRemoved() throws {
        let part = Array("--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"e.bin\"\r\n\r\n\r\n".utf8)
        var body: [UInt8] = []
        for _ in 0..<1_001 { body += part }
        body += closeDelimiter
        let reply = try exchange(server, uploadRequest(body: body), timeout: 10)
        #expect(reply.status == 413)
        #expect(reply.error?.contains("part 1001") == true, "\(reply.error ?? reply.head)")
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    @Test func aThousandPartsWithAHundredHeadersEachStayCheap() throws {
        // CVE-2023-24536 (Go mime/multipart) style: many parts, many headers each, within
        // the limits — answered quickly, and only what it holds is reported.
        let headers = (0..<100).map { "X-H\($0): v\r\n" }.joined()
        let part = Array("--x\r\nContent-Disposition: form-data; name=\"n\"\r\n\(headers)\r\nv\r\n".utf8)
        var body: [UInt8] = []
        for _ in 0..<1_000 { body += part }
        body += closeDelimiter
        let reply = try exchange(server, uploadRequest(body: body))
        #expect(reply.seconds < 3, "took \(reply.seconds) s")
        #expect(reply.status == 200)
        #expect((reply.json()?["fields"] as? [[String: Any]])?.count == 1_000)
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    @Test func aHeaderSectionJustUnder16KiBIsAccepted() throws {
        // The control for the 17 KB case above: the limit is where the README says.
        let headers = (0..<140).map { "X-H\($0): " + String(repeating: "v", count: 100) + "\r\n" }.joined()
        let body = Array("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\(headers)\r\nv\r\n--x--\r\n".utf8)
        let reply = try exchange(server, uploadRequest(body: body))
        #expect(reply.status == 200, "\(reply.error ?? reply.head)")
        expectFieldOnlyReceipt(reply)
        expectNothingLeftBehind(server)
    }
}

// MARK: - Boundary look-alikes

@Suite("Bad input corpus: boundary look-alikes")
struct BadInputCorpusLookalikeTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    @Test func aBodyOfBoundaryLookalikesParsesIntactAndFast() throws {
        let boundary = "AaB03xLongBoundary-0123456789"
        // CRLF "--" and every proper prefix of the boundary, then the whole boundary followed
        // by a letter (README: data, not a delimiter), repeated for about 3 MB.
        var unit: [UInt8] = []
        for length in 0..<boundary.utf8.count { unit += Array("\r\n--".utf8) + Array(boundary.utf8.prefix(length)) }
        unit += Array("\r\n-\r\n\r\n--\(boundary)x\r\n\n--\(boundary)\r--".utf8)
        var content: [UInt8] = []
        content.reserveCapacity(3_000_000 + unit.count)
        while content.count < 3_000_000 { content += unit }
        let body = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"f\"; filename=\"look.bin\"\r\n\r\n".utf8)
            + content + Array("\r\n--\(boundary)--\r\n".utf8)
        let reply = try exchange(server, uploadRequest(boundary: boundary, body: body), timeout: 10)
        #expect(reply.seconds < 3, "took \(reply.seconds) s")
        #expect(reply.status == 200, "\(reply.error ?? reply.head)")
        let file = try #require((reply.json()?["files"] as? [[String: Any]])?.first)
        #expect(file["size"] as? Int == content.count)
        #expect(file["sha256"] as? String == (try sha256(Data(content))))
        #expect(try Data(contentsOf: server.uploads.appendingPathComponent("look.bin")) == Data(content))
        // Exactly the file: no temporary file left next to it.
        #expect(server.uploadedNames() == ["look.bin"])
        try expectStillServing(server)
    }
}

// MARK: - File names

@Suite("Bad input corpus: file names")
struct BadInputCorpusFilenameTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    // README: stored names are the last component (after `/` or `\`), without control and
    // invisible formatting characters, without leading dots and spaces, at most 200 bytes
    // (extension kept), `upload` if nothing is left; the JSON `filename` is as sent.
    @Test(arguments: [
        ("../../etc/passwd", "passwd"),
        ("C:\\..\\x", "x"),
        ("..\\..\\windows\\system32\\evil.dll", "evil.dll"),
        ("sub/../../.ssh/authorized_keys", "authorized_keys"),
        (".htaccess", "htaccess"),
        (String(repeating: "n", count: 296) + ".txt", String(repeating: "n", count: 196) + ".txt"),
        (String(repeating: "é", count: 150) + ".txt", String(repeating: "é", count: 98) + ".txt"),
        ("invoice\u{202E}fdp.exe", "invoicefdp.exe"),
        ("\u{202E}\u{202D}.bashrc", "bashrc"),
        ("\u{200B}.profile", "profile"),
        ("a\u{01}b\u{1B}c\u{7F}d\u{9B}.txt", "abcd.txt"),
        ("%00.txt", "%00.txt"),
        ("...", "upload"),
        (".", "upload"),
        ("..", "upload"),
        (" . . ", "upload"),
    ])
    func storedNamesAreSafeAndTheReceiptSaysWhatWasSent(_ sent: String, _ stored: String) throws {
        let body = Array("--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"\(sent)\"\r\n\r\ndata\r\n--x--\r\n".utf8)
        let reply = try exchange(server, uploadRequest(body: body))
        #expect(reply.status == 200, "\(sent.debugDescription): \(reply.error ?? reply.head)")
        let file = try #require((reply.json()?["files"] as? [[String: Any]])?.first)
        #expect(file["filename"] as? String == sent)
        #expect(file["url"] as? String == "/uploads/" + PercentEncoding.encode(stored))
        // Exactly one file, under the safe name, inside the uploads folder; nothing next to it.
        #expect(server.uploadedNames() == [stored], "\(sent.debugDescription) stored as \(server.uploadedNames())")
        #expect(!stored.hasPrefix(".") && stored.utf8.count <= 200)
        #expect(try Data(contentsOf: server.uploads.appendingPathComponent(stored)) == Data("data".utf8))
        let folder = server.uploads.deletingLastPathComponent().path
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["public", "secret-folder", "secret.txt", "uploads"])
        let fetched = try curl([server.url(file["url"] as? String ?? "/")])
        #expect(fetched.status == 200 && fetched.text == "data")
    }
}

// MARK: - Files that change while they are served

/// What a paced download saw: the announced length, the body, whether the server closed.
private struct PacedDownload: Sendable, CustomStringConvertible {
    var contentLength: String?
    var body: [UInt8]
    var closed: Bool

    var description: String { "Content-Length \(contentLength ?? "none"), \(body.count) body bytes, \(closed ? "closed" : "open")" }
}

/// GETs `target`, reads the head and the first body bytes, calls `change` (the file changes
/// under the download), then reads on until the server closes or `timeout` passes.
private func pacedDownload(_ server: TestServer, _ target: String, timeout: Double,
                           change: @escaping @Sendable () throws -> Void) async throws -> PacedDownload {
    let port = server.server.port
    return try await offloaded {
        let client = try PacedClient(port: port)
        client.send("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        guard let (head, first) = client.readHead(minimumBody: 1) else {
            return PacedDownload(contentLength: nil, body: [], closed: false)
        }
        try change()
        let (rest, closed) = client.readToEnd(timeout: timeout)
        return PacedDownload(contentLength: headerValue("Content-Length", in: head + "\r\n"), body: first + rest, closed: closed)
    }
}

/// Truncates the file at `path` (runs on the download's thread: it throws rather than expects).
private func shrink(_ path: String, to length: Int) throws {
    struct TruncateFailed: Error { let errno: Int32 }
    guard Glibc.truncate(path, off_t(length)) == 0 else { throw TruncateFailed(errno: errno) }
}

@Suite("Bad input corpus: files that change while they are served")
struct BadInputCorpusChangingFileTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    static let original = testBytes(count: 2_000_000, seed: 42)

    @Test func aFileThatShrinksDuringAThrottledDownloadEndsShort() async throws {
        let path = server.root.appendingPathComponent("shrinks.bin").path
        try Self.original.write(to: URL(fileURLWithPath: path))
        let download = try await pacedDownload(server, "/shrinks.bin?rate=2MiB", timeout: 5) {
            try shrink(path, to: 100_000)
        }
        let (length, closed, count) = (download.contentLength, download.closed, download.body.count)
        let intact = Data(download.body) == Self.original.prefix(count)
        #expect(length == "2000000")
        // The connection closes short of Content-Length (curl would exit 18), with the
        // original bytes up to there.
        #expect(closed, "the server neither finished nor closed the connection")
        #expect(count < Self.original.count)
        #expect(intact)
        try expectStillServing(server)
    }

    @Test func aFileThatGrowsDuringAThrottledDownloadSendsExactlyTheAnnouncedLength() async throws {
        let path = server.root.appendingPathComponent("grows.bin")
        try Self.original.write(to: path)
        let download = try await pacedDownload(server, "/grows.bin?rate=2MiB", timeout: 10) {
            let handle = try FileHandle(forWritingTo: path)
            try handle.seekToEnd()
            try handle.write(contentsOf: testBytes(count: 1_000_000, seed: 43))
            try handle.close()
        }
        let (length, closed, count) = (download.contentLength, download.closed, download.body.count)
        let intact = Data(download.body) == Self.original
        #expect(length == "2000000")
        #expect(closed)
        #expect(count == Self.original.count)
        #expect(intact)
        try expectStillServing(server)
    }

    @Test func aFileThatShrinksDuringASendfileDownloadEndsShort() async throws {
        // No fault: a file over 64 KiB goes out with sendfile. A 64 MB sparse file, a client
        // that reads a little; the server fills the socket buffers (a few MB) and waits.
        let path = server.root.appendingPathComponent("sparse.bin").path
        let descriptor = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        #expect(descriptor >= 0 && ftruncate(descriptor, 64_000_000) == 0)
        close(descriptor)
        let download = try await pacedDownload(server, "/sparse.bin", timeout: 2) {
            try shrink(path, to: 100_000)
        }
        let length = download.contentLength
        #expect(length == "64000000")
        // libmicrohttpd's sendfile loop would spin on the short file for ever, neither
        // sending nor closing; the connection watch sees the file shrink and closes the
        // connection within a second: the response ends short of its Content-Length.
        let (closed, count, zeros) = (download.closed, download.body.count, download.body.allSatisfy { $0 == 0 })
        #expect(closed, "after the file shrank the connection stayed open without sending (\(count) body bytes came)")
        #expect(count < 64_000_000)
        #expect(zeros)
        try expectStillServing(server)
    }
}

// MARK: - Request framing: smuggling, Content-Length, Transfer-Encoding, chunks

@Suite("Bad input corpus: request framing")
struct BadInputCorpusFramingTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    static let fileBody = Array("--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"framed.txt\"\r\n\r\nframed\r\n--x--\r\n".utf8)
    static let smuggled = Array("GET /hello.txt?smuggled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
    static let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\n"

    @Test func contentLengthAndTransferEncodingTogetherSmuggleNothing() async throws {
        // A front end that goes by Content-Length sees one request; one that goes by
        // Transfer-Encoding sees a body ending at "0\r\n\r\n" and a second request.
        let framed = chunked(Self.fileBody) + Self.smuggled
        let request = Array((Self.head + "Content-Length: \(framed.count)\r\nTransfer-Encoding: chunked\r\n\r\n").utf8) + framed
        let reply = try await exchangeAsync(server, request, timeout: 1.5)
        // RFC 9112 §6.1: reject, or go by Transfer-Encoding and then close the connection;
        // nginx 1.22 answers 400, and so does Counterpart (libmicrohttpd alone would store
        // the file and answer the GET after the chunked body as a request of its own).
        #expect(reply.statusLineCount == 1, "the request after the chunked body was answered too: \(reply.statusLineCount) responses")
        #expect(reply.status == 400, "got \(reply.status ?? 0)")
        try await expectNothingLeftBehindAsync(server, after: reply)
        try expectStillServing(server)
    }

    @Test func twoDifferentContentLengthsSmuggleNothing() async throws {
        let request = Array((Self.head + "Content-Length: 0\r\nContent-Length: \(Self.smuggled.count)\r\n\r\n").utf8) + Self.smuggled
        let reply = try await exchangeAsync(server, request, timeout: 1.5)
        // RFC 9112 §6.3: differing Content-Length values are an unrecoverable framing error:
        // 400, then close (libmicrohttpd alone takes the first and answers the bytes after
        // it as a second request).
        #expect(reply.statusLineCount == 1, "the bytes after the first Content-Length were answered as a request: \(reply.statusLineCount) responses")
        #expect(reply.status == 400)
        try await expectNothingLeftBehindAsync(server, after: reply)
        try expectStillServing(server)
    }

    @Test func whitespaceBeforeTheColonOfTransferEncodingIsRefused() async throws {
        // A front end that tolerates "Transfer-Encoding :" reads a chunked body; one that
        // ignores the field reads Content-Length.
        let request = Array((Self.head + "Transfer-Encoding : chunked\r\nConnection: close\r\nContent-Length: \(fieldOnlyBody.count)\r\n\r\n").utf8) + fieldOnlyBody
        let reply = try await exchangeAsync(server, request, timeout: 1.5)
        // RFC 9112 §5.1: a server MUST reject whitespace between a field name and the colon
        // with 400 (nginx 1.22 does): it is a request-smuggling vector. (libmicrohttpd
        // alone takes it as an unknown header named "Transfer-Encoding ".)
        #expect(reply.status == 400, "got \(reply.status ?? 0)")
        #expect(reply.statusLineCount == 1)
        try await expectNothingLeftBehindAsync(server, after: reply)
        try expectStillServing(server)
    }

    // RFC 9112 §6.3: an invalid Content-Length is an unrecoverable framing error: 400 (413
    // for one too large to hold), then close.
    @Test(arguments: [("-5", [400]), ("5, 5", [400]), ("abc", [400]), ("+5", [400]), ("0x5", [400]), ("", [400]),
                      ("5 5", [400]), ("99999999999999999999999", [400, 413])])
    func anInvalidContentLengthIsRefusedWithOneResponse(_ value: String, _ statuses: [Int]) throws {
        let request = Array((Self.head + "Connection: close\r\nContent-Length: \(value)\r\n\r\n").utf8) + Self.fileBody
        let reply = try exchange(server, request, timeout: 2)
        #expect(statuses.contains(reply.status ?? 0), "Content-Length: \(value) → \(reply.status ?? 0)")
        // libmicrohttpd 0.9.75 answers these itself, and sends its error head twice: "HTTP/1.1
        // 400 Bad Request … Content-Length: 138\r\n\r\n", the same head again, then the
        // 138-byte HTML body, so a client reads the second head as the body of the first.
        // The status is right and the connection closes.
        withKnownIssue("libmicrohttpd 0.9.75 writes its error head twice for an invalid Content-Length") {
            #expect(reply.statusLineCount == 1, "Content-Length: \(value): \(reply.statusLineCount) status lines in \(reply.text.prefix(400).debugDescription)")
        }
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    // Field values exclude leading and trailing whitespace (RFC 9110 §5.5): "N " and
    // "chunked " are the valid values N and chunked.
    @Test(arguments: ["Content-Length: \(fieldOnlyBody.count) ", "Transfer-Encoding: chunked "])
    func framingHeadersWithTrailingWhitespaceAreValid(_ field: String) async throws {
        let body = field.hasPrefix("Transfer") ? chunked(fieldOnlyBody) : fieldOnlyBody
        let request = Array((Self.head + "Connection: close\r\n\(field)\r\n\r\n").utf8) + body
        let reply = try await exchangeAsync(server, request, timeout: 1.5)
        // libmicrohttpd does not trim trailing whitespace here: it refuses "Content-Length: N "
        // itself with 400 (its head sent twice, see above), and would take
        // "Transfer-Encoding: chunked " as an unknown coding and read the body until the
        // client closes; Counterpart refuses that one with 400 at once. nginx accepts both.
        #expect(reply.status == 400, "\(field.debugDescription) → \(reply.status ?? 0)")
        withKnownIssue("libmicrohttpd 0.9.75 does not trim trailing whitespace from framing headers") {
            #expect(reply.status == 200, "\(field.debugDescription) → \(reply.status ?? 0)")
        }
        try await expectNothingLeftBehindAsync(server, after: reply)
        try expectStillServing(server)
    }

    // RFC 9112 §6.1: chunked must be the last coding (else 400 and close); a coding the
    // server does not know is 501 (nginx 1.22: 501 for anything but "chunked").
    @Test(arguments: [
        ("Transfer-Encoding: gzip, chunked", [400, 501]),
        ("Transfer-Encoding: chunked, gzip", [400]),
        ("Transfer-Encoding: chunked, chunked", [400]),
        ("Transfer-Encoding: identity", [400, 501]),
        ("Transfer-Encoding: xchunked", [400, 501]),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip", [400]),
    ])
    func transferCodingsOtherThanChunkedAreRefused(_ fields: String, _ statuses: [Int]) async throws {
        let request = Array((Self.head + "Connection: close\r\n\(fields)\r\n\r\n").utf8) + chunked(Self.fileBody)
        async let pending = exchangeAsync(server, request, timeout: 1.5)
        // Every name the uploads folder shows while the request is pending.
        var seen = Set<String>()
        for _ in 0..<25 {
            try await Task.sleep(for: .milliseconds(50))
            seen.formUnion(server.uploadedNames())
        }
        let during = seen.sorted()
        let reply = try await pending
        // Refused at once, nothing stored. (For every Transfer-Encoding but exactly "chunked",
        // libmicrohttpd alone would read the body until the client closes and hand the raw
        // chunk framing to the multipart parser.)
        #expect(statuses.contains(reply.status ?? 0), "\(fields.debugDescription) → \(reply.status.map(String.init) ?? "no answer within 1.5 s")")
        #expect(during.isEmpty, "stored while the request was pending: \(during)")
        try await expectNothingLeftBehindAsync(server, after: reply)
        try expectStillServing(server)
    }

    // libmicrohttpd answers bad chunk framing itself (README: 400 with its HTML body); a
    // chunk size that does not fit 64 bits is its 413.
    @Test(arguments: [
        ("zz", [400]), ("-5", [400]), ("0x5", [400]), ("5   ", [400]),
        (String(repeating: "f", count: 64), [400, 413]),
        // 2^64 + the body's length: must not wrap around to the body's length.
        ("1" + String(format: "%016x", BadInputCorpusFramingTests.fileBody.count), [400, 413]),
        (String(BadInputCorpusFramingTests.fileBody.count - 3, radix: 16), [400]),  // shorter than the data
    ])
    func invalidChunkSizesAreRefused(_ size: String, _ statuses: [Int]) throws {
        let request = Array((Self.head + "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\n").utf8)
            + Self.fileBody + Array("\r\n0\r\n\r\n".utf8)
        let reply = try exchange(server, request, timeout: 3)
        #expect(statuses.contains(reply.status ?? 0), "chunk size \(size.prefix(20)) → \(reply.status ?? 0)")
        #expect(reply.statusLineCount == 1)
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    @Test func aChunkSizeWithLeadingZerosIsValid() throws {
        // 64 hex digits that are a small number: RFC 9112 allows leading zeros.
        let size = String(repeating: "0", count: 62) + String(format: "%02x", fieldOnlyBody.count)
        let request = Array((Self.head + "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\n").utf8)
            + fieldOnlyBody + Array("\r\n0\r\n\r\n".utf8)
        let reply = try exchange(server, request, timeout: 3)
        #expect(reply.status == 200)
        expectFieldOnlyReceipt(reply)
        expectNothingLeftBehind(server)
    }
}

// MARK: - Request heads: limits and odd request lines

@Suite("Bad input corpus: request heads")
struct BadInputCorpusRequestHeadTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    // The head must fit the connection's 64 KiB (README, Limits). What libmicrohttpd does
    // past it: a header or too many headers → 431, a request line → 414, each with its HTML
    // body and "Connection: close"; the server goes on.
    @Test(arguments: [
        ("a 70 KB header", "GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 70_000) + "\r\nConnection: close\r\n\r\n", 431),
        ("2,000 headers", "GET /hello.txt HTTP/1.1\r\nHost: x\r\n" + (0..<2_000).map { "X-H\($0): v\r\n" }.joined() + "Connection: close\r\n\r\n", 431),
        ("a 70 KB request line", "GET /" + String(repeating: "a", count: 70_000) + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 414),
        ("an upload with a 70 KB header", "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=x\r\nX-Big: "
            + String(repeating: "a", count: 70_000) + "\r\nContent-Length: \(BadInputCorpusFramingTests.fileBody.count)\r\n\r\n"
            + String(decoding: BadInputCorpusFramingTests.fileBody, as: UTF8.self), 431),
    ])
    func headsPastTheLimitAreRefused(_ label: String, _ request: String, _ status: Int) throws {
        let reply = try exchange(server, Array(request.utf8))
        #expect(reply.status == status, "\(label) → \(reply.status ?? 0)")
        #expect(reply.statusLineCount == 1)
        #expect(reply.seconds < 2)
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    // nil: the connection closed without an answer.
    @Test(arguments: [
        ("an HTTP/0.9 request", "GET /hello.txt\r\n", [400, nil]),
        ("a lowercase method", "get /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [405]),
        ("a NUL in the version", "GET /hello.txt HTTP/1.1\0\r\nHost: x\r\nConnection: close\r\n\r\n", [400]),
        ("an unknown version", "GET /hello.txt HTTP/2.0\r\nHost: x\r\nConnection: close\r\n\r\n", [505]),
        ("a lowercase version", "GET /hello.txt http/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [400]),
        ("tabs between the parts", "GET\t/hello.txt\tHTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [400, nil]),
        // RFC 9112 §3.2.2: a server MUST accept the absolute form (nginx serves /hello.txt).
        ("the absolute form", "GET http://x/hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [200]),
        ("the absolute form over https, any case", "GET HTTPS://x:8443/hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [200]),
    ] as [(String, String, [Int?])])
    func oddRequestLines(_ label: String, _ request: String, _ statuses: [Int?]) throws {
        let reply = try exchange(server, Array(request.utf8), timeout: 3)
        #expect(statuses.contains(reply.status), "\(label) → \(reply.status.map(String.init) ?? "closed without an answer")")
        #expect(reply.statusLineCount <= 1)
        if reply.status == 405 { #expect(reply.error?.contains("case-sensitive") == true) }
        if reply.status == 200 { #expect(String(decoding: reply.body, as: UTF8.self) == "hello\n") }
        #expect(!reply.leaksSecret)
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    // libmicrohttpd hands the request target and header values over as C strings, cut at a
    // raw NUL, with no way to see the rest (the lengths it gives are cut too):
    // "GET /hello.txt\0.png" is served as /hello.txt, "GET /hel\0lo.txt" is 404 for /hel,
    // "Range: bytes=0-1\0junk" is the range 0-1. RFC 9112 §3.2, RFC 9110 §5.5 / nginx 1.22:
    // 400. (An encoded %00 is refused, see the path tests.) Nothing outside the root is
    // reachable this way: the cut path is checked like any other.
    @Test(arguments: [
        ("a NUL after the path", "GET /hello.txt\0.png HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("a NUL inside the path", "GET /hel\0lo.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        ("a NUL in a header value", "GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\0junk\r\nConnection: close\r\n\r\n"),
    ])
    func aRawNULCutsWhatItIsIn(_ label: String, _ request: String) throws {
        let reply = try exchange(server, Array(request.utf8), timeout: 3)
        #expect(reply.statusLineCount == 1)
        #expect(!reply.leaksSecret)
        withKnownIssue("libmicrohttpd 0.9.75 cuts the request target and header values at a raw NUL") {
            #expect(reply.status == 400, "\(label) → \(reply.status.map(String.init) ?? "closed without an answer")")
        }
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }
}
