import HTTPTransfer

/// `GET /__counterpart/events`: the server's events as Server-Sent Events (WHATWG HTML
/// §9.2), for as long as the client reads. Each event has an `id:`; a client that comes back
/// with `Last-Event-ID` gets what it missed while the backlog still holds it, else a
/// `snapshot` (as a new client does) that says it missed some. An idle stream gets a
/// comment every 15 s, which keeps proxies and the connection timeout from closing it.
struct EventsEndpoint: Sendable {
    let events: ServerEvents
    let faults: ServerFaults
    /// `Configuration.latestRequestsPerSecond`.
    let latestRequestsPerSecond: Int

    /// How long the stream waits before it looks for new events again, when it has sent
    /// them all (the connection is suspended meanwhile, not a thread): 5 ms while events
    /// come, doubling while none do, up to 100 ms. Under a flood of requests a longer first
    /// wait let a reader fall behind the backlog (a timer fires late on busy cores), and a
    /// stream with nothing to send costs ten wake-ups a second.
    ///
    /// From `wakeablePause` on (no event for 15 ms) the next event also wakes the stream
    /// (`ServerEvents.wakeOnNext`): after 100 ms of quiet a flood that begins would
    /// otherwise pass 4,096 events (the backlog) before the stream looked, and the reader
    /// was dropped. Under the flood itself the pauses stay at 5 ms and nothing wakes them:
    /// a wake-up per event would cost more than the events read in batches every 5 ms.
    static let shortestPause = 5
    static let longestPause = 100
    static let wakeablePause = 20
    static let heartbeatSeconds = 15.0
    static let keepAlive: StaticString = ": keep-alive\n\n"
    /// With `?requests=latest`, the shortest wait (ms), once the allowance is spent too: a
    /// tenth of the page's redraw. Waiting only for the next request's worth (1 ms at 1,000 a
    /// second) suspended and resumed the connection a thousand times a second under a flood,
    /// to send one request each time. Such a stream is woken by the next event from 100 ms
    /// (`latestWakeablePause`) on, after 75 ms of quiet.
    static let latestBatchPause = 25
    static let latestWakeablePause = 100

    func respond(to head: RequestHead) -> Response {
        guard head.method == "GET" || head.method == "HEAD" else {
            return Response.methodNotAllowed(head.method, allowed: ["GET", "HEAD"], on: head.path)
        }
        let headers = [
            HTTPField(name: "Content-Type", value: "text/event-stream; charset=utf-8"),
            HTTPField(name: "Cache-Control", value: "no-store"),
            // nginx and others in front would otherwise hold the events back in their buffers.
            HTTPField(name: "X-Accel-Buffering", value: "no"),
        ]
        // `requests=latest` (the live page): under a flood of requests only the newest of
        // each batch, and while no `requests=all` stream listens the server keeps no more
        // requests as events than the rate (`ServerEvents.everyRequestListeners`), so that a
        // page open costs the server next to nothing per request.
        let latest: Bool
        let mode = head.queryArgument("requests")
        switch mode {
        case nil, "all": latest = false
        case "latest": latest = true
        default:
            return Response.error(400, "requests=\(mode.flatMap { $0 } ?? "") is not a mode of the event stream: use requests=all (every request, the default) or requests=latest")
        }
        guard head.method == "GET" else { return Response(status: 200, headers: headers) }
        let lastEventID = head.header("Last-Event-ID").flatMap { UInt64(ASCII.trimmed($0).description) }
        guard let opening = events.openReader(lastEventID: lastEventID, socket: head.connection?.socket, everyRequest: !latest) else {
            return Response.error(503, "the server is stopping")
        }
        var preamble = JSONWriter(capacity: 1024)
        preamble.raw("retry: 2000\n\n")
        if !opening.resumed {
            // Its id is the last event's before the stream: a client that reconnects from
            // here misses nothing.
            preamble.raw("id: ")
            preamble.digits(opening.lastID)
            preamble.raw("\nevent: snapshot\ndata: ")
            preamble.beginObject()
            preamble.key("resumed")
            preamble.bool(false)
            preamble.key("lastEventId")
            preamble.unsigned(lastEventID)
            preamble.key("nextId")
            preamble.unsigned(opening.lastID + 1)
            preamble.key("transfers")
            preamble.beginArray()
            for transfer in opening.transfers { transfer.write(to: &preamble) }
            preamble.endArray()
            preamble.key("resumable")
            preamble.value(.array(opening.resumable.map(\.json)))
            preamble.key("rules")
            preamble.value(.array(faults.rules.map(\.json)))
            preamble.endObject()
            preamble.raw("\n\n")
        }
        return Response(status: 200, headers: headers,
                        body: .stream(length: .max, EventStreamBody(events: events, reader: opening.reader, socket: head.connection?.socket,
                                                                    preamble: preamble, latestRequestsPerSecond: latest ? latestRequestsPerSecond : nil)))
    }
}

