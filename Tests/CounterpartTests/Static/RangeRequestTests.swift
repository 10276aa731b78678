import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

@Suite("Static files: Range, If-Range and conditionals")
struct RangeRequestTests {
    let server: TestServer
    init() throws { server = try makeStaticServer() }

    @Test(arguments: [
        ("bytes=0-499", 0, 499), ("bytes=500-999", 500, 999), ("bytes=-500", 99_500, 99_999),
        ("bytes=99500-", 99_500, 99_999), ("bytes=99000-200000", 99_000, 99_999), ("Bytes=20250-40499", 20_250, 40_499),
        ("bytes=-200000", 0, 99_999), ("bytes= 10-19 ", 10, 19),
    ])
    func oneRangeIs206WithThatSlice(_ range: String, _ first: Int, _ last: Int) throws {
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(result.status == 206)
        #expect(result.header("Content-Range") == "bytes \(first)-\(last)/100000")
        #expect(result.header("Content-Length") == String(last - first + 1))
        #expect(result.header("Content-Type") == "application/octet-stream")
        #expect(result.body == sampleData[first...last])
    }

    @Test func curlRangeOption() throws {
        let result = try curl(["-r", "100-199", server.url("/data.bin")])
        #expect(result.status == 206)
        #expect(result.body == sampleData[100...199])
    }

    @Test func severalRangesAreMultipartByteranges() throws {
        let result = try curl(["-H", "Range: bytes=0-0, -1 ,500-599", server.url("/data.bin")])
        #expect(result.status == 206)
        #expect(result.header("Content-Range") == nil)
        let contentType = try #require(result.header("Content-Type"))
        let mediaType = try MediaType(parsing: contentType)
        #expect(mediaType.essence == "multipart/byteranges")
        let boundary = try MultipartBoundary(try #require(mediaType[parameter: "boundary"]))
        #expect(result.header("Content-Length") == String(result.body.count))

        var parser = MultipartParser(boundary: boundary)
        var parts: [(headers: MultipartHeaders, data: Data)] = []
        try parser.feed([UInt8](result.body)) { event in
            switch event {
            case .partBegin(let part): parts.append((part.headers, Data()))
            case .partData(let bytes): parts[parts.count - 1].data.append(contentsOf: bytes)
            case .partEnd, .end: break
            }
        }
        try parser.finish()
        #expect(parts.map { $0.headers["Content-Range"] } == ["bytes 0-0/100000", "bytes 99999-99999/100000", "bytes 500-599/100000"])
        #expect(parts.allSatisfy { $0.headers["Content-Type"] == "application/octet-stream" })
        #expect(parts[0].data == sampleData[0...0])
        #expect(parts[1].data == sampleData[99_999...99_999])
        #expect(parts[2].data == sampleData[500...599])
    }

    @Test func overlappingRangesAreCoalesced() throws {
        let result = try curl(["-H", "Range: bytes=0-99,50-149", server.url("/data.bin")])
        #expect(result.status == 206)
        #expect(result.header("Content-Range") == "bytes 0-149/100000")
        #expect(result.body == sampleData[0...149])
    }

    @Test func anAbusiveRangeSetGetsTheWholeFile() throws {
        // CVE-2011-3192: many overlapping ranges.
        let ranges = "bytes=0-," + (1...300).map { "5-\($0)" }.joined(separator: ",")
        let result = try curl(["-H", "Range: \(ranges)", server.url("/data.bin")])
        #expect(result.status == 200)
        #expect(result.body == sampleData)
    }

    @Test(arguments: ["bytes=100000-", "bytes=100000-100010", "bytes=-0", "bytes=200000-300000,150000-"])
    func anUnsatisfiableRangeIs416(_ range: String) throws {
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(result.status == 416)
        #expect(result.header("Content-Range") == "bytes */100000")
        #expect(try result.json()["error"] is String)
    }

    @Test func anyRangeOfAnEmptyFileIs416() throws {
        let result = try curl(["-H", "Range: bytes=0-", server.url("/empty.txt")])
        #expect(result.status == 416)
        #expect(result.header("Content-Range") == "bytes */0")
    }

    @Test(arguments: ["bytes=5-1", "items=0-1", "bytes=abc", "bytes=0-1,x", "bytes 0-1"])
    func anInvalidRangeIsIgnored(_ range: String) throws {
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(result.status == 200)
        #expect(result.body == sampleData)
    }

    @Test func ifRangeWithTheCurrentETagGivesTheRange() throws {
        let etag = try #require(try curl(["--head", server.url("/data.bin")]).header("ETag"))
        let result = try curl(["-H", "Range: bytes=0-9", "-H", "If-Range: \(etag)", server.url("/data.bin")])
        #expect(result.status == 206)
        #expect(result.body == sampleData[0...9])
    }

    @Test func ifRangeWithTheCurrentDateGivesTheRange() throws {
        let date = try #require(try curl(["--head", server.url("/data.bin")]).header("Last-Modified"))
        let result = try curl(["-H", "Range: bytes=0-9", "-H", "If-Range: \(date)", server.url("/data.bin")])
        #expect(result.status == 206)
    }

    @Test(arguments: ["\"stale\"", "W/\"x\"", "Sat, 01 Jan 2000 00:00:00 GMT"])
    func ifRangeThatDoesNotMatchGivesTheWholeFile(_ value: String) throws {
        let result = try curl(["-H", "Range: bytes=0-9", "-H", "If-Range: \(value)", server.url("/data.bin")])
        #expect(result.status == 200)
        #expect(result.body == sampleData)
    }

    @Test func ifNoneMatchGives304() throws {
        let first = try curl([server.url("/data.bin")])
        let etag = try #require(first.header("ETag"))
        let result = try curl(["-H", "If-None-Match: \"other\", \(etag)", server.url("/data.bin")])
        #expect(result.status == 304)
        #expect(result.body.isEmpty)
        #expect(result.header("ETag") == etag)
    }

    @Test func ifModifiedSinceGives304() throws {
        let date = try #require(try curl([server.url("/hello.txt")]).header("Last-Modified"))
        #expect(try curl(["-H", "If-Modified-Since: \(date)", server.url("/hello.txt")]).status == 304)
        #expect(try curl(["-H", "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT", server.url("/hello.txt")]).status == 200)
    }

    @Test func ifMatchAndIfUnmodifiedSinceFailingGive412() throws {
        #expect(try curl(["-H", "If-Match: \"other\"", server.url("/hello.txt")]).status == 412)
        #expect(try curl(["-H", "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT", server.url("/hello.txt")]).status == 412)
        let etag = try #require(try curl([server.url("/hello.txt")]).header("ETag"))
        #expect(try curl(["-H", "If-Match: \(etag)", server.url("/hello.txt")]).status == 200)
    }

    @Test func theETagChangesWhenTheFileChanges() throws {
        let before = try #require(try curl([server.url("/hello.txt")]).header("ETag"))
        try Data("hello again\n".utf8).write(to: server.root.appendingPathComponent("hello.txt"))
        let after = try #require(try curl([server.url("/hello.txt")]).header("ETag"))
        #expect(before != after)
        let result = try curl(["-H", "Range: bytes=0-4", "-H", "If-Range: \(before)", server.url("/hello.txt")])
        #expect(result.status == 200)
        #expect(result.text == "hello again\n")
    }

    @Test func curlResumesAPartialDownload() throws {
        let folder = try makeTemporaryFolder("resume")
        defer { try? FileManager.default.removeItem(at: folder) }
        let partial = folder.appendingPathComponent("data.bin")
        try sampleData.prefix(30_000).write(to: partial)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-s", "-C", "-", "-o", partial.path, server.url("/data.bin")]
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(try Data(contentsOf: partial) == sampleData)
    }

    @Test func urlSessionRangeRequest() async throws {
        var request = URLRequest(url: URL(string: server.url("/data.bin"))!)
        request.setValue("bytes=20250-40499", forHTTPHeaderField: "Range")
        let (data, response) = try await makeSession().data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 206)
        #expect(http.header("Content-Range") == "bytes 20250-40499/100000")
        #expect(data == sampleData[20_250...40_499])
    }
}

