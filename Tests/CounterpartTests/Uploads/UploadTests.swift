import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

/// Writes `data` to a fresh temporary file named `name` and returns its path.
func temporaryFile(_ name: String, _ data: Data) throws -> String {
    let folder = try makeTemporaryFolder("upload-src")
    let url = folder.appendingPathComponent(name)
    try data.write(to: url)
    return url.path
}

/// Posts a hand-built body with curl.
func postBody(_ body: [UInt8], contentType: String, to url: String, extra: [String] = []) throws -> CurlResult {
    let path = try temporaryFile("body", Data(body))
    return try curl(["-H", "Content-Type: \(contentType)", "--data-binary", "@\(path)"] + extra + [url])
}

@Suite("Uploads: POST /upload")
struct UploadTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    /// A file of several read windows (an object store reads 4 MiB at a time, the next one
    /// ahead while the last is sent) comes back whole, and in ranges that cross windows.
    @Test func aLargeUploadComesBackWholeAndInRangesAcrossReadWindows() throws {
        let data = testBytes(count: 20 << 20, seed: 11)
        let path = try temporaryFile("windows.bin", data)
        #expect(try curl(["-F", "f=@\(path)", server.url("/upload")]).status == 200)
        let whole = try curl([server.url("/uploads/windows.bin")])
        #expect(whole.status == 200)
        #expect(whole.body == data)
        let window = 4 << 20
        let across = try curl(["-r", "\(window - 10)-\(3 * window + 9)", server.url("/uploads/windows.bin")])
        #expect(across.status == 206)
        #expect(across.body == data[(window - 10)...(3 * window + 9)])
        let resumed = try curl(["-r", "\(2 * window + 1)-", server.url("/uploads/windows.bin")])
        #expect(resumed.status == 206)
        #expect(resumed.body == data[(2 * window + 1)...])
        let several = try curl(["-H", "Range: bytes=0-9,\(window - 5)-\(window + 4),\(5 * window - 3)-", server.url("/uploads/windows.bin")])
        #expect(several.status == 206)
        for slice in [data[0...9], data[(window - 5)...(window + 4)], data[(5 * window - 3)...]] {
            #expect(several.body.range(of: slice) != nil)
        }
    }

    /// How the body after a large file ends. An object store streams a file that is the
    /// body's last part, of the size the request's length then gives, as one `PUT`: each
    /// ending but the first makes that guess wrong, and the file must still be stored whole.
    enum LargeFileEnding: String, CaseIterable, Sendable {
        case closed, fieldAfter, largeFileAfter, noFinalLineEnd, epilogue, spaceAfterClose, chunked

        var tail: [UInt8] {
            switch self {
            case .closed, .chunked: return Array("\r\n--b--\r\n".utf8)
            case .fieldAfter: return Array("\r\n--b\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nafter\r\n--b--\r\n".utf8)
            case .largeFileAfter:
                return Array("\r\n--b\r\nContent-Disposition: form-data; name=\"g\"; filename=\"second.bin\"\r\n\r\n".utf8)
                    + [UInt8](Self.second) + Array("\r\n--b--\r\n".utf8)
            case .noFinalLineEnd: return Array("\r\n--b--".utf8)
            case .epilogue: return Array("\r\n--b--\r\nan epilogue, which is ignored\r\n".utf8)
            case .spaceAfterClose: return Array("\r\n--b--  \r\n".utf8)
            }
        }

        /// The second file of `.largeFileAfter`: the first is guessed to be as long as both.
        static let second = testBytes(count: 17 << 20, seed: 29)
    }

    @Test(arguments: LargeFileEnding.allCases)
    func aLargeFileIsStoredWholeHoweverItsBodyEnds(_ ending: LargeFileEnding) throws {
        let data = testBytes(count: 17 << 20, seed: 23)
        let head = "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"large.bin\"\r\n\r\n"
        let body = Array(head.utf8) + [UInt8](data) + ending.tail
        let result = try postBody(body, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"),
                                  extra: ending == .chunked ? ["-H", "Transfer-Encoding: chunked"] : [])
        #expect(result.status == 200, "\(result.text)")
        let files = try #require(try result.json()["files"] as? [[String: Any]])
        #expect(files.first?["size"] as? Int == data.count)
        #expect(files.first?["sha256"] as? String == (try sha256(data)))
        #expect(try server.uploadedData("large.bin") == data)
        var stored = ["large.bin"]
        if ending == .largeFileAfter {
            #expect(try server.uploadedData("second.bin") == LargeFileEnding.second)
            stored.append("second.bin")
        }
        if let store = server.objectStore {
            // Which way it went: one PUT (an ETag without `-N`), or parts after all.
            let etag = try #require(try store.headObject("large.bin")).etag
            #expect(etag.contains("-") == [.noFinalLineEnd, .chunked].contains(ending), "\(ending): \(etag)")
        }
        #expect(server.eventually { server.uploadedNames() == stored && server.temporaryFiles().isEmpty },
                "\(server.uploadedNames()) \(server.temporaryFiles())")
    }

    /// A large body cut by its client: nothing of it stays, streamed or not.
    @Test func aLargeBodyCutByItsClientLeavesNothing() throws {
        let head = "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"cut.bin\"\r\n\r\n"
        let length = head.utf8.count + (17 << 20) + 9
        do {
            let connection = try RawHTTPConnection(port: server.server.port)
            connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: \(length)\r\n\r\n" + head)
            connection.send([UInt8](testBytes(count: 12 << 20, seed: 5)))
        }
        #expect(server.eventually { server.uploadedNames().isEmpty && server.temporaryFiles().isEmpty },
                "\(server.uploadedNames()) \(server.temporaryFiles())")
        if let store = server.objectStore {
            // The name is free again: its claim went with the upload.
            #expect(server.eventually { (try? store.headObject(".counterpart/names/cut.bin")) == .some(nil) })
        }
    }

    @Test func aFileAndAFieldAreStoredAndReported() throws {
        let png = testBytes(count: 48_213, seed: 7)
        let path = try temporaryFile("Snip20151228_572.png", png)
        let result = try curl(["-F", "username=dashen9", "-F", "file=@\(path);type=image/png", server.url("/upload")])
        #expect(result.status == 200)
        #expect(result.header("Content-Type") == "application/json")
        let json = try result.json()
        let fields = try #require(json["fields"] as? [[String: Any]])
        #expect(fields.count == 1)
        #expect(fields[0]["name"] as? String == "username")
        #expect(fields[0]["value"] as? String == "dashen9")
        let files = try #require(json["files"] as? [[String: Any]])
        #expect(files.count == 1)
        #expect(files[0]["field"] as? String == "file")
        #expect(files[0]["filename"] as? String == "Snip20151228_572.png")
        #expect(files[0]["contentType"] as? String == "image/png")
        #expect(files[0]["size"] as? Int == 48_213)
        #expect(files[0]["sha256"] as? String == (try sha256(png)))
        #expect(files[0]["url"] as? String == "/uploads/Snip20151228_572.png")
        // The keys come in the contract's order.
        #expect(result.text.hasPrefix("{\"fields\":[{\"name\":\"username\",\"value\":\"dashen9\"}],\"files\":[{\"field\":\"file\",\"filename\":"))
        #expect(try server.uploadedData("Snip20151228_572.png") == png)
        #expect(server.uploadedNames() == ["Snip20151228_572.png"])
    }

    @Test func severalFilesAndRepeatedNamesKeepTheirOrder() throws {
        let one = try temporaryFile("one.txt", Data("1".utf8))
        let two = try temporaryFile("two.txt", Data("22".utf8))
        let result = try curl(["-F", "tag=a", "-F", "f=@\(one)", "-F", "tag=b", "-F", "f=@\(two)", "-F", "f=@\(one)", server.url("/upload")])
        let json = try result.json()
        let fields = try #require(json["fields"] as? [[String: Any]])
        #expect(fields.map { $0["value"] as? String } == ["a", "b"])
        let files = try #require(json["files"] as? [[String: Any]])
        #expect(files.map { $0["filename"] as? String } == ["one.txt", "two.txt", "one.txt"])
        #expect(files.map { $0["url"] as? String } == ["/uploads/one.txt", "/uploads/two.txt", "/uploads/one-1.txt"])
        #expect(files.map { $0["size"] as? Int } == [1, 2, 1])
    }

    @Test func anEmptyFile() throws {
        let empty = try temporaryFile("empty.bin", Data())
        let files = try #require(try curl(["-F", "f=@\(empty)", server.url("/upload")]).json()["files"] as? [[String: Any]])
        #expect(files.first?["size"] as? Int == 0)
        #expect(files.first?["sha256"] as? String == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(server.uploadedNames() == ["empty.bin"])
    }

    /// RFC 2046 §5.1.1: a part may end right after its headers; the issue's own bodies.
    @Test(arguments: ["\r\n", "\n"])
    func partsThatEndRightAfterTheirHeadersAreEmpty(_ lineEnd: String) throws {
        let twoFields = "--B\(lineEnd)Content-Disposition: form-data; name=\"a\"\(lineEnd)\(lineEnd)--B\(lineEnd)Content-Disposition: form-data; name=\"b\"\(lineEnd)\(lineEnd)x\(lineEnd)--B--\(lineEnd)"
        let fields = try #require(try postBody(Array(twoFields.utf8), contentType: "multipart/form-data; boundary=B", to: server.url("/upload")).json()["fields"] as? [[String: Any]])
        #expect(fields.map { $0["name"] as? String } == ["a", "b"])
        #expect(fields.map { $0["value"] as? String } == ["", "x"])

        let emptyFileLast = "--B\(lineEnd)Content-Disposition: form-data; name=\"f\"; filename=\"e.bin\"\(lineEnd)\(lineEnd)--B--\(lineEnd)"
        let result = try postBody(Array(emptyFileLast.utf8), contentType: "multipart/form-data; boundary=B", to: server.url("/upload"))
        #expect(result.status == 200)
        let files = try #require(try result.json()["files"] as? [[String: Any]])
        #expect(files.first?["size"] as? Int == 0)
        #expect(server.uploadedNames().contains("e.bin"))
    }

    @Test func anEmptyFilenameStarGivesWayToFilename() throws {
        let body = "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"kept.txt\"; filename*=UTF-8''\r\n\r\nx\r\n--B--\r\n"
        let files = try #require(try postBody(Array(body.utf8), contentType: "multipart/form-data; boundary=B", to: server.url("/upload")).json()["files"] as? [[String: Any]])
        #expect(files.first?["filename"] as? String == "kept.txt")
        #expect(files.first?["url"] as? String == "/uploads/kept.txt")
    }

    @Test func partsWithoutContentTypeGetTheDefaults() throws {
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.dat\"\r\n\r\nxyz\r\n--b--\r\n".utf8)
        let result = try postBody(body, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        let files = try #require(try result.json()["files"] as? [[String: Any]])
        #expect(files.first?["contentType"] as? String == "application/octet-stream")
        // The text field's default type is not part of the JSON, but the field is there.
        #expect((try result.json()["fields"] as? [[String: Any]])?.first?["value"] as? String == "hi")
    }

    @Test func aFieldThatIsNotUTF8IsGivenInBase64() throws {
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"raw\"\r\n\r\n".utf8) + [0xFF, 0xFE, 0x00, 0x41] + Array("\r\n--b--".utf8)
        let result = try postBody(body, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        let field = try #require((try result.json()["fields"] as? [[String: Any]])?.first)
        #expect(field["value"] == nil)
        #expect(field["valueBase64"] as? String == "//4AQQ==")
    }

    @Test func theMediaTypeIsCaseInsensitiveAndTheBoundaryMayBeQuoted() throws {
        let body = Array("--a b\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\nv\r\n--a b--".utf8)
        let result = try postBody(body, contentType: "Multipart/Form-Data; Boundary=\"a b\"", to: server.url("/upload"))
        #expect(result.status == 200)
    }

    @Test func clientFilenamesAreMadeSafeAndReportedAsSent() throws {
        let names = ["../../etc/passwd", "C:\\Users\\me\\photo.jpg", ".htaccess", "evil\u{202E}gnp.exe", "tab\there.txt",
                     "", String(repeating: "long", count: 75) + ".txt", "...", "照片.png"]
        var writer = MultipartWriter(boundary: try MultipartBoundary("x"))
        var body: [UInt8] = []
        for name in names {
            body += writer.beginPart(headers: MultipartWriter.formDataHeaders(name: "f", filename: name))
            body += Array("data".utf8)
        }
        body += writer.finish()
        let result = try postBody(body, contentType: "multipart/form-data; boundary=x", to: server.url("/upload"))
        let files = try #require(try result.json()["files"] as? [[String: Any]])
        #expect(files.map { $0["filename"] as? String } == names)
        let stored = files.compactMap { ($0["url"] as? String)?.dropFirst("/uploads/".count) }.map { PercentDecodingForTests.decode(String($0)) }
        #expect(Array(stored.prefix(6)) == ["passwd", "photo.jpg", "htaccess", "evilgnp.exe", "tabhere.txt", "upload"])
        #expect(stored[6].utf8.count <= 200 && stored[6].hasSuffix(".txt"))
        #expect(stored[7] == "upload-1")
        #expect(stored[8] == "照片.png")
        // Everything landed inside the uploads folder, nowhere else.
        #expect(server.uploadedNames().count == names.count)
        #expect(!FileManager.default.fileExists(atPath: server.uploads.deletingLastPathComponent().appendingPathComponent("passwd").path))
    }

    @Test func concurrentUploadsOfOneNameNeverOverwrite() async throws {
        let path = try temporaryFile("same.txt", Data("x".utf8))
        let url = server.url("/upload")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { _ = try curl(["-F", "f=@\(path)", url]) } }
            try await group.waitForAll()
        }
        #expect(server.uploadedNames() == ["same-1.txt", "same-2.txt", "same-3.txt", "same-4.txt", "same-5.txt", "same-6.txt", "same-7.txt", "same.txt"])
    }

    @Test func aBigUploadWithExpect100ContinueRoundTripsThroughRange() throws {
        let data = testBytes(count: 3_000_000, seed: 3)
        let path = try temporaryFile("big.bin", data)
        let result = try curl(["-H", "Expect: 100-continue", "-F", "file=@\(path)", server.url("/upload")])
        #expect(result.status == 200)
        let file = try #require((try result.json()["files"] as? [[String: Any]])?.first)
        let url = try #require(file["url"] as? String)
        var assembled = Data()
        var offset = 0
        while offset < data.count {
            let last = min(offset + 1_000_000, data.count) - 1
            let piece = try curl(["-r", "\(offset)-\(last)", server.url(url)])
            #expect(piece.status == 206)
            assembled += piece.body
            offset = last + 1
        }
        #expect(assembled == data)
        #expect(file["sha256"] as? String == (try sha256(assembled)))
    }

    @Test func aClientThatHangsUpInABigFileLeavesNothing() throws {
        // Past the first MiB a file is hashed by a thread of its own: it must stop too.
        let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 9000000\r\n\r\n"
        let part = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.bin\"\r\n\r\n".utf8) + [UInt8](testBytes(count: 3_000_000))
        _ = try RawHTTPConnection.exchange(port: server.server.port, Array(head.utf8) + part, closeAfterSending: true)
        #expect(server.eventually { server.uploadedNames().isEmpty }, "left behind: \(server.uploadedNames())")
    }

    @Test func manyBigFilesInOneBodyAreEachHashedRight() throws {
        let files = (0..<3).map { testBytes(count: 1_500_000 + $0 * 700_001, seed: UInt64(10 + $0)) }
        let paths = try files.enumerated().map { try temporaryFile("f\($0.offset).bin", $0.element) }
        let result = try curl(paths.flatMap { ["-F", "f=@\($0)"] } + [server.url("/upload")])
        let reported = try #require(try result.json()["files"] as? [[String: Any]])
        #expect(try reported.map { $0["sha256"] as? String } == files.map { try sha256($0) })
    }

    @Test func browsersGetAnHTMLPage() throws {
        let path = try temporaryFile("page <b>.txt", Data("x".utf8))
        let result = try curl(["-H", "Accept: text/html,application/xhtml+xml,*/*;q=0.8", "-F", "who=me", "-F", "f=@\(path)", server.url("/upload")])
        #expect(result.status == 200)
        #expect(result.header("Content-Type") == "text/html; charset=utf-8")
        #expect(result.text.contains("page &lt;b&gt;.txt"))
        #expect(result.text.contains("/uploads/page%20%3Cb%3E.txt"))
        #expect(result.text.contains("<td>who</td><td>me</td>"))
    }

    @Test func urlSessionUploadsAHandBuiltBody() async throws {
        let boundary = MultipartBoundary.random()
        let body = MultipartWriter.formData([
            (MultipartWriter.formDataHeaders(name: "username"), Array("dashen9".utf8)),
            (MultipartWriter.formDataHeaders(name: "file", filename: "u.bin", contentType: "application/x-test"), [UInt8](testBytes(count: 70_000))),
        ], boundary: boundary)
        var request = URLRequest(url: URL(string: server.url("/upload"))!)
        request.httpMethod = "POST"
        request.setValue("multipart/form-data; boundary=\(boundary.value)", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await makeSession().upload(for: request, from: Data(body))
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let file = try #require((json["files"] as? [[String: Any]])?.first)
        #expect(file["size"] as? Int == 70_000)
        #expect(file["contentType"] as? String == "application/x-test")
    }
}

