import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

/// The one owner of libmicrohttpd: the daemon, the C callbacks and their `Unmanaged`
/// contexts, and the conversion of `Response` values into MHD responses. Nothing else in
/// Counterpart imports `CMicroHTTPD`.
final class MicroHTTPDDaemon: Sendable {
    struct Options: Sendable {
        var host: String
        var port: UInt16
        /// Threads polling connections (a pool); 0 means a thread per connection.
        var threads: Int
        /// Seconds a connection may stay idle before it is closed.
        var connectionTimeout: UInt32
        /// Memory per connection for headers and read buffer; body chunks are handed over
        /// in pieces of about half of it.
        var connectionMemoryLimit: Int
        var maxConnections: UInt32
        /// Connections one client address may hold before its requests get 503 (at twice as
        /// many, more are closed as they come); 0: no limit.
        var maxConnectionsPerClient: Int
        /// Seconds a connection has to send a complete request head; 0: no limit.
        var headTimeout: Int
        /// Body bytes read and thrown away so that a response decided on the head reaches a
        /// client that sends its body without waiting for `100 Continue`.
        var maxDrainBytes: UInt64
        var tls: TLSCredentials?
    }

    let port: UInt16
    private let daemon: DaemonPointer
    private let dispatcher: Dispatcher
    /// Kept alive as long as the daemon: MHD holds its address as the handler's context.
    private let dispatcherReference: Unmanaged<Dispatcher>

    init(options: Options, handler: any RequestHandler) throws(CounterpartServer.StartError) {
        let address = try SocketAddress(host: options.host, port: options.port)
        dispatcher = Dispatcher(handler: handler, maxDrainBytes: options.maxDrainBytes, threadPerConnection: options.threads == 0,
                                watch: ConnectionWatch(maxPerClient: options.maxConnectionsPerClient, headTimeout: options.headTimeout))
        dispatcherReference = Unmanaged.passRetained(dispatcher)
        let context = dispatcherReference.toOpaque()

        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_ITC.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        var items: [MHD_OptionItem] = [
            // The logger first, so that MHD reports everything through it.
            MHD_OptionItem(option: .EXTERNAL_LOGGER, value: unsafeBitCast(logMessage, to: Int.self), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_TIMEOUT, value: Int(options.connectionTimeout), ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_MEMORY_LIMIT, value: options.connectionMemoryLimit, ptr_value: nil),
            MHD_OptionItem(option: .CONNECTION_LIMIT, value: Int(options.maxConnections), ptr_value: nil),
            MHD_OptionItem(option: .NOTIFY_COMPLETED, value: unsafeBitCast(requestCompleted, to: Int.self), ptr_value: context),
            MHD_OptionItem(option: .NOTIFY_CONNECTION, value: unsafeBitCast(connectionChanged, to: Int.self), ptr_value: context),
            MHD_OptionItem(option: .UNESCAPE_CALLBACK, value: unsafeBitCast(keepEscaped, to: Int.self), ptr_value: nil),
        ]
        if options.maxConnectionsPerClient > 0 {
            // Up to the limit a client's extra connections get a 503 that says why; past
            // twice the limit libmicrohttpd closes them at once, so one client cannot take
            // every connection the server has.
            let hardLimit = min(options.maxConnectionsPerClient * 2, Int(UInt32.max))
            items.append(MHD_OptionItem(option: .PER_IP_CONNECTION_LIMIT, value: hardLimit, ptr_value: nil))
        }
        // poll(), not epoll: libmicrohttpd 0.9.75's edge-triggered epoll loop misses a client's
        // FIN that arrives behind unread body bytes, so an upload cut by a client that closed
        // normally would linger until the idle timeout. Measured no slower (see README).
        if options.threads > 0 {
            // Suspend/resume carries the delay, rate and stall faults.
            flags |= MHD_USE_POLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            items.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: options.threads, ptr_value: nil))
        } else {
            flags |= MHD_USE_THREAD_PER_CONNECTION.rawValue | MHD_USE_POLL.rawValue
        }
        flags |= MHD_USE_ERROR_LOG.rawValue

        // The PEM texts only have to live through the start: GnuTLS parses them there.
        let certificate = strdup(options.tls?.certificatePEM ?? "")
        let key = strdup(options.tls?.privateKeyPEM ?? "")
        defer {
            free(certificate)
            free(key)
        }
        if options.tls != nil {
            flags |= MHD_USE_TLS.rawValue
            items.append(MHD_OptionItem(option: .HTTPS_MEM_CERT, value: 0, ptr_value: UnsafeMutableRawPointer(certificate)))
            items.append(MHD_OptionItem(option: .HTTPS_MEM_KEY, value: 0, ptr_value: UnsafeMutableRawPointer(key)))
        }
        let started: OpaquePointer? = address.withSockaddr { sockaddr in
            items.append(MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: UnsafeMutableRawPointer(mutating: sockaddr)))
            items.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))
            return items.withUnsafeBufferPointer { list in
                cp_start_daemon(flags, options.port, accessHandler, context, list.baseAddress)
            }
        }
        guard let started else {
            dispatcher.watch.stop()
            dispatcherReference.release()
            throw .cannotListen(host: options.host, port: options.port, reason: FileSystem.lastError())
        }
        daemon = DaemonPointer(pointer: started)
        port = cp_daemon_port(started)
    }

    /// Stops accepting connections; requests in flight go on.
    func stopAccepting() {
        let socket = MHD_quiesce_daemon(daemon.pointer)
        // MHD hands the listening socket back; it is closed after MHD_stop_daemon (see its doc).
        if socket >= 0 { dispatcher.quiescedSocket.withLock { $0 = socket } }
    }

    /// Requests that have begun and not completed.
    var requestsInFlight: Int { dispatcher.inFlight.load(ordering: .relaxed) }

    /// Stops the daemon: connections still open are cut; their requests complete as
    /// terminated (uploads in progress are abandoned).
    func stop() {
        dispatcher.pauses.resumeAllForStop()
        MHD_stop_daemon(daemon.pointer)
        dispatcher.watch.stop()
        if let socket = dispatcher.quiescedSocket.withLock({ $0 }) { close(socket) }
        dispatcherReference.release()
    }
}

