import Counterpart
import Foundation
import Testing

// Short forms of the many-clients scenarios of `scripts/stress` (slow heads, idle
// keep-alive connections, slow bodies), on real sockets with small limits.

private func withHello(_ root: URL) throws {
    try Data("hello".utf8).write(to: root.appendingPathComponent("hello.txt"))
}

/// A GET on a raw connection, answered before it returns (the connection stays open).
private func served(_ connection: RawHTTPConnection) -> Int? {
    connection.send("GET /hello.txt HTTP/1.1\r\nHost: many\r\n\r\n")
    return connection.readResponse().flatMap { statusCode(of: $0.head) }
}

/// The start of a head that never ends.
private let unfinishedHead = "GET /hello.txt HTTP/1.1\r\nHost: many\r\nX-a: "

private func multipart(_ name: String, _ content: [UInt8]) -> (head: String, body: [UInt8]) {
    let body = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"\(name)\"\r\n\r\n".utf8) + content
        + Array("\r\n--b--\r\n".utf8)
    let head = "POST /upload HTTP/1.1\r\nHost: many\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: \(body.count)\r\n\r\n"
    return (head, body)
}

@Suite("Many clients: slow heads, idle connections, slow bodies")
struct ManyClientsTests {
    @Test(arguments: [2, 0])
    func aHeadSlowerThanTheMinimumRateIsClosedAfterItsGraceWhileOthersAreServed(threads: Int) throws {
        let server = try TestServer(configure: { $0.headGrace = 1; $0.minHeadRate = 100; $0.threads = threads }, populate: withHello)
        let slow = try RawHTTPConnection(port: server.server.port)
        let start = Date()
        slow.send(unfinishedHead)
        #expect(try curl([server.url("/hello.txt")]).status == 200)
        #expect(slow.closedByServer(within: 5))
        let elapsed = Date().timeIntervalSince(start)
        // The grace (1 s) and the 41 bytes' worth at 100 B/s, checked every quarter second.
        #expect(elapsed >= 1.3 && elapsed < 3, "closed after \(elapsed) s")
    }