@Suite("Uploads: errors leave nothing behind")
struct UploadErrorTests {
    let server: TestServer
    init() throws {
        server = try TestServer { configuration in
            configuration.maxUploadBytes = 200_000
            configuration.multipartLimits = MultipartLimits(maxParts: 5, maxFieldBytes: 100)
        }
    }

    func expectNothingStored() {
        #expect(server.eventually { server.uploadedNames().isEmpty }, "left behind: \(server.uploadedNames())")
    }

    @Test(arguments: ["GET", "PUT", "DELETE", "PATCH", "post"])
    func otherMethodsAre405(_ method: String) throws {
        try expectMethodNotAllowed(method, server.url("/upload"), allow: "POST, OPTIONS")
    }

    @Test func optionsListsTheMethods() throws {
        let result = try curl(["-X", "OPTIONS", server.url("/upload")])
        #expect(result.status == 204)
        #expect(result.header("Allow") == "POST, OPTIONS")
    }

    @Test(arguments: ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/mixed; boundary=x"])
    func notFormDataIs415(_ type: String) throws {
        let result = try curl(["-H", "Content-Type: \(type)", "--data-binary", "x", server.url("/upload")])
        #expect(result.status == 415)
        #expect((try result.json()["error"] as? String)?.contains("multipart/form-data") == true)
    }

    @Test func noContentTypeIs415() throws {
        #expect(try curl(["-X", "POST", server.url("/upload")]).status == 415)
    }

    @Test(arguments: ["multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=*****",
                      "multipart/form-data; boundary=\"unterminated"])
    func aMissingOrInvalidBoundaryIs400(_ type: String) throws {
        let result = try curl(["-H", "Content-Type: \(type)", "--data-binary", "x", server.url("/upload")])
        #expect(result.status == 400)
        #expect((try result.json()["error"] as? String)?.contains("boundary") == true)
    }

    @Test func aBodyOverTheLimitIs413BeforeItIsSent() throws {
        let path = try temporaryFile("big.bin", testBytes(count: 300_000))
        let result = try curl(["-H", "Expect: 100-continue", "-F", "f=@\(path)", server.url("/upload")])
        #expect(result.status == 413)
        #expect((try result.json()["error"] as? String)?.contains("200000") == true)
        expectNothingStored()
    }

    @Test func aChunkedBodyOverTheLimitIs413() throws {
        let path = try temporaryFile("big.bin", testBytes(count: 300_000))
        let result = try curl(["-H", "Transfer-Encoding: chunked", "-F", "f=@\(path)", server.url("/upload")])
        #expect(result.status == 413)
        expectNothingStored()
    }

    @Test func aTruncatedBodyIs400() throws {
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"cut.bin\"\r\n\r\n".utf8) + [UInt8](testBytes(count: 50_000))
        let result = try postBody(body, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        #expect(result.status == 400)
        #expect((try result.json()["error"] as? String)?.contains("truncated") == true)
        expectNothingStored()
    }

    @Test func anErrorAfterACompleteFileRemovesThatFileToo() throws {
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"ok.txt\"\r\n\r\nfine\r\n--b\r\nno colon here\r\n\r\nx\r\n--b--".utf8)
        let result = try postBody(body, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        #expect(result.status == 400)
        #expect((try result.json()["error"] as? String)?.contains("part 2") == true)
        expectNothingStored()
    }

    @Test func tooManyPartsIs413() throws {
        let body = MultipartWriter.formData((0..<6).map { (MultipartWriter.formDataHeaders(name: "f\($0)", filename: "\($0).txt"), [0x61]) },
                                            boundary: try MultipartBoundary("b"))
        let result = try postBody(body, contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        #expect(result.status == 413)
        expectNothingStored()
    }

    @Test func tooManyFieldBytesIs413() throws {
        let result = try curl(["-F", "a=\(String(repeating: "x", count: 60))", "-F", "b=\(String(repeating: "y", count: 60))", server.url("/upload")])
        #expect(result.status == 413)
    }

    @Test func theWrongBoundaryInTheBodyIs400AndSaysSo() throws {
        let body = Array("--other\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--other--".utf8)
        let result = try postBody(body, contentType: "multipart/form-data; boundary=declared", to: server.url("/upload"))
        #expect(result.status == 400)
        #expect(try result.json()["error"] as? String
            == "the body contains no delimiter line \"--declared\" (the boundary from Content-Type); the body starts with \"--other\"")
    }

    @Test func aClientThatHangsUpHalfwayLeavesNothing() throws {
        let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 150000\r\n\r\n"
        let part = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"half.bin\"\r\n\r\n".utf8) + [UInt8](testBytes(count: 70_000))
        _ = try RawHTTPConnection.exchange(port: server.server.port, Array(head.utf8) + part, closeAfterSending: true)
        expectNothingStored()
        // And the server goes on serving.
        #expect(try curl(["-F", "a=1", server.url("/upload")]).status == 200)
    }