@Suite("Static files: answers to review findings")
struct StaticFileReviewTests {
    let server: TestServer
    init() throws { server = try makeStaticServer() }

    @Test func a304AnnouncesTheLengthOfTheFileNotZero() throws {
        let etag = try #require(try curl([server.url("/data.bin")]).header("ETag"))
        let raw = try RawHTTPConnection.exchange(port: server.server.port, Array(
            "GET /data.bin HTTP/1.1\r\nHost: x\r\nIf-None-Match: \(etag)\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        let text = raw.text
        #expect(text.hasPrefix("HTTP/1.1 304 Not Modified\r\n"))
        #expect(text.contains("Content-Length: 100000\r\n"))
        // No body follows the 304: the next response comes right after its header block.
        let first = try #require(text.range(of: "\r\n\r\n"))
        #expect(text[first.upperBound...].hasPrefix("HTTP/1.1 200 OK"))
    }

    @Test(arguments: [";", "*/*,;", ";q=1", "text/html;;q=0.5,,", "/", "a/", "*/*;q=abc"])
    func anOddAcceptHeaderIsHarmless(_ accept: String) throws {
        #expect(try curl(["-H", "Accept: \(accept)", server.url("/list/")]).status == 200)
        #expect(try curl(["-H", "Accept: \(accept)", "-F", "a=1", server.url("/upload")]).status == 200)
    }

    @Test func jsonClientsGetJSONListingsEvenWithWildcards() throws {
        // axios's default Accept.
        let result = try curl(["-H", "Accept: application/json, text/plain, */*", server.url("/list/")])
        #expect(result.header("Content-Type") == "application/json")
    }

    @Test func redirectsAreBuiltFromTheDecodedPath() throws {
        let doubled = try curl(["--path-as-is", server.url("//list?a+b=c%20d")])
        #expect(doubled.status == 301)
        #expect(doubled.header("Location") == "/list/?a%20b=c%20d")
    }

    @Test func listingsLeaveOutSymlinksThatLeadOut() throws {
        let json = try curl(["-H", "Accept: application/json", server.url("/")]).json()
        let names = (json["entries"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
        #expect(names.contains("link-inside.txt"))
        #expect(!names.contains("link-outside"))
        #expect(!names.contains("folder-outside"))
    }

    @Test func aFIFOInTheRootDoesNotHoldAThread() throws {
        let fifo = server.root.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o644) == 0)
        for _ in 0..<6 {
            #expect(try curl(["--max-time", "5", server.url("/pipe")]).status == 404)
        }
        #expect(try curl(["--max-time", "5", server.url("/hello.txt")]).status == 200)
    }

    @Test func downloadNamesOnlySuccessfulAnswers() throws {
        #expect(try curl(["-H", "Range: bytes=999999-", server.url("/data.bin?download")]).header("Content-Disposition") == nil)
        #expect(try curl(["-H", "If-Match: \"x\"", server.url("/data.bin?download")]).header("Content-Disposition") == nil)
    }
}
