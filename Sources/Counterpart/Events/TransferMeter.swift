import CMicroHTTPD
import HTTPTransfer
import Synchronization

extension ServerEvents {
    /// `action` with its request body (an upload) or its streamed response (a generated or
    /// throttled download) counted as it passes, while someone listens; as it is otherwise.
    /// A file sent with sendfile passes without the server touching its bytes: its progress
    /// is read from the connection's socket instead (`SentFiles`).
    func metered(_ action: RequestAction, _ head: RequestHead) -> RequestAction {
        guard listening > 0 else { return action }
        switch action {
        case .receiveBody(let receiver, let interim):
            let meter = TransferMeter(self, .upload, head, total: head.contentLength)
            return .receiveBody(MeteredBodyReceiver(receiver, meter), interim: interim)
        case .respond(let response) where head.method != "HEAD":
            switch response.body {
            case .stream(let length, let stream):
                var metered = response  // copied only here: most responses pass as they are
                metered.body = .stream(length: length, MeteredStream(stream, TransferMeter(self, .download, head, total: length)))
                return .respond(metered)
            case .file(_, _, let length) where length > ResponseBody.inMemoryLimit && response.status != 204 && response.status != 304:
                // Larger files go with sendfile (ResponseQueue); smaller ones in one write.
                if let connection = head.connection,
                   let meter = SentFileMeter(self, head, socket: connection.socket, length: length,
                                             headBytes: SentFileMeter.headBytes(of: response)) {
                    sentFiles.start(meter, on: connection)
                }
                return action
            case .file, .empty, .bytes:
                return action
            }
        case .respond, .reset:
            return action
        }
    }
}

/// Downloads sent with sendfile, while someone listens: the server hands the file to the
/// kernel and never sees its bytes go, so their progress is read from the connection's
/// socket every `sampleInterval` — the bytes the client's TCP has acknowledged since the
/// response began (`tcpi_bytes_acked`), less the response's head, at most the body's length
/// — and told as the streamed ones are (at most every 250 ms). The request's end tells the
/// last event, with the bytes the server counts as sent. A task samples only while such a
/// download goes on; a request on another kind of response pays one atomic load.
final class SentFiles: Sendable {
    static let sampleInterval = 0.05

    private struct State {
        var meters: [ObjectIdentifier: SentFileMeter] = [:]
        var sampler: PeriodicTask?
    }

    private let state = Mutex(State())
    private let count = Atomic<Int>(0)

    /// `meter` is `connection`'s response from now until `end`.
    func start(_ meter: SentFileMeter, on connection: WatchedConnection) {
        let replaced = state.withLock { state -> SentFileMeter? in
            let replaced = state.meters.updateValue(meter, forKey: ObjectIdentifier(connection))
            if replaced == nil { count.add(1, ordering: .relaxed) }
            if state.sampler == nil {
                state.sampler = PeriodicTask(every: Self.sampleInterval) { [weak self] in self?.sample() }
            }
            return replaced
        }
        replaced?.end(bytesSent: nil)
    }

    /// `connection`'s request has ended (before its socket closes), having sent
    /// `bytesSent` body bytes when known.
    func end(_ connection: WatchedConnection?, bytesSent: UInt64?) {
        guard count.load(ordering: .relaxed) > 0, let connection else { return }
        let ended = state.withLock { state -> SentFileMeter? in
            guard let meter = state.meters.removeValue(forKey: ObjectIdentifier(connection)) else { return nil }
            count.subtract(1, ordering: .relaxed)
            if state.meters.isEmpty {
                state.sampler?.cancel()
                state.sampler = nil
            }
            return meter
        }
        ended?.end(bytesSent: bytesSent)
    }

    /// The server is stopping.
    func stop() {
        let meters = state.withLock { state -> [SentFileMeter] in
            state.sampler?.cancel()
            state.sampler = nil
            count.store(0, ordering: .relaxed)
            defer { state.meters.removeAll() }
            return Array(state.meters.values)
        }
        for meter in meters { meter.end(bytesSent: nil) }
    }

    private func sample() {
        let meters = state.withLock { Array($0.meters.values) }
        for meter in meters { meter.sample() }
    }
}

/// One download sent with sendfile, metered from its connection's socket.
final class SentFileMeter: Sendable {
    private struct State {
        let meter: TransferMeter
        var ended = false
    }

    private let state: Mutex<State>
    private let socket: Int32
    /// Bytes written to the socket before this response: all of them acknowledged, and
    /// those still in its send queue.
    private let before: UInt64
    private let head: UInt64
    private let length: UInt64

    /// nil when the socket does not tell what it has sent (not Linux).
    init?(_ events: ServerEvents, _ request: RequestHead, socket: Int32, length: UInt64, headBytes: UInt64) {
        let acked = cp_tcp_bytes_acked(socket)
        guard acked >= 0, let queued = Platform.unsentBytes(socket) else { return nil }
        before = UInt64(acked) + UInt64(queued)
        state = Mutex(State(meter: TransferMeter(events, .download, request, total: length)))
        self.socket = socket
        self.length = length
        head = headBytes
    }