    @Test func aClientThatHangsUpAfterACompleteFileLeavesNothing() throws {
        let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 150000\r\n\r\n"
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"done.txt\"\r\n\r\ncomplete\r\n--b\r\nContent-Disposition: form-data; name=\"g\"; filename=\"next.txt\"\r\n\r\npart".utf8)
        _ = try RawHTTPConnection.exchange(port: server.server.port, Array(head.utf8) + body, closeAfterSending: true)
        expectNothingStored()
    }
}

/// Percent-decoding for checking URLs in tests.
enum PercentDecodingForTests {
    static func decode(_ text: String) -> String { text.removingPercentEncoding ?? text }
}

@Suite("Uploads: answers to review findings")
struct UploadReviewTests {
    @Test func aClientThatSendsItsWholeBodyAtOnceStillGetsTheRejection() throws {
        let server = try TestServer()
        // No Expect: 100-continue, 2 MB of body sent without waiting: the 415 arrives.
        let body = [UInt8](testBytes(count: 2_000_000))
        let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: \(body.count)\r\n\r\n"
        let raw = try RawHTTPConnection.exchange(port: server.server.port, Array(head.utf8) + body)
        #expect(raw.head.hasPrefix("HTTP/1.1 415 "))
    }

    @Test func afterAnErrorOnlyTheDrainAllowanceIsRead() throws {
        let server = try TestServer { $0.maxDrainBytes = 100_000; $0.maxUploadBytes = .max }
        let bad = Array("--b\r\nno colon\r\n\r\n".utf8)
        // A little more than the error: answered.
        let small = try postBody(bad + [UInt8](repeating: 0x61, count: 50_000), contentType: "multipart/form-data; boundary=b", to: server.url("/upload"))
        #expect(small.status == 400)
        // Far more: the connection is cut once the allowance is read.
        let path = try temporaryFile("big", Data(bad + [UInt8](repeating: 0x61, count: 5_000_000)))
        let big = try curl(["-H", "Content-Type: multipart/form-data; boundary=b", "--data-binary", "@\(path)", server.url("/upload")])
        #expect(big.status != 400)
        #expect(try curl([server.url("/")]).status != 0)
    }

