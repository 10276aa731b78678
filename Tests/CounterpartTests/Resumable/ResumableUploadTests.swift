import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// A multipart body of one file, for resumable uploads of `POST /upload`.
func resumableBody(_ name: String, size: Int, seed: UInt64 = 30) -> (body: [UInt8], content: [UInt8]) {
    let content = [UInt8](testBytes(count: size, seed: seed))
    let body = MultipartWriter.formData([(MultipartWriter.formDataHeaders(name: "file", filename: name), content)],
                                        boundary: try! MultipartBoundary("RUFH"))
    return (body, content)
}

/// What a client of one interop version sends.
struct DraftClient {
    let version: Int
    let port: UInt16

    /// `Upload-Complete: ?1` (or `Upload-Incomplete: ?0` in version 3).
    func completeness(_ complete: Bool) -> String {
        version == 3 ? "Upload-Incomplete: \(complete ? "?0" : "?1")" : "Upload-Complete: \(complete ? "?1" : "?0")"
    }

    func creationHead(length: Int, complete: Bool = true, extra: String = "") -> String {
        "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: multipart/form-data; boundary=RUFH\r\n"
            + "Upload-Draft-Interop-Version: \(version)\r\n\(completeness(complete))\r\nContent-Length: \(length)\r\n\(extra)"
    }

    func patch(_ path: String, offset: Int, _ bytes: [UInt8], complete: Bool) -> [UInt8] {
        let type = version >= 6 ? "Content-Type: application/partial-upload\r\n" : ""
        return Array(("PATCH \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\n\(completeness(complete))\r\n"
            + "Upload-Offset: \(offset)\r\n\(type)Content-Length: \(bytes.count)\r\nConnection: close\r\n\r\n").utf8) + bytes
    }

    func head(_ path: String) -> String {
        "HEAD \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\nConnection: close\r\n\r\n"
    }

    /// Creates an upload of `body` whose creation request sends its first `sent` bytes
    /// (and `Upload-Length` when `announceLength`) and leaves it incomplete: its path,
    /// `/resumable/<id>`.
    func createIncomplete(_ body: [UInt8], sent: Int, announceLength: Bool) throws -> String {
        let connection = try RawHTTPConnection(port: port)
        connection.send(creationHead(length: sent, complete: false, extra: announceLength ? "Upload-Length: \(body.count)\r\n" : "") + "\r\n")
        let interim = try #require(connection.readHead(), "no 104")
        #expect(statusCode(of: interim) == 104, "\(interim)")
        let location = try #require(headerValue("Location", in: interim))
        connection.send(Array(body.prefix(sent)))
        let (head, _) = try #require(connection.readResponse(), "no answer to the creation")
        #expect((200..<300).contains(statusCode(of: head) ?? 0), "\(head)")
        return String(location[try #require(location.range(of: "/resumable/")).lowerBound...])
    }

    /// Sends `request` on a new connection: the final response, if one came.
    func response(to request: [UInt8]) throws -> (head: String, body: [UInt8])? {
        let connection = try RawHTTPConnection(port: port)
        connection.send(request)
        return connection.readResponse()
    }

    func response(to request: String) throws -> (head: String, body: [UInt8])? { try response(to: Array(request.utf8)) }

    /// The head of the answer to a HEAD of the upload at `path`, if one came.
    func status(of path: String) throws -> String? {
        let connection = try RawHTTPConnection(port: port)
        connection.send(head(path))
        return connection.readHead()
    }

    /// The upload's `Upload-Offset`, from a HEAD.
    func offset(of path: String) throws -> String? {
        try status(of: path).flatMap { headerValue("Upload-Offset", in: $0) }
    }

    /// The name of the completeness header a server of this version answers with, and its
    /// value for "complete".
    var completenessHeader: String { version == 3 ? "Upload-Incomplete" : "Upload-Complete" }
    func value(complete: Bool) -> String { (version == 3) != complete ? "?1" : "?0" }
}

@Suite("Resumable Uploads for HTTP (IETF), every interop version")
struct ResumableUploadTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    /// The 104 byte for byte: status line, then the version, the Location, and from
    /// version 6 the limits.
    func expect104(_ head: String, version: Int) throws -> String {
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "HTTP/1.1 104 Upload Resumption Supported")
        #expect(lines.dropFirst().first == "Upload-Draft-Interop-Version: \(version)")
        let location = try #require(lines.dropFirst(2).first)
        #expect(location.hasPrefix("Location: http://127.0.0.1:\(server.server.port)/resumable/"))
        #expect(location.count == "Location: http://127.0.0.1:\(server.server.port)/resumable/".count + 32)
        if version >= 6 {
            // The time left: a second may pass between the creation and the 104.
            let limits = ["86400", "86399"].map { "Upload-Limit: max-size=\(Configuration.defaultMaxUploadBytes), \(version == 6 ? "expires" : "max-age")=\($0)" }
            #expect(limits.contains(lines.dropFirst(3).first ?? ""), "\(lines)")
            #expect(lines.count == 6)
        } else {
            #expect(lines.count == 5)
        }
        return String(location.dropFirst("Location: http://127.0.0.1:\(server.server.port)".count))
    }

