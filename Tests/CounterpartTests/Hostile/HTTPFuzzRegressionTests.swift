import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// Requests that `scripts/http-fuzz` (the HTTP-level fuzzer) found mishandled, sent byte for
/// byte over a raw socket, each with the behaviour it must get. The fuzzer's own reproducer
/// is named in each test (`fuzz-artifacts/http/...`, seed and request number).
@Suite("HTTP fuzzer regressions")
struct HTTPFuzzRegressionTests {
    let server: TestServer
    init() throws { server = try TestServer() }

    /// Sends `request` on a new connection and returns the final response.
    private func exchange(_ request: String) throws -> (head: String, body: [UInt8]) {
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(request)
        return try #require(connection.readResponse(), "no answer to \(request.debugDescription)")
    }

    private func text(_ body: [UInt8]) -> String { String(decoding: body, as: UTF8.self) }

    /// A tus `PATCH` of `body` at `offset`, on a new connection.
    private func tusPatch(_ path: String, offset: Int, _ body: String) throws -> (head: String, body: [UInt8]) {
        try exchange("PATCH \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: \(offset)\r\n"
            + "Content-Type: application/offset+octet-stream\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    }

    /// A tus upload of one byte, sent whole: its path (`/files/<id>`).
    private func completedTusUpload(named name: String) throws -> String {
        let create = try exchange("""
            POST /files/ HTTP/1.1\r
            Host: 127.0.0.1\r
            Tus-Resumable: 1.0.0\r
            Upload-Length: 1\r
            Upload-Metadata: filename \(Base64Test.encode(name))\r
            Connection: close\r
            \r

            """)
        #expect(statusCode(of: create.head) == 201, "\(create.head)")
        let location = try #require(headerValue("Location", in: create.head))
        let path = String(location[try #require(location.range(of: "/files/")).lowerBound...])
        let first = try tusPatch(path, offset: 0, "x")
        #expect(statusCode(of: first.head) == 204, "\(first.head)")
        #expect(headerValue("Upload-Offset", in: first.head) == "1")
        return path
    }

    /// http-fuzz seed 1, requests 309.3 and 619.3 (`500-s1-r309.3-tus-patch.bin`): a `PATCH`
    /// at the final offset of a tus upload that is complete got `500` "cannot open the
    /// upload's file: No such file or directory" — the upload's data file went into the
    /// uploads folder when it completed, and the append opened it again. An empty `PATCH`
    /// there changes nothing (`204`, the same offset); bytes past the length are `413`, as
    /// for an upload in progress; the stored file stays as it was.
    @Test func patchAtTheEndOfACompletedTusUpload() throws {
        let path = try completedTusUpload(named: "fuzz-complete.txt")
        #expect(server.eventually { server.uploadedNames().contains("fuzz-complete.txt") })

        let empty = try tusPatch(path, offset: 1, "")
        #expect(statusCode(of: empty.head) == 204, "\(empty.head)\(text(empty.body))")
        #expect(headerValue("Upload-Offset", in: empty.head) == "1")

        let more = try tusPatch(path, offset: 1, "y")
        #expect(statusCode(of: more.head) == 413, "\(more.head)\(text(more.body))")
        #expect(headerValue("Upload-Offset", in: more.head) == "1")

        let status = try exchange("HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nTus-Resumable: 1.0.0\r\nConnection: close\r\n\r\n")
        #expect(statusCode(of: status.head) == 200)
        #expect(headerValue("Upload-Offset", in: status.head) == "1")
        #expect(try server.uploadedData("fuzz-complete.txt") == Data("x".utf8))
        #expect(server.uploadedNames().filter { $0.hasSuffix(".part") }.isEmpty)
    }
}

/// http-fuzz seed 11, 1,800 s: 33 sockets still open in the server after every client had
/// closed. A stalled upload (`Counterpart-Fault: stall=N`) whose client had sent more than
/// the server read, then left, was never noticed: the once-a-second liveness check peeked
/// at the socket, found the unread bytes and not the end of stream behind them, and the
/// connection was held until the server stopped — a descriptor any client could pin.
/// With one connection per client, a new connection from the same address is served only
/// once the stalled one is gone: it must be within a few seconds.
@Suite("HTTP fuzzer regressions: held connections")
struct HTTPFuzzHeldConnectionTests {
    @Test(arguments: [4, 0])
    func aStalledUploadWhoseClientLeftIsCut(threads: Int) throws {
        let server = try TestServer { $0.maxConnectionsPerClient = 1; $0.threads = threads }
        let port = server.server.port
        let stalled = try RawHTTPConnection(port: port)
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 100_000)
        stalled.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
            + "Counterpart-Fault: stall=1000\r\nContent-Length: \(body.count)\r\n\r\n")
        stalled.send(body)
        Thread.sleep(forTimeInterval: 0.3)
        stalled.close()
        let served = waitUntil(seconds: 6) {
            guard let connection = try? RawHTTPConnection(port: port) else { return false }
            connection.send("GET /__counterpart/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return connection.readResponse().flatMap { statusCode(of: $0.head) } == 200
        }
        #expect(served, "the stalled connection is still held")
        #expect(server.uploadedNames().isEmpty || server.uploadedNames().allSatisfy { $0.hasPrefix(".") && !$0.hasSuffix(".part") })
    }
}

/// The same, for requests that crashed the server: these run the `counterpart` command as a
/// process of its own, so that a crash fails the test instead of ending the test run.
@Suite("HTTP fuzzer regressions: crashes")
struct HTTPFuzzCrashRegressionTests {
    /// A `counterpart --port 0` with folders of its own; stopped (SIGTERM) at the end.
    private final class Server {
        let run: CommandRun
        let port: UInt16
        let folder: URL

        init() throws {
            folder = try makeFolder()
            run = try CommandRun(["--port", "0", "--quiet", "--root", folder.appendingPathComponent("public").path,
                                  "--uploads", folder.appendingPathComponent("uploads").path])
            let line = run.firstLine()
            port = try #require(line.split(separator: ":").last.flatMap { UInt16($0) }, "no listening line: \(line)")
        }

        var isRunning: Bool { run.process.isRunning }

        /// Stops it (SIGTERM): how it exited and what it said on stderr (its crash report, if
        /// it crashed).
        @discardableResult
        func stop() -> (status: Int32, stderr: String) {
            if run.process.isRunning { run.process.terminate() }
            let result = run.waitForExit()
            try? FileManager.default.removeItem(at: folder)
            return (result.status, result.stderr)
        }
    }

    /// An IETF upload (interop `version`) with 100 of its 1,000 bytes sent (its length
    /// announced when `announceLength`), then an append at offset 100 with a
    /// `Content-Length` of 2^64 − 1 (saying it completes the upload when `sayComplete`):
    /// the append's answer, and the upload's offset afterwards.
    private func overflowingAppend(version: Int, announceLength: Bool, sayComplete: Bool) throws
        -> (answer: (head: String, body: [UInt8])?, offsetAfter: String?) {
        let server = try Server()
        defer { server.stop() }
        let client = DraftClient(version: version, port: server.port)
        let (body, _) = resumableBody("overflow-\(version).bin", size: 1_000)
        let path = try client.createIncomplete(body, sent: 100, announceLength: announceLength)

        let append = try RawHTTPConnection(port: server.port)
        let type = version >= 6 ? "Content-Type: application/partial-upload\r\n" : ""
        let completeness = sayComplete ? "\(client.completeness(true))\r\n" : ""
        append.send("PATCH \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpload-Draft-Interop-Version: \(version)\r\n"
            + "\(completeness)Upload-Offset: 100\r\n\(type)Content-Length: 18446744073709551615\r\nConnection: close\r\n\r\n")
        let answer = append.readResponse()
        Thread.sleep(forTimeInterval: 0.2)
        try #require(server.isRunning, "the server died: \(server.stop().stderr.split(separator: "\n").prefix(12).joined(separator: "\n"))")
        return (answer, try client.offset(of: path))
    }

    /// http-fuzz seed 1 (`crash-s1-*`; `Swift runtime failure: arithmetic overflow` at
    /// ResumableUploads.swift:211/215, in `append`): an append that says it completes the
    /// upload, at the right offset (not 0), with a `Content-Length` so large that offset +
    /// Content-Length passes 2^64 − 1, killed the server — any client could stop it with
    /// one request. It is 413 before any byte is read; the upload stays where it was.
    @Test(arguments: 3...9)
    func completingAppendWhoseEndOverflows(version: Int) throws {
        let (answer, offset) = try overflowingAppend(version: version, announceLength: false, sayComplete: true)
        #expect(answer.map { statusCode(of: $0.head) } == 413, "\(answer?.head ?? "no answer")")
        #expect(offset == "100")
    }

    /// The same crash one line earlier (ResumableUploads.swift:208, deciding whether the
    /// append completes the upload from its length): an append with no `Upload-Complete`
    /// to an upload whose length is known.
    @Test(arguments: 3...9)
    func appendWhoseEndOverflowsTheKnownLength(version: Int) throws {
        let (answer, offset) = try overflowingAppend(version: version, announceLength: true, sayComplete: false)
        #expect(answer.map { statusCode(of: $0.head) } == 413, "\(answer?.head ?? "no answer")")
        #expect(offset == "100")
    }

    /// http-fuzz seed 12, 30 min: after 25 minutes plain requests began to hang (81 sockets
    /// in CLOSE-WAIT, never read) and the stop aborted: "MHD_stop_daemon() called while we
    /// have suspended connections". libmicrohttpd calls the handler again for the next
    /// chunk of a chunked body after the handler suspended the connection (a `stall` or
    /// `rate` fault); suspending it a second time broke libmicrohttpd's list of suspended
    /// connections. Here: chunked uploads of small chunks under those faults, the stalled
    /// ones' clients leaving; the server must keep answering and stop cleanly.
    @Test func chunkedUploadsHeldByFaultsAreSuspendedOnce() throws {
        let server = try Server()
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"chunks.bin\"\r\n\r\n".utf8)
            + [UInt8](repeating: UInt8(ascii: "x"), count: 20_000) + Array("\r\n--b--\r\n".utf8)
        var chunked: [UInt8] = []
        for start in stride(from: 0, to: body.count, by: 100) {
            let piece = body[start..<min(start + 100, body.count)]
            chunked += Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + Array("\r\n".utf8)
        }
        chunked += Array("0\r\n\r\n".utf8)
        let (port, request) = (server.port, chunked)
        let faults = ["stall=5000", "rate=50000", "stall=300", "rate=100000", "stall=12000", "rate=20000"]
        let calls = faults.map { fault in
            BackgroundCall { () throws -> Int? in
                let connection = try RawHTTPConnection(port: port)
                connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                    + "Transfer-Encoding: chunked\r\nCounterpart-Fault: \(fault)\r\nConnection: close\r\n\r\n")
                connection.send(request)
                if fault.hasPrefix("stall") {
                    Thread.sleep(forTimeInterval: 0.5)
                    connection.close()  // a stalled upload is never answered: its client gives up
                    return nil
                }
                return connection.readResponse().flatMap { statusCode(of: $0.head) }
            }
        }
        for (fault, call) in zip(faults, calls) where fault.hasPrefix("rate") {
            #expect(try call.wait() == 200, "\(fault)")
        }
        let plain = try RawHTTPConnection(port: server.port)
        plain.send("GET /__counterpart/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(plain.readResponse().flatMap { statusCode(of: $0.head) } == 200)
        Thread.sleep(forTimeInterval: 1.5)  // the stalled connections are noticed and cut
        let (status, stderr) = server.stop()
        #expect(status == 0, "\(stderr.split(separator: "\n").suffix(5).joined(separator: "\n"))")
        #expect(!stderr.contains("Fatal error"), "\(stderr)")
    }
}
