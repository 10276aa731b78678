import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

/// The one owner of libmicrohttpd's daemon: its start with every option, its stop, and the
/// handler context (`Dispatcher`) that its callbacks share. The files of this folder are the
/// only ones in Counterpart that import `CMicroHTTPD`: AccessHandler.swift (the request
/// callbacks), ResponseQueue.swift (responses), Pauses.swift (suspend and resume),
/// HeadPolicy.swift (answers decided on the head), InterimResponses.swift (1xx).
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
        /// Seconds a head may take before `minHeadRate` (bytes a second) applies; 0: no minimum.
        var headGrace: Int
        var minHeadRate: Int
        /// Percent of `maxConnections` at which waiting connections are closed to make room; 0: never.
        var evictAtPercent: Int
        /// Bytes a second a request body must keep up over windows of `bodyRateWindow`
        /// seconds; 0: no minimum.
        var minBodyRate: Int
        var bodyRateWindow: Int
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
        dispatcher = Dispatcher(handler: handler, maxDrainBytes: options.maxDrainBytes, connectionTimeout: options.connectionTimeout,
                                threadPerConnection: options.threads == 0,
                                watch: ConnectionWatch(rules: ConnectionWatch.Rules(
                                    maxPerClient: options.maxConnectionsPerClient, headTimeout: options.headTimeout,
                                    headGrace: options.headGrace, minHeadRate: options.minHeadRate,
                                    maxConnections: Int(options.maxConnections), evictAtPercent: options.evictAtPercent,
                                    minBodyRate: options.minBodyRate, bodyRateWindow: options.bodyRateWindow, tls: options.tls != nil)))
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
struct DaemonPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The handler's context, shared by all MHD threads: only `let`s and synchronized state.
final class Dispatcher: Sendable {
    let handler: any RequestHandler
    let maxDrainBytes: UInt64
    /// Seconds a connection may stay idle (libmicrohttpd's timeout, the same for all).
    let connectionTimeout: UInt32
    let inFlight = Atomic<Int>(0)
    let quiescedSocket = Mutex<Int32?>(nil)
    let pauses: Pauses
    let watch: ConnectionWatch

    /// A callback that returns this long (seconds) after the previous one restarts the
    /// connection's idle timer.
    static let slowCallbackSeconds = 1.0

    init(handler: any RequestHandler, maxDrainBytes: UInt64, connectionTimeout: UInt32, threadPerConnection: Bool, watch: ConnectionWatch) {
        self.handler = handler
        self.maxDrainBytes = maxDrainBytes
        self.connectionTimeout = connectionTimeout
        pauses = Pauses(blocking: threadPerConnection)
        self.watch = watch
    }

    /// A callback of `connection`'s is returning; `last` is when its previous one did. While
    /// a callback works (an object store that answers slowly), libmicrohttpd moves no byte on
    /// the connection, and its idle timer runs on: when the callback returns, the connection
    /// may look silent for longer than its timeout and be closed before its answer goes out.
    /// So after a long gap the timer starts again. The gap also holds any wait for the
    /// client's bytes, but a client's bytes have just restarted the timer anyway: restarting
    /// it once more costs nothing, and needs no second clock reading.
    func calledBack(_ connection: OpaquePointer, _ last: inout Double) {
        let now = MonotonicClock.seconds()
        if now - last >= Self.slowCallbackSeconds { cp_restart_connection_timeout(connection, connectionTimeout) }
        last = now
    }
}

/// MHD would percent-decode the path and the query arguments in place; Counterpart
/// decodes them itself, once, so that `%2F` and `%00` can be told from `/` and refused.
let keepEscaped: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<CChar>?) -> Int = { _, _, text in
    text.map { strlen($0) } ?? 0
}

let logMessage: MHD_LogCallback = { _, format, arguments in
    guard let format, let arguments else { return }
    var buffer = [CChar](repeating: 0, count: 512)
    vsnprintf(&buffer, buffer.count, format, arguments)
    var line = "counterpart: libmicrohttpd: " + String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    if !line.hasSuffix("\n") { line += "\n" }
    _ = line.withCString { write(2, $0, strlen($0)) }
}
