import HTTPTransfer

/// Applies a `FaultSpec` to one exchange: the response it sends, or the body it reads.
/// The mechanics of waiting and cutting belong to the adapter; this decides what and when.
enum Faults {
    /// What the faults of a request come to: the server's (`--fault`), overridden by the
    /// first armed rule that counts it, overridden by the `Counterpart-Fault` header,
    /// overridden by query arguments. `path` is the decoded path rules match.
    static func decide(for head: RequestHead, path: @autoclosure () -> String, server: ServerFaults) throws(FaultSpecError) -> FaultDecision {
        // The request's own faults first: an invalid one gets 400 and no rule counts it.
        var header: FaultSpec?
        if let text = head.header("Counterpart-Fault") { header = try FaultSpec(parsing: text) }
        // Most requests have no query: nothing to parse or to override with.
        let query = head.query.isEmpty ? nil : try FaultSpec(query: head.query)
        // Each source makes its own draws (fail, jitter), in its own sequence.
        let serverWide = server.serverWide
        var decision = FaultDecision(spec: serverWide.draws ? serverWide.resolved(draw: server.nextServerWideDraw()) : serverWide, rule: nil)
        if let count = server.count(method: head.method, path: path()), let fault = count.fault {
            decision.spec = decision.spec.overridden(by: fault.resolved(draw: count.draw))
            decision.rule = count.rule
        }
        if let header { decision.spec = decision.spec.overridden(by: header.resolved(draw: 0)) }
        if let query { decision.spec = decision.spec.overridden(by: query.resolved(draw: 0)) }
        return decision
    }

    /// The action that replaces the endpoint's answer (`reset`, `status`), or nil when the
    /// endpoint answers. Decided on the head, before the endpoint runs: an endpoint that
    /// ran would have taken a lock, a slot or a file for an answer that is then dropped.
    static func replacement(_ spec: FaultSpec) -> RequestAction? {
        if spec.reset { return .reset }
        guard let status = spec.status else { return nil }
        var response = Response.json(status, .object([("status", .number(Int64(status))), ("fault", .string(spec.description))]))
        response.delay = spec.delayMilliseconds.map { .milliseconds($0) }
        return .respond(response)
    }

    /// The endpoint's action with the faults of `spec` that shape its exchange applied
    /// (those that replace it are `replacement`'s).
    static func apply(_ spec: FaultSpec, to action: RequestAction, method: String) -> RequestAction {
        switch action {
        case .respond(let response):
            return .respond(apply(spec, to: response, method: method))
        case .receiveBody(let receiver, let interim):
            return .receiveBody(FaultyBodyReceiver(spec, wrapping: receiver, method: method), interim: interim)
        case .reset:
            return .reset
        }
    }

    /// The response with the delay, and its body cut, stalled, throttled, reset or late.
    static func apply(_ spec: FaultSpec, to response: Response, method: String) -> Response {
        var response = response
        if let delay = spec.delayMilliseconds { response.delay = .milliseconds(delay) }
        guard spec.cut != nil || spec.stall != nil || spec.rate != nil || spec.resetAfter != nil || spec.firstByteMilliseconds != nil,
              method != "HEAD" else { return response }
        let length = response.bodyLength
        let source: any ResponseStream
        switch response.body {
        case .empty: return response
        case .bytes(let bytes): source = BytesStream(bytes)
        case .file(let file, let offset, let length): source = SourceRangeStream(file, offset: offset, length: length)
        case .stream(_, let stream): source = stream
        }
        response.body = .stream(length: length, FaultyStream(spec, wrapping: source))
        return response
    }
}

/// The faults one request gets, and the armed rule they came from.
struct FaultDecision {
    var spec: FaultSpec
    var rule: Int?

    /// What the journal says of it; nil for a request without faults.
    var applied: AppliedFault? {
        spec.isEmpty && rule == nil ? nil : AppliedFault(fault: spec.description, rule: rule)
    }
}

/// The fault a request got, as the journal names it.
public struct AppliedFault: Sendable, Equatable {
    /// The faults applied, in the fault-spec grammar (`cut=1048576`).
    public var fault: String
    /// The armed rule that faulted it; nil for `--fault` or the request's own.
    public var rule: Int?

    public init(fault: String, rule: Int? = nil) {
        self.fault = fault
        self.rule = rule
    }
}

/// Throttling, shared by responses and uploads: how many bytes may have passed by now, and
/// how long to wait before some more may.
struct Throttle {
    let bytesPerSecond: UInt64
    private var start: Double?

