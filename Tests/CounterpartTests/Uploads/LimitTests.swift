import Counterpart
import Foundation
import Testing

/// A GET on a raw connection, answered before it returns (the connection stays open).
private func served(_ connection: RawHTTPConnection) -> Int? {
    connection.send("GET /hello.txt HTTP/1.1\r\nHost: limits\r\n\r\n")
    return connection.readResponse().flatMap { statusCode(of: $0.head) }
}

private func withHello(_ root: URL) throws {
    try Data("hello".utf8).write(to: root.appendingPathComponent("hello.txt"))
}

@Suite("Connection limits and timeouts")
struct ConnectionLimitTests {
    /// In the thread pool and with a thread per connection.
    @Test(arguments: [4, 0])
    func aClientPastItsLimitGets503WithAJSONErrorWhileOthersAreServed(threads: Int) throws {
        let server = try TestServer(configure: { $0.maxConnectionsPerClient = 2; $0.threads = threads }, populate: withHello)
        let first = try RawHTTPConnection(port: server.server.port)
        let second = try RawHTTPConnection(port: server.server.port)
        #expect(served(first) == 200)
        #expect(served(second) == 200)

        let third = try RawHTTPConnection(port: server.server.port)
        third.send("GET /hello.txt HTTP/1.1\r\nHost: limits\r\n\r\n")
        let refused = try #require(third.readResponse())
        #expect(statusCode(of: refused.head) == 503)
        #expect(headerValue("Connection", in: refused.head) == "close")
        #expect(headerValue("Retry-After", in: refused.head) == "1")
        #expect(headerValue("Content-Type", in: refused.head)?.hasPrefix("application/json") == true)
        let error = try JSONSerialization.jsonObject(with: Data(refused.body)) as? [String: Any]
        #expect((error?["error"] as? String)?.contains("at most 2 from one client") == true, "\(error ?? [:])")
        #expect(third.closedByServer(within: 2))

        // Another address is another client.
        let elsewhere = try RawHTTPConnection(port: server.server.port, from: "127.0.0.2")
        #expect(served(elsewhere) == 200)

        // Connections given back are connections to use again.
        first.close()
        #expect(server.eventually {
            guard let again = try? RawHTTPConnection(port: server.server.port) else { return false }
            return served(again) == 200
        })
        #expect(served(second) == 200)
    }

    @Test func pastTwiceTheLimitNewConnectionsAreClosedAtOnce() throws {
        let server = try TestServer(configure: { $0.maxConnectionsPerClient = 1 }, populate: withHello)
        let first = try RawHTTPConnection(port: server.server.port)
        #expect(served(first) == 200)
        let second = try RawHTTPConnection(port: server.server.port)
        #expect(!second.closedByServer(within: 0.3), "the second connection is held, to be answered 503")
        let third = try RawHTTPConnection(port: server.server.port)
        #expect(third.closedByServer(within: 2))
        #expect(served(first) == 200)
    }

    @Test(arguments: [4, 0])
    func aHeadTrickledByteByByteIsCutAtTheHeadTimeoutWhileOthersAreServed(threads: Int) throws {
        let server = try TestServer(configure: { $0.headTimeout = 1; $0.threads = threads }, populate: withHello)
        let slow = try RawHTTPConnection(port: server.server.port)
        let start = Date()
        slow.send("GET /hello.txt HTTP/1.1\r\n")
        var cut = false
        for line in 0..<40 where !cut {
            slow.send("X-Trickle-\(line): x\r\n")
            #expect(try curl([server.url("/hello.txt")]).status == 200)
            cut = slow.closedByServer(within: 0.1)
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(cut)
        #expect(elapsed >= 0.9 && elapsed < 4, "cut after \(elapsed) s")
    }

    @Test func aSlowBodyAfterAPromptHeadIsNotCut() throws {
        let server = try TestServer { $0.headTimeout = 1 }
        let body = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"slow.txt\"\r\n\r\nslowly\r\n--b--\r\n".utf8)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send("POST /upload HTTP/1.1\r\nHost: limits\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                        + "Content-Length: \(body.count)\r\n\r\n")
        let pieces = stride(from: 0, to: body.count, by: body.count / 4 + 1).map { Array(body[$0..<min($0 + body.count / 4 + 1, body.count)]) }
        for piece in pieces {
            Thread.sleep(forTimeInterval: 0.6)
            connection.send(piece)
        }
        let response = try #require(connection.readResponse())
        #expect(statusCode(of: response.head) == 200)
        #expect(server.uploadedNames() == ["slow.txt"])
    }

    @Test func aSilentConnectionIsClosedAfterTheIdleTimeout() throws {
        let server = try TestServer(configure: { $0.connectionTimeout = 1; $0.headTimeout = 0 }, populate: withHello)
        let connection = try RawHTTPConnection(port: server.server.port)
        #expect(served(connection) == 200)
        #expect(connection.closedByServer(within: 4))
    }
}

@Suite("Free-disk guard")
struct FreeDiskTests {
    /// Bytes available on the filesystem of `path`.
    static func available(_ path: String) -> UInt64 {
        var info = statvfs()
        _ = statvfs(path, &info)
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    @Test func anUploadThatWouldGoBelowTheFreeSpaceKeptGets507BeforeItsBody() throws {
        let server = try TestServer(configure: { $0.minFreeDiskBytes = 1 << 60 }, populate: withHello)
        let file = server.root.appendingPathComponent("hello.txt").path
        let result = try curl(["-F", "file=@\(file)", server.url("/upload")])
        #expect(result.status == 507)
        #expect((try result.json()["error"] as? String)?.contains("keeps free") == true, "\(result.text)")
        #expect(server.uploadedNames().isEmpty)
        // tus and the IETF protocol keep the same space.
        let tus = try curl(["-X", "POST", "-H", "Tus-Resumable: 1.0.0", "-H", "Upload-Length: 10", server.url("/files")])
        #expect(tus.status == 507)
        let ietf = try curl(["-H", "Upload-Draft-Interop-Version: 6", "-H", "Upload-Complete: ?0",
                             "-F", "file=@\(file)", server.url("/upload")])
        #expect(ietf.status == 507)
        #expect(server.uploadedNames().isEmpty)
        // Downloads go on.
        #expect(try curl([server.url("/hello.txt")]).text == "hello")
    }

    @Test func anUploadThatGoesBelowItMidBodyGets507AndLeavesNothing() throws {
        let probe = FileManager.default.temporaryDirectory.path
        // Keep all but 2 MiB free: a 48 MiB upload without Content-Length passes the head
        // check and is stopped as it streams (it stays under the 64 MiB the server drains
        // after its answer). The disk is shared: tests running beside this one free space as
        // they clean up, sometimes more than the upload takes. Such a try proves nothing
        // (the upload never went below the mark), so it is tried again with the room measured
        // anew; every try that did go below must get 507.
        var outcomes: [String] = []
        for _ in 0..<5 {
            let kept = Self.available(probe) - (2 << 20)
            let server = try TestServer { $0.minFreeDiskBytes = kept }
            let result = try curl(["-H", "Transfer-Encoding: chunked", "-F", "file=@-;filename=big.bin", server.url("/upload")],
                                  stdin: testBytes(count: 48 << 20))
            if result.status == 200, Self.available(probe) > kept {
                outcomes.append("200 while other tests freed space")
                continue
            }
            #expect(result.status == 507, "\(result.text)")
            #expect(server.eventually { server.uploadedNames().isEmpty }, "left behind: \(server.uploadedNames())")
            return
        }
        Issue.record("the upload never went below the free space kept: \(outcomes)")
    }
}
