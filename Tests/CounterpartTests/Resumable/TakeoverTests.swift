import Counterpart
import Foundation
import Testing

/// A client whose network changes mid-append (no FIN: its old connection just goes
/// silent) resumes on a new one without waiting for the server to notice: once the old
/// request has received nothing for a second, the new one takes the upload over, the old
/// one writes nothing more, and its connection is closed at once (not at the idle timeout,
/// 30 s here).
@Suite("A silent writer's upload is taken over")
struct TakeoverTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    /// How soon a taken-over connection must be seen closed: well below the idle timeout.
    static let closeWithin = 3.0

    func tusCreate(length: Int, name: String, on server: TestServer? = nil) throws -> String {
        let connection = try RawHTTPConnection(port: (server ?? self.server).server.port)
        connection.send("POST /files HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nUpload-Length: \(length)\r\n"
            + "Upload-Metadata: filename \(Data(name.utf8).base64EncodedString())\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let head = try #require(connection.readResponse()?.head)
        #expect(statusCode(of: head) == 201)
        return try #require(headerValue("Location", in: head))
    }

    func tusPatchHead(_ location: String, offset: Int, length: Int, extra: String = "") -> String {
        "PATCH \(location) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: \(offset)\r\n"
            + "Content-Type: application/offset+octet-stream\r\nContent-Length: \(length)\r\n\(extra)Connection: close\r\n\r\n"
    }

    /// A (tus) sends the first `sent` bytes of an append of `content` at 0, then nothing (its
    /// socket stays open), for longer than a writer may stay silent.
    func silentTusAppend(_ location: String, _ content: [UInt8], sent: Int, on server: TestServer? = nil) throws -> RawHTTPConnection {
        let silent = try RawHTTPConnection(port: (server ?? self.server).server.port)
        silent.send(tusPatchHead(location, offset: 0, length: content.count))
        silent.send(Array(content.prefix(sent)))
        Thread.sleep(forTimeInterval: 1.3)
        return silent
    }

    /// The same for an IETF client: a completing append of `body` at 0.
    func silentDraftAppend(_ client: DraftClient, _ path: String, _ body: [UInt8], sent: Int) throws -> RawHTTPConnection {
        let request = client.patch(path, offset: 0, body, complete: true)
        let silent = try RawHTTPConnection(port: server.server.port)
        silent.send(Array(request.prefix(request.count - body.count + sent)))
        Thread.sleep(forTimeInterval: 1.3)
        return silent
    }

    @Test func tus() throws {
        try tus(on: server, name: "taken-over.bin")
    }

    /// The same with a thread per connection, where the old connection's own thread waits in poll.
    @Test func tusWithAThreadPerConnection() throws {
        try tus(on: TestServer { $0.threads = 0 }, name: "taken-over-threaded.bin")
    }

    func tus(on server: TestServer, name: String) throws {
        let content = [UInt8](testBytes(count: 200_000, seed: 41))
        let location = try tusCreate(length: content.count, name: name, on: server)
        let silent = try silentTusAppend(location, content, sent: 100_000, on: server)
        // B asks the offset and sends everything from there.
        let status = try RawHTTPConnection(port: server.server.port)
        status.send("HEAD \(location) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nConnection: close\r\n\r\n")
        let offset = try #require(Int(headerValue("Upload-Offset", in: status.readHead() ?? "") ?? ""))
        // What A wrote was saved as it let go, and A's connection is closed without it sending anything.
        #expect(offset == 100_000)
        #expect(silent.closedByServer(within: Self.closeWithin))
        let resume = try RawHTTPConnection(port: server.server.port)
        resume.send(tusPatchHead(location, offset: offset, length: content.count - offset))
        resume.send(Array(content[offset...]))
        let answer = try #require(resume.readResponse()?.head)
        #expect(statusCode(of: answer) == 204, "\(answer)")
        #expect(headerValue("Upload-Offset", in: answer) == String(content.count))
        // A's late bytes change nothing.
        silent.send([UInt8](repeating: 0x21, count: 100_000))
        #expect(try server.uploadedData(name) == Data(content))
    }

    /// A PATCH that takes the upload over without asking the offset first closes the old
    /// connection too. If the old writer had stored bytes, the PATCH is told where the upload
    /// now is and resumes from there; if it had stored none, the PATCH's offset is still right
    /// and it goes on at once (letting go moved only the upload's expiry).
    @Test(arguments: [5_000, 0])
    func tusPatchTakesOver(storedBeforeSilence: Int) throws {
        let content = [UInt8](testBytes(count: 20_000, seed: 43))
        let name = "patched-over-\(storedBeforeSilence).bin"
        let location = try tusCreate(length: content.count, name: name)
        let silent = try silentTusAppend(location, content, sent: storedBeforeSilence)
        let again = try RawHTTPConnection(port: server.server.port)
        again.send(tusPatchHead(location, offset: 0, length: content.count))
        again.send(content)
        let answer = try #require(again.readResponse()?.head)
        #expect(silent.closedByServer(within: Self.closeWithin))
        if storedBeforeSilence > 0 {
            #expect(statusCode(of: answer) == 409)
            #expect(headerValue("Upload-Offset", in: answer) == String(storedBeforeSilence))
            let resume = try RawHTTPConnection(port: server.server.port)
            resume.send(tusPatchHead(location, offset: storedBeforeSilence, length: content.count - storedBeforeSilence))
            resume.send(Array(content[storedBeforeSilence...]))
            #expect(statusCode(of: resume.readResponse()?.head ?? "") == 204)
        } else {
            #expect(statusCode(of: answer) == 204, "\(answer)")
        }
        #expect(try server.uploadedData(name) == Data(content))
    }

    @Test(arguments: [3, 6, 8, 9])
    func ietf(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, content) = resumableBody("taken-over-\(version).bin", size: 200_000)
        let path = try client.createIncomplete(body, sent: 0, announceLength: false)
        let silent = try silentDraftAppend(client, path, body, sent: 100_000)
        let offset = try #require(Int(try client.offset(of: path) ?? ""))
        #expect(offset == 100_000)
        #expect(silent.closedByServer(within: Self.closeWithin))
        let resume = try RawHTTPConnection(port: server.server.port)
        resume.send(client.patch(path, offset: offset, Array(body[offset...]), complete: true))
        let answer = try #require(resume.readResponse()?.head)
        #expect(statusCode(of: answer) == 200, "\(answer)")
        silent.send([UInt8](repeating: 0x21, count: body.count - 100_000))
        #expect(try server.uploadedData("taken-over-\(version).bin") == Data(content))
    }

    /// `Counterpart-Takeover: off` keeps the answer of before: 423 (tus), 409 (IETF).
    @Test func theOldAnswerOnRequest() throws {
        let content = [UInt8](testBytes(count: 10_000, seed: 42))
        let location = try tusCreate(length: content.count, name: "kept.bin")
        let silent = try silentTusAppend(location, content, sent: 5_000)
        let refused = try RawHTTPConnection(port: server.server.port)
        refused.send(tusPatchHead(location, offset: 0, length: content.count, extra: "Counterpart-Takeover: off\r\n"))
        refused.send(content)
        #expect(statusCode(of: refused.readResponse()?.head ?? "") == 423)
        #expect(!silent.closedByServer(within: 0.2), "the writer kept its upload and its connection")

        let client = DraftClient(version: 8, port: server.server.port)
        let (body, _) = resumableBody("kept.bin", size: 10_000)
        let path = try client.createIncomplete(body, sent: 0, announceLength: false)
        let ietfSilent = try silentDraftAppend(client, path, body, sent: 5_000)
        var again = client.patch(path, offset: 0, body, complete: true)
        again.insert(contentsOf: Array("Counterpart-Takeover: off\r\n".utf8), at: again.firstRange(of: Array("Connection:".utf8))!.lowerBound)
        let ietfRefused = try RawHTTPConnection(port: server.server.port)
        ietfRefused.send(again)
        let head = try #require(ietfRefused.readResponse()?.head)
        #expect(statusCode(of: head) == 409)
        #expect(headerValue("Upload-Offset", in: head) == "0")
        #expect(!ietfSilent.closedByServer(within: 0.2))
    }
}
