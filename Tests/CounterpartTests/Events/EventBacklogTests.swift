@testable import Counterpart
import HTTPTransfer
import Testing

/// The backlog behind `Last-Event-ID` and lagging readers, without a server: which ids it
/// still holds as it drops the oldest, who resumes, and who is dropped.
@Suite("The event backlog")
struct EventBacklogTests {
    static func transfer(_ index: Int) -> ServerEvent.Transfer {
        ServerEvent.Transfer(id: index, direction: .download, method: "GET", path: "/f", bytes: UInt64(index),
                             total: nil, bytesPerSecond: 0, ended: false)
    }

    static func request(_ path: String) -> CompletedRequest {
        CompletedRequest(head: RequestHead(method: "GET", path: path, query: [], version: "HTTP/1.1", headers: [], clientAddress: "127.0.0.1"),
                         receivedAt: .now, status: 200, requestBodyBytes: 0, bodyBytes: 0, bytesSent: 0, seconds: 0,
                         completed: true, parts: [])
    }

    /// The ids `reader` reads now, in order (nil once it has been dropped).
    static func readAll(_ events: ServerEvents, _ reader: Int, bytes: Int = .max) -> [UInt64]? {
        var slots: [ServerEvents.Slot] = []
        var ids: [UInt64] = []
        while true {
            slots.removeAll(keepingCapacity: true)
            guard events.read(reader, bytes: bytes, into: &slots) else { return nil }
            if slots.isEmpty { return ids }
            ids += slots.map(\.id)
        }
    }

    /// The backlog's places hold one reference each, whatever the kind: a request's event is
    /// the journal's own object, and the rarer kinds are boxed.
    @Test func anEventIsKeptAsOneReference() {
        #expect(MemoryLayout<ServerEvent.Stored>.size == MemoryLayout<AnyObject>.size)
        #expect(MemoryLayout<ServerEvent.Stored?>.size == MemoryLayout<AnyObject>.size)
    }

    @Test func aFullBacklogKeepsTheLastEventsAndResumesOnlyWhereItHoldsTheNext() throws {
        let events = ServerEvents(backlog: 4)
        let first = events.nextID
        for index in 0..<10 { events.transfer(Self.transfer(index)) }
        #expect(events.nextID == first + 10)

        // Holds the last four (first + 6 ... first + 9): an id from first + 5 on resumes.
        let resumed = try #require(events.openReader(lastEventID: first + 5, socket: nil))
        #expect(resumed.resumed)
        #expect(Self.readAll(events, resumed.reader) == [first + 6, first + 7, first + 8, first + 9])
        let missed = try #require(events.openReader(lastEventID: first + 4, socket: nil))
        #expect(!missed.resumed)
        #expect(missed.lastID == first + 9)
        #expect(Self.readAll(events, missed.reader) == [])
        // The last id given, and one never given, resume with nothing to read or start afresh.
        let caughtUp = try #require(events.openReader(lastEventID: first + 9, socket: nil))
        #expect(caughtUp.resumed && Self.readAll(events, caughtUp.reader) == [])
        let future = try #require(events.openReader(lastEventID: first + 10, socket: nil))
        #expect(!future.resumed)
    }

    @Test func aReaderGetsEveryEventInOrderWhateverItsBudget() throws {
        let events = ServerEvents(backlog: 64)
        let reader = try #require(events.openReader(lastEventID: nil, socket: nil))
        for index in 0..<20 { events.transfer(Self.transfer(index)) }
        // A budget below one event's size still reads one at a time.
        #expect(Self.readAll(events, reader.reader, bytes: 1) == (1...20).map { reader.lastID + UInt64($0) })
    }

    @Test func aReaderThatFallsBehindTheBacklogIsDroppedAndOthersGoOn() throws {
        let events = ServerEvents(backlog: 4)
        let lagging = try #require(events.openReader(lastEventID: nil, socket: nil))
        let keeping = try #require(events.openReader(lastEventID: nil, socket: nil))
        var read: [UInt64] = []
        for index in 0..<10 {
            events.transfer(Self.transfer(index))
            read += try #require(Self.readAll(events, keeping.reader))
        }
        #expect(read == (1...10).map { keeping.lastID + UInt64($0) })
        #expect(Self.readAll(events, lagging.reader) == nil)
        #expect(events.listening == 2)  // until its stream ends and closes it
        events.closeReader(lagging.reader)
        #expect(events.listening == 1)
    }

