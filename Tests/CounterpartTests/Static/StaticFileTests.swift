import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

let sampleData = testBytes(count: 100_000)

/// A root with the files the static tests use.
func makeStaticServer(configure: (inout Configuration) -> Void = { _ in }) throws -> TestServer {
    try TestServer(configure: configure) { root in
        try Data("hello\n".utf8).write(to: root.appendingPathComponent("hello.txt"))
        try sampleData.write(to: root.appendingPathComponent("data.bin"))
        try Data().write(to: root.appendingPathComponent("empty.txt"))
        try Data("%PDF-1.4 résumé".utf8).write(to: root.appendingPathComponent("résumé 2024.pdf"))
        try Data("<video>".utf8).write(to: root.appendingPathComponent("clip.mp4"))
        try Data("<h1>site</h1>".utf8).write(into: root, at: "site/index.html")
        let list = root.appendingPathComponent("list")
        try FileManager.default.createDirectory(at: list.appendingPathComponent("inner"), withIntermediateDirectories: true)
        try Data("a".utf8).write(to: list.appendingPathComponent("a.txt"))
        try Data("bb".utf8).write(to: list.appendingPathComponent("b <&> c.bin"))
        try Data("secret".utf8).write(to: list.appendingPathComponent(".hidden"))
        try FileManager.default.createSymbolicLink(atPath: root.appendingPathComponent("link-inside.txt").path,
                                                   withDestinationPath: "hello.txt")
        try FileManager.default.createSymbolicLink(atPath: root.appendingPathComponent("link-outside").path,
                                                   withDestinationPath: "/etc/hostname")
        try FileManager.default.createSymbolicLink(atPath: root.appendingPathComponent("folder-outside").path,
                                                   withDestinationPath: "/etc")
    }
}

@Suite("Static files: GET and HEAD")
struct StaticFileTests {
    let server: TestServer
    init() throws { server = try makeStaticServer() }

    @Test func getSendsTheFileWithItsValidators() throws {
        let result = try curl([server.url("/data.bin")])
        #expect(result.status == 200)
        #expect(result.body == sampleData)
        #expect(result.header("Content-Length") == "100000")
        #expect(result.header("Content-Type") == "application/octet-stream")
        #expect(result.header("Accept-Ranges") == "bytes")
        let etag = try #require(result.header("ETag"))
        #expect(EntityTag(parsing: etag)?.isWeak == false)
        let modified = try #require(result.header("Last-Modified"))
        #expect(HTTPDate(parsing: modified) != nil)
    }

    @Test(arguments: [("/hello.txt", "text/plain; charset=utf-8"), ("/clip.mp4", "video/mp4"),
                      ("/site/index.html", "text/html; charset=utf-8"), ("/r%C3%A9sum%C3%A9%202024.pdf", "application/pdf")])
    func contentTypeComesFromTheExtension(_ path: String, _ type: String) throws {
        #expect(try curl([server.url(path)]).header("Content-Type") == type)
    }

    @Test func headSendsExactlyTheHeadersOfGetAndNoBody() throws {
        let get = try curl([server.url("/data.bin")])
        let head = try curl(["--head", server.url("/data.bin")])
        #expect(head.status == 200)
        // On the wire: the header block and not one byte more.
        let raw = try RawHTTPConnection.exchange(port: server.server.port, Array("HEAD /data.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        let text = raw.text
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
        #expect(text.contains("Content-Length: 100000\r\n"))
        let ignored: Set<String> = ["date"]
        #expect(head.headers.filter { !ignored.contains($0.name.lowercased()) }.map { "\($0.name): \($0.value)" }
            == get.headers.filter { !ignored.contains($0.name.lowercased()) }.map { "\($0.name): \($0.value)" })
    }

    @Test func aRangeOnHeadIsIgnored() throws {
        // RFC 9110 §14.2: Range is defined for GET only.
        let head = try curl(["--head", "-H", "Range: bytes=0-9", server.url("/data.bin")])
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "100000")
        #expect(head.header("Content-Range") == nil)
    }

    @Test func urlSessionHeadGivesTheSizeAndType() async throws {
        var request = URLRequest(url: URL(string: server.url("/clip.mp4"))!)
        request.httpMethod = "HEAD"
        let (data, response) = try await makeSession().data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(data.isEmpty)
        #expect(http.expectedContentLength == 7)
        #expect(http.mimeType == "video/mp4")
    }

    @Test func anEmptyFile() throws {
        let result = try curl([server.url("/empty.txt")])
        #expect(result.status == 200)
        #expect(result.header("Content-Length") == "0")
        #expect(result.body.isEmpty)
    }

    @Test func aFolderServesItsIndex() throws {
        let result = try curl([server.url("/site/")])
        #expect(result.status == 200)
        #expect(result.text == "<h1>site</h1>")
    }

    @Test func aFolderWithoutSlashRedirects() throws {
        let result = try curl([server.url("/site?x=1")])
        #expect(result.status == 301)
        #expect(result.header("Location") == "/site/?x=1")
    }

