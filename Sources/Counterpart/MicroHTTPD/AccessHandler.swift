import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

// libmicrohttpd's request callbacks: the head, each body chunk, the end of a request, and
// connections opening and closing. What to answer is the handler's (the router's).

/// Per-request state kept in MHD's `con_cls`. MHD calls a connection from one thread at a
/// time, so this is never touched concurrently.
final class RequestState {
    var head: RequestHead
    /// When the head arrived, on the monotonic clock (seconds).
    let started: Double
    let receivedAt = HTTPDate.now
    var receiver: (any RequestBodyReceiver)?
    /// A response decided on the head, queued when the request is complete.
    var pending: Response?
    var answered = false
    var status = 0
    var bodyBytes: UInt64 = 0
    var requestBodyBytes: UInt64 = 0
    /// Bytes a streamed response has produced; nil for other bodies.
    var streamed: StreamCounter?
    /// When the last callback of the request returned (first: when the head arrived).
    var lastCallback: Double

    init(head: RequestHead) {
        self.head = head
        started = MonotonicClock.seconds()
        lastCallback = started
    }
}

let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadDataSize, requestContext in
    guard let cls, let connection, let requestContext, let uploadDataSize else { return MHD_Result.NO }
    let dispatcher = Unmanaged<Dispatcher>.fromOpaque(cls).takeUnretainedValue()

    guard let existing = requestContext.pointee else {
        // First call: the head has arrived.
        dispatcher.inFlight.add(1, ordering: .relaxed)
        let state = RequestState(head: readHead(connection, url: url, method: method, version: version))
        requestContext.pointee = Unmanaged.passRetained(state).toOpaque()
        let action: RequestAction
        if let refusal = headRefusal(state.head) {
            action = .respond(refusal)
        } else if let watched = state.head.connection, let held = dispatcher.watch.headArrived(watched) {
            action = .respond(tooManyConnections(held, limit: dispatcher.watch.maxPerClient, from: state.head.clientAddress))
        } else {
            action = dispatcher.handler.handle(&state.head)
        }
        switch action {
        case .reset:
            resetConnection(connection)
            return MHD_Result.NO
        case .respond(let response) where state.head.announcesBody:
            dispatcher.calledBack(connection, &state.lastCallback)
            let declared = state.head.contentLength
            let canDrain = declared.map { $0 <= dispatcher.maxDrainBytes } ?? true
            if response.delay == nil, state.head.expectsContinue || !canDrain || response.closesConnection {
                // The client waits for `100 Continue` (or sends too much to drain, or the
                // body cannot be trusted): answer now; MHD skips the body and closes the
                // connection after the response.
                return queue(response, on: connection, for: state, dispatcher)
            }
            // A client that sends its body at once would see the connection close under
            // it and miss the answer: read the body, drop it, then answer.
            state.receiver = BodyDrain(response: response, limit: dispatcher.maxDrainBytes)
            if let watched = state.head.connection { dispatcher.watch.bodyStarted(watched) }
            return MHD_Result.YES
        case .respond(let response):
            // Queued once MHD has the whole request, so the connection can be kept alive
            // (the call for it, at once, restarts the idle timer if this one was slow).
            state.pending = response
            return MHD_Result.YES
        case .receiveBody(let receiver, let interim):
            dispatcher.calledBack(connection, &state.lastCallback)
            state.receiver = receiver
            if state.head.announcesBody, let watched = state.head.connection { dispatcher.watch.bodyStarted(watched) }
            for response in interim where !sendInterim(response, on: connection) {
                return MHD_Result.NO
            }
            return MHD_Result.YES
        }
    }

    let state = Unmanaged<RequestState>.fromOpaque(existing).takeUnretainedValue()
    if uploadDataSize.pointee > 0 {
        guard let receiver = state.receiver, !dispatcher.pauses.clientLeft(connection) else {
            uploadDataSize.pointee = 0
            return state.receiver == nil ? MHD_Result.YES : MHD_Result.NO
        }
        let offered = uploadDataSize.pointee
        if let watched = state.head.connection { dispatcher.watch.bodyArrived(watched) }
        let intake = receiver.receive(UnsafeRawBufferPointer(start: uploadData, count: offered))
        dispatcher.calledBack(connection, &state.lastCallback)
        switch intake {
        case .consumed:
            state.requestBodyBytes += UInt64(offered)
            uploadDataSize.pointee = 0
            return MHD_Result.YES
        case .pause(let consumed, let pause):
            state.requestBodyBytes += UInt64(consumed)
            uploadDataSize.pointee = offered - consumed
            if let watched = state.head.connection { dispatcher.watch.held(watched) }
            return dispatcher.pauses.hold(connection, for: pause) == .refused ? MHD_Result.NO : MHD_Result.YES
        case .close:
            state.requestBodyBytes += UInt64(offered)
            return MHD_Result.NO
        case .reset:
            resetConnection(connection)
            return MHD_Result.NO
        }
    }
    guard !state.answered else { return MHD_Result.YES }
    if let watched = state.head.connection { dispatcher.watch.bodyEnded(watched) }
    if let pending = state.pending {
        dispatcher.calledBack(connection, &state.lastCallback)
        return queue(pending, on: connection, for: state, dispatcher)
    }
    guard let receiver = state.receiver else { return MHD_Result.YES }
    let response = receiver.finish()
    dispatcher.calledBack(connection, &state.lastCallback)
    return queue(response, on: connection, for: state, dispatcher)
}

