import Foundation
import Synchronization

/// What happens on a server, as events: kept in a bounded backlog (for `Last-Event-ID`),
/// read by the `/__counterpart/events` streams and yielded to `subscribe()`.
///
/// Publishing never waits on a reader: it is O(1) under one short lock (plus a constant
/// step per reader), and the backlog is the only memory the events hold. An SSE reader
/// reads from the backlog at its own pace; one that falls so far behind that the backlog
/// has dropped what it has not read yet is dropped (its connection shut), and may come
/// back with `Last-Event-ID` to learn that it missed some.
///
/// ```swift
/// let events = server.events.subscribe()
/// // … start an upload …
/// for await event in events {
///     if case .transfer(let transfer) = event.kind, (transfer.fraction ?? 0) >= 0.5 { break }
/// }
/// ```
public final class ServerEvents: Sendable {
    /// Events kept for `Last-Event-ID` and for readers that lag, at most.
    public let backlog: Int
    /// Bytes the backlog holds at most (a request's event counts its text as the journal
    /// does): a few requests with 60 KB heads must not make it hold gigabytes.
    public static let backlogBytes = 8 << 20
    /// A transfer's events come at most this often (seconds).
    static let transferInterval = 0.25

    private let state: Mutex<State>
    /// Readers and subscribers, read without the lock: transfers are metered only while
    /// someone is listening.
    private let listeners = Atomic<Int>(0)
    /// Whether requests are kept as events: from the first listener on, until nobody has
    /// listened for `requestGrace` seconds. Before that no one can hold an id to come back
    /// with, and after it the backlog is forgotten (a client that comes back later starts
    /// afresh); the page reads the requests it has not seen from the journal. So a server
    /// nobody watches, or nobody has watched for a while, pays nothing for them.
    private let keepingRequests = Atomic<Bool>(false)
    /// When the last listener left (`MonotonicClock`, ms); only read while nobody listens.
    private let lastLeft = Atomic<Int>(0)
    /// `Configuration.requestEventGrace`, in ms.
    private let requestGraceMilliseconds: Int
    /// `requests=all` readers and subscribers: while none listens (only `requests=latest`
    /// streams, the live page's), a request is kept as an event at most
    /// `latestRequestsPerSecond` (`takesRequestTurn`), and the others are only counted. Under
    /// a flood, keeping every request in the backlog cost the server a few percent of its
    /// CPU per request, to be left out by the stream after.
    private let everyRequestListeners = Atomic<Int>(0)
    /// The even spacing of request events at that rate, and how far ahead of the clock they
    /// may run (a second's worth at once after a quiet second), in nanoseconds.
    private let requestSpacing: Int
    private let requestBurst: Int
    /// When the next request event is due were they evenly spaced (`MonotonicClock`, ns):
    /// one is kept when this is no more than `requestBurst` ahead of now (the generic cell
    /// rate algorithm: one atomic, written only for the requests kept).
    private let requestTurn = Atomic<Int>(0)
    /// Requests left out of the backlog by the rate, all told: a `requests=latest` stream
    /// counts those since it last read in its next `skipped` event.
    private let requestsLeftOut = Atomic<Int>(0)
    private let transferIDs = Atomic<Int>(1)
    /// Downloads sent with sendfile, metered from their sockets.
    let sentFiles = SentFiles()

    init(backlog: Int, requestGrace: Double = 60, latestRequestsPerSecond: Int = 1_000) {
        self.backlog = max(backlog, 1)
        requestGraceMilliseconds = Int(max(0, min(requestGrace, 1e9)) * 1_000)
        // One at least; at most a billion (one a nanosecond).
        requestSpacing = 1_000_000_000 / min(max(latestRequestsPerSecond, 1), 1_000_000_000)
        requestBurst = 1_000_000_000 - requestSpacing
        state = Mutex(State(capacity: max(backlog, 1)))
    }

    /// Readers (SSE streams) and subscribers now.
    public var listening: Int { listeners.load(ordering: .relaxed) }

    /// The id the next event will get.
    public var nextID: UInt64 { state.withLock { $0.nextID } }