/// One client's event stream: reads its events from the backlog as the connection can take
/// them, and lets go of its place when the connection ends. Each frame is written into one
/// writer the stream keeps (no memory is allocated per event) and copied into the
/// connection's buffer from there.
final class EventStreamBody: ResponseStream {
    private let events: ServerEvents
    private let reader: Int
    /// The connection's socket: a client that has gone is noticed while the stream is idle,
    /// not only when the next event or keep-alive is written.
    private let socket: Int32?
    /// The text begun (the preamble, a keep-alive, a frame) and how much of it has been
    /// written: a frame larger than the room left goes on with the next read.
    private var text: JSONWriter
    private var sent = 0
    /// Events read from the backlog and not yet written, from `next` on: the array keeps its
    /// capacity, so that reading allocates nothing.
    private var queued: [ServerEvents.Slot] = []
    private var next = 0
    private var lastWrite = MonotonicClock.seconds()
    /// The pauses while no event comes: from `shortestPause`, doubling up to
    /// `EventsEndpoint.longestPause`; from `wakeablePause` on the next event ends them.
    private let shortestPause: Int
    private let wakeablePause: Int
    private var pauseMilliseconds: Int
    /// Whether the pause just asked for is long enough for the next event to end it.
    private var wakeable = false
    /// `?requests=latest`: the request events it writes at most, a second; nil for all.
    private let latestRate: Double?
    /// The request events it may write now: refilled at `latestRate`, up to a second's worth.
    private var allowance: Double
    private var allowanceTime = MonotonicClock.seconds()

    init(events: ServerEvents, reader: Int, socket: Int32?, preamble: consuming JSONWriter, latestRequestsPerSecond: Int? = nil) {
        self.events = events
        self.reader = reader
        self.socket = socket
        // One at least; at most a billion: the allowance is counted in a Double and read as an Int.
        latestRate = latestRequestsPerSecond.map { Double(min(max($0, 1), 1_000_000_000)) }
        allowance = latestRate ?? 0
        shortestPause = latestRate == nil ? EventsEndpoint.shortestPause : EventsEndpoint.latestBatchPause
        wakeablePause = latestRate == nil ? EventsEndpoint.wakeablePause : EventsEndpoint.latestWakeablePause
        pauseMilliseconds = shortestPause
        text = preamble
        queued.reserveCapacity(256)
    }

    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        var written = 0
        while written < buffer.count {
            if sent < text.written {
                let count = min(buffer.count - written, text.written - sent)
                text.withWritten(from: sent) { (buffer.baseAddress! + written).copyMemory(from: $0.baseAddress!, byteCount: count) }
                sent += count
                written += count
                continue
            }
            text.removeAll()
            sent = 0
            if next == queued.count {
                queued.removeAll(keepingCapacity: true)
                next = 0
                if let latestRate {
                    // Out of allowance: wait for the next request's worth, and a batch's at
                    // least, rather than read a batch of which none could go out (other
                    // events wait that long too).
                    let now = MonotonicClock.seconds()
                    allowance = min(latestRate, allowance + (now - allowanceTime) * latestRate)
                    allowanceTime = now
                    if allowance < 1 {
                        if written > 0 { break }
                        wakeable = false
                        let untilNext = Int(((1 - allowance) / latestRate * 1_000).rounded(.up))
                        return .pause(.duration(.milliseconds(max(EventsEndpoint.latestBatchPause, untilNext))))
                    }
                    // Everything since the last read: what is skipped costs no room in the
                    // connection's buffer.
                    guard let read = events.readLatest(reader, requests: Int(allowance), into: &queued) else { return written > 0 ? .bytes(written) : .cut }
                    allowance -= Double(read.requests)
                    if read.skipped > 0 { writeSkipped(read) }
                } else {
                    guard events.read(reader, bytes: buffer.count - written, into: &queued) else { return written > 0 ? .bytes(written) : .cut }
                }
                if queued.isEmpty {
                    if text.written > 0 { continue }  // a `skipped` event alone
                    if written > 0 { break }
                    if let socket, Platform.peerHasClosed(socket) { return .cut }
                    guard MonotonicClock.seconds() - lastWrite >= EventsEndpoint.heartbeatSeconds else {
                        wakeable = pauseMilliseconds >= wakeablePause
                        defer { pauseMilliseconds = min(2 * pauseMilliseconds, EventsEndpoint.longestPause) }
                        return .pause(.duration(.milliseconds(pauseMilliseconds)))
                    }
                    text.raw(EventsEndpoint.keepAlive)
                    continue
                }
                pauseMilliseconds = shortestPause
            }
            // Each stream writes its own frames: a frame shared between streams cost an
            // allocation, a lock and a copy for each event, more than writing it again for a
            // second reader costs.
            let slot = queued[next]
            next += 1
            slot.stored.writeFrame(id: slot.id, to: &text)
        }
        lastWrite = MonotonicClock.seconds()
        return .bytes(written)
    }

    /// A `skipped` event for the requests `read` left out (the journal has them: the gaps
    /// in the `sequence` of the requests sent). It has no `id:`, so that a client that
    /// comes back goes on from the last event it was sent.
    private func writeSkipped(_ read: ServerEvents.LatestRead) {
        text.raw("event: skipped\ndata: ")
        text.beginObject()
        text.key("requests")
        text.unsigned(UInt64(read.skipped))
        text.endObject()
        text.raw("\n\n")
    }

    func suspended(_ waker: Waker) {
        if wakeable { events.wakeOnNext(reader, waker) }
    }

    deinit { events.closeReader(reader) }
}