    /// About the bytes of `response`'s head as libmicrohttpd writes it: the status line, the
    /// fields, and the Date and Content-Length it adds.
    static func headBytes(of response: Response) -> UInt64 {
        let reason = MHD_get_reason_phrase_len_for(UInt32(response.status))
        var bytes = "HTTP/1.1 200 \r\n".utf8.count + reason
        for field in response.headers { bytes += field.name.utf8.count + field.value.utf8.count + 4 }
        bytes += "Date: Sat, 05 Dec 2026 08:00:00 GMT\r\n".utf8.count
        bytes += "Content-Length: \r\n".utf8.count + String(response.bodyLength).utf8.count + 2
        return UInt64(bytes)
    }

    /// The body bytes the client has acknowledged; nil once the socket does not tell.
    private func acknowledged() -> UInt64? {
        let acked = cp_tcp_bytes_acked(socket)
        guard acked >= 0 else { return nil }
        let sent = UInt64(acked)
        return sent > before + head ? min(length, sent - before - head) : 0
    }

    func sample() {
        state.withLock { state in
            // Not after the end: the socket may be another connection's by then.
            guard !state.ended, let bytes = acknowledged() else { return }
            state.meter.reach(bytes)
        }
    }

    func end(bytesSent: UInt64?) {
        state.withLock { state in
            guard !state.ended else { return }
            if let bytes = bytesSent ?? acknowledged() { state.meter.reach(bytes, telling: false) }
            state.ended = true
            state.meter.end()
        }
    }
}

/// Counts one transfer's bytes and tells them at most every `transferInterval`, and once
/// when it ends if it was told before: a transfer over before its first interval is only
/// its request's event. One connection's thread at a time.
final class TransferMeter {
    private let events: ServerEvents
    private var transfer: ServerEvent.Transfer
    private let started = MonotonicClock.seconds()
    private var lastTime: Double
    private var lastBytes: UInt64 = 0
    private var told = false
    private var ended = false

    init(_ events: ServerEvents, _ direction: ServerEvent.Transfer.Direction, _ head: RequestHead, total: UInt64?) {
        self.events = events
        transfer = ServerEvent.Transfer(id: events.newTransferID(), direction: direction, method: head.method, path: head.target,
                                        bytes: 0, total: total, bytesPerSecond: 0, ended: false)
        lastTime = started
    }

    func add(_ count: Int) {
        transfer.bytes += UInt64(count)
        let now = MonotonicClock.seconds()
        if now - lastTime >= ServerEvents.transferInterval { tell(now) }
    }

    /// The transfer has reached `bytes` in all (a count read from elsewhere: a sendfile
    /// download's socket); told as `add` tells, unless `telling` is false.
    func reach(_ bytes: UInt64, telling: Bool = true) {
        transfer.bytes = max(transfer.bytes, bytes)
        guard telling else { return }
        let now = MonotonicClock.seconds()
        if now - lastTime >= ServerEvents.transferInterval { tell(now) }
    }

    func end() {
        guard !ended else { return }
        ended = true
        guard told else { return }
        transfer.ended = true
        tell(MonotonicClock.seconds())
    }

    private func tell(_ now: Double) {
        let seconds = transfer.ended ? now - started : now - lastTime
        let bytes = transfer.ended ? transfer.bytes : transfer.bytes - lastBytes
        transfer.bytesPerSecond = seconds > 0 ? Double(bytes) / seconds : 0
        lastTime = now
        lastBytes = transfer.bytes
        told = true
        events.transfer(transfer)
    }

    deinit { end() }
}

/// An upload's body, counted on its way to the endpoint.
final class MeteredBodyReceiver: RequestBodyReceiver {
    private let inner: any RequestBodyReceiver
    private let meter: TransferMeter

    init(_ inner: any RequestBodyReceiver, _ meter: TransferMeter) {
        self.inner = inner
        self.meter = meter
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        let intake = inner.receive(chunk)
        switch intake {
        case .consumed: meter.add(chunk.count)
        case .pause(let consumed, _): meter.add(consumed)
        case .close, .reset: meter.end()
        }
        return intake
    }

    func finish() -> Response {
        meter.end()
        return inner.finish()
    }

    func abandon() {
        meter.end()
        inner.abandon()
    }

    var receivedParts: [ReceivedPart] { inner.receivedParts }
}

/// A streamed response, counted as the connection takes it.
final class MeteredStream: ResponseStream {
    private let inner: any ResponseStream
    private let meter: TransferMeter

    init(_ inner: any ResponseStream, _ meter: TransferMeter) {
        self.inner = inner
        self.meter = meter
    }

    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        let read = inner.read(at: position, into: buffer)
        switch read {
        case .bytes(let count): meter.add(count)
        case .pause: break
        case .cut, .reset: meter.end()
        }
        return read
    }

    func suspended(_ waker: Waker) { inner.suspended(waker) }
}
