import Counterpart
import Foundation
import Testing

/// The draft rules that differ by interop version, each for every version it applies to,
/// over raw sockets (every upload is made by a creation whose 104 is read and checked).
/// The version table is in docs/resumable-uploads.md.
@Suite("Resumable Uploads for HTTP: the rules of each draft")
struct DraftRuleTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    /// One request on its own connection: its answer (a HEAD's has no body).
    func exchange(_ request: [UInt8]) throws -> (head: String, body: [UInt8]) {
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(request)
        if request.starts(with: Array("HEAD ".utf8)) { return (try #require(connection.readHead(), "no answer"), []) }
        return try #require(connection.readResponse(), "no answer to \(String(decoding: request.prefix(80), as: UTF8.self))")
    }

    func exchange(_ request: String) throws -> (head: String, body: [UInt8]) { try exchange(Array(request.utf8)) }

    func json(_ body: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
    }

    /// Drafts -01 to -05 (versions 3–6): a DELETE with `Upload-Offset` or the completeness
    /// field is 400 and the upload stays; later versions cancel.
    @Test(arguments: 3...9)
    func aCancellationWithUploadFields(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("cancel-\(version).bin", size: 1_000)
        for field in ["Upload-Offset: 300", client.completeness(false)] {
            let path = try client.createIncomplete(body, sent: 300, announceLength: false)
            let (head, _) = try exchange("DELETE \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\n\(field)\r\nConnection: close\r\n\r\n")
            if version <= 6 {
                #expect(statusCode(of: head) == 400, "\(field): \(head)")
                #expect(try client.offset(of: path) == "300")
            } else {
                #expect(statusCode(of: head) == 204, "\(field): \(head)")
                #expect(try client.offset(of: path) == nil)
            }
        }
    }

    /// A request on an upload resource in a version this server does not speak is 400 with
    /// problem details naming the versions it does, and changes nothing; one in another
    /// supported version is answered.
    @Test(arguments: 3...9)
    func anUnsupportedVersionOnAnUploadResource(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("unsupported-\(version).bin", size: 1_000)
        let path = try client.createIncomplete(body, sent: 300, announceLength: false)
        for other in ["-1", "2", "10"] {
            let fields = "Host: x\r\nUpload-Draft-Interop-Version: \(other)\r\nConnection: close\r\n"
            let requests = [
                Array("HEAD \(path) HTTP/1.1\r\n\(fields)\r\n".utf8),
                Array("DELETE \(path) HTTP/1.1\r\n\(fields)\r\n".utf8),
                Array(("PATCH \(path) HTTP/1.1\r\n\(fields)Upload-Offset: 300\r\nUpload-Complete: ?1\r\n"
                       + "Content-Type: application/partial-upload\r\nContent-Length: 700\r\n\r\n").utf8) + body[300...],
            ]
            for request in requests {
                let (head, problem) = try exchange(request)
                #expect(statusCode(of: head) == 400, "\(other): \(head)")
                #expect(headerValue("Content-Type", in: head) == "application/problem+json")
                if !problem.isEmpty { #expect(try json(problem)["supported-versions"] as? [Int] == Array(3...9)) }
            }
        }
        #expect(try client.offset(of: path) == "300")
        let otherVersion = DraftClient(version: version == 9 ? 3 : version + 1, port: server.server.port)
        #expect(try otherVersion.offset(of: path) == "300")
    }

    /// An append past the upload's declared length: 400 up to 6 (draft -05), 413 in 7, and
    /// from 8 (draft -08 on) 400 with the upload invalid from then on.
    @Test(arguments: 3...9)
    func anAppendPastTheLength(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("past-\(version).bin", size: 1_000)
        let path = try client.createIncomplete(body, sent: 300, announceLength: true)
        let (head, _) = try exchange(client.patch(path, offset: 300, Array(body[300...]) + [0x21], complete: false))
        #expect(statusCode(of: head) == (version == 7 ? 413 : 400), "\(head)")
        if version <= 6 { #expect(headerValue("Upload-Offset", in: head) == "300") }
        let status = try RawHTTPConnection(port: server.server.port)
        status.send(client.head(path))
        let after = try #require(status.readHead())
        if version >= 8 {
            #expect(statusCode(of: after) == 400, "\(after)")
            let patch = try exchange(client.patch(path, offset: 300, Array(body[300...]), complete: true))
            #expect(statusCode(of: patch.head) == 400)
            #expect(String(decoding: patch.body, as: UTF8.self).contains("invalid"))
        } else {
            #expect(headerValue("Upload-Offset", in: after) == "300")
            let patch = try exchange(client.patch(path, offset: 300, Array(body[300...]), complete: true))
            #expect(statusCode(of: patch.head) == 200)
        }
    }

    /// The same when the append's end is known only as its bytes come (chunked).
    @Test(arguments: [6, 7, 8])
    func aChunkedAppendPastTheLength(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("chunked-\(version).bin", size: 1_000)
        let path = try client.createIncomplete(body, sent: 300, announceLength: true)
        let chunk = Array(body[300...]) + [0x21]
        let type = version >= 6 ? "Content-Type: application/partial-upload\r\n" : ""
        let (head, _) = try exchange(Array(("PATCH \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\nUpload-Offset: 300\r\n\(type)"
                                            + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + String(chunk.count, radix: 16) + "\r\n").utf8)
                                     + chunk + Array("\r\n0\r\n\r\n".utf8))
        #expect(statusCode(of: head) == (version == 7 ? 413 : 400), "\(head)")
        let status = try RawHTTPConnection(port: server.server.port)
        status.send(client.head(path))
        let after = try #require(status.readHead())
        #expect(statusCode(of: after) == (version >= 8 ? 400 : 204), "\(after)")
    }

    /// Up to 6 (drafts -01 to -05) a failure answer on an upload carries `Upload-Offset`:
    /// the 400 of an append to a completed upload, the 415 of an append of another type.
    @Test(arguments: 3...9)
    func failureAnswersCarryTheOffset(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, _) = resumableBody("failure-\(version).bin", size: 500)
        let path = try client.createIncomplete(body, sent: 200, announceLength: false)
        if version >= 6 {
            let (wrongType, _) = try exchange("PATCH \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: \(version)\r\nUpload-Offset: 200\r\n"
                                              + "Content-Type: text/plain\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            #expect(statusCode(of: wrongType) == 415)
            #expect(headerValue("Upload-Offset", in: wrongType) == (version <= 6 ? "200" : nil))
        }
        let done = try exchange(client.patch(path, offset: 200, Array(body[200...]), complete: true))
        #expect(statusCode(of: done.head) == 200)
        let (again, _) = try exchange(client.patch(path, offset: body.count, [0x21], complete: true))
        #expect(statusCode(of: again) == 400, "\(again)")
        #expect(headerValue("Upload-Offset", in: again) == (version <= 6 ? String(body.count) : nil))
    }

    /// Version 9 replays the final answer only to a valid request: the empty completing
    /// append gets it, an append with more bytes is refused.
    @Test func onlyAValidRequestGetsTheReplay() throws {
        let client = DraftClient(version: 9, port: server.server.port)
        let (body, _) = resumableBody("replay.bin", size: 500)
        let path = try client.createIncomplete(body, sent: 200, announceLength: false)
        let done = try exchange(client.patch(path, offset: 200, Array(body[200...]), complete: true))
        #expect(statusCode(of: done.head) == 200)
        let more = try exchange(client.patch(path, offset: body.count, [0x21, 0x21], complete: true))
        #expect(statusCode(of: more.head) == 400, "\(more.head)")
        #expect(String(decoding: more.body, as: UTF8.self).contains("#inconsistent-upload-length"))
        let replay = try exchange(client.patch(path, offset: body.count, [], complete: true))
        #expect(statusCode(of: replay.head) == 200)
        #expect(replay.body == done.body)
    }
}