    /// Sends `client`'s creation head for `length` body bytes on a new connection and checks
    /// the 104: the connection, for the body, and the upload's path.
    func beginCreation(_ client: DraftClient, length: Int, complete: Bool = true,
                       closing: Bool = true) throws -> (connection: RawHTTPConnection, path: String) {
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(client.creationHead(length: length, complete: complete) + (closing ? "Connection: close\r\n" : "") + "\r\n")
        // The 104 comes before the body is sent.
        let interim = try #require(connection.readHead())
        return (connection, try expect104(interim, version: client.version))
    }

    /// Creates an upload with all of `body` in its creation request: the upload's path and
    /// the answer.
    func createWhole(_ client: DraftClient, _ body: [UInt8]) throws -> (path: String, head: String, answer: [UInt8]) {
        let (connection, path) = try beginCreation(client, length: body.count)
        connection.send(body)
        let (head, answer) = try #require(connection.readResponse())
        return (path, head, answer)
    }

    /// Creates an upload whose creation request sends only the first `sent` bytes of `body`
    /// and leaves it incomplete: the upload's path and the head of the answer, if one came.
    func createWithFirstBytes(_ client: DraftClient, _ body: [UInt8], sent: Int) throws -> (path: String, head: String?) {
        let (connection, path) = try beginCreation(client, length: sent, complete: false)
        connection.send(Array(body.prefix(sent)))
        return (path, connection.readResponse()?.head)
    }

