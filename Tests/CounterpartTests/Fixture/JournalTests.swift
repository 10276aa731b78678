@testable import Counterpart
import Foundation
import Testing

@Suite("The request journal and the control endpoints")
struct JournalTests {
    let server: TestServer
    init() throws { server = try makeStaticServer() }

    @Test func itRecordsWhatCurlSent() throws {
        _ = try curl(["-H", "Range: bytes=20250-40499", "-H", "X-App: demo", server.url("/data.bin")])
        let entry = try #require(server.server.journal.waitForRequests(path: "/data.bin").first)
        #expect(entry.method == "GET")
        #expect(entry.header("Range") == "bytes=20250-40499")
        #expect(entry.header("x-app") == "demo")
        #expect(entry.status == 206)
        #expect(entry.responseBodyBytes == 20_250)
        #expect(entry.bytesSent == 20_250)
        #expect(!entry.clientHungUp)
    }

    /// A 304 announces the 200's Content-Length but sends no body: the journal counts none.
    @Test func aNotModifiedAnswerCountsNoBodyBytes() throws {
        let etag = try #require(try curl(["--head", server.url("/data.bin")]).header("ETag"))
        let answer = try curl(["-H", "If-None-Match: \(etag)", server.url("/data.bin")])
        #expect(answer.status == 304 && answer.body.isEmpty)
        let entry = try #require(server.server.journal.waitForRequests(path: "/data.bin", method: "GET").last)
        #expect(entry.status == 304)
        #expect(entry.responseBodyBytes == 0)
        #expect(entry.bytesSent == 0)
    }

    /// Entries are bounded in bytes as well as in number: requests with 30 KB heads (a
    /// hostile client's) push the oldest out long before 1,000 of them are kept.
    @Test func itKeepsABoundedNumberOfBytes() throws {
        let small = try TestServer { $0.journalMaxBytes = 200_000 }
        let padding = String(repeating: "p", count: 30_000)
        for index in 0..<20 {
            let connection = try RawHTTPConnection(port: small.server.port)
            connection.send("GET /missing?n=\(index) HTTP/1.1\r\nHost: x\r\nX-Padding: \(padding)\r\nConnection: close\r\n\r\n")
            #expect(connection.readResponse().flatMap { statusCode(of: $0.head) } == 404)
            // A request is journaled when it completes, a moment after its answer: wait for
            // it, so that the journal's order is the order sent even when the machine is busy.
            #expect(waitUntil { small.server.journal.requests().last?.target == "/missing?n=\(index)" })
        }
        let kept = small.server.journal.requests()
        #expect(kept.count >= 5 && kept.count <= 7, "\(kept.count) kept")
        #expect(kept.reduce(0) { $0 + $1.textBytes } <= 200_000)
        #expect(kept.map(\.target) == (20 - kept.count..<20).map { "/missing?n=\($0)" })
    }

    /// Big files are stored while the body goes on (each file's last chunks are hashed and
    /// written as the next part arrives): the answer, the journal and the folder still keep
    /// the body's order, fields between files included.
    @Test func bigFilesBetweenFieldsKeepTheBodysOrder() throws {
        let sizes = [1_300_001, 700_000, 2_100_003]
        let paths = try sizes.enumerated().map { try temporaryFile("b\($0.offset).bin", testBytes(count: $0.element, seed: UInt64(40 + $0.offset))) }
        let result = try curl(["-F", "a=1", "-F", "f=@\(paths[0])", "-F", "b=2", "-F", "f=@\(paths[1])", "-F", "f=@\(paths[2])", "-F", "c=3",
                               server.url("/upload")])
        #expect(result.status == 200)
        let files = try #require(try result.json()["files"] as? [[String: Any]])
        let digests = try sizes.enumerated().map { try sha256(testBytes(count: $0.element, seed: UInt64(40 + $0.offset))) }
        #expect(files.map { $0["filename"] as? String } == ["b0.bin", "b1.bin", "b2.bin"])
        #expect(files.map { $0["sha256"] as? String } == digests)
        #expect((try result.json()["fields"] as? [[String: Any]])?.map { $0["name"] as? String } == ["a", "b", "c"])
        let entry = try #require(server.server.journal.waitForRequests(path: "/upload", method: "POST").last)
        #expect(entry.parts.map(\.name) == ["a", "f", "b", "f", "f", "c"])
        #expect(entry.parts.compactMap(\.sha256) == digests)
    }

