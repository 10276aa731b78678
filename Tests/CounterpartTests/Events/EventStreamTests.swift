import Counterpart
import Foundation
import Testing

/// `/__counterpart/events` read by real clients (curl, Python's http.client, a socket that
/// stops reading), and the same events as an AsyncSequence on the embedded server.
@Suite("The event stream")
struct EventStreamTests {
    /// One SSE event as a client reads it.
    struct ReadEvent {
        var id: UInt64?
        var name: String
        var data: [String: Any]
    }

    /// The events in SSE text (blocks separated by an empty line; comments and `retry` skipped).
    static func parse(_ text: String) throws -> [ReadEvent] {
        var events: [ReadEvent] = []
        for block in text.components(separatedBy: "\n\n") {
            var id: UInt64?
            var name = "message"
            var data: [String] = []
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = UInt64(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data.append(String(line.dropFirst(6))) }
            }
            guard !data.isEmpty else { continue }
            let object = try #require(try JSONSerialization.jsonObject(with: Data(data.joined(separator: "\n").utf8)) as? [String: Any])
            events.append(ReadEvent(id: id, name: name, data: object))
        }
        return events
    }

    /// `curl -N` on the stream, in the background, until `stop()`.
    final class CurlReader: @unchecked Sendable {
        let process = Process()
        private let output = Pipe()
        private let read: BackgroundRead

        init(_ url: String, headers: [String] = []) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments = ["-sN"] + headers.flatMap { ["-H", $0] } + [url]
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            read = BackgroundRead(output.fileHandleForReading)
        }

        /// Waits, 10 s at most, until what has arrived satisfies `condition`: a reader on a
        /// machine busy with other tests may be a second behind.
        func waitFor(_ condition: (String) -> Bool) -> Bool {
            waitUntil(seconds: 10) { condition(read.soFar) }
        }

        /// What has arrived until now.
        var received: String { read.soFar }

        /// Waits until the event with `id` has arrived among the last events (the last MB).
        func waitFor(id: UInt64) -> Bool {
            waitUntil(seconds: 10) { read.tail(1 << 20).contains("\nid: \(id)\n") }
        }

        func stop() -> String {
            // SIGKILL: the test process's children start with SIGTERM blocked.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return read.wait()
        }
    }

    @Test func curlReadsTheEventsWithIdsAndRedactedHeaders() throws {
        let server = try TestServer(serving: ["a.txt": Data("hello".utf8)])
        let reader = try CurlReader(server.url("/__counterpart/events"))
        #expect(waitUntil { server.server.events.listening == 1 })
        let first = server.server.events.nextID
        // Each step waits for its event: a request's is published when the server has
        // finished it, a moment after curl has read the answer.
        _ = try curl(["-H", "Authorization: Bearer twelve-chars", server.url("/a.txt")])
        #expect(waitUntil { server.server.events.nextID == first + 1 })
        _ = try curl([server.url("/missing")])
        #expect(waitUntil { server.server.events.nextID == first + 2 })
        try server.server.faults.arm(path: "/a.txt", fault: "status=503", times: 1)
        _ = try curl([server.url("/a.txt")])
        #expect(waitUntil { server.server.events.nextID >= first + 5 })
        #expect(reader.waitFor(id: first + 4))
        let events = try Self.parse(reader.stop())

        #expect(events.first?.name == "snapshot")
        #expect(events.first?.id == first - 1, "the snapshot's id is the last event's before the stream")
        let after = Array(events.dropFirst())
        #expect(after.map(\.id) == (first..<first + UInt64(after.count)).map { Optional($0) }, "ids one apart: \(after.map(\.id))")
        #expect(after.map(\.name) == ["request", "request", "rule", "rule", "request"])
        let secret = after[0].data
        #expect(secret["path"] as? String == "/a.txt")
        let headers = try #require(secret["headers"] as? [[String]])
        #expect(headers.contains(["Authorization", "<redacted 19 bytes>"]), "\(headers)")
        #expect(after[1].data["status"] as? Int == 404)
        #expect((after[2].data["rule"] as? [String: Any])?["remaining"] as? Int == 1)
        #expect(after[3].data["change"] as? String == "fired")
        #expect((after[3].data["rule"] as? [String: Any])?["remaining"] as? Int == 0)
        #expect(after[4].data["status"] as? Int == 503)
        #expect((after[4].data["fault"] as? [String: Any])?["rule"] as? Int == 1)
    }

    @Test func pythonResumesWithLastEventIDWithoutAGap() throws {
        let server = try TestServer(configure: { $0.eventBacklog = 16 })
        let run = try runCommand("/usr/bin/python3", [repositoryRoot.appendingPathComponent("Tests/Events/sse_resume.py").path,
                                                       server.url(""), "16"])
        #expect(run.status == 0, "\(run.output)")
        let report = try #require(run.output.split(separator: "\n").last { $0.hasPrefix("{") })
        print("sse_resume.py: \(report)")
    }

    /// `?requests=latest`, the live page's stream: above its rate (10 a second here), of the
    /// request events read at once only the newest go out, after a `skipped` event that
    /// counts the others; the other events all go out, in their order. The default stream,
    /// from the same place, has every one (and while one listens, the server keeps every
    /// request as an event).
    @Test func theLatestStreamSkipsTheOlderRequestsAboveItsRate() throws {
        let server = try TestServer(configure: { $0.latestRequestsPerSecond = 10 }, serving: ["a.txt": Data("hello".utf8)])
        let listener = try CurlReader(server.url("/__counterpart/events"))
        #expect(waitUntil { server.server.events.listening == 1 })
        let first = server.server.events.nextID
        // 25 requests, a rule armed, 15 requests: 41 events, ids first..<first + 41.
        try Self.get(server.url("/a.txt"), times: 25)
        #expect(waitUntil { server.server.events.nextID == first + 25 })
        try server.server.faults.arm(path: "/never", fault: "status=503", times: 1)
        try Self.get(server.url("/a.txt"), times: 15)
        #expect(waitUntil { server.server.events.nextID == first + 41 })

        // Resumed from before them, each stream reads the 41 at once.
        let latest = try CurlReader(server.url("/__counterpart/events?requests=latest"), headers: ["Last-Event-ID: \(first - 1)"])
        let all = try CurlReader(server.url("/__counterpart/events?requests=all"), headers: ["Last-Event-ID: \(first - 1)"])
        #expect(waitUntil { server.server.events.listening == 3 })
        #expect(latest.waitFor(id: first + 40) && all.waitFor(id: first + 40))
        let thinned = try Self.parse(latest.stop())
        let every = try Self.parse(all.stop())
        _ = listener.stop()

        #expect(every.map(\.id) == (first..<first + 41).map { Optional($0) }, "\(every.map(\.id))")
        #expect(thinned.map(\.name) == ["skipped", "rule"] + Array(repeating: "request", count: 10), "\(thinned.map(\.name))")
        guard thinned.count == 12 else { return }
        #expect(thinned[0].id == nil, "a skipped event has no id: a client that comes back goes on from the last it was sent")
        #expect(thinned[0].data["requests"] as? Int == 30, "the 25 before the rule and 5 after it")
        #expect(thinned[0].data.count == 1, "\(thinned[0].data)")
        #expect(thinned[1].id == first + 25)
        #expect(thinned.dropFirst(2).map(\.id) == (first + 31..<first + 41).map { Optional($0) })

        let wrong = try curl(["--max-time", "2", server.url("/__counterpart/events?requests=some")])
        #expect(wrong.status == 400)
        #expect(String(decoding: wrong.body, as: UTF8.self).contains("requests=latest"))
    }

    /// A steady stream of requests above the rate, with only `requests=latest` streams
    /// listening: the server keeps no more of them as events than the rate allows (a second's
    /// worth at once, then 10 a second), and each request is either sent or counted in a
    /// `skipped` event, which comes even when no request follows.
    @Test func theLatestStreamKeepsToItsRateUnderASteadyStream() throws {
        let server = try TestServer(configure: { $0.latestRequestsPerSecond = 10 }, serving: ["a.txt": Data("hello".utf8)])
        let opened = Date()
        let reader = try CurlReader(server.url("/__counterpart/events?requests=latest"))
        #expect(waitUntil { server.server.events.listening == 1 })
        let first = server.server.events.nextID
        try Self.get(server.url("/a.txt"), times: 60, extra: ["--rate", "100/s"])
        #expect(server.server.journal.waitForRequests(path: "/a.txt", count: 60).count == 60)
        let elapsed = Date().timeIntervalSince(opened)
        let kept = Int(server.server.events.nextID - first)
        #expect(kept <= 10 + Int(elapsed * 10) + 1, "\(kept) kept as events in \(elapsed) s at 10 a second")
        #expect(reader.waitFor { Self.sentAndSkipped(in: $0) == 60 }, "every request sent or counted")
        let events = try Self.parse(reader.stop())
        let sent = events.filter { $0.name == "request" }.count
        let skipped = Self.skippedRequests(in: events)
        #expect(sent + skipped == 60, "\(sent) sent, \(skipped) skipped")
        #expect(sent <= kept && skipped > 0, "\(sent) sent, \(skipped) skipped, \(kept) kept")
    }

    /// Under a flood the page's stream sends in batches, a few dozen times a second at most
    /// (every 25 ms at most), not one request each time its allowance has grown
    /// by one (a thousand suspensions a second): each `skipped` event ends a batch.
    @Test func theLatestStreamSendsAFloodInBatches() throws {
        // A rate a debug build's flood is well above, whose next request's worth (10 ms) is
        // shorter than a batch's pause.
        let server = try TestServer(configure: { $0.latestRequestsPerSecond = 100; $0.journalCapacity = 4_000 },
                                    serving: ["a.txt": Data("hello".utf8)])
        let reader = try CurlReader(server.url("/__counterpart/events?requests=latest"))
        #expect(waitUntil { server.server.events.listening == 1 })
        let first = server.server.events.nextID
        let started = Date()
        try Self.get(server.url("/a.txt"), times: 4_000)
        #expect(server.server.journal.waitForRequests(path: "/a.txt", count: 4_000).count == 4_000)
        #expect(server.server.events.nextID - first < 4_000, "the server kept fewer as events")
        #expect(reader.waitFor { Self.sentAndSkipped(in: $0) == 4_000 }, "every request sent or counted")
        let elapsed = Date().timeIntervalSince(started)
        let events = try Self.parse(reader.stop())
        let batches = events.filter { $0.name == "skipped" }
        let sent = events.filter { $0.name == "request" }.count
        let skipped = Self.skippedRequests(in: events)
        #expect(sent + skipped == 4_000, "\(sent) sent, \(skipped) skipped")
        let batchPause = 25  // ms: the server's `EventsEndpoint.latestBatchPause`
        // Twice that: a read that finds fewer requests than its allowance ends its batch
        // without a pause. One request at a time would be twenty times as many.
        let most = 2 * Int(elapsed * 1_000) / batchPause + 4
        #expect(batches.count <= most, "\(batches.count) batches in \(elapsed) s")
        #expect(!batches.isEmpty, "the flood, \(4_000 / elapsed) requests a second, was not above the rate")
    }

    /// The requests the `skipped` events among `events` count.
    static func skippedRequests(in events: [ReadEvent]) -> Int {
        events.filter { $0.name == "skipped" }.reduce(0) { $0 + ($1.data["requests"] as? Int ?? 0) }
    }

    /// The requests sent and counted as skipped in the SSE `text` so far (its whole events).
    static func sentAndSkipped(in text: String) -> Int {
        guard let end = text.range(of: "\n\n", options: .backwards),
              let events = try? parse(String(text[..<end.upperBound])) else { return 0 }
        return events.filter { $0.name == "request" }.count + skippedRequests(in: events)
    }

    /// GETs of `url`, `times` over one connection, the bodies dropped.
    static func get(_ url: String, times: Int, extra: [String] = []) throws {
        let result = try curl(extra + [url] + (1..<times).flatMap { _ in ["-o", "/dev/null", url] })
        #expect(result.exitCode == 0)
    }

    /// Ids start from the server's start time: an id a client kept from a server that has
    /// since restarted is older than anything this one has, and gets a fresh snapshot.
    @Test func anIdFromBeforeARestartIsNotResumed() throws {
        let server = try TestServer()
        #expect(server.server.events.nextID > 1_700_000_000_000_000, "\(server.server.events.nextID)")
        let reader = try CurlReader(server.url("/__counterpart/events"), headers: ["Last-Event-ID: 41"])
        #expect(reader.waitFor { $0.contains("event: snapshot\n") })
        let events = try Self.parse(reader.stop())
        #expect(events.first?.name == "snapshot")
        #expect(events.first?.data["resumed"] as? Bool == false)
        #expect(events.first?.data["lastEventId"] as? Int == 41)
    }

    @Test func manyReadersGetTheSameEvents() throws {
        let server = try TestServer(serving: ["a.txt": Data("hello".utf8)])
        let readers = try (0..<20).map { _ in try CurlReader(server.url("/__counterpart/events")) }
        #expect(waitUntil(seconds: 10) { server.server.events.listening == 20 })
        let first = server.server.events.nextID
        for _ in 0..<5 { _ = try curl([server.url("/a.txt")]) }
        #expect(waitUntil { server.server.events.nextID == first + 5 })
        #expect(readers.allSatisfy { $0.waitFor(id: first + 4) })
        for reader in readers {
            let events = try Self.parse(reader.stop()).filter { $0.name == "request" }
            #expect(events.map(\.id) == (first..<first + 5).map { Optional($0) })
        }
        #expect(waitUntil { server.server.events.listening == 0 })
    }

    /// A stream idle long enough to pause 100 ms between looks is woken by the next event
    /// (`ServerEvents.wakeOnNext`): the event arrives in milliseconds, not after the rest of
    /// the pause (half of it at the median), so that a flood that starts after a quiet spell
    /// does not pass the backlog before the stream looks.
    @Test func anIdleStreamIsWokenByTheNextEvent() throws {
        let server = try TestServer()
        let socket = try connectedSocket(port: server.server.port)
        defer { close(socket) }
        let request = "GET /__counterpart/events HTTP/1.1\r\nHost: x\r\n\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        /// Milliseconds until something arrives (nil: nothing within 2 s), what came read.
        func arrival() -> Double? {
            let start = ContinuousClock.now
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 2_000) == 1, recv(socket, &chunk, chunk.count, 0) > 0 else { return nil }
            let waited = ContinuousClock.now - start
            return Double(waited.components.seconds) * 1e3 + Double(waited.components.attoseconds) / 1e15
        }
        #expect(arrival() != nil, "the head and the snapshot")
        var delays: [Double] = []
        for trial in 0..<9 {
            // Quiet for long enough that the stream pauses 100 ms at a time (5, 10, 20, 40,
            // 80, then 100 ms: 155 ms).
            Thread.sleep(forTimeInterval: 0.4)
            while recv(socket, &chunk, chunk.count, Int32(MSG_DONTWAIT)) > 0 {}  // anything left over
            try server.server.faults.arm(path: "/trial-\(trial)", fault: "status=503", times: 1)
            delays.append(try #require(arrival(), "trial \(trial): the rule's event"))
        }
        let median = delays.sorted()[delays.count / 2]
        // Without the wake, the median is half the pause or more (56 ms when measured); the
        // bound leaves room for a machine busy with other tests.
        #expect(median < 40, "milliseconds from the event to its arrival: \(delays)")
    }

    /// A client that stops reading: the events it has not read pile up in its socket, then
    /// the backlog passes it by and it is dropped (its connection shut); uploads go on at
    /// their pace throughout, and a client that reads stays.
    @Test func aReaderThatStopsReadingIsDroppedWhileUploadsGoOn() throws {
        // The backlog's 320 events of 24 KB are 7.7 MB, under its byte bound: a reader may be
        // a second behind under this flood (on a machine busy with other tests) and stay.
        let server = try TestServer(configure: { $0.eventBacklog = 320 })
        let reading = try CurlReader(server.url("/__counterpart/events"))
        let stuck = try Self.smallWindowSocket(port: server.server.port)
        defer { close(stuck) }
        let request = "GET /__counterpart/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        #expect(request.withCString { send(stuck, $0, strlen($0), Int32(MSG_NOSIGNAL)) } > 0)
        #expect(waitUntil { server.server.events.listening == 2 })

        let file = server.root.appendingPathComponent("part.bin")
        try testBytes(count: 2_000).write(to: file)
        let started = ContinuousClock.now
        // Each request's event carries a 24 KB header: the 1,000 events are 24 MB, three times
        // what the stuck reader's socket buffers (which grow to 4 MB at most) and the backlog
        // hold together.
        let padding = "X-Padding: " + String(repeating: "a", count: 24_000)
        let uploads = try runCommand("/usr/bin/curl", ["-s", "-w", "%{http_code}\n", "-H", padding, "-F", "file=@\(file.path)"]
            + Array(repeating: ["-o", "/dev/null", server.url("/upload")], count: 1000).flatMap { $0 })
        let took = ContinuousClock.now - started
        let statuses = uploads.output.split(separator: "\n")
        #expect(statuses.count == 1000 && statuses.allSatisfy { $0 == "200" }, "\(statuses.filter { $0 != "200" }.prefix(5))")
        #expect(took < .seconds(30), "1,000 uploads took \(took)")
        #expect(waitUntil { server.server.events.listening == 1 }, "the stuck reader was not dropped: \(server.server.events.listening)")

        // What it had not read is still there to read, then the stream ends.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(stuck, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 65536)
        var received = 0
        while true {
            let count = recv(stuck, &buffer, buffer.count, 0)
            if count <= 0 {
                #expect(count == 0 || errno == ECONNRESET, "the dropped stream did not end (errno \(errno))")
                break
            }
            received += count
        }
        #expect(received > 0)
        // The journal holds the newest 16 MB of requests (fewer than 1,000 here), numbered from 1.
        #expect(waitUntil { server.server.journal.requests().last?.sequence == 1000 })
        #expect(reading.waitFor(id: server.server.events.nextID - 1), "the last event reaches the reading client")
        let read = try Self.parse(reading.stop()).filter { $0.name == "request" }
        #expect(read.count == 1000, "the reading client got \(read.count) of the 1,000 uploads")
    }

    /// A socket with a small receive window, connected to the server.
    static func smallWindowSocket(port: UInt16) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var size: Int32 = 4096
        setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "cannot connect to port \(port)")
        return socket
    }

    /// Until someone listens, requests are not kept as events (no one holds an id to come
    /// back with; the journal has them); from the first listener on they are, and stay kept
    /// when that listener has gone, for it to come back with `Last-Event-ID`.
    @Test func requestsAreKeptAsEventsFromTheFirstListenerOn() throws {
        let server = try TestServer(serving: ["a.txt": Data("hello".utf8)])
        let before = server.server.events.nextID
        for _ in 0..<3 { _ = try curl([server.url("/a.txt")]) }
        #expect(server.server.journal.waitForRequests(path: "/a.txt", method: "GET", count: 3).count == 3)
        #expect(server.server.events.nextID == before)
        let reader = try CurlReader(server.url("/__counterpart/events"))
        #expect(waitUntil { server.server.events.listening == 1 })
        _ = reader.stop()
        #expect(waitUntil { server.server.events.listening == 0 })
        _ = try curl([server.url("/a.txt")])
        #expect(waitUntil { server.server.events.nextID == before + 1 })
        let resumed = try CurlReader(server.url("/__counterpart/events"), headers: ["Last-Event-ID: \(before - 1)"])
        #expect(resumed.waitFor(id: before))
        // Resumed: no snapshot, the one request since.
        let events = try Self.parse(resumed.stop())
        #expect(events.map(\.name) == ["request"])
        #expect(events.first?.id == before)
    }

    /// Once nobody has listened for the grace, requests are no longer kept as events (the
    /// server pays nothing for them again), and a client that comes back with an id from
    /// before is told it missed some: a snapshot, not a resume.
    @Test func afterTheGraceRequestsAreNoLongerKept() throws {
        let server = try TestServer(configure: { $0.requestEventGrace = 3 }, serving: ["a.txt": Data("hello".utf8)])
        let reader = try CurlReader(server.url("/__counterpart/events"))
        #expect(waitUntil { server.server.events.listening == 1 })
        let first = server.server.events.nextID
        _ = try curl([server.url("/a.txt")])
        #expect(waitUntil { server.server.events.nextID == first + 1 })
        #expect(reader.waitFor(id: first))
        let seen = try Self.parse(reader.stop()).filter { $0.name == "request" }
        #expect(seen.map(\.id) == [first])
        #expect(waitUntil { server.server.events.listening == 0 })
        // Within the grace: still kept.
        _ = try curl([server.url("/a.txt")])
        #expect(waitUntil { server.server.events.nextID == first + 2 })
        Thread.sleep(forTimeInterval: 3.2)
        // After it: the next request ends the keeping (and skips an id), those after are not kept.
        for _ in 0..<3 { _ = try curl([server.url("/a.txt")]) }
        #expect(server.server.journal.waitForRequests(path: "/a.txt", method: "GET", count: 5).count == 5)
        #expect(waitUntil { server.server.events.nextID == first + 3 })
        let back = try CurlReader(server.url("/__counterpart/events"), headers: ["Last-Event-ID: \(first)"])
        #expect(back.waitFor { $0.contains("event: snapshot\n") }, "\(back.received)")
        let events = try Self.parse(back.stop())
        #expect(events.first?.name == "snapshot")
        #expect(events.first?.data["resumed"] as? Bool == false)
        #expect(events.first?.data["lastEventId"] as? Int == Int(first))
    }

    @Test(.timeLimit(.minutes(1))) func aTestAwaitsHalfAnUploadAndARuleFiredTwice() async throws {
        let server = try TestServer()
        let events = server.server.events.subscribe()
        var iterator = events.makeAsyncIterator()
        let file = server.root.appendingPathComponent("four.bin")
        try testBytes(count: 4 << 20).write(to: file)
        let upload = Process()
        upload.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        upload.arguments = ["-s", "-o", "/dev/null", "-F", "file=@\(file.path)", server.url("/upload?rate=2MiB")]
        try upload.run()
        var halfWay: ServerEvent.Transfer?
        while halfWay == nil, let event = await iterator.next() {
            if case .transfer(let transfer) = event.kind, transfer.direction == .upload, (transfer.fraction ?? 0) >= 0.5 { halfWay = transfer }
        }
        let transfer = try #require(halfWay)
        // Seen while it went on (the test may read it late, on a busy machine; the event
        // itself says where the upload was), and the same transfer ends later.
        #expect(!transfer.ended && transfer.bytes < transfer.total!)
        // At most the `rate=` of 2 MiB/s (and a burst); at least a quarter of it.
        #expect(transfer.bytesPerSecond > 500_000 && transfer.bytesPerSecond < 4_000_000, "\(transfer.bytesPerSecond)")
        var ended: ServerEvent.Transfer?
        while ended == nil, let event = await iterator.next() {
            if case .transfer(let later) = event.kind, later.id == transfer.id, later.ended { ended = later }
        }
        #expect(ended?.bytes == ended?.total && ended?.total == transfer.total)
        upload.waitUntilExit()
        #expect(upload.terminationStatus == 0)

        let rule = try server.server.faults.arm(method: "GET", path: "/bytes/*", fault: "status=503", times: 2)
        for _ in 0..<3 { _ = try curl([server.url("/bytes/10")]) }
        var fired: [Int?] = []
        while fired.count < 2, let event = await iterator.next() {
            if case .rule(let change) = event.kind, change.change == .fired, change.rule?.id == rule.id { fired.append(change.rule?.remaining) }
        }
        #expect(fired == [1, 0])
    }

    /// A file sent with sendfile: its progress is read from the connection's socket (the
    /// bytes the client has acknowledged), at most every 250 ms, and ends at its length.
    @Test(.timeLimit(.minutes(1))) func aSendfileDownloadTellsItsProgress() async throws {
        let total = 64 << 20
        // 1 MiB of test bytes 64 times: made in a moment (64 MiB byte by byte would keep a
        // core busy for seconds in a debug build, under the other suites' timed tests).
        let mebibyte = testBytes(count: 1 << 20)
        var file = Data(capacity: total)
        for _ in 0..<(total >> 20) { file.append(mebibyte) }
        let server = try TestServer(serving: ["big.bin": file])
        let events = server.server.events.subscribe()
        var iterator = events.makeAsyncIterator()
        let started = ContinuousClock.now
        let download = Process()
        download.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        download.arguments = ["-s", "-o", "/dev/null", "--limit-rate", "16M", server.url("/big.bin")]
        try download.run()
        var transfers: [ServerEvent.Transfer] = []
        while transfers.last?.ended != true, let event = await iterator.next() {
            if case .transfer(let transfer) = event.kind, transfer.direction == .download { transfers.append(transfer) }
        }
        download.waitUntilExit()
        #expect(download.terminationStatus == 0)
        // 64 MiB at 16 MiB/s: about 4 s, so a dozen events or more.
        #expect(transfers.count >= 8, "\(transfers.map(\.bytes))")
        #expect(Set(transfers.map(\.id)).count == 1 && transfers.allSatisfy { $0.path == "/big.bin" && $0.total == UInt64(total) })
        // Never back; the same twice when curl's rate limit has filled the socket buffers
        // and nothing moved for a quarter of a second.
        #expect(zip(transfers, transfers.dropFirst()).allSatisfy { $0.bytes <= $1.bytes }, "increasing: \(transfers.map(\.bytes))")
        #expect(Set(transfers.map(\.bytes)).count >= 6, "\(transfers.map(\.bytes))")
        #expect(transfers.last?.ended == true && transfers.last?.bytes == UInt64(total))
        #expect(transfers.dropLast().allSatisfy { !$0.ended && $0.bytes < UInt64(total) })
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(Double(transfers.count) <= seconds / 0.25 + 2, "at most every 250 ms: \(transfers.count) in \(seconds) s")
        // The last event's rate is the whole transfer's: curl's 16 MiB/s, near enough.
        let rate = transfers.last?.bytesPerSecond ?? 0
        #expect(rate > 8_000_000 && rate < 32_000_000, "\(rate)")
        let entry = try #require(server.server.journal.waitForRequests(path: "/big.bin").first)
        #expect(entry.bytesSent == UInt64(total))
    }

    @Test(.timeLimit(.minutes(1))) func aTusUploadIsCreatedMovesItsOffsetAndCompletes() async throws {
        let server = try TestServer()
        let events = server.server.events.subscribe()
        let created = try curl(["-X", "POST", "-H", "Tus-Resumable: 1.0.0", "-H", "Upload-Length: 11", server.url("/files")])
        let location = try #require(created.header("Location"))
        for (offset, text) in [(0, "hello"), (5, " world")] {
            let patched = try curl(["-X", "PATCH", "-H", "Tus-Resumable: 1.0.0", "-H", "Upload-Offset: \(offset)",
                                    "-H", "Content-Type: application/offset+octet-stream", "--data-binary", text, server.url(location)])
            #expect(patched.status == 204)
        }
        var changes: [ServerEvent.ResumableChange] = []
        for await event in events {
            guard case .resumable(let change) = event.kind else { continue }
            changes.append(change)
            if change.change == .completed { break }
        }
        let id = String(location.split(separator: "/").last!)
        #expect(changes.map(\.upload).allSatisfy { $0 == id })
        #expect(changes.first?.change == .created && changes.first?.length == 11 && changes.first?.protocol == "tus")
        #expect(changes.contains { $0.change == .offset && $0.offset == 5 }, "\(changes)")
        #expect(changes.last?.change == .completed && changes.last?.offset == 11)
    }

    @Test func aSubscriberThatDoesNotReadIsDropped() async throws {
        let server = try TestServer(configure: { $0.eventBacklog = 8 }, populate: { try Data("x".utf8).write(to: $0.appendingPathComponent("a.txt")) })
        let events = server.server.events.subscribe()
        #expect(server.server.events.listening == 1)
        for _ in 0..<12 { _ = try curl([server.url("/a.txt")]) }
        #expect(waitUntil { server.server.events.listening == 0 })
        var count = 0
        for await _ in events { count += 1 }
        #expect(count == 8, "a subscriber that was dropped still gets what its buffer held, then its sequence ends")
    }

    @Test func thePageAndItsFilesAreServedWithTheStream() throws {
        let server = try TestServer()
        let page = try curl([server.url("/__counterpart/")])
        #expect(page.status == 200)
        #expect(page.header("Content-Type") == "text/html; charset=utf-8")
        #expect(page.text.contains("<title>Counterpart — live</title>"))
        for (name, type) in [("live.js", "text/javascript; charset=utf-8"), ("live.css", "text/css; charset=utf-8")] {
            let asset = try curl([server.url("/__counterpart/\(name)")])
            #expect(asset.status == 200 && asset.header("Content-Type") == type && asset.body.count > 1000, "\(name)")
            #expect(page.text.contains("/__counterpart/\(name)"))
        }
        let head = try curl(["-I", server.url("/__counterpart/events")])
        #expect(head.status == 200 && head.header("Content-Type") == "text/event-stream; charset=utf-8")
        #expect(server.server.events.listening == 0, "HEAD opens no reader")
        try expectMethodNotAllowed("POST", server.url("/__counterpart/events"), allow: "GET, HEAD")
        try expectMethodNotAllowed("DELETE", server.url("/__counterpart/"), allow: "GET, HEAD")
    }
}
