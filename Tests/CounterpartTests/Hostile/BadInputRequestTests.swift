import Foundation
import Testing

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
        expectFieldOnlyAccepted(try exchange(server, request, timeout: 3), by: server)
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
        #expect(reply.seconds < pathologicalSeconds)
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