/// The daemon handle. MHD's daemon functions may be called from any thread; the pointer
/// is set once in `init` and never changes, so sharing it is safe.
private struct DaemonPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The handler's context, shared by all MHD threads: only `let`s and synchronized state.
private final class Dispatcher: Sendable {
    let handler: any RequestHandler
    let maxDrainBytes: UInt64
    let inFlight = Atomic<Int>(0)
    let quiescedSocket = Mutex<Int32?>(nil)
    let pauses: Pauses
    let watch: ConnectionWatch

    init(handler: any RequestHandler, maxDrainBytes: UInt64, threadPerConnection: Bool, watch: ConnectionWatch) {
        self.handler = handler
        self.maxDrainBytes = maxDrainBytes
        pauses = Pauses(blocking: threadPerConnection)
        self.watch = watch
    }
}

/// Holds connections still for a while (faults: delay, rate, stall). In the thread pool
/// the connection is suspended and a timer resumes it; MHD must resume every suspended
/// connection before it stops, and a suspended connection sees no client disconnect, so a
/// stalled one is checked every second. With a thread per connection (where MHD cannot
/// suspend) the connection's own thread sleeps instead, checking the same things.
private final class Pauses: Sendable {
    /// What became of a request to hold a connection.
    enum Hold {
        /// Suspended: MHD calls again once it resumes.
        case suspended
        /// The wait is over already (a thread per connection slept through it).
        case waited
        /// The server is stopping, or the client left: end the exchange.
        case refused
    }

    private struct State {
        var suspended: [UInt: ConnectionPointer] = [:]
        /// Stalled connections whose client has gone: cut when they resume.
        var abandoned: Set<UInt> = []
        var stopping = false
    }