    init(bytesPerSecond: UInt64) { self.bytesPerSecond = bytesPerSecond }

    /// Bytes allowed in total since the first call.
    mutating func allowed() -> UInt64 {
        let now = MonotonicClock.seconds()
        let start = self.start ?? now
        self.start = start
        return UInt64((now - start) * Double(bytesPerSecond))
    }

    /// The wait until `more` bytes (at least a tenth of a second's worth) are allowed.
    func wait(for more: UInt64) -> Duration {
        let bytes = max(more, max(1, bytesPerSecond / 10))
        return .nanoseconds(Int64(min(Double(bytes) / Double(bytesPerSecond) * 1e9, 1e9)))
    }
}

/// A response body with `cut`, `stall`, `rate`, `reset=N` and `first-byte` applied;
/// `position` counts bytes of this response (a Range response's own body).
final class FaultyStream: ResponseStream {
    private let spec: FaultSpec
    private let source: any ResponseStream
    private var throttle: Throttle?
    /// Whether the first byte has waited its `first-byte` (the headers are out by then).
    private var firstByteWaited = false

    init(_ spec: FaultSpec, wrapping source: any ResponseStream) {
        self.spec = spec
        self.source = source
        throttle = spec.rate.map(Throttle.init)
    }

    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        if let wait = spec.firstByteMilliseconds, !firstByteWaited {
            firstByteWaited = true
            return .pause(.duration(.milliseconds(wait)))
        }
        if let reset = spec.resetAfter, position >= reset { return .reset }
        if let cut = spec.cut, position >= cut { return .cut }
        if let stall = spec.stall, position >= stall { return .pause(.untilClientLeaves) }
        var limit = UInt64(buffer.count)
        if let reset = spec.resetAfter { limit = min(limit, reset - position) }
        if let cut = spec.cut { limit = min(limit, cut - position) }
        if let stall = spec.stall { limit = min(limit, stall - position) }
        if var throttle {
            let allowed = throttle.allowed()
            self.throttle = throttle
            guard allowed > position else { return .pause(.duration(throttle.wait(for: limit))) }
            limit = min(limit, allowed - position)
        }
        return source.read(at: position, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(limit)]))
    }
}

/// A request body read with `cut`, `stall`, `rate` and `reset=N` applied. A cut, reset or
/// stalled upload is abandoned, so nothing of it stays in the uploads folder.
final class FaultyBodyReceiver: RequestBodyReceiver {
    private let spec: FaultSpec
    private let inner: any RequestBodyReceiver
    private let method: String
    private var throttle: Throttle?
    private var received: UInt64 = 0
    private var stalled = false

    init(_ spec: FaultSpec, wrapping inner: any RequestBodyReceiver, method: String) {
        self.spec = spec
        self.inner = inner
        self.method = method
        throttle = spec.rate.map(Throttle.init)
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        if let reset = spec.resetAfter, received + UInt64(chunk.count) >= reset {
            inner.abandon()
            return .reset
        }
        if let cut = spec.cut, received + UInt64(chunk.count) >= cut {
            inner.abandon()
            return .close
        }
        var take = UInt64(chunk.count)
        var pause: Pause?
        if let stall = spec.stall, received + take >= stall {
            take = stall - received
            pause = .untilClientLeaves
        }
        if var throttle {
            let allowed = throttle.allowed()
            self.throttle = throttle
            if received + take > allowed {
                take = allowed > received ? allowed - received : 0
                pause = pause ?? .duration(throttle.wait(for: UInt64(chunk.count) - take))
            }
        }
        if take > 0 {
            switch inner.receive(UnsafeRawBufferPointer(rebasing: chunk[0..<Int(take)])) {
            case .close: return .close
            case .reset: return .reset
            case .consumed, .pause: break
            }
            received += take
        }
        guard let pause else { return .consumed }
        if pause == .untilClientLeaves, !stalled {
            // It can never complete: drop what it stored now, not when the client leaves.
            stalled = true
            inner.abandon()
        }
        return .pause(consumed: Int(take), pause)
    }

    func finish() -> Response { Faults.apply(spec, to: inner.finish(), method: method) }

    func abandon() { inner.abandon() }

    var receivedParts: [ReceivedPart] { inner.receivedParts }
}

/// Bytes in memory, read as a stream.
final class BytesStream: ResponseStream {
    private let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        guard position < UInt64(bytes.count) else { return .cut }
        let count = min(buffer.count, bytes.count - Int(position))
        bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + Int(position), byteCount: count) }
        return .bytes(count)
    }
}
