import Counterpart
import Foundation
import Testing

/// A fault that answers a request in place of the endpoint drops the append the endpoint
/// had already begun: the upload must be free again, not taken for good (it used to answer
/// 423 or 409 until the server restarted).
@Suite("A dropped append lets go of its upload")
struct DroppedAppendTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    @Test func tus() throws {
        let created = try tusRequest("POST /files", ["Upload-Length: 4"])
        #expect(statusCode(of: created.head) == 201, "\(created.head)")
        let location = try #require(headerValue("Location", in: created.head))
        let faulted = try tusRequest("PATCH \(location)?status=503", ["Upload-Offset: 0", "Content-Type: application/offset+octet-stream"], body: "ab")
        #expect(statusCode(of: faulted.head) == 503)
        let append = try tusRequest("PATCH \(location)", ["Upload-Offset: 0", "Content-Type: application/offset+octet-stream"], body: "abcd")
        #expect(statusCode(of: append.head) == 204, "\(append.head)")
        #expect(headerValue("Upload-Offset", in: append.head) == "4")
    }

    @Test(arguments: [3, 6, 9])
    func ietf(version: Int) throws {
        let client = DraftClient(version: version, port: server.server.port)
        let (body, content) = resumableBody("dropped-\(version).bin", size: 2_000)
        let path = try client.createIncomplete(body, sent: 1_000, announceLength: false)
        let faulted = try RawHTTPConnection(port: server.server.port)
        faulted.send(client.patch(path + "?status=503", offset: 1_000, Array(body[1_000...]), complete: true))
        #expect(statusCode(of: faulted.readResponse()?.head ?? "") == 503)
        let append = try RawHTTPConnection(port: server.server.port)
        append.send(client.patch(path, offset: 1_000, Array(body[1_000...]), complete: true))
        let (head, _) = try #require(append.readResponse())
        #expect(statusCode(of: head) == 200, "\(head)")
        #expect(try server.uploadedData("dropped-\(version).bin") == Data(content))
    }

    /// One tus request over its own connection.
    func tusRequest(_ requestLine: String, _ headers: [String], body: String = "") throws -> (head: String, body: [UInt8]) {
        let connection = try RawHTTPConnection(port: server.server.port)
        let lines = ["\(requestLine) HTTP/1.1", "Host: x", "Tus-Resumable: 1.0.0", "Content-Length: \(body.utf8.count)", "Connection: close"] + headers
        connection.send(lines.joined(separator: "\r\n") + "\r\n\r\n" + body)
        return try #require(connection.readResponse(), "no answer to \(requestLine)")
    }
}