    @Test func aFolderWithoutIndexIsListedAsHTMLForBrowsers() throws {
        let result = try curl(["-H", "Accept: text/html,application/xhtml+xml,*/*;q=0.8", server.url("/list/")])
        #expect(result.status == 200)
        #expect(result.header("Content-Type") == "text/html; charset=utf-8")
        #expect(result.text.contains("<a href=\"/list/a.txt\">a.txt</a>"))
        #expect(result.text.contains("b &lt;&amp;&gt; c.bin"))
        #expect(result.text.contains("/list/b%20%3C%26%3E%20c.bin?download"))
        #expect(result.text.contains("inner/"))
        #expect(!result.text.contains(".hidden"))
    }

    @Test func aFolderWithoutIndexIsListedAsJSONOnRequest() throws {
        let entries = try jsonListing(server.url("/list/"), of: "/list/")
        #expect(entries.map { $0["name"] as? String } == ["a.txt", "b <&> c.bin", "inner"])
        #expect(entries[0]["size"] as? Int == 1)
        #expect(entries[0]["type"] as? String == "file")
        #expect(entries[2]["type"] as? String == "folder")
        #expect(entries[1]["url"] as? String == "/list/b%20%3C%26%3E%20c.bin")
    }

    @Test(arguments: ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "get"])
    func otherMethodsAreNotAllowed(_ method: String) throws {
        try expectMethodNotAllowed(method, server.url("/hello.txt"), allow: "GET, HEAD")
    }

    @Test func aMissingFileIs404WithAJSONError() throws {
        let result = try curl([server.url("/nope.txt")])
        #expect(result.status == 404)
        #expect(try result.json()["error"] as? String == "/nope.txt was not found")
    }

    @Test func aSymlinkInsideTheRootIsFollowed() throws {
        let result = try curl([server.url("/link-inside.txt")])
        #expect(result.status == 200)
        #expect(result.text == "hello\n")
    }

    @Test(arguments: [
        "/../../../../etc/hostname", "/%2e%2e/%2e%2e/%2e%2e/etc/hostname", "/%2E%2E/%2E%2E/etc/hostname",
        "/..%2f..%2f..%2fetc%2fhostname", "/list/..%2f..%2f..%2f..%2fetc/hostname", "/.%2e/.%2e/etc/hostname",
        "/link-outside", "/folder-outside/hostname", "/hello.txt%00.png", "/%2fetc%2fhostname", "//etc/hostname",
        "/list/%2e%2e/%2e%2e/%2e%2e/etc/hostname", "/..\\..\\etc\\hostname",
    ])
    func nothingOutsideTheRootIsReachable(_ path: String) throws {
        let result = try curl(["--path-as-is", server.url(path)])
        #expect([400, 403, 404].contains(result.status), "\(path) → \(result.status)")
        let hostname = (try? String(contentsOfFile: "/etc/hostname", encoding: .utf8)) ?? "never"
        #expect(!result.text.contains(hostname.trimmingCharacters(in: .whitespacesAndNewlines)) || hostname.count < 3)
    }

    @Test func aNonASCIINameCanBeFetched() throws {
        let result = try curl([server.url("/r%C3%A9sum%C3%A9%202024.pdf")])
        #expect(result.status == 200)
        #expect(result.text == "%PDF-1.4 résumé")
    }
}

@Suite("Static files: ?download")
struct DownloadDispositionTests {
    let server: TestServer
    init() throws { server = try makeStaticServer() }

    @Test func downloadNamesTheFile() throws {
        let result = try curl([server.url("/hello.txt?download")])
        #expect(result.header("Content-Disposition") == "attachment; filename=\"hello.txt\"")
    }

    @Test func downloadWithANonASCIINameAddsFilenameStar() throws {
        let result = try curl([server.url("/r%C3%A9sum%C3%A9%202024.pdf?download")])
        #expect(result.header("Content-Disposition")
            == "attachment; filename=\"r_sum_ 2024.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%202024.pdf")
    }

    @Test func downloadCanRename() throws {
        let result = try curl([server.url("/hello.txt?download=gr%C3%BC%C3%9Fe%20%22x%22.txt")])
        #expect(result.header("Content-Disposition")
            == "attachment; filename=\"gr__e \\\"x\\\".txt\"; filename*=UTF-8''gr%C3%BC%C3%9Fe%20%22x%22.txt")
    }

    @Test func urlSessionSuggestsTheFilename() async throws {
        let (_, ascii) = try await makeSession().data(from: URL(string: server.url("/hello.txt?download=report.txt"))!)
        #expect(ascii.suggestedFilename == "report.txt")
        // Apple's URLSession reads filename*; Linux's FoundationNetworking reads only the
        // plain filename, which carries the ASCII stand-in.
        let (_, unicode) = try await makeSession().data(from: URL(string: server.url("/r%C3%A9sum%C3%A9%202024.pdf?download"))!)
        #expect(unicode.suggestedFilename == "r_sum_ 2024.pdf")
        let header = try #require((unicode as? HTTPURLResponse)?.header("Content-Disposition"))
        #expect(try ContentDisposition(parsing: header).filename == "résumé 2024.pdf")
    }

    @Test func curlSavesUnderTheRemoteHeaderName() throws {
        let folder = try makeTemporaryFolder("dl")
        defer { try? FileManager.default.removeItem(at: folder) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.currentDirectoryURL = folder
        process.arguments = ["-s", "-O", "-J", server.url("/hello.txt?download=saved.txt")]
        try process.run()
        process.waitUntilExit()
        #expect(try String(contentsOf: folder.appendingPathComponent("saved.txt"), encoding: .utf8) == "hello\n")
    }
}