    private let state = Mutex(State())
    private let timers = DispatchQueue(label: "counterpart.pauses")
    private let blocking: Bool
    private static let livenessInterval = Duration.seconds(1)

    init(blocking: Bool) { self.blocking = blocking }

    /// Holds `connection` still (from an MHD callback of its own) for `pause`.
    func hold(_ connection: OpaquePointer, for pause: Pause) -> Hold {
        blocking ? sleep(connection, for: pause) : suspend(connection, for: pause)
    }

    private func suspend(_ connection: OpaquePointer, for pause: Pause) -> Hold {
        let key = connectionKey(connection)
        let suspended = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            // In the table: suspended and not yet asked to resume. libmicrohttpd may still
            // call back before the suspension takes hold (the next chunk of a chunked body);
            // suspending twice is undefined there (its suspended list breaks, connections
            // are lost and the stop aborts), so the second hold only adds its wait.
            if state.suspended[key] == nil {
                MHD_suspend_connection(connection)
                state.suspended[key] = ConnectionPointer(pointer: connection)
            }
            return true
        }
        guard suspended else { return .refused }
        switch pause {
        case .duration(let duration):
            schedule(after: duration) { [self] in resume(key) }
        case .untilClientLeaves:
            watch(key, socket: cp_connection_fd(connection))
        }
        return .suspended
    }

    private func sleep(_ connection: OpaquePointer, for pause: Pause) -> Hold {
        let deadline: ContinuousClock.Instant? = switch pause {
        case .duration(let duration): .now + duration
        case .untilClientLeaves: nil
        }
        let socket = cp_connection_fd(connection)
        while true {
            if state.withLock({ $0.stopping }) { return .refused }
            let remaining = deadline.map { $0 - .now } ?? Self.livenessInterval
            if remaining <= .zero { return .waited }
            Thread.sleep(forTimeInterval: Double(min(remaining, Self.livenessInterval).components.seconds)
                + Double(min(remaining, Self.livenessInterval).components.attoseconds) / 1e18)
            if deadline == nil, Self.peerClosed(socket) { return .refused }
        }
    }

    /// Whether the client of a stalled connection has gone (asked once, after it resumes).
    func clientLeft(_ connection: OpaquePointer) -> Bool {
        state.withLock { $0.abandoned.remove(connectionKey(connection)) != nil }
    }

    /// Resumes every suspended connection and refuses new holds: before MHD stops.
    func resumeAllForStop() {
        state.withLock { state in
            state.stopping = true
            for connection in state.suspended.values { MHD_resume_connection(connection.pointer) }
            state.suspended.removeAll()
        }
    }

    private func resume(_ key: UInt) {
        state.withLock { state in
            // Gone from the table: already resumed for the stop.
            if let connection = state.suspended.removeValue(forKey: key) { MHD_resume_connection(connection.pointer) }
        }
    }

    /// Every second, peeks at a stalled connection's socket; once the client has left,
    /// the connection is resumed to be cut.
    private func watch(_ key: UInt, socket: Int32) {
        schedule(after: Self.livenessInterval) { [self] in
            let gone = Self.peerClosed(socket)
            let stillSuspended = state.withLock { state -> Bool in
                guard state.suspended[key] != nil else { return false }
                if gone { state.abandoned.insert(key) }
                return true
            }
            guard stillSuspended else { return }
            if gone { resume(key) } else { watch(key, socket: socket) }
        }
    }

    /// The client has shut its side down or the socket has failed: it has gone (also when
    /// bytes it sent are still unread, as a stalled upload's rest).
    private static func peerClosed(_ socket: Int32) -> Bool { Platform.peerHasClosed(socket) }

    private func schedule(after duration: Duration, _ work: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        timers.asyncAfter(deadline: .now() + .nanoseconds(max(0, nanoseconds)), execute: work)
    }
}

/// A connection handle kept while it is suspended; MHD keeps the connection alive until
/// it is resumed, so the pointer stays valid as long as it is in the table.
private struct ConnectionPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Per-request state kept in MHD's `con_cls`. MHD calls a connection from one thread at a
/// time, so this is never touched concurrently.
private final class RequestState {
    var head: RequestHead
    let started: timespec
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

