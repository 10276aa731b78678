import Synchronization

/// The connections open now: how many each client address holds (for the per-client
/// limit), which have kept the server waiting too long for a request head (a client
/// that trickles its headers a byte at a time, slowloris, would otherwise hold its
/// connection for ever: the idle timeout only counts silence), and which are sending a
/// file that has shrunk under them (libmicrohttpd 0.9.75's sendfile loop spins on a short
/// file for ever instead of ending the response).
///
/// A connection waits for a head from when it opens and again from when each response
/// ends (keep-alive); once its head is complete, only the idle timeout applies.
final class ConnectionWatch: Sendable {
    /// Connections one client address may hold before its requests are refused with 503;
    /// 0: no limit.
    let maxPerClient: Int
    /// Seconds a connection has to send a complete request head; 0: no limit.
    let headTimeout: Int

    private struct Connection {
        var socket: Int32
        var client: String
        var overLimit: Bool
        /// When (in milliseconds) the connection began waiting for its next head; nil while
        /// a request is in progress.
        var waitingSince: Int?
    }

    /// A file response in progress: its own descriptor of the file, and the size the
    /// file must keep for the response to be sent whole.
    private struct FileBeingSent {
        var descriptor: Int32
        var end: UInt64
    }

    private struct State {
        var connections: [UInt: Connection] = [:]
        var perClient: [String: Int] = [:]
        var files: [UInt: FileBeingSent] = [:]
    }

    private let state = Mutex(State())
    private let sweeper = Mutex<PeriodicTask?>(nil)

    init(maxPerClient: Int, headTimeout: Int) {
        self.maxPerClient = maxPerClient
        self.headTimeout = headTimeout
        let checkEvery = headTimeout > 0 ? min(1.0, Double(headTimeout) / 4) : 1.0
        sweeper.withLock { $0 = PeriodicTask(every: checkEvery) { [weak self] in self?.sweep() } }
    }

    func stop() {
        sweeper.withLock { $0?.cancel() }
    }

    /// A connection was accepted.
    func opened(_ key: UInt, socket: Int32, client: String) {
        state.withLock { state in
            let count = state.perClient[client, default: 0] + 1
            state.perClient[client] = count
            state.connections[key] = Connection(socket: socket, client: client,
                                                overLimit: maxPerClient > 0 && count > maxPerClient,
                                                waitingSince: Self.now())
        }
    }

    /// A request head arrived on the connection. Returns how many connections its client
    /// holds when that is over the limit (the request is then refused), nil otherwise.
    func headArrived(_ key: UInt) -> Int? {
        state.withLock { state in
            guard var connection = state.connections[key] else { return nil }
            connection.waitingSince = nil
            state.connections[key] = connection
            return connection.overLimit ? state.perClient[connection.client] : nil
        }
    }

    /// The connection is sending `descriptor`'s file, which must stay `end` bytes long.
    func sending(_ key: UInt, file descriptor: Int32, upTo end: UInt64) {
        let copy = dup(descriptor)
        guard copy >= 0 else { return }
        let replaced = state.withLock { state in state.files.updateValue(FileBeingSent(descriptor: copy, end: end), forKey: key) }
        if let replaced { close(replaced.descriptor) }
    }

    /// The connection's request is complete: it now waits for the next head.
    func requestEnded(_ key: UInt) {
        let file = state.withLock { state in
            state.connections[key]?.waitingSince = Self.now()
            return state.files.removeValue(forKey: key)
        }
        if let file { close(file.descriptor) }
    }

    /// The connection is closing. libmicrohttpd says so before it closes the socket, so a
    /// socket in this table is never one that has been reused for another connection.
    func closed(_ key: UInt) {
        let file = state.withLock { state in
            if let connection = state.connections.removeValue(forKey: key) {
                let count = state.perClient[connection.client, default: 1] - 1
                state.perClient[connection.client] = count > 0 ? count : nil
            }
            return state.files.removeValue(forKey: key)
        }
        if let file { close(file.descriptor) }
    }

    /// Connections open now (all clients).
    var openConnections: Int { state.withLock { $0.connections.count } }

    /// Shuts down the sockets of connections that waited longer than `headTimeout` for a
    /// head, or whose file has shrunk below what their response promised (the client then
    /// sees a body shorter than its `Content-Length`: an error, as it should); libmicrohttpd
    /// sees them close and cleans up as for any client that left.
    func sweep() {
        let deadline = Self.now() - headTimeout * 1000
        state.withLock { state in
            for (key, connection) in state.connections {
                guard headTimeout > 0, let since = connection.waitingSince, since <= deadline else { continue }
                shutdown(connection.socket, Int32(SHUT_RDWR))
                state.connections[key]?.waitingSince = nil
            }
            for (key, file) in state.files {
                var info = stat()
                guard fstat(file.descriptor, &info) == 0, UInt64(info.st_size) < file.end else { continue }
                if let connection = state.connections[key] { shutdown(connection.socket, Int32(SHUT_RDWR)) }
                close(file.descriptor)
                state.files[key] = nil
            }
        }
    }

    /// Milliseconds on the monotonic clock.
    private static func now() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}