    /// The events from now on (and, with `after`, those after that id the backlog still
    /// holds: not the requests left out while only `requests=latest` streams listened), until
    /// the server stops; every request, while it listens. A subscriber that lets more than
    /// `backlog` events pile up unread is dropped: its sequence ends.
    public func subscribe(after: UInt64? = nil) -> AsyncStream<ServerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: ServerEvent.self, bufferingPolicy: .bufferingOldest(backlog))
        let key = state.withLock { state -> Int? in
            guard !state.closed else { return nil }
            if let after { for slot in state.slots(after: after) { continuation.yield(slot.event) } }
            let key = state.nextKey
            state.nextKey += 1
            state.subscribers[key] = continuation
            listenersCame(everyRequest: true)
            return key
        }
        guard let key else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            let removed = state.withLock { $0.subscribers.removeValue(forKey: key) != nil }
            if removed { listenersLeft(1, everyRequest: 1) }
        }
        return stream
    }

    // MARK: - Publishing

    /// `request` has ended, and the journal keeps it as `kept` (nil when the journal keeps
    /// nothing); `bytes` is its text as the journal counts it (`textBytes`).
    func requestFinished(_ request: CompletedRequest, kept: RequestJournal.Kept?, bytes: Int) {
        // A file sent with sendfile tells its last transfer event before its request's.
        sentFiles.end(request.head.connection, bytesSent: request.completed ? request.bodyBytes : nil)
        guard keepingRequests.load(ordering: .relaxed) else { return }
        // Acquiring: the last listener's `lastLeft` is seen with its leaving.
        if listeners.load(ordering: .acquiring) == 0, Self.milliseconds() - lastLeft.load(ordering: .relaxed) >= requestGraceMilliseconds {
            stopKeepingRequests()
            return
        }
        if everyRequestListeners.load(ordering: .relaxed) == 0, !takesRequestTurn() {
            requestsLeftOut.add(1, ordering: .relaxed)
            return
        }
        publish(.request(kept ?? RequestJournal.Kept(request: request, bytes: bytes)), bytes: bytes)
    }

    /// Nobody has listened for the grace: forgets the backlog, and skips an id, so that a
    /// client that comes back with an id from before is not taken to have missed nothing
    /// (it gets a snapshot that says so); keeps no request as an event until the next
    /// listener. Under the lock, where listeners are added: one that has just come keeps it on.
    private func stopKeepingRequests() {
        let forgotten = state.withLock { state -> [ServerEvent.Stored?] in
            guard state.readers.isEmpty, state.subscribers.isEmpty, keepingRequests.load(ordering: .relaxed) else { return [] }
            keepingRequests.store(false, ordering: .relaxed)
            return state.forgetAll()
        }
        _ = forgotten  // released here, outside the lock
    }

    /// Whether this request is kept as an event, at `latestRequestsPerSecond`: false while
    /// the requests come faster. Lock-free, and a request left out writes nothing here.
    private func takesRequestTurn() -> Bool {
        let now = MonotonicClock.nanoseconds()
        var turn = requestTurn.load(ordering: .relaxed)
        while turn - now <= requestBurst {
            let (exchanged, found) = requestTurn.compareExchange(expected: turn, desired: max(turn, now) + requestSpacing,
                                                                 ordering: .relaxed)
            if exchanged { return true }
            turn = found
        }
        return false
    }

    /// A listener has come (under the lock, where `stopKeepingRequests` looks): requests are
    /// kept as events from now on.
    private func listenersCame(everyRequest: Bool) {
        listeners.add(1, ordering: .relaxed)
        if everyRequest { everyRequestListeners.add(1, ordering: .relaxed) }
        keepingRequests.store(true, ordering: .relaxed)
    }

    /// `count` listeners have gone, `everyRequest` of which took every request.
    private func listenersLeft(_ count: Int, everyRequest: Int) {
        if everyRequest > 0 { everyRequestListeners.subtract(everyRequest, ordering: .relaxed) }
        lastLeft.store(Self.milliseconds(), ordering: .relaxed)
        listeners.subtract(count, ordering: .releasing)
    }

    private static func milliseconds() -> Int { Int(MonotonicClock.seconds() * 1_000) }

    func resumable(_ change: ServerEvent.ResumableChange.Change, _ upload: ResumableStore.Upload?) {
        guard let upload else { return }
        publish(.resumable(ServerEvent.ResumableChange(change: change, upload: upload.id, protocol: upload.kind.rawValue,
                                                       offset: upload.offset, length: upload.length)))
    }

    func rule(_ change: ServerEvent.RuleChange.Change, _ rule: ServerFaults.Armed?) {
        publish(.rule(ServerEvent.RuleChange(change: change, rule: rule)))
    }

    func transfer(_ transfer: ServerEvent.Transfer) { publish(.transfer(transfer)) }

    /// A new transfer's id.
    func newTransferID() -> Int { transferIDs.add(1, ordering: .relaxed).oldValue }

    private func publish(_ stored: ServerEvent.Stored, bytes: Int = 256) {
        // Made before the lock is taken: under it, only references move (and the id is given).
        let change: State.SnapshotChange
        switch stored {
        case .transfer(let transfer): change = .transfer(transfer)
        case .resumable(let resumable): change = .resumable(resumable)
        case .request, .rule: change = .none
        }
        let (evicted, unsubscribed, wakers) = state.withLock { state -> (State.Evicted, [AsyncStream<ServerEvent>.Continuation], [Waker]) in
            guard !state.closed else { return (State.Evicted(), [], []) }
            state.noteRequestsLeftOut(requestsLeftOut.load(ordering: .relaxed))
            return state.append(stored, bytes: bytes, changing: change, maxBytes: Self.backlogBytes)
        }
        _ = evicted  // released here, outside the lock
        for waker in wakers { waker.wake() }
        guard !unsubscribed.isEmpty else { return }
        listenersLeft(unsubscribed.count, everyRequest: unsubscribed.count)
        // Outside the lock: finishing calls the stream's onTermination, which takes it.
        for subscriber in unsubscribed { subscriber.finish() }
    }

    // MARK: - Readers

    /// Where a new reader starts.
    struct Opening {
        let reader: Int
        /// Whether it goes on from the `Last-Event-ID` it gave; when false, it starts from
        /// now and gets `snapshot` first.
        let resumed: Bool
        let transfers: [ServerEvent.Transfer]
        let resumable: [ServerEvent.ResumableChange]
        /// The id of the last event before it starts.
        let lastID: UInt64
    }

    /// A reader for an SSE stream on `socket`, after `lastEventID` when the backlog still
    /// holds every event since (and no request was left out since: see
    /// `everyRequestListeners`); nil once the server is stopping. `everyRequest`: a
    /// `requests=all` stream, false for `requests=latest`.
    func openReader(lastEventID: UInt64?, socket: Int32?, everyRequest: Bool = true) -> Opening? {
        state.withLock { state -> Opening? in
            guard !state.closed else { return nil }
            let key = state.nextKey
            state.nextKey += 1
            var cursor = state.nextID
            var resumed = false
            state.noteRequestsLeftOut(requestsLeftOut.load(ordering: .relaxed))
            if let lastEventID, lastEventID < state.nextID, lastEventID + 1 >= state.oldestID, lastEventID >= state.lastGapID {
                cursor = lastEventID + 1
                resumed = true
            }
            state.readers[key] = Reader(cursor: cursor, socket: socket, everyRequest: everyRequest, leftOutCounted: state.leftOutSeen)
            listenersCame(everyRequest: everyRequest)
            return Opening(reader: key, resumed: resumed, transfers: state.transfers.values.sorted { $0.id < $1.id },
                           resumable: state.resumable.values.sorted { $0.upload < $1.upload }, lastID: cursor - 1)
        }
    }

    /// Appends the next events for `reader` to `slots`, about `bytes` of them (at least
    /// one when there is one); false when the reader fell behind the backlog or the server
    /// is stopping: end the stream. The caller's array keeps its capacity from one read to
    /// the next, so that nothing is allocated under the lock.
    func read(_ reader: Int, bytes: Int, into slots: inout [Slot]) -> Bool {
        state.withLock { state in
            guard let cursor = state.readers[reader]?.cursor, cursor != Reader.dropped, !state.closed else { return false }
            let found = state.slots(from: cursor, bytes: bytes, into: &slots)
            state.readers[reader]?.cursor = cursor + UInt64(found)
            return true
        }
    }

    /// What a `?requests=latest` stream read (`readLatest`).
    struct LatestRead {
        /// Events passed, taken or left out.
        var count = 0
        /// Request events taken.
        var requests = 0
        /// Requests left out: the oldest request events of those read, and the requests the
        /// server did not keep as events since the stream last read.
        var skipped = 0
    }

    /// Like `read`, for a `?requests=latest` stream: appends every event after the reader's
    /// last to `slots` but for the request events past the newest `requests`, which it only
    /// counts; nil when the reader fell behind the backlog or the server is stopping. Under a
    /// flood that leaves the lock held for a walk over a few thousand flags, where taking
    /// every slot to skip most of them (a reference count each, on the cores that made them)
    /// held up the requests publishing.
    func readLatest(_ reader: Int, requests: Int, into slots: inout [Slot]) -> LatestRead? {
        state.withLock { state in
            guard var found = state.readers[reader], found.cursor != Reader.dropped, !state.closed else { return nil }
            var read = state.latestSlots(from: found.cursor, requests: requests, into: &slots)
            found.cursor += UInt64(read.count)
            // Read under the lock, as `append` does: the requests left out before the events
            // read are all counted here, and none counted again at the next read.
            state.noteRequestsLeftOut(requestsLeftOut.load(ordering: .relaxed))
            read.skipped += state.leftOutSeen - found.leftOutCounted
            found.leftOutCounted = state.leftOutSeen
            state.readers[reader] = found
            return read
        }
    }

    /// Wakes `reader`'s stream (suspended, waiting for events) with `waker` when the next
    /// event comes, or at once if one has come since it last read: a stream that has been
    /// idle starts reading again at the first event of a burst instead of after its pause
    /// (when that many may have passed that the backlog no longer holds them).
    func wakeOnNext(_ reader: Int, _ waker: Waker) {
        let now = state.withLock { state -> Bool in
            guard let found = state.readers[reader], found.cursor != Reader.dropped, !state.closed else { return false }
            if found.cursor < state.nextID { return true }
            if found.waker == nil { state.waiting += 1 }
            state.readers[reader]?.waker = waker
            return false
        }
        if now { waker.wake() }
    }

    func closeReader(_ reader: Int) {
        let removed = state.withLock { state -> Reader? in
            guard let reader = state.readers.removeValue(forKey: reader) else { return nil }
            if reader.waker != nil { state.waiting -= 1 }
            return reader
        }
        if let removed { listenersLeft(1, everyRequest: removed.everyRequest ? 1 : 0) }
    }

    /// Ends every stream and subscription: the server is stopping.
    func close() {
        sentFiles.stop()
        let subscribers = state.withLock { state -> [AsyncStream<ServerEvent>.Continuation] in
            state.closed = true
            for reader in state.readers.values { reader.shut() }
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        if !subscribers.isEmpty { listenersLeft(subscribers.count, everyRequest: subscribers.count) }
        for subscriber in subscribers { subscriber.finish() }
    }

    // MARK: - State

    /// An event read from the backlog, with its id.
    struct Slot {
        let id: UInt64
        let stored: ServerEvent.Stored

        var event: ServerEvent { ServerEvent(id: id, stored: stored) }
    }

    struct Reader {
        /// The id of the next event it reads.
        var cursor: UInt64
        let socket: Int32?
        /// A `requests=all` stream's (false: `requests=latest`).
        let everyRequest: Bool
        /// `State.leftOutSeen` when it last counted the requests left out.
        var leftOutCounted: Int
        /// Set while its stream is suspended waiting for the next event.
        var waker: Waker?

        /// The cursor of a reader that fell behind the backlog.
        static let dropped = UInt64.max

        /// Shuts the reader's connection down (libmicrohttpd then closes it): called under
        /// the lock, and a reader is removed under it before its connection can close, so
        /// the socket is still the reader's.
        func shut() {
            if let socket { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    private struct State: @unchecked Sendable {
        /// The events kept, a ring from `oldest`: ids run on from `oldestID`, one a place.
        var slots: [ServerEvent.Stored?]
        /// Each event's bytes (what it costs to keep: a request's text, as the journal counts
        /// it) and whether it is a request's, beside it: dropping the oldest then reads
        /// nothing of the event itself, long out of the cache, under the lock (it is released
        /// after), and a `?requests=latest` stream passes over the requests it leaves out
        /// without touching them.
        var sizes: [Int]
        var isRequest: [Bool]
        var oldest = 0
        var count = 0
        var bytes = 0
        var nextID = State.firstID()
        var nextKey = 0
        var readers: [Int: Reader] = [:]
        /// Readers with a `waker`.
        var waiting = 0
        var subscribers: [Int: AsyncStream<ServerEvent>.Continuation] = [:]
        /// Transfers in flight and resumable uploads not yet ended, for a new reader's snapshot.
        var transfers: [Int: ServerEvent.Transfer] = [:]
        var resumable: [String: ServerEvent.ResumableChange] = [:]
        var closed = false
        /// `requestsLeftOut` as last read under the lock, and the id of the first event
        /// after the requests left out then (`nextID` when that was read): a client that
        /// comes back with an id from before it has missed requests the backlog does not
        /// hold, and is not resumed.
        var leftOutSeen = 0
        var lastGapID: UInt64 = 0

        init(capacity: Int) {
            slots = Array(repeating: nil, count: capacity)
            sizes = Array(repeating: 0, count: capacity)
            isRequest = Array(repeating: false, count: capacity)
        }

        /// The first id: the start's time in milliseconds times 1,000, so that a client that
        /// comes back to a restarted server with an id of the one before is not taken to have
        /// missed nothing (unless the old one published a million events a second). Below
        /// 2^53 until the year 2255: JavaScript reads it exactly.
        static func firstID() -> UInt64 {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            return (UInt64(now.tv_sec) * 1_000 + UInt64(now.tv_nsec) / 1_000_000) * 1_000
        }

        /// The id of the oldest event kept (`nextID` when none is): the ids kept run on to
        /// the last one given, with no gap.
        var oldestID: UInt64 { nextID - UInt64(count) }

        /// Where in the ring the `index`th event kept (from the oldest) is.
        func place(_ index: Int) -> Int { (oldest + index) % slots.count }

        /// The `index`th event kept, with its id.
        func slot(_ index: Int) -> Slot { Slot(id: oldestID + UInt64(index), stored: slots[place(index)]!) }

        /// What an append pushed out of the backlog, for the caller to release outside the
        /// lock: one slot when the backlog is full, more only past the byte bound (no array
        /// is made under the lock for the usual one).
        struct Evicted {
            var first: ServerEvent.Stored?
            var more: [ServerEvent.Stored] = []
        }

        /// What an event changes in a new reader's snapshot: taken from the event before
        /// the lock (a request's event, the usual one, is not looked into under it).
        enum SnapshotChange {
            case none
            case transfer(ServerEvent.Transfer)
            case resumable(ServerEvent.ResumableChange)
        }

        /// Adds `stored` with the next id, dropping the oldest past the count or the bytes;
        /// readers that had not read those are dropped; subscribers get it. Returns the
        /// slots dropped, the subscribers that were (for the caller to finish) and the
        /// wakers of the readers waiting for an event (for the caller to call).
        mutating func append(_ stored: ServerEvent.Stored, bytes: Int, changing change: SnapshotChange,
                             maxBytes: Int) -> (Evicted, [AsyncStream<ServerEvent>.Continuation], [Waker]) {
            let id = nextID
            nextID += 1
            var evicted = Evicted()
            while count > 0, count == slots.count || self.bytes + bytes > maxBytes {
                let dropped = slots[oldest]!
                slots[oldest] = nil
                self.bytes -= sizes[oldest]
                oldest = (oldest + 1) % slots.count
                count -= 1
                if evicted.first == nil { evicted.first = dropped } else { evicted.more.append(dropped) }
            }
            let newest = place(count)
            slots[newest] = stored
            sizes[newest] = bytes
            isRequest[newest] = stored.isRequest
            count += 1
            self.bytes += bytes
            if evicted.first != nil, !readers.isEmpty {
                let oldestKept = oldestID
                for (key, reader) in readers where reader.cursor < oldestKept {
                    reader.shut()
                    readers[key]?.cursor = Reader.dropped  // removed when its stream ends
                }
            }
            var unsubscribed: [AsyncStream<ServerEvent>.Continuation] = []  // empty: no allocation
            if !subscribers.isEmpty {
                let event = ServerEvent(id: id, stored: stored)
                for (key, subscriber) in subscribers {
                    switch subscriber.yield(event) {
                    case .enqueued: break
                    case .dropped, .terminated: unsubscribed.append(subscribers.removeValue(forKey: key)!)
                    @unknown default: break
                    }
                }
            }
            switch change {
            case .transfer(let transfer):
                if transfer.ended { transfers.removeValue(forKey: transfer.id) } else { transfers[transfer.id] = transfer }
            case .resumable(let change):
                switch change.change {
                case .created, .offset, .takenOver: resumable[change.upload] = change
                case .completed, .expired, .removed: resumable.removeValue(forKey: change.upload)
                }
            case .none:
                break
            }
            var wakers: [Waker] = []  // made only when a reader waits: the first event after a quiet spell
            if waiting > 0 {
                for index in readers.values.indices {
                    guard let waker = readers.values[index].waker else { continue }
                    wakers.append(waker)
                    readers.values[index].waker = nil
                }
                waiting = 0
            }
            return (evicted, unsubscribed, wakers)
        }

        /// Notes `leftOut`, `requestsLeftOut` read now: when it has grown, the next event's id
        /// is after a gap.
        mutating func noteRequestsLeftOut(_ leftOut: Int) {
            guard leftOut != leftOutSeen else { return }
            leftOutSeen = leftOut
            lastGapID = nextID
        }

        /// Empties the backlog and skips an id (see `stopKeepingRequests`); returns the slots
        /// it held, for the caller to release outside the lock.
        mutating func forgetAll() -> [ServerEvent.Stored?] {
            defer {
                slots = Array(repeating: nil, count: slots.count)
                oldest = 0
                count = 0
                bytes = 0
                nextID += 1
            }
            return slots
        }

        /// Appends the slots from id `cursor` on to `found`, about `bytes` of them; returns
        /// how many.
        func slots(from cursor: UInt64, bytes: Int, into found: inout [Slot]) -> Int {
            let first = oldestID
            guard cursor >= first, cursor < nextID else { return 0 }
            var taken = 0
            var index = Int(cursor - first)
            let start = index
            while index < count, taken < bytes {
                found.append(slot(index))
                taken += sizes[place(index)]
                index += 1
            }
            return index - start
        }

        /// Appends the slots from id `cursor` on to `found`, all but the newest `requests`
        /// request events left out (counted, not taken: their slots are not touched).
        func latestSlots(from cursor: UInt64, requests allowed: Int, into found: inout [Slot]) -> LatestRead {
            let first = oldestID
            guard cursor >= first, cursor < nextID else { return LatestRead() }
            let start = Int(cursor - first)
            var requests = 0
            for index in start..<count where isRequest[place(index)] { requests += 1 }
            var skipping = max(0, requests - allowed)
            let read = LatestRead(count: count - start, requests: requests - skipping, skipped: skipping)
            for index in start..<count {
                if skipping > 0, isRequest[place(index)] {
                    skipping -= 1
                    continue
                }
                found.append(slot(index))
            }
            return read
        }

        func slots(after id: UInt64) -> [Slot] {
            var found: [Slot] = []
            _ = slots(from: id + 1, bytes: .max, into: &found)
            return found
        }
    }
}