    init(head: RequestHead) {
        self.head = head
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        started = now
    }
}

private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadDataSize, requestContext in
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
        } else if let watched = watchedConnection(connection), let held = dispatcher.watch.headArrived(watched) {
            action = .respond(tooManyConnections(held, limit: dispatcher.watch.maxPerClient, from: state.head.clientAddress))
        } else {
            action = dispatcher.handler.handle(&state.head)
        }
        switch action {
        case .reset:
            resetConnection(connection)
            return MHD_Result.NO
        case .respond(let response) where state.head.announcesBody:
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
            return MHD_Result.YES
        case .respond(let response):
            // Queued once MHD has the whole request, so the connection can be kept alive.
            state.pending = response
            return MHD_Result.YES
        case .receiveBody(let receiver, let interim):
            state.receiver = receiver
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
        switch receiver.receive(UnsafeRawBufferPointer(start: uploadData, count: offered)) {
        case .consumed:
            state.requestBodyBytes += UInt64(offered)
            uploadDataSize.pointee = 0
            return MHD_Result.YES
        case .pause(let consumed, let pause):
            state.requestBodyBytes += UInt64(consumed)
            uploadDataSize.pointee = offered - consumed
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
    if let pending = state.pending {
        return queue(pending, on: connection, for: state, dispatcher)
    }
    guard let receiver = state.receiver else { return MHD_Result.YES }
    return queue(receiver.finish(), on: connection, for: state, dispatcher)
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, requestContext, termination in
    guard let cls else { return }
    let dispatcher = Unmanaged<Dispatcher>.fromOpaque(cls).takeUnretainedValue()
    if let connection, let watched = watchedConnection(connection) { dispatcher.watch.requestEnded(watched) }
    guard let requestContext, let raw = requestContext.pointee else { return }
    requestContext.pointee = nil
    let state = Unmanaged<RequestState>.fromOpaque(raw).takeRetainedValue()
    if !state.answered { state.receiver?.abandon() }
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    let seconds = Double(now.tv_sec - state.started.tv_sec) + Double(now.tv_nsec - state.started.tv_nsec) / 1e9
    let completed = termination == MHD_RequestTerminationCode.REQUEST_TERMINATED_COMPLETED_OK
    dispatcher.handler.completed(CompletedRequest(
        head: state.head, receivedAt: state.receivedAt, status: state.status, requestBodyBytes: state.requestBodyBytes,
        bodyBytes: state.bodyBytes, bytesSent: completed ? state.bodyBytes : state.streamed?.count.load(ordering: .relaxed),
        seconds: seconds, completed: completed, parts: state.receiver?.receivedParts ?? []))
    dispatcher.inFlight.subtract(1, ordering: .relaxed)
}

private let connectionChanged: MHD_NotifyConnectionCallback = { cls, connection, socketContext, change in
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
private func watchedConnection(_ connection: OpaquePointer) -> WatchedConnection? {
    cp_connection_context(connection).map { Unmanaged<WatchedConnection>.fromOpaque($0).takeUnretainedValue() }
}

private func connectionKey(_ connection: OpaquePointer) -> UInt {
    UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))
}

/// The refusal of a head whose body framing is ambiguous or unsupported (RFC 9112 §6.3),
/// or that libmicrohttpd would frame otherwise than RFC 9112 does: it takes a body as
/// chunked only when the first `Transfer-Encoding` is exactly `chunked`, and reads any
/// other until the connection closes. The connection closes after the answer: the bytes
/// that follow cannot be trusted to start a request.
private func headRefusal(_ head: RequestHead) -> Response? {
    // Without either field there is no body and nothing to frame (most GETs).
    guard head.header("Content-Length") != nil || head.header("Transfer-Encoding") != nil else { return nil }
    let close = HTTPField(name: "Connection", value: "close")
    do {
        let framing = try MessageFraming(headers: head.headers.map { ($0.name, $0.value) })
        if framing == .chunked, let coding = head.header("Transfer-Encoding"), !ASCII.equalsIgnoringCase(coding, "chunked") {
            return Response.error(400, "Transfer-Encoding \"\(coding)\" must be exactly \"chunked\" here (libmicrohttpd frames no other spelling)",
                                   headers: [close])
        }
        return nil
    } catch {
        return Response.error(error.status, error.description, headers: [close])
    }
}