    /// What the server keeps beside the uploads is never served nor listed, however the path
    /// is spelled: a folder's temporary files and resumable uploads' state; an object
    /// store's claims on names, resumable uploads' state and leases.
    @Test func theServersOwnFilesBesideTheUploadsAreNeverServedWhateverThePath() throws {
        let server = try TestServer { configuration in
            configuration.uploads = configuration.root + "/data/up"
        }
        let kept: [String]
        var paths: [String] = []
        if server.objectStore == nil {
            kept = [".counterpart-1-1.part", ".resumable/abc.data"]
            for name in kept { try Data("partial".utf8).write(into: server.root, at: "data/up/" + name) }
            paths = ["/data/up/.counterpart-1-1.part", "//data/up/.counterpart-1-1.part", "/data/up/.resumable/abc.data"]
        } else {
            kept = [".counterpart/names/x.bin", ".counterpart/resumable/abc.info", ".counterpart/leases/abc"]
            for name in kept { try server.storeUpload(Data("partial".utf8), as: name) }
        }
        for name in kept {
            paths += ["/uploads/\(name)", "//uploads/\(name)", "/%75ploads/\(name)",
                      "/uploads/" + name.replacingOccurrences(of: "/", with: "%2F")]
        }
        for path in paths {
            #expect(try curl(["--path-as-is", server.url(path)]).status == 404, "\(path)")
        }
        for folder in ["/uploads/", "/uploads/.counterpart/", "/uploads/.resumable/"] {
            let listing = try curl(["-H", "Accept: application/json", server.url(folder)])
            let names = (try? listing.json()["entries"] as? [[String: Any]])??.compactMap { $0["name"] as? String } ?? []
            #expect(names.allSatisfy { !$0.hasPrefix(".") }, "\(folder): \(names)")
            #expect(folder == "/uploads/" ? listing.status == 200 : listing.status == 404, "\(folder)")
        }
    }