    /// The watch starts when libmicrohttpd accepts the connection, before its handshake.
    @Test func aTLSHandshakeThatNeverFinishesIsASlowHead() throws {
        let credentials = try TLSCredentials.selfSigned()
        let server = try TestServer(configure: { $0.tls = credentials; $0.headGrace = 1; $0.minHeadRate = 100 }, populate: withHello)
        let stuck = try RawHTTPConnection(port: server.server.port)
        let start = Date()
        // The first bytes of a ClientHello: a handshake record, then nothing more.
        stuck.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03])
        #expect(stuck.closedByServer(within: 5))
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed >= 1 && elapsed < 3, "closed after \(elapsed) s")
        #expect(try curl(["-k", server.url("/hello.txt")]).status == 200)
    }

    @Test func aHeadTrickledFasterThanTheMinimumRateIsServed() throws {
        let server = try TestServer(configure: { $0.headGrace = 1; $0.minHeadRate = 100 }, populate: withHello)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send("GET /hello.txt HTTP/1.1\r\nHost: many\r\n")
        // 40 bytes every 0.2 s: 200 B/s for 2.4 s, past the grace and at twice the minimum.
        for line in 0..<12 {
            Thread.sleep(forTimeInterval: 0.2)
            connection.send("X-Trickle-\(String(format: "%02d", line)): " + String(repeating: "a", count: 24) + "\r\n")
        }
        connection.send("\r\n")
        let response = try #require(connection.readResponse())
        #expect(statusCode(of: response.head) == 200)
    }

    @Test func anIdleKeepAliveConnectionIsNotASlowHead() throws {
        let server = try TestServer(configure: { $0.headGrace = 1; $0.minHeadRate = 100 }, populate: withHello)
        let connection = try RawHTTPConnection(port: server.server.port)
        #expect(served(connection) == 200)
        #expect(!connection.closedByServer(within: 2.5), "idle for 2.5 s, past the head grace")
        #expect(served(connection) == 200)
    }

    /// Without eviction the new client would wait for the head timeout (30 s): every
    /// connection the server takes holds an unfinished head.
    @Test(arguments: [2, 0])
    func nearTheConnectionLimitUnfinishedHeadsAreClosedOldestFirstAndABodyOnItsWayIsNot(threads: Int) throws {
        let server = try TestServer(configure: {
            $0.maxConnections = 40
            $0.minHeadRate = 0
            $0.threads = threads
        }, populate: withHello)
        let (head, body) = multipart("kept.txt", Array(repeating: UInt8(ascii: "k"), count: 2_000))
        let upload = try RawHTTPConnection(port: server.server.port)
        upload.send(head)
        upload.send(Array(body[..<1_000]))

        var slow: [RawHTTPConnection] = []
        for _ in 0..<60 {
            let connection = try RawHTTPConnection(port: server.server.port, from: "127.0.0.2")
            connection.send(unfinishedHead)
            slow.append(connection)
        }
        // In the pool the new connection waits in the listen queue; with a thread per
        // connection libmicrohttpd closes a connection past its limit at once, so the client
        // tries again.
        let start = Date()
        #expect(server.eventually { (try? curl([server.url("/hello.txt")]))?.status == 200 })
        let waited = Date().timeIntervalSince(start)
        #expect(waited < 5, "the new client waited \(waited) s")
        #expect(slow[0].closedByServer(within: 3), "the oldest unfinished head is closed")

        upload.send(Array(body[1_000...]))
        let response = try #require(upload.readResponse())
        #expect(statusCode(of: response.head) == 200)
        #expect(server.uploadedNames() == ["kept.txt"])
    }

    @Test func nearTheConnectionLimitIdleKeepAliveConnectionsAreClosedOldestFirst() throws {
        let server = try TestServer(configure: { $0.maxConnections = 40; $0.threads = 2 }, populate: withHello)
        var idle: [RawHTTPConnection] = []
        for _ in 0..<30 {
            let connection = try RawHTTPConnection(port: server.server.port)
            #expect(served(connection) == 200)
            idle.append(connection)
        }
        // Silent for longer than the eviction's minimum, so that age decides.
        Thread.sleep(forTimeInterval: 0.5)
        for _ in 0..<8 {
            let connection = try RawHTTPConnection(port: server.server.port)
            #expect(served(connection) == 200)
            idle.append(connection)
        }
        // 38 open of 40: past 90 % (36), the longest idle go until 18 are left.
        #expect(try curl([server.url("/hello.txt")]).status == 200)
        #expect(idle[0].closedByServer(within: 3), "the oldest idle connection is closed")
        #expect(served(idle[37]) == 200, "the newest idle connection is kept")
    }

    @Test func aBodySlowerThanTheMinimumRateGets408AndNothingIsStored() throws {
        let server = try TestServer { $0.minBodyRate = 1_000; $0.bodyRateWindow = 1 }
        let (head, body) = multipart("slow.bin", Array(repeating: UInt8(ascii: "s"), count: 10_000))
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(head)
        connection.send(Array(body[..<200]))
        let response = try #require(connection.readResponse())
        #expect(statusCode(of: response.head) == 408)
        #expect(String(decoding: response.body, as: UTF8.self).contains("--min-body-rate"))
        #expect(connection.closedByServer(within: 2))
        #expect(server.eventually { server.uploadedNames().isEmpty })
        let journal = try curl([server.url("/__counterpart/requests?path=/upload")])
        let requests = (try JSONSerialization.jsonObject(with: journal.body) as? [String: Any])?["requests"] as? [[String: Any]]
        #expect(requests?.compactMap { $0["status"] as? Int } == [408], "the journal says 408")
    }

    @Test func aBodyAtAFairRateIsNotCut() throws {
        let server = try TestServer { $0.minBodyRate = 1_000; $0.bodyRateWindow = 1 }
        let (head, body) = multipart("fair.bin", Array(repeating: UInt8(ascii: "f"), count: 6_000))
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(head)
        // 500 bytes every 0.2 s: 2,500 B/s for 2.4 s, over two whole windows.
        for start in stride(from: 0, to: body.count, by: 500) {
            connection.send(Array(body[start..<min(start + 500, body.count)]))
            Thread.sleep(forTimeInterval: 0.2)
        }
        let response = try #require(connection.readResponse())
        #expect(statusCode(of: response.head) == 200)
        #expect(server.uploadedNames() == ["fair.bin"])
    }

    @Test func theServersOwnRateFaultIsNotTheClientsSlowness() throws {
        let server = try TestServer { $0.minBodyRate = 100_000; $0.bodyRateWindow = 1 }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("many-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("throttled.bin").path
        try Data(repeating: 7, count: 150_000).write(to: URL(fileURLWithPath: path))
        // The server reads it at 50 KB/s, half the minimum, for some 3 s.
        let result = try curl(["-F", "f=@\(path)", server.url("/upload?rate=50000")])
        #expect(result.status == 200)
        #expect(server.uploadedNames() == ["throttled.bin"])
    }

    @Test func aSlowResumableAppendGets408AndTheUploadStaysResumable() throws {
        let server = try TestServer { $0.minBodyRate = 1_000; $0.bodyRateWindow = 1 }
        let created = try RawHTTPConnection.exchange(port: server.server.port, Array((
            "POST /files HTTP/1.1\r\nHost: many\r\nTus-Resumable: 1.0.0\r\nUpload-Length: 4000\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").utf8))
        #expect(statusCode(of: created.head) == 201)
        let location = try #require(headerValue("Location", in: created.head))
        let path = location.hasPrefix("http") ? (URL(string: location)?.path ?? location) : location

        let append = try RawHTTPConnection(port: server.server.port)
        append.send("PATCH \(path) HTTP/1.1\r\nHost: many\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\n"
                    + "Content-Type: application/offset+octet-stream\r\nContent-Length: 4000\r\n\r\n")
        append.send(Array(repeating: UInt8(ascii: "r"), count: 300))
        let cut = try #require(append.readResponse())
        #expect(statusCode(of: cut.head) == 408)

        // The cut append lets go of the upload once libmicrohttpd has seen the connection
        // close; a client asks for the offset and resumes from it, again if it was too soon.
        var kept: Int?
        let resumed = server.eventually {
            guard let offset = try? RawHTTPConnection.exchange(port: server.server.port, Array((
                "HEAD \(path) HTTP/1.1\r\nHost: many\r\nTus-Resumable: 1.0.0\r\nConnection: close\r\n\r\n").utf8)),
                  let at = headerValue("Upload-Offset", in: offset.head).flatMap({ Int($0) }) else { return false }
            kept = at
            let rest = Array(repeating: UInt8(ascii: "r"), count: 4000 - at)
            let answer = try? RawHTTPConnection.exchange(port: server.server.port, Array((
                "PATCH \(path) HTTP/1.1\r\nHost: many\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: \(at)\r\n"
                + "Content-Type: application/offset+octet-stream\r\nContent-Length: \(rest.count)\r\nConnection: close\r\n\r\n").utf8) + rest)
            return answer.flatMap { statusCode(of: $0.head) } == 204
        }
        #expect(resumed, "resumed from the offset the server kept")
        #expect((kept ?? .max) <= 300)
    }
}