/// The answer to a request on a connection past its client's limit; the connection then closes.
private func tooManyConnections(_ held: Int, limit: Int, from client: String) -> Response {
    Response.error(503, "\(client) has \(held) connections open; this server takes at most \(limit) from one client",
                    headers: [HTTPField(name: "Connection", value: "close"), HTTPField(name: "Retry-After", value: "1")])
}

/// Writes a 1xx response on the connection, before MHD has written anything for this
/// request: MHD answers a request only after it is read and has finished the previous
/// response before it read this one, so nothing of its own can be in the way. With TLS,
/// the bytes go through the connection's GnuTLS session (MHD's record layer is idle
/// here, on this connection's thread). MHD offers no API for a 1xx other than 100.
private func sendInterim(_ response: InformationalResponse, on connection: OpaquePointer) -> Bool {
    let bytes = response.serialized
    if let session = cp_connection_tls_session(connection) {
        let tls = OpaquePointer(session)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { gnutls_record_send(tls, $0.baseAddress, $0.count) }
            if count == GNUTLS_E_AGAIN || count == GNUTLS_E_INTERRUPTED {
                guard waitWritable(cp_connection_fd(connection)) else { return false }
                continue
            }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }
    let socket = cp_connection_fd(connection)
    var sent = 0
    while sent < bytes.count {
        let count = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Platform.sendFlags) }
        if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
            guard waitWritable(socket) else { return false }
            continue
        }
        guard count > 0 else { return false }
        sent += count
    }
    return true
}

/// Waits up to a second for a non-blocking socket to take more bytes.
private func waitWritable(_ socket: Int32) -> Bool {
    var descriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
    return poll(&descriptor, 1, 1000) == 1
}

/// MHD would percent-decode the path and the query arguments in place; Counterpart
/// decodes them itself, once, so that `%2F` and `%00` can be told from `/` and refused.
private let keepEscaped: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<CChar>?) -> Int = { _, _, text in
    text.map { strlen($0) } ?? 0
}

private let logMessage: MHD_LogCallback = { _, format, arguments in
    guard let format, let arguments else { return }
    var buffer = [CChar](repeating: 0, count: 512)
    vsnprintf(&buffer, buffer.count, format, arguments)
    var line = "counterpart: libmicrohttpd: " + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    if !line.hasSuffix("\n") { line += "\n" }
    _ = line.withCString { write(2, $0, strlen($0)) }
}

private func readHead(
    _ connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
    version: UnsafePointer<CChar>?
) -> RequestHead {
    var collected = CollectedValues()
    // Counted first (an iterator of NULL only counts), so the arrays grow once.
    collected.headers.reserveCapacity(Int(MHD_get_connection_values(connection, MHD_ValueKind.HEADER_KIND, nil, nil)))
    withUnsafeMutablePointer(to: &collected) { pointer in
        _ = MHD_get_connection_values(connection, MHD_ValueKind.HEADER_KIND, collectValue, pointer)
        pointer.pointee.collectingQuery = true
        _ = MHD_get_connection_values(connection, MHD_ValueKind.GET_ARGUMENT_KIND, collectValue, pointer)
    }
    return RequestHead(
        method: method.map { String(cString: $0) } ?? "",
        path: RequestHead.path(ofTarget: url.map { String(cString: $0) } ?? "/"),
        query: collected.query,
        version: version.map { String(cString: $0) } ?? "",
        headers: collected.headers,
        clientAddress: watchedConnection(connection)?.client ?? SocketAddress.describe(cp_client_address(connection)))
}

