import CMicroHTTPD
import Glibc
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
        /// Body bytes read and thrown away so that a response decided on the head reaches a
        /// client that sends its body without waiting for `100 Continue`.
        var maxDrainBytes: UInt64
    }

    let port: UInt16
    private let daemon: DaemonPointer
    private let dispatcher: Dispatcher
    /// Kept alive as long as the daemon: MHD holds its address as the handler's context.
    private let dispatcherReference: Unmanaged<Dispatcher>

    init(options: Options, handler: any RequestHandler) throws(CounterpartServer.StartError) {
        let address = try SocketAddress(host: options.host, port: options.port)
        dispatcher = Dispatcher(handler: handler, maxDrainBytes: options.maxDrainBytes)
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
            MHD_OptionItem(option: .UNESCAPE_CALLBACK, value: unsafeBitCast(keepEscaped, to: Int.self), ptr_value: nil),
        ]
        // poll(), not epoll: libmicrohttpd 0.9.75's edge-triggered epoll loop misses a client's
        // FIN that arrives behind unread body bytes, so an upload cut by a client that closed
        // normally would linger until the idle timeout. Measured no slower (see README).
        if options.threads > 0 {
            flags |= MHD_USE_POLL.rawValue
            items.append(MHD_OptionItem(option: .THREAD_POOL_SIZE, value: options.threads, ptr_value: nil))
        } else {
            flags |= MHD_USE_THREAD_PER_CONNECTION.rawValue | MHD_USE_POLL.rawValue
        }
        flags |= MHD_USE_ERROR_LOG.rawValue

        let started: OpaquePointer? = address.withSockaddr { sockaddr in
            items.append(MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: UnsafeMutableRawPointer(mutating: sockaddr)))
            items.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))
            return items.withUnsafeBufferPointer { list in
                cp_start_daemon(flags, options.port, accessHandler, context, list.baseAddress)
            }
        }
        guard let started else {
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
        MHD_stop_daemon(daemon.pointer)
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

    init(handler: any RequestHandler, maxDrainBytes: UInt64) {
        self.handler = handler
        self.maxDrainBytes = maxDrainBytes
    }
}

/// Per-request state kept in MHD's `con_cls`. MHD calls a connection from one thread at a
/// time, so this is never touched concurrently.
private final class RequestState {
    let head: RequestHead
    let started: timespec
    var receiver: (any RequestBodyReceiver)?
    /// A response decided on the head, queued when the request is complete.
    var pending: Response?
    var answered = false
    var status = 0
    var bodyBytes: UInt64 = 0

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
        switch dispatcher.handler.handle(state.head) {
        case .respond(let response) where state.head.announcesBody:
            let declared = state.head.header("Content-Length").flatMap(UInt64.init)
            if state.head.expectsContinue || declared.map({ $0 > dispatcher.maxDrainBytes }) ?? false {
                // The client waits for `100 Continue` (or sends too much to drain): answer
                // now; MHD skips the body and closes the connection after the response.
                return queue(response, on: connection, for: state)
            }
            // A client that sends its body at once would see the connection close under
            // it and miss the answer: read the body, drop it, then answer.
            state.receiver = BodyDrain(response: response, limit: dispatcher.maxDrainBytes)
            return MHD_Result.YES
        case .respond(let response):
            // Queued once MHD has the whole request, so the connection can be kept alive.
            state.pending = response
            return MHD_Result.YES
        case .receiveBody(let receiver):
            state.receiver = receiver
            return MHD_Result.YES
        }
    }

    let state = Unmanaged<RequestState>.fromOpaque(existing).takeUnretainedValue()
    if uploadDataSize.pointee > 0 {
        let chunk = UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee)
        uploadDataSize.pointee = 0
        guard let receiver = state.receiver else { return MHD_Result.YES }
        return receiver.receive(chunk) ? MHD_Result.YES : MHD_Result.NO
    }
    guard !state.answered else { return MHD_Result.YES }
    if let pending = state.pending {
        state.pending = nil
        return queue(pending, on: connection, for: state)
    }
    guard let receiver = state.receiver else { return MHD_Result.YES }
    return queue(receiver.finish(), on: connection, for: state)
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, _, requestContext, termination in
    guard let cls, let requestContext, let raw = requestContext.pointee else { return }
    requestContext.pointee = nil
    let dispatcher = Unmanaged<Dispatcher>.fromOpaque(cls).takeUnretainedValue()
    let state = Unmanaged<RequestState>.fromOpaque(raw).takeRetainedValue()
    if !state.answered { state.receiver?.abandon() }
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    let seconds = Double(now.tv_sec - state.started.tv_sec) + Double(now.tv_nsec - state.started.tv_nsec) / 1e9
    dispatcher.handler.completed(CompletedRequest(
        head: state.head, status: state.status, bodyBytes: state.bodyBytes, seconds: seconds,
        completed: termination == MHD_RequestTerminationCode.REQUEST_TERMINATED_COMPLETED_OK))
    dispatcher.inFlight.subtract(1, ordering: .relaxed)
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
    withUnsafeMutablePointer(to: &collected) { pointer in
        _ = MHD_get_connection_values(connection, MHD_ValueKind.HEADER_KIND, collectValue, pointer)
        pointer.pointee.collectingQuery = true
        _ = MHD_get_connection_values(connection, MHD_ValueKind.GET_ARGUMENT_KIND, collectValue, pointer)
    }
    return RequestHead(
        method: method.map { String(cString: $0) } ?? "",
        path: url.map { String(cString: $0) } ?? "/",
        query: collected.query,
        version: version.map { String(cString: $0) } ?? "",
        headers: collected.headers,
        clientAddress: SocketAddress.describe(cp_client_address(connection)))
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

/// Turns a `Response` into an MHD response and queues it.
private func queue(_ response: Response, on connection: OpaquePointer, for state: RequestState) -> MHD_Result {
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
    case .file(let file, let offset, let length):
        let descriptor = file.take()
        created = MHD_create_response_from_fd_at_offset64(length, descriptor, offset)
        if created == nil { close(descriptor) }
    case .stream(let length, let stream):
        let box = Unmanaged.passRetained(StreamBox(stream)).toOpaque()
        created = MHD_create_response_from_callback(length, streamBlockSize, readStream, box, freeStream)
        if created == nil { Unmanaged<StreamBox>.fromOpaque(box).release() }
    }
    guard let created else { return MHD_Result.NO }
    for field in response.headers {
        _ = MHD_add_response_header(created, field.name, field.value)
    }
    let result = MHD_queue_response(connection, UInt32(response.status), created)
    MHD_destroy_response(created)
    return result
}

private final class StreamBox {
    let stream: any ResponseStream
    init(_ stream: any ResponseStream) { self.stream = stream }
}

private let readStream: MHD_ContentReaderCallback = { cls, position, buffer, max in
    guard let cls, let buffer else { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
    let box = Unmanaged<StreamBox>.fromOpaque(cls).takeUnretainedValue()
    guard let count = box.stream.read(at: position, into: UnsafeMutableRawBufferPointer(start: buffer, count: max)),
          count > 0 else { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
    return count
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

    func receive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        received += UInt64(chunk.count)
        return received <= limit
    }

    func finish() -> Response { response }

    func abandon() {}
}