let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, requestContext, termination in
    guard let cls else { return }
    let dispatcher = Unmanaged<Dispatcher>.fromOpaque(cls).takeUnretainedValue()
    if let connection, let watched = watchedConnection(connection) { dispatcher.watch.requestEnded(watched) }
    guard let requestContext, let raw = requestContext.pointee else { return }
    requestContext.pointee = nil
    let state = Unmanaged<RequestState>.fromOpaque(raw).takeRetainedValue()
    if !state.answered { state.receiver?.abandon() }
    if !state.answered, state.head.connection?.timedOut.load(ordering: .relaxed) == true { state.status = 408 }
    let seconds = MonotonicClock.seconds() - state.started
    let completed = termination == MHD_RequestTerminationCode.REQUEST_TERMINATED_COMPLETED_OK
    dispatcher.handler.completed(CompletedRequest(
        head: state.head, receivedAt: state.receivedAt, status: state.status, requestBodyBytes: state.requestBodyBytes,
        bodyBytes: state.bodyBytes, bytesSent: completed ? state.bodyBytes : state.streamed?.count.load(ordering: .relaxed),
        seconds: seconds, completed: completed, parts: state.receiver?.receivedParts ?? []))
    dispatcher.inFlight.subtract(1, ordering: .relaxed)
}

let connectionChanged: MHD_NotifyConnectionCallback = { cls, connection, socketContext, change in
    guard let cls, let connection, let socketContext else { return }
    let watch = Unmanaged<Dispatcher>.fromOpaque(cls).takeUnretainedValue().watch
    // MHD_CONNECTION_NOTIFY_STARTED is 0 (Swift does not import the constant by name).
    if change.rawValue == 0 {
        let watched = watch.opened(socket: cp_connection_fd(connection), client: SocketAddress.describe(cp_client_address(connection)))
        // Kept with the connection (its socket context) until it closes.
        socketContext.pointee = Unmanaged.passRetained(watched).toOpaque()
    } else if let raw = socketContext.pointee {
        socketContext.pointee = nil
        watch.closed(Unmanaged<WatchedConnection>.fromOpaque(raw).takeRetainedValue())
    }
}

/// The watch's record of `connection`, kept in its socket context from when it opened.
func watchedConnection(_ connection: OpaquePointer) -> WatchedConnection? {
    cp_connection_context(connection).map { Unmanaged<WatchedConnection>.fromOpaque($0).takeUnretainedValue() }
}

func connectionKey(_ connection: OpaquePointer) -> UInt {
    UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
}

func readHead(
    _ connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
    version: UnsafePointer<CChar>?
) -> RequestHead {
    var collected = CollectedValues()
    collected.headers.reserveCapacity(16)
    withUnsafeMutablePointer(to: &collected) { pointer in
        _ = cp_headers_and_arguments(connection, collectValue, pointer)
    }
    let watched = watchedConnection(connection)
    return RequestHead(
        method: method.map { String(cString: $0) } ?? "",
        path: RequestHead.path(ofTarget: url.map { String(cString: $0) } ?? "/"),
        query: collected.query,
        version: version.map { String(cString: $0) } ?? "",
        headers: collected.headers,
        kinds: collected.kinds,
        clientAddress: watched?.client ?? SocketAddress.describe(cp_client_address(connection)),
        connection: watched)
}

struct CollectedValues {
    var headers: [HTTPField] = []
    var kinds = FieldKinds()
    var query: [(name: String, value: String?)] = []
}

let collectValue: MHD_KeyValueIterator = { cls, kind, key, value in
    guard let cls, let key else { return MHD_Result.YES }
    let collected = cls.assumingMemoryBound(to: CollectedValues.self)
    let name = String(cString: key)
    if kind == MHD_ValueKind.GET_ARGUMENT_KIND {
        collected.pointee.query.append((name, value.map { String(cString: $0) }))
    } else {
        collected.pointee.kinds.note(UnsafeBufferPointer(start: UnsafeRawPointer(key).assumingMemoryBound(to: UInt8.self), count: strlen(key)),
                                     at: collected.pointee.headers.count)
        collected.pointee.headers.append(HTTPField(name: name, value: value.map { String(cString: $0) } ?? ""))
    }
    return MHD_Result.YES
}

/// Ends a connection with a TCP reset (`Platform.resetConnection`); MHD then closes what is
/// left. The reset throws away what the socket has not sent yet, so `afterSending` first
/// waits (up to a second) for its send queue to empty: the client gets every byte written
/// before the reset.
func resetConnection(_ connection: OpaquePointer, afterSending: Bool = false) {
    let socket = cp_connection_fd(connection)
    if afterSending {
        var waited = 0
        while waited < 1000, let unsent = Platform.unsentBytes(socket), unsent > 0 {
            usleep(1000)
            waited += 1
        }
    }
    Platform.resetConnection(socket)
}