private struct CollectedValues {
    var headers: [HTTPField] = []
    var query: [(name: String, value: String?)] = []
    var collectingQuery = false
}

private let collectValue: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return MHD_Result.YES }
    let collected = cls.assumingMemoryBound(to: CollectedValues.self)
    let name = String(cString: key)
    if collected.pointee.collectingQuery {
        collected.pointee.query.append((name, value.map { String(cString: $0) }))
    } else {
        collected.pointee.headers.append(HTTPField(name: name, value: value.map { String(cString: $0) } ?? ""))
    }
    return MHD_Result.YES
}

/// Turns a `Response` into an MHD response and queues it — after its delay, if it has one:
/// the connection is suspended meanwhile and MHD calls the handler again when it resumes.
private func queue(_ response: Response, on connection: OpaquePointer, for state: RequestState, _ dispatcher: Dispatcher) -> MHD_Result {
    if let delay = response.delay {
        var later = response
        later.delay = nil
        switch dispatcher.pauses.hold(connection, for: .duration(delay)) {
        case .suspended:
            state.pending = later
            return MHD_Result.YES
        case .waited:
            return queue(later, on: connection, for: state, dispatcher)
        case .refused:
            return MHD_Result.NO
        }
    }
    state.pending = nil
    state.answered = true
    state.status = response.status
    state.bodyBytes = state.head.method == "HEAD" ? 0 : response.bodyLength

    let created: OpaquePointer?
    switch response.body {
    case .empty:
        created = MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode.RESPMEM_PERSISTENT)
    case .bytes(let bytes):
        created = bytes.withUnsafeBytes { buffer in
            MHD_create_response_from_buffer(buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
        }
    case .file(_, _, 0):
        created = MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode.RESPMEM_PERSISTENT)
    case .file(let file, let offset, let length) where length <= smallFileBytes && state.head.method == "GET":
        created = smallFileResponse(file, offset: offset, length: Int(length))
            ?? fileResponse(file, offset: offset, length: length, on: connection, dispatcher)
    case .file(let file, let offset, let length):
        created = fileResponse(file, offset: offset, length: length, on: connection, dispatcher)
    case .stream(let length, let stream):
        let counter = StreamCounter()
        state.streamed = counter
        let box = Unmanaged.passRetained(StreamBox(stream, connection: connection, dispatcher: dispatcher, counter: counter)).toOpaque()
        created = MHD_create_response_from_callback(length, streamBlockSize, readStream, box, freeStream)
        if created == nil { Unmanaged<StreamBox>.fromOpaque(box).release() }
    }
    guard let created else { return MHD_Result.NO }
    for field in response.headers {
        // withCString lends a native string's own bytes; passing a String where C wants a
        // pointer would copy each name and value into a new array first.
        _ = field.name.withCString { name in field.value.withCString { value in MHD_add_response_header(created, name, value) } }
    }
    let result = MHD_queue_response(connection, UInt32(response.status), created)
    MHD_destroy_response(created)
    return result
}

/// Bodies up to this size are read into memory and sent from there: libmicrohttpd then
/// sends the headers and the body in one write, where sendfile costs a second one.
private let smallFileBytes: UInt64 = 64 * 1024

/// A response with `length` bytes of `file` read into a buffer libmicrohttpd frees; nil when
/// the file no longer has them all (it shrank since it was measured).
private func smallFileResponse(_ file: OpenFile, offset: UInt64, length: Int) -> OpaquePointer? {
    guard let buffer = malloc(max(length, 1)) else { return nil }
    var filled = 0
    while filled < length {
        guard let count = file.read(at: offset + UInt64(filled), into: UnsafeMutableRawBufferPointer(start: buffer + filled, count: length - filled)) else {
            free(buffer)
            return nil
        }
        filled += count
    }
    guard let response = MHD_create_response_from_buffer(length, buffer, MHD_ResponseMemoryMode.RESPMEM_MUST_FREE) else {
        free(buffer)
        return nil
    }
    return response
}