    /// A body that fails after a complete big file: the file is removed, and the journal still
    /// records that part with its size and SHA-256, as it does for a small one.
    @Test func aBodyThatFailsAfterABigFileRecordsThatPart() throws {
        let bytes = testBytes(count: 1_500_000, seed: 44)
        let head = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\n\r\n".utf8)
        let tail = Array("\r\n--b\r\nno colon here\r\n\r\nx\r\n--b--".utf8)
        let result = try postBody(head + bytes + tail, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        #expect(result.status == 400)
        #expect(server.eventually { server.uploadedNames().isEmpty }, "left behind: \(server.uploadedNames())")
        let entry = try #require(server.server.journal.waitForRequests(path: "/upload", method: "POST").last)
        #expect(entry.parts.map(\.name) == ["f"])
        #expect(entry.parts.first?.size == 1_500_000)
        #expect(entry.parts.first?.sha256 == (try sha256(bytes)))
    }

    @Test func itRecordsTheParts() throws {
        let path = try temporaryFile("photo.png", testBytes(count: 5000))
        _ = try curl(["-F", "user=dashen9", "-F", "file=@\(path)", server.url("/upload")])
        let entry = try #require(server.server.journal.waitForRequests(path: "/upload", method: "POST").first)
        #expect(entry.parts.map(\.name) == ["user", "file"])
        #expect(entry.parts[1].filename == "photo.png")
        #expect(entry.parts[1].size == 5000)
        #expect(entry.parts[1].sha256 == (try sha256(testBytes(count: 5000))))
        #expect(entry.requestBodyBytes > 5000)
    }

    @Test func itRecordsACutAndTheBytesThatWentOut() throws {
        _ = try curl([server.url("/data.bin?cut=70000")])
        let entry = try #require(server.server.journal.waitForRequests(path: "/data.bin").first)
        #expect(entry.clientHungUp)
        #expect(entry.bytesSent.map { $0 <= 70_000 } == true)
        #expect(entry.target == "/data.bin?cut=70000")
    }

    @Test func theJSONEndpointFiltersAndClears() throws {
        _ = try curl([server.url("/hello.txt")])
        _ = try curl(["--head", server.url("/hello.txt")])
        _ = try curl([server.url("/data.bin")])
        _ = server.server.journal.waitForRequests(count: 3)
        let json = try curl([server.url("/__counterpart/requests?path=/hello.txt&method=HEAD")]).json()
        let requests = try #require(json["requests"] as? [[String: Any]])
        #expect(requests.count == 1)
        #expect(requests.first?["method"] as? String == "HEAD")
        #expect(requests.first?["status"] as? Int == 200)
        #expect(try curl(["-X", "DELETE", server.url("/__counterpart/requests")]).status == 204)
        #expect(server.server.journal.requests().isEmpty)
        // Control requests are not journaled themselves.
        _ = try curl([server.url("/__counterpart/requests")])
        #expect(server.server.journal.requests().isEmpty)
    }

    @Test func itKeepsOnlyTheLastN() throws {
        let small = try makeStaticServer { $0.journalCapacity = 3 }
        for index in 0..<5 { _ = try curl([small.url("/hello.txt?n=\(index)")]) }
        let entries = small.server.journal.waitForRequests(count: 3)
        _ = small.eventually { small.server.journal.requests().last?.target == "/hello.txt?n=4" }
        #expect(small.server.journal.requests().map(\.target) == ["/hello.txt?n=2", "/hello.txt?n=3", "/hello.txt?n=4"])
        #expect(entries.count == 3)
    }

    @Test func healthAndClearingTheUploads() throws {
        let health = try curl([server.url("/__counterpart/health")]).json()
        #expect(health["status"] as? String == "ok")
        #expect(health["maxUploadBytes"] as? Int == Int(server.server.configuration.maxUploadBytes))
        let path = try temporaryFile("x.txt", Data("x".utf8))
        _ = try curl(["-F", "f=@\(path)", server.url("/upload")])
        let cleared = try curl(["-X", "DELETE", server.url("/__counterpart/uploads")])
        #expect(try cleared.json()["removed"] as? Int == 1)
        #expect(server.uploadedNames().isEmpty)
        #expect(try curl(["-X", "POST", server.url("/__counterpart/uploads")]).status == 405)
        #expect(try curl([server.url("/__counterpart/nothing")]).status == 404)
    }

    @Test(arguments: [("127.0.0.1", true), ("127.8.9.10", true), ("::1", true), ("::ffff:127.0.0.1", true),
                      ("10.0.0.5", false), ("192.168.1.2", false), ("::ffff:10.0.0.1", false), ("fe80::1", false)])
    func onlyLoopbackClientsChangeStateByDefault(_ address: String, _ allowed: Bool) {
        #expect(ControlEndpoint.isLoopback(address) == allowed)
    }
}

@Suite("CORS")
struct CORSTests {
    @Test func aSpecificOriginIsAllowedAndOthersAreNot() throws {
        let server = try makeStaticServer { $0.corsOrigin = "https://app.example" }
        let allowed = try curl(["-H", "Origin: https://app.example", server.url("/data.bin")])
        #expect(allowed.header("Access-Control-Allow-Origin") == "https://app.example")
        #expect(allowed.header("Vary") == "Origin")
        #expect(allowed.header("Access-Control-Expose-Headers")?.contains("Content-Range") == true)
        let other = try curl(["-H", "Origin: https://evil.example", server.url("/data.bin")])
        #expect(other.header("Access-Control-Allow-Origin") == nil)
    }

    @Test func preflightForARangedDownloadAndAnUpload() throws {
        let server = try makeStaticServer { $0.corsOrigin = "*" }
        let preflight = try curl(["-X", "OPTIONS", "-H", "Origin: http://localhost:3000", "-H", "Access-Control-Request-Method: GET",
                                  "-H", "Access-Control-Request-Headers: range, if-range", server.url("/data.bin")])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == "*")
        #expect(preflight.header("Access-Control-Allow-Methods")?.contains("GET") == true)
        #expect(preflight.header("Access-Control-Allow-Headers") == "range, if-range")
        let upload = try curl(["-H", "Origin: http://localhost:3000", "-F", "a=1", server.url("/upload")])
        #expect(upload.status == 200)
        #expect(upload.header("Access-Control-Allow-Origin") == "*")
    }

    @Test func withoutCORSThereAreNoHeaders() throws {
        let server = try makeStaticServer()
        #expect(try curl(["-H", "Origin: https://app.example", server.url("/data.bin")]).header("Access-Control-Allow-Origin") == nil)
    }
}
