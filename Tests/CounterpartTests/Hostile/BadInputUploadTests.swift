import Foundation
import HTTPTransfer
import Testing

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
        #expect(reply.seconds < pathologicalSeconds, "\(label): took \(reply.seconds) s")
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
        #expect(reply.seconds < pathologicalSeconds, "\(label): took \(reply.seconds) s")
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
        #expect(reply.seconds < pathologicalSeconds, "took \(reply.seconds) s")
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
        // In an object store each of the thousand e.bin claims its name after listing the
        // claims of e-*.bin, which grow with each: about 70 s against RGW (README: what each backend promises).
        let reply = try exchange(server, uploadRequest(body: body), timeout: TestServer.usesObjectStore ? 300 : 10)
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
        #expect(reply.seconds < pathologicalSeconds, "took \(reply.seconds) s")
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
        expectFieldOnlyAccepted(reply, by: server)
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
        #expect(reply.seconds < pathologicalSeconds, "took \(reply.seconds) s")
        #expect(reply.status == 200, "\(reply.error ?? reply.head)")
        let file = try #require((reply.json()?["files"] as? [[String: Any]])?.first)
        #expect(file["size"] as? Int == content.count)
        #expect(file["sha256"] as? String == (try sha256(Data(content))))
        #expect(try server.uploadedData("look.bin") == Data(content))
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
        #expect(try server.uploadedData(stored) == Data("data".utf8))
        let folder = server.uploads.deletingLastPathComponent().path
        let nextToIt = ["public", "secret-folder", "secret.txt"] + (server.objectStore == nil ? ["uploads"] : [])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == nextToIt)
        let fetched = try curl([server.url(file["url"] as? String ?? "/")])
        #expect(fetched.status == 200 && fetched.text == "data")
    }
}