/// A response that sends `length` bytes of `file` from `offset` with sendfile; libmicrohttpd
/// takes the descriptor. The watch cuts the connection if the file shrinks under it.
private func fileResponse(_ file: OpenFile, offset: UInt64, length: UInt64, on connection: OpaquePointer, _ dispatcher: Dispatcher) -> OpaquePointer? {
    let descriptor = file.take()
    guard let created = MHD_create_response_from_fd_at_offset64(length, descriptor, offset) else {
        close(descriptor)
        return nil
    }
    if let watched = watchedConnection(connection) { dispatcher.watch.sending(watched, file: descriptor, upTo: offset + length) }
    return created
}

/// Bytes a stream has produced, read at completion (possibly from another MHD thread).
private final class StreamCounter: Sendable {
    let count = Atomic<UInt64>(0)
}

/// A stream with what its reader needs to pause the connection.
private final class StreamBox {
    let stream: any ResponseStream
    let connection: OpaquePointer
    let dispatcher: Dispatcher
    let counter: StreamCounter

    init(_ stream: any ResponseStream, connection: OpaquePointer, dispatcher: Dispatcher, counter: StreamCounter) {
        self.stream = stream
        self.connection = connection
        self.dispatcher = dispatcher
        self.counter = counter
    }
}

private let readStream: MHD_ContentReaderCallback = { cls, position, buffer, max in
    guard let cls, let buffer else { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
    let box = Unmanaged<StreamBox>.fromOpaque(cls).takeUnretainedValue()
    if box.dispatcher.pauses.clientLeft(box.connection) { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
    switch box.stream.read(at: position, into: UnsafeMutableRawBufferPointer(start: buffer, count: max)) {
    case .bytes(let count) where count > 0:
        box.counter.count.add(UInt64(count), ordering: .relaxed)
        return count
    case .pause(let pause):
        // Returning 0 asks MHD to call again: once resumed, or at once after a sleep.
        return box.dispatcher.pauses.hold(box.connection, for: pause) == .refused ? Int(MHD_CONTENT_READER_END_WITH_ERROR) : 0
    case .reset:
        resetConnection(box.connection, afterSending: true)
        return Int(MHD_CONTENT_READER_END_WITH_ERROR)
    case .bytes, .cut:
        return Int(MHD_CONTENT_READER_END_WITH_ERROR)
    }
}

/// Ends a connection with a TCP reset: connect(AF_UNSPEC) disconnects a TCP socket with a
/// RST (Linux tcp_disconnect); MHD then closes what is left. Closing with SO_LINGER 0
/// would not do: MHD shuts the socket down first, which sends a FIN. The reset throws
/// away what the socket has not sent yet, so `afterSending` first waits (up to a second)
/// for its send queue to empty: the client gets every byte written before the reset.
private func resetConnection(_ connection: OpaquePointer, afterSending: Bool = false) {
    let socket = cp_connection_fd(connection)
    if afterSending {
        var unsent: Int32 = 0
        var waited = 0
        while waited < 1000, ioctl(socket, UInt(TIOCOUTQ), &unsent) == 0, unsent > 0 {
            usleep(1000)
            waited += 1
        }
    }
    var unspecified = sockaddr()
    unspecified.sa_family = sa_family_t(AF_UNSPEC)
    _ = connect(socket, &unspecified, socklen_t(MemoryLayout<sockaddr>.size))
}

private let freeStream: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<StreamBox>.fromOpaque(cls).release()
}

/// The size of the pieces a stream is asked for.
private let streamBlockSize = 64 * 1024

/// Reads a request body and throws it away, then gives the response decided on its head.
private final class BodyDrain: RequestBodyReceiver {
    private let response: Response
    private let limit: UInt64
    private var received: UInt64 = 0

    init(response: Response, limit: UInt64) {
        self.response = response
        self.limit = limit
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        received += UInt64(chunk.count)
        return received <= limit ? .consumed : .close
    }

    func finish() -> Response { response }

    func abandon() {}

    var receivedParts: [ReceivedPart] { [] }
}