    @Test(arguments: 3...9)
    func aWholeUploadInOneRequest(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, content) = resumableBody("one-\(version).bin", size: 40_000)
        let (path, head, answer) = try createWhole(client, body)
        #expect(statusCode(of: head) == 200)
        #expect(headerValue("Upload-Draft-Interop-Version", in: head) == String(version))
        #expect(headerValue("Location", in: head)?.hasSuffix(path) == true)
        if version <= 6 { #expect(headerValue("Upload-Offset", in: head) == String(body.count)) }
        if version >= 7 || version == 3 { #expect(headerValue(client.completenessHeader, in: head) == client.value(complete: true)) }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any])
        #expect((json["files"] as? [[String: Any]])?.first?["sha256"] as? String == SHA256.hex(of: content))
        #expect(try server.uploadedData("one-\(version).bin") == Data(content))
    }

    @Test(arguments: 3...9)
    func aCutUploadResumesWithHeadAndPatch(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, content) = resumableBody("cut-\(version).bin", size: 300_000)
        let (connection, path) = try beginCreation(client, length: body.count, closing: false)
        connection.send(Array(body.prefix(120_000)))
        connection.close()
        // The server keeps what came, durably, and says so.
        var offset = 0
        #expect(server.eventually {
            offset = Int((try? client.offset(of: path)) ?? "") ?? 0
            return offset == 120_000
        })
        let status = try #require(try client.status(of: path))
        #expect(statusCode(of: status) == 204)
        #expect(headerValue(client.completenessHeader, in: status) == client.value(complete: false))
        #expect(headerValue("Cache-Control", in: status) == "no-store")
        if version >= 6 {
            #expect(headerValue("Upload-Length", in: status) == String(body.count))
            #expect(headerValue("Upload-Limit", in: status)?.hasPrefix("max-size=") == true)
        }
        let (head, answer) = try #require(try client.response(to: client.patch(path, offset: offset, Array(body[offset...]), complete: true)))
        #expect(statusCode(of: head) == 200, "\(head)")
        if version >= 7 { #expect(headerValue("Upload-Complete", in: head) == "?1") }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any])
        #expect((json["files"] as? [[String: Any]])?.first?["sha256"] as? String == SHA256.hex(of: content))
        // The journal shows the completing request with its parts.
        let entry = try #require(server.server.journal.waitForRequests(path: path, method: "PATCH").last)
        #expect(entry.parts.first?.filename == "cut-\(version).bin")
    }

    @Test(arguments: 3...9)
    func anIncompleteCreationThenAnAppend(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, content) = resumableBody("parts-\(version).bin", size: 10_000)
        let (path, answer) = try createWithFirstBytes(client, body, sent: 4_000)
        let created = try #require(answer)
        #expect(statusCode(of: created) == 201)
        #expect(headerValue("Location", in: created)?.hasSuffix(path) == true)
        #expect(headerValue(client.completenessHeader, in: created) == client.value(complete: false))
        if version <= 6 { #expect(headerValue("Upload-Offset", in: created) == "4000") }
        // A middle part, not the end.
        let (appended, _) = try #require(try client.response(to: client.patch(path, offset: 4_000, Array(body[4_000..<6_000]), complete: false)))
        #expect(statusCode(of: appended) == (version <= 6 ? 201 : 204))
        #expect(headerValue(client.completenessHeader, in: appended) == client.value(complete: false))
        let (done, _) = try #require(try client.response(to: client.patch(path, offset: 6_000, Array(body[6_000...]), complete: true)))
        #expect(statusCode(of: done) == 200)
        #expect(try server.uploadedData("parts-\(version).bin") == Data(content))
    }

    @Test(arguments: 3...9)
    func theErrorPaths(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("errors-\(version).bin", size: 1_000)
        let path = try createWithFirstBytes(client, body, sent: 300).path

        // An offset that does not match: 409 with the right one.
        let (conflict, problem) = try #require(try client.response(to: client.patch(path, offset: 100, [0x61], complete: false)))
        #expect(statusCode(of: conflict) == 409)
        #expect(headerValue("Upload-Offset", in: conflict) == "300")
        if version >= 6 {
            #expect(headerValue("Content-Type", in: conflict) == "application/problem+json")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(problem)) as? [String: Any])
            #expect(json["type"] as? String == "https://iana.org/assignments/http-problem-types#mismatching-upload-offset")
            #expect(json["expected-offset"] as? Int == 300)
            #expect(json["provided-offset"] as? Int == 100)
        }
        // The wrong media type for an append (from version 6).
        if version >= 6 {
            let wrongType = try client.response(to: "PATCH \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\nUpload-Complete: ?0\r\nUpload-Offset: 300\r\nContent-Type: application/octet-stream\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
            #expect(statusCode(of: wrongType?.head ?? "") == 415)
        }
        // An unknown upload.
        #expect(statusCode(of: try client.status(of: "/resumable/0123456789abcdef0123456789abcdef") ?? "") == 404)
        // Cancellation.
        let cancel = try client.response(to: "DELETE \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\nConnection: close\r\n\r\n")
        #expect(statusCode(of: cancel?.head ?? "") == 204)
        #expect(statusCode(of: try client.status(of: path) ?? "") == 404)
    }

    @Test(arguments: 3...9)
    func anAppendToACompletedUpload(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("done-\(version).bin", size: 500)
        let (path, first, firstBody) = try createWhole(client, body)
        let (head, replay) = try #require(try client.response(to: client.patch(path, offset: body.count, [], complete: true)))
        switch version {
        case 9:
            // Draft -12: the final response, replayed.
            #expect(statusCode(of: head) == statusCode(of: first))
            #expect(replay == firstBody)
        case 8:
            #expect(statusCode(of: head) == 410)
        default:
            #expect(statusCode(of: head) == 400)
        }
        // And its offset says complete.
        #expect(headerValue(client.completenessHeader, in: try client.status(of: path) ?? "") == client.value(complete: true))
    }

    @Test(arguments: [2, 10, 99])
    func aVersionItDoesNotSpeakGetsAPlainUpload(version: Int) throws {
        let (body, _) = resumableBody("plain-\(version).bin", size: 1_000)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(DraftClient(version: version, port: server.server.port).creationHead(length: body.count) + "Connection: close\r\n\r\n")
        connection.send(body)
        let (head, _) = try #require(connection.readResponse())
        // No 104 (the draft forbids one for a version it does not speak): the answer itself.
        #expect(statusCode(of: head) == 200)
        #expect(headerValue("Upload-Draft-Interop-Version", in: head) == nil)
    }

    @Test func aPlainUploadIsNotResumable() throws {
        let (body, _) = resumableBody("plain.bin", size: 100)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=RUFH\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        connection.send(body)
        let (head, _) = try #require(connection.readResponse())
        #expect(statusCode(of: head) == 200)
    }

    @Test func aRefusedCreationGetsNoResource() throws {
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nUpload-Draft-Interop-Version: 8\r\nUpload-Complete: ?1\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
        let (head, _) = try #require(connection.readResponse())
        #expect(statusCode(of: head) == 415)
        #expect(headerValue("Upload-Complete", in: head) == "?1")
        let resources = (try? FileManager.default.contentsOfDirectory(atPath: server.uploads.appendingPathComponent(".resumable").path)) ?? []
        #expect(resources.isEmpty)
    }

    @Test func expect100ContinueAnd104BothCome() throws {
        let (body, _) = resumableBody("continue.bin", size: 1_000)
        let client = DraftClient(version: 8, port: server.server.port)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(client.creationHead(length: body.count) + "Expect: 100-continue\r\nConnection: close\r\n\r\n")
        let first = try #require(connection.readHead())
        #expect(first.hasPrefix("HTTP/1.1 104 Upload Resumption Supported\r\n"))
        let second = try #require(connection.readHead())
        #expect(second.hasPrefix("HTTP/1.1 100 Continue"))
        connection.send(body)
        #expect(statusCode(of: connection.readResponse()?.head ?? "") == 200)
    }

    @Test func optionsAnnouncesTheLimits() throws {
        let v8 = try curl(["-X", "OPTIONS", "-H", "Upload-Draft-Interop-Version: 8", server.url("/upload")])
        #expect(v8.header("Upload-Limit")?.contains("max-size=") == true)
        #expect(v8.header("Accept-Patch") == "application/partial-upload")
        let v6 = try curl(["-X", "OPTIONS", "-H", "Upload-Draft-Interop-Version: 6", server.url("/upload")])
        #expect(v6.header("Upload-Limit")?.contains("expires=") == true)
        #expect(v6.header("Accept-Patch") == nil)
    }

    @Test func curlStepByStep() throws {
        // Creation with an incomplete body, then HEAD and PATCH with curl.
        let (body, content) = resumableBody("curl.bin", size: 2_000)
        let first = try temporaryFile("first", Data(body.prefix(1_000)))
        let created = try curl(["-H", "Content-Type: multipart/form-data; boundary=RUFH", "-H", "Upload-Draft-Interop-Version: 8",
                                "-H", "Upload-Complete: ?0", "--data-binary", "@\(first)", server.url("/upload")])
        #expect(created.status == 201)
        let location = try #require(created.header("Location"))
        let status = try curl(["--head", "-H", "Upload-Draft-Interop-Version: 8", location])
        #expect(status.status == 204)
        #expect(status.header("Upload-Offset") == "1000")
        let rest = try temporaryFile("rest", Data(body.dropFirst(1_000)))
        let done = try curl(["-X", "PATCH", "-H", "Upload-Draft-Interop-Version: 8", "-H", "Upload-Complete: ?1", "-H", "Upload-Offset: 1000",
                             "-H", "Content-Type: application/partial-upload", "--data-binary", "@\(rest)", location])
        #expect(done.status == 200)
        #expect((try done.json()["files"] as? [[String: Any]])?.first?["sha256"] as? String == SHA256.hex(of: content))
    }

    @Test func aRestartInTheMiddleAndResume() throws {
        let folder = try makeTemporaryFolder("rufh")
        defer { try? FileManager.default.removeItem(at: folder) }
        let configuration = Configuration(root: folder.path, uploads: folder.appendingPathComponent("uploads").path)
        var server = try CounterpartServer(configuration)
        let (body, content) = resumableBody("restart.bin", size: 50_000)
        var client = DraftClient(version: 6, port: server.port)
        let connection = try RawHTTPConnection(port: server.port)
        connection.send(client.creationHead(length: body.count) + "\r\n")
        let interim = try #require(connection.readHead())
        let path = try #require(headerValue("Location", in: interim).flatMap { URL(string: $0)?.path })
        connection.send(Array(body.prefix(20_000)))
        connection.close()
        Thread.sleep(forTimeInterval: 0.3)
        server.stop()
        server = try CounterpartServer(configuration)
        defer { server.stop() }
        client = DraftClient(version: 6, port: server.port)
        let offset = try #require(Int(try client.offset(of: path) ?? ""))
        #expect(offset == 20_000)
        #expect(statusCode(of: try client.response(to: client.patch(path, offset: offset, Array(body[offset...]), complete: true))?.head ?? "") == 200)
        #expect(try Data(contentsOf: folder.appendingPathComponent("uploads/restart.bin")) == Data(content))
    }

    @Test func anExpiredUploadIsGoneAndATooLargeOneIsRefused() throws {
        let shortLived = try TestServer { $0.resumableLimits = ResumableLimits(expirySeconds: 1); $0.maxUploadBytes = 100_000 }
        let client = DraftClient(version: 8, port: shortLived.server.port)
        let (body, _) = resumableBody("expiring.bin", size: 1_000)
        let path = try client.createIncomplete(body, sent: 500, announceLength: false)
        Thread.sleep(forTimeInterval: 2.1)
        #expect(statusCode(of: try client.response(to: client.patch(path, offset: 500, Array(body[500...]), complete: true))?.head ?? "") == 410)
        // A declared length over the server's limit: 413, before any resource exists.
        let big = try client.response(to: client.creationHead(length: 10, complete: false, extra: "Upload-Length: 200000\r\n") + "Connection: close\r\n\r\n0123456789")
        #expect(statusCode(of: big?.head ?? "") == 413)
    }

    @Test func lengthsThatDisagreeAreRefused() throws {
        let client = DraftClient(version: 7, port: server.server.port)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(client.creationHead(length: 10, extra: "Upload-Length: 20\r\n") + "Connection: close\r\n\r\n0123456789")
        let (head, problem) = try #require(connection.readResponse())
        #expect(statusCode(of: head) == 400)
        #expect(String(decoding: problem, as: UTF8.self).contains("#inconsistent-upload-length"))
    }
}