    @Test func uploadedPagesCannotRunAsPagesOfTheServer() throws {
        let server = try TestServer()
        let page = try temporaryFile("page.html", Data("<script>alert(1)</script>".utf8))
        _ = try curl(["-F", "f=@\(page)", "-F", "g=@\(try temporaryFile("index.html", Data("<h1>mine</h1>".utf8)))", server.url("/upload")])
        let served = try curl([server.url("/uploads/page.html")])
        #expect(served.header("Content-Security-Policy") == "sandbox")
        #expect(served.header("X-Content-Type-Options") == "nosniff")
        // An uploaded index.html does not replace the listing.
        #expect(try curl(["-H", "Accept: application/json", server.url("/uploads/")]).header("Content-Type") == "application/json")
    }

    @Test func aNameTakenManyTimesGetsARandomSuffixNotAnError() throws {
        let server = try TestServer()
        try server.storeUpload(Data(), as: "a.png")
        for n in 1...100 { try server.storeUpload(Data(), as: "a-\(n).png") }
        let path = try temporaryFile("a.png", Data("x".utf8))
        let result = try curl(["-F", "f=@\(path)", server.url("/upload")])
        #expect(result.status == 200)
        let url = try #require((try result.json()["files"] as? [[String: Any]])?.first?["url"] as? String)
        #expect(url.hasPrefix("/uploads/a-") && url.hasSuffix(".png") && url != "/uploads/a-101.png")
    }
}
