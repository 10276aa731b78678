import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// The Python of the build's own virtual environment (scripts/setup puts tuspy in it).
func python(_ script: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let interpreter = buildPython
    try #require(FileManager.default.isExecutableFile(atPath: interpreter), "run scripts/setup (make test does) to install tuspy")
    return try runCommand(interpreter, ["-c", script] + arguments)
}

/// Uploads a file with tuspy: `url file chunk_size [header=value ...]`; prints the upload URL,
/// or `FAILED <url or -> <error>` when the upload stops partway.
let tuspyUpload = """
    import sys
    from tusclient import client
    url, path, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
    headers = dict(h.split("=", 1) for h in sys.argv[4:] if not h.startswith("resume="))
    resume = [h.split("=", 1)[1] for h in sys.argv[4:] if h.startswith("resume=")]
    tus = client.TusClient(url, headers=headers)
    if resume:
        # A client coming back may find its dead predecessor's request still being read
        # (423 until the server sees it go): tuspy retries.
        uploader = tus.uploader(path, url=resume[0], chunk_size=chunk, retries=5, retry_delay=1)
    else:
        uploader = tus.uploader(path, chunk_size=chunk, metadata={"filename": path.split("/")[-1], "filetype": "application/x-test"})
    try:
        uploader.upload()
    except Exception as error:
        print("FAILED", uploader.url or "-", repr(error))
        sys.exit(0)
    print(uploader.url)
    """

/// curl for tus: the header every tus request needs, then the arguments.
func tus(_ arguments: [String]) throws -> CurlResult {
    try curl(["-H", "Tus-Resumable: 1.0.0"] + arguments)
}

@Suite("tus 1.0.0")
struct TusTests {
    let server: TestServer
    init() throws { server = try TestServer { $0.maxUploadBytes = 50_000_000 } }

    func create(length: Int? = 11, metadata: String? = nil, extra: [String] = []) throws -> String {
        var arguments = ["-X", "POST"]
        if let length { arguments += ["-H", "Upload-Length: \(length)"] }
        if let metadata { arguments += ["-H", "Upload-Metadata: \(metadata)"] }
        let result = try tus(arguments + extra + [server.url("/files")])
        #expect(result.status == 201, "\(result.text)")
        return try #require(result.header("Location"))
    }

    func patch(_ location: String, offset: Int, _ body: String, extra: [String] = []) throws -> CurlResult {
        try tus(["-X", "PATCH", "-H", "Upload-Offset: \(offset)", "-H", "Content-Type: application/offset+octet-stream",
                 "--data-binary", body] + extra + [server.url(location)])
    }

