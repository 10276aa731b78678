import Foundation
import HTTPTransfer
import Testing

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
        let client = try RawHTTPConnection(port: port)
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
