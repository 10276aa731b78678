import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

/// What a paced download saw: the announced length, the body, whether the server closed.
private struct PacedDownload: Sendable, CustomStringConvertible {
    var contentLength: String?
    var body: [UInt8]
    var closed: Bool

    var description: String { "Content-Length \(contentLength ?? "none"), \(body.count) body bytes, \(closed ? "closed" : "open")" }
}

/// GETs `target`, reads the head and the first body bytes, calls `change` (the file changes
/// under the download), then reads on until the server closes or `timeout` passes.
private func pacedDownload(_ server: TestServer, _ target: String, timeout: Double,
                           change: @escaping @Sendable () throws -> Void) async throws -> PacedDownload {
    let port = server.server.port
    return try await offloaded {
        let client = try RawHTTPConnection(port: port)
        client.send("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        guard let (head, first) = client.readHead(minimumBody: 1) else {
            return PacedDownload(contentLength: nil, body: [], closed: false)
        }
        try change()
        let (rest, closed) = client.readToEnd(timeout: timeout)
        return PacedDownload(contentLength: headerValue("Content-Length", in: head + "\r\n"), body: first + rest, closed: closed)
    }
}

/// Truncates the file at `path` (runs on the download's thread: it throws rather than expects).
private func shrink(_ path: String, to length: Int) throws {
    struct TruncateFailed: Error { let errno: Int32 }
    guard Glibc.truncate(path, off_t(length)) == 0 else { throw TruncateFailed(errno: errno) }
}

@Suite("Bad input corpus: files that change while they are served")
struct BadInputCorpusChangingFileTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    static let original = testBytes(count: 2_000_000, seed: 42)

    @Test func aFileThatShrinksDuringAThrottledDownloadEndsShort() async throws {
        let path = server.root.appendingPathComponent("shrinks.bin").path
        try Self.original.write(to: URL(fileURLWithPath: path))
        let download = try await pacedDownload(server, "/shrinks.bin?rate=2MiB", timeout: 5) {
            try shrink(path, to: 100_000)
        }
        let (length, closed, count) = (download.contentLength, download.closed, download.body.count)
        let intact = Data(download.body) == Self.original.prefix(count)
        #expect(length == "2000000")
        // The connection closes short of Content-Length (curl would exit 18), with the
        // original bytes up to there.
        #expect(closed, "the server neither finished nor closed the connection")
        #expect(count < Self.original.count)
        #expect(intact)
        try expectStillServing(server)
    }

    @Test func aFileThatGrowsDuringAThrottledDownloadSendsExactlyTheAnnouncedLength() async throws {
        let path = server.root.appendingPathComponent("grows.bin")
        try Self.original.write(to: path)
        let download = try await pacedDownload(server, "/grows.bin?rate=2MiB", timeout: 10) {
            let handle = try FileHandle(forWritingTo: path)
            try handle.seekToEnd()
            try handle.write(contentsOf: testBytes(count: 1_000_000, seed: 43))
            try handle.close()
        }
        let (length, closed, count) = (download.contentLength, download.closed, download.body.count)
        let intact = Data(download.body) == Self.original
        #expect(length == "2000000")
        #expect(closed)
        #expect(count == Self.original.count)
        #expect(intact)
        try expectStillServing(server)
    }

    @Test func aFileThatShrinksDuringASendfileDownloadEndsShort() async throws {
        // No fault: a file over 64 KiB goes out with sendfile. A 64 MB sparse file, a client
        // that reads a little; the server fills the socket buffers (a few MB) and waits.
        let path = server.root.appendingPathComponent("sparse.bin").path
        let descriptor = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
        #expect(descriptor >= 0 && ftruncate(descriptor, 64_000_000) == 0)
        close(descriptor)
        let download = try await pacedDownload(server, "/sparse.bin", timeout: 2) {
            try shrink(path, to: 100_000)
        }
        let length = download.contentLength
        #expect(length == "64000000")
        // libmicrohttpd's sendfile loop would spin on the short file for ever, neither
        // sending nor closing; the connection watch sees the file shrink and closes the
        // connection within a second: the response ends short of its Content-Length.
        let (closed, count, zeros) = (download.closed, download.body.count, download.body.allSatisfy { $0 == 0 })
        #expect(closed, "after the file shrank the connection stayed open without sending (\(count) body bytes came)")
        #expect(count < 64_000_000)
        #expect(zeros)
        try expectStillServing(server)
    }
}