extension ResumableUploadTests {
    /// An append that comes while the completing request is still processing the upload
    /// (parsing it, storing its file) waits its turn (409, "another request is writing")
    /// and then finds it complete: the file is stored once, and the completing request
    /// gets its answer. (The upload used to be let go before it was processed, and both
    /// requests stored it.)
    @Test(arguments: [5, 9])
    func anAppendWhileTheUploadIsProcessedWaitsItsTurn(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, content) = resumableBody("processed-\(version).bin", size: 16 << 20)
        let path = try client.createIncomplete(body, sent: 0, announceLength: false)
        let whole = BackgroundCall { () throws -> String in
            try #require(try client.response(to: client.patch(path, offset: 0, body, complete: true)), "no answer to the whole append").head
        }
        #expect(waitUntil(seconds: 30) { (try? client.offset(of: path)) == String(body.count) })
        var answers: [(head: String, body: [UInt8])] = []
        repeat {
            answers.append(try #require(try client.response(to: client.patch(path, offset: body.count, [], complete: true)), "no answer to the empty append"))
        } while answers.count < 1_000 && String(decoding: answers.last!.body, as: UTF8.self).contains("another request is writing")
        let last = try #require(answers.last)
        #expect(statusCode(of: try whole.wait()) == 200)
        #expect(statusCode(of: last.head) != 500, "\(last.head)\(String(decoding: last.body, as: UTF8.self))")
        #expect(server.uploadedNames().filter { !$0.hasPrefix(".") } == ["processed-\(version).bin"])
        #expect(try server.uploadedData("processed-\(version).bin") == Data(content))
    }
}
