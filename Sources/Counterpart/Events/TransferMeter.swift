import HTTPTransfer

extension ServerEvents {
    /// `action` with its request body (an upload) or its streamed response (a generated or
    /// throttled download) counted as it passes, while someone listens; as it is otherwise.
    /// Files sent with sendfile pass without the server touching their bytes: they show
    /// as the request's event when they end.
    func metered(_ action: RequestAction, _ head: RequestHead) -> RequestAction {
        guard listening > 0 else { return action }
        switch action {
        case .receiveBody(let receiver, let interim):
            let meter = TransferMeter(self, .upload, head, total: head.contentLength)
            return .receiveBody(MeteredBodyReceiver(receiver, meter), interim: interim)
        case .respond(var response) where head.method != "HEAD":
            guard case .stream(let length, let stream) = response.body else { return action }
            response.body = .stream(length: length, MeteredStream(stream, TransferMeter(self, .download, head, total: length)))
            return .respond(response)
        case .respond, .reset:
            return action
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