    /// `?requests=latest` under a flood: every transfer event, the newest requests the
    /// allowance covers, and the older ones counted.
    @Test func aLatestReadLeavesOutTheOlderRequestsAndKeepsTheRest() throws {
        let events = ServerEvents(backlog: 64)
        let reader = try #require(events.openReader(lastEventID: nil, socket: nil))
        var kinds: [(id: UInt64, request: Bool)] = []
        for index in 0..<12 {
            let id = events.nextID
            if index % 3 == 2 {
                events.transfer(Self.transfer(index))
            } else {
                events.requestFinished(Self.request("/\(index)"), kept: nil, bytes: 100)
            }
            kinds.append((id, index % 3 != 2))
        }
        var slots: [ServerEvents.Slot] = []
        let read = try #require(events.readLatest(reader.reader, requests: 3, into: &slots))
        let requests = kinds.filter(\.request).map(\.id)  // 8 of them: the 5 oldest left out
        #expect(read.count == 12 && read.requests == 3 && read.skipped == 5)
        let kept = kinds.filter { !$0.request || $0.id > requests[4] }.map(\.id)
        #expect(slots.map(\.id) == kept)
        // Nothing new: nothing read; then one more request, with the allowance to spare.
        slots.removeAll()
        #expect(events.readLatest(reader.reader, requests: 3, into: &slots)?.count == 0)
        events.requestFinished(Self.request("/last"), kept: nil, bytes: 100)
        let last = try #require(events.readLatest(reader.reader, requests: 3, into: &slots))
        #expect(last.requests == 1 && last.skipped == 0 && slots.count == 1)
    }

    /// While only `requests=latest` readers listen, requests are kept as events at the rate
    /// (a second's worth at once) and the others counted at the next read; a `requests=all`
    /// reader or a subscriber gets every one; an id from before requests were left out is
    /// not resumed.
    @Test func whileOnlyLatestReadersListenRequestsAreKeptAtTheRate() throws {
        let events = ServerEvents(backlog: 64, latestRequestsPerSecond: 5)
        let latest = try #require(events.openReader(lastEventID: nil, socket: nil, everyRequest: false))
        let first = events.nextID
        for index in 0..<12 { events.requestFinished(Self.request("/\(index)"), kept: nil, bytes: 100) }
        #expect(events.nextID == first + 5, "a second's worth, at once")
        events.transfer(Self.transfer(1))
        #expect(events.nextID == first + 6, "other events are all kept")
        var slots: [ServerEvents.Slot] = []
        let read = try #require(events.readLatest(latest.reader, requests: 100, into: &slots))
        #expect(read.count == 6 && read.requests == 5 && read.skipped == 7)
        #expect(events.readLatest(latest.reader, requests: 100, into: &slots)?.skipped == 0, "counted once")

        // Last-Event-ID: the 7 were left out between the 5th request and the transfer.
        let missed = try #require(events.openReader(lastEventID: first + 4, socket: nil, everyRequest: false))
        #expect(!missed.resumed)
        let after = try #require(events.openReader(lastEventID: first + 5, socket: nil, everyRequest: false))
        #expect(after.resumed)

        // A reader of every request: every one is kept while it listens, and none after.
        let all = try #require(events.openReader(lastEventID: nil, socket: nil))
        for index in 0..<3 { events.requestFinished(Self.request("/all/\(index)"), kept: nil, bytes: 100) }
        #expect(events.nextID == first + 9)
        events.closeReader(all.reader)
        events.requestFinished(Self.request("/left-out"), kept: nil, bytes: 100)
        #expect(events.nextID == first + 9)
        var subscribed: AsyncStream<ServerEvent>? = events.subscribe()
        events.requestFinished(Self.request("/subscribed"), kept: nil, bytes: 100)
        #expect(events.nextID == first + 10, "a subscriber gets every request")
        subscribed = nil
        _ = subscribed
        events.requestFinished(Self.request("/left-out-again"), kept: nil, bytes: 100)
        #expect(events.nextID == first + 10)
        slots.removeAll()
        #expect(events.readLatest(latest.reader, requests: 100, into: &slots)?.skipped == 2)
    }
}