    @Test func optionsDescribesTheServer() throws {
        let result = try curl(["-X", "OPTIONS", server.url("/files")])
        #expect(result.status == 204)
        #expect(result.header("Tus-Version") == "1.0.0")
        #expect(result.header("Tus-Resumable") == "1.0.0")
        #expect(result.header("Tus-Max-Size") == "50000000")
        #expect(Set(result.header("Tus-Extension")?.split(separator: ",").map(String.init) ?? [])
            == ["creation", "creation-with-upload", "creation-defer-length", "termination", "checksum", "expiration", "concatenation"])
        #expect(result.header("Tus-Checksum-Algorithm")?.contains("sha256") == true)
    }

    @Test func createHeadPatchAndTheFileIsStored() throws {
        let location = try create(metadata: "filename \(Base64Test.encode("hello world.txt")),filetype \(Base64Test.encode("text/plain"))")
        #expect(location.hasPrefix("/files/"))
        let head = try tus(["--head", server.url(location)])
        #expect(head.status == 200)
        #expect(head.header("Upload-Offset") == "0")
        #expect(head.header("Upload-Length") == "11")
        #expect(head.header("Cache-Control") == "no-store")
        #expect(head.header("Upload-Expires").flatMap { HTTPDate(parsing: $0) } != nil)
        #expect(head.header("Upload-Metadata")?.contains("filename ") == true)
        let first = try patch(location, offset: 0, "hello")
        #expect(first.status == 204)
        #expect(first.header("Upload-Offset") == "5")
        #expect(first.header("Tus-Resumable") == "1.0.0")
        let last = try patch(location, offset: 5, " world")
        #expect(last.status == 204)
        #expect(last.header("Upload-Offset") == "11")
        #expect(try curl([server.url("/uploads/hello%20world.txt")]).text == "hello world")
        #expect(try curl(["-r", "6-10", server.url("/uploads/hello%20world.txt")]).text == "world")
        // The journal shows the finished upload like any other.
        let entry = try #require(server.server.journal.waitForRequests(path: location, method: "PATCH", count: 2).last)
        #expect(entry.parts.first?.filename == "hello world.txt")
        #expect(entry.parts.first?.sha256 == SHA256.hex(of: Array("hello world".utf8)))
        // HEAD after completion still answers.
        #expect(try tus(["--head", server.url(location)]).header("Upload-Offset") == "11")
    }

    @Test func everyRequestButOptionsNeedsTheVersion() throws {
        let missing = try curl(["-X", "POST", "-H", "Upload-Length: 1", server.url("/files")])
        #expect(missing.status == 412)
        #expect(missing.header("Tus-Version") == "1.0.0")
        #expect(try curl(["-X", "POST", "-H", "Tus-Resumable: 0.2.2", "-H", "Upload-Length: 1", server.url("/files")]).status == 412)
    }

    @Test func theErrorsOfTheCoreProtocol() throws {
        let location = try create()
        #expect(try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: text/plain", "--data-binary", "x", server.url(location)]).status == 415)
        let mismatch = try patch(location, offset: 3, "x")
        #expect(mismatch.status == 409)
        #expect(mismatch.header("Upload-Offset") == "0")
        #expect(try patch("/files/0123456789abcdef0123456789abcdef", offset: 0, "x").status == 404)
        #expect(try tus(["--head", server.url("/files/nonsense")]).status == 404)
        let tooLong = try patch(location, offset: 0, "this is longer than eleven bytes")
        #expect(tooLong.status == 413)
        #expect(try tus(["--head", server.url(location)]).header("Upload-Offset") == "0")
        #expect(try tus(["-X", "POST", server.url("/files")]).status == 400)
        #expect(try tus(["-X", "POST", "-H", "Upload-Length: 999999999999", server.url("/files")]).status == 413)
        #expect(try tus(["-X", "POST", "-H", "Upload-Length: 5", "-H", "Upload-Defer-Length: 1", server.url("/files")]).status == 400)
        #expect(try tus(["-X", "POST", "-H", "Upload-Length: 5", "-H", "Upload-Metadata: key not-base64!", server.url("/files")]).status == 400)
        #expect(try tus(["-X", "PUT", server.url(location)]).status == 405)
    }

    @Test func creationWithUpload() throws {
        let result = try tus(["-X", "POST", "-H", "Upload-Length: 11", "-H", "Content-Type: application/offset+octet-stream",
                              "--data-binary", "hello", server.url("/files")])
        #expect(result.status == 201)
        #expect(result.header("Upload-Offset") == "5")
        let location = try #require(result.header("Location"))
        #expect(try patch(location, offset: 5, " world").header("Upload-Offset") == "11")
    }

    @Test func deferredLength() throws {
        let location = try create(length: nil, extra: ["-H", "Upload-Defer-Length: 1"])
        #expect(try tus(["--head", server.url(location)]).header("Upload-Defer-Length") == "1")
        #expect(try patch(location, offset: 0, "abc").status == 204)
        let last = try patch(location, offset: 3, "def", extra: ["-H", "Upload-Length: 6"])
        #expect(last.status == 204)
        #expect(try tus(["--head", server.url(location)]).header("Upload-Length") == "6")
        #expect(server.uploadedNames().contains("upload"))
    }

    @Test func checksums() throws {
        let location = try create()
        let good = try patch(location, offset: 0, "hello", extra: ["-H", "Upload-Checksum: sha256 \(Base64Test.encode(Array(sha256Bytes("hello"))))"])
        #expect(good.status == 204)
        let bad = try patch(location, offset: 5, " world", extra: ["-H", "Upload-Checksum: sha1 \(Base64Test.encode([UInt8](repeating: 0, count: 20)))"])
        #expect(bad.status == 460)
        #expect(bad.header("Upload-Offset") == "5")
        #expect(try tus(["--head", server.url(location)]).header("Upload-Offset") == "5")
        #expect(try patch(location, offset: 5, " world", extra: ["-H", "Upload-Checksum: crc32 AAAA"]).status == 400)
    }

    @Test func termination() throws {
        let location = try create()
        #expect(try tus(["-X", "DELETE", server.url(location)]).status == 204)
        #expect(try tus(["--head", server.url(location)]).status == 404)
        #expect(try tus(["-X", "POST", "-H", "X-HTTP-Method-Override: DELETE", server.url(try create())]).status == 204)
    }

    @Test func concatenation() throws {
        let first = try create(length: 5, extra: ["-H", "Upload-Concat: partial"])
        let second = try create(length: 6, extra: ["-H", "Upload-Concat: partial"])
        _ = try patch(first, offset: 0, "hello")
        _ = try patch(second, offset: 0, " world")
        let final = try tus(["-X", "POST", "-H", "Upload-Concat: final;\(first) \(server.url(second))",
                             "-H", "Upload-Metadata: filename \(Base64Test.encode("joined.txt"))", server.url("/files")])
        #expect(final.status == 201)
        let location = try #require(final.header("Location"))
        let head = try tus(["--head", server.url(location)])
        #expect(head.header("Upload-Length") == "11")
        #expect(head.header("Upload-Concat")?.hasPrefix("final;") == true)
        #expect(try curl([server.url("/uploads/joined.txt")]).text == "hello world")
        #expect(try patch(location, offset: 11, "x").status == 403)
        // The parts are not files of their own.
        #expect(server.uploadedNames().filter { !$0.hasPrefix(".") } == ["joined.txt"])
    }

    @Test func twoWritersAtOnceOneWins() throws {
        let location = try create(length: 300_000)
        let body = try temporaryFile("chunk", testBytes(count: 300_000))
        let url = server.url(location)
        // The first PATCH is throttled so that it is still writing when the second comes.
        let slow = BackgroundCall { try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                                             "-H", "Counterpart-Fault: rate=200000", "--data-binary", "@\(body)", url]) }
        Thread.sleep(forTimeInterval: 0.4)
        let second = try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                              "--data-binary", "@\(body)", url])
        #expect(second.status == 423)
        #expect(try slow.wait().status == 204)
        #expect(try sha256(try server.uploadedData("upload")) == (try sha256(testBytes(count: 300_000))))
    }

    /// A request that comes while a complete upload is being stored (hashed, given its
    /// name, synced) waits its turn (423) and then finds it stored: never a 500, never
    /// stored twice. (The upload used to be let go before it was stored.)
    @Test func anEmptyPatchWhileTheUploadIsStoredWaitsItsTurn() throws {
        let size = 16 << 20
        let location = try create(length: size, metadata: "filename \(Base64Test.encode("whole.bin"))")
        let body = try temporaryFile("whole", testBytes(count: size))
        let url = server.url(location)
        let whole = BackgroundCall { try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                                              "--data-binary", "@\(body)", url]) }
        let port = server.server.port
        func exchange(_ request: String) throws -> (head: String, body: [UInt8]) {
            let connection = try RawHTTPConnection(port: port)
            connection.send(request)
            return try #require(connection.readResponse(), "no answer to \(request)")
        }
        let head = "HEAD \(location) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nConnection: close\r\n\r\n"
        #expect(waitUntil(seconds: 30) { (try? exchange(head)).flatMap { headerValue("Upload-Offset", in: $0.head) } == String(size) })
        let empty = "PATCH \(location) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: \(size)\r\n"
            + "Content-Type: application/offset+octet-stream\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        var statuses: [Int] = []
        repeat { statuses.append(statusCode(of: try exchange(empty).head) ?? 0) } while statuses.last == 423 && statuses.count < 1_000
        #expect(try whole.wait().status == 204)
        #expect([204, 409].contains(statuses.last ?? 0), "\(statuses)")
        #expect(server.uploadedNames().filter { !$0.hasPrefix(".") } == ["whole.bin"])
        #expect(try sha256(try server.uploadedData("whole.bin")) == (try sha256(testBytes(count: size))))
    }

    @Test func anUploadExpires() throws {
        let shortLived = try TestServer { $0.resumableLimits = ResumableLimits(expirySeconds: 1) }
        let result = try tus(["-X", "POST", "-H", "Upload-Length: 5", shortLived.url("/files")])
        let location = try #require(result.header("Location"))
        Thread.sleep(forTimeInterval: 2.1)
        #expect(try tus(["--head", shortLived.url(location)]).status == 410)
        #expect(try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                         "--data-binary", "x", shortLived.url(location)]).status == 410)
    }

    @Test func tuspyUploadsInChunks() throws {
        let data = testBytes(count: 2_500_000, seed: 21)
        let path = try temporaryFile("tuspy.bin", data)
        let result = try python(tuspyUpload, [server.url("/files"), path, "600000"])
        #expect(result.status == 0 && !result.output.hasPrefix("FAILED"), "\(result.output)")
        #expect(try sha256(try server.uploadedData("tuspy.bin")) == (try sha256(data)))
        let patches = server.server.journal.waitForRequests(method: "PATCH", count: 5)
        #expect(patches.count == 5)
    }

    @Test func tuspyResumesAfterACut() throws {
        let data = testBytes(count: 2_000_000, seed: 22)
        let path = try temporaryFile("cut.bin", data)
        // Every request of this client is cut after 300,000 body bytes: the first chunk of
        // 600,000 is cut halfway, and what came before the cut stays.
        let first = try python(tuspyUpload, [server.url("/files"), path, "600000", "Counterpart-Fault=cut=300000"])
        #expect(first.output.hasPrefix("FAILED \(server.url("/files/"))"), "\(first.output)")
        let location = try #require(URL(string: String(first.output.split(separator: " ")[1]))?.path)
        let offsetText = try tus(["--head", server.url(location)]).header("Upload-Offset") ?? ""
        let offset = try #require(UInt64(offsetText))
        #expect(offset > 0 && offset <= 300_000)
        let resumed = try python(tuspyUpload, [server.url("/files"), path, "600000", "resume=\(server.url(location))"])
        #expect(!resumed.output.hasPrefix("FAILED"), "\(resumed.output)")
        #expect(try sha256(try server.uploadedData("cut.bin")) == (try sha256(data)))
    }

    @Test func tuspyResumesAfterItsProcessIsKilled() throws {
        let data = testBytes(count: 3_000_000, seed: 23)
        let path = try temporaryFile("killed.bin", data)
        let interpreter = buildPython
        // A slow client (the server reads 1 MB/s), killed with SIGKILL partway.
        let client = Process()
        client.executableURL = URL(fileURLWithPath: interpreter)
        client.arguments = ["-c", tuspyUpload, server.url("/files"), path, "500000", "Counterpart-Fault=rate=1000000"]
        client.standardOutput = FileHandle.nullDevice
        try client.run()
        #expect(server.eventually { (server.server.journal.requests(method: "PATCH").count) >= 1 })
        kill(client.processIdentifier, SIGKILL)
        client.waitUntilExit()
        let location = try #require(server.server.journal.requests(method: "PATCH").first?.path)
        let offsetText = try tus(["--head", server.url(location)]).header("Upload-Offset") ?? ""
        let offset = try #require(UInt64(offsetText))
        #expect(offset > 0 && offset < 3_000_000)
        let resumed = try python(tuspyUpload, [server.url("/files"), path, "500000", "resume=\(server.url(location))"])
        #expect(!resumed.output.hasPrefix("FAILED"), "\(resumed.output)")
        #expect(try sha256(try server.uploadedData("killed.bin")) == (try sha256(data)))
    }

    @Test func aRestartInTheMiddleLosesNothing() throws {
        let folder = try makeTemporaryFolder("restart")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = Configuration(root: folder.path, uploads: folder.appendingPathComponent("uploads").path)
        var server = try CounterpartServer(configuration)
        let created = try tus(["-X", "POST", "-H", "Upload-Length: 11", "-H", "Upload-Metadata: filename \(Base64Test.encode("r.txt"))",
                               server.baseURL.absoluteString + "/files"])
        let location = try #require(created.header("Location"))
        _ = try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                     "--data-binary", "hello", server.baseURL.absoluteString + location])
        server.stop()
        server = try CounterpartServer(configuration)
        defer { server.stop() }
        #expect(try tus(["--head", server.baseURL.absoluteString + location]).header("Upload-Offset") == "5")
        let last = try tus(["-X", "PATCH", "-H", "Upload-Offset: 5", "-H", "Content-Type: application/offset+octet-stream",
                            "--data-binary", " world", server.baseURL.absoluteString + location])
        #expect(last.header("Upload-Offset") == "11")
        #expect(try String(contentsOf: folder.appendingPathComponent("uploads/r.txt"), encoding: .utf8) == "hello world")
    }
}

/// Base64 for test inputs.
enum Base64Test {
    static func encode(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
    static func encode(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}

func sha256Bytes(_ text: String) -> [UInt8] {
    let hex = SHA256.hex(of: Array(text.utf8))
    return stride(from: 0, to: hex.count, by: 2).map { UInt8(hex.dropFirst($0).prefix(2), radix: 16)! }
}
