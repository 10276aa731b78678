import Synchronization

/// The connections open now: how many each client address holds (for the per-client
/// limit), which have kept the server waiting too long for a request head (a client
/// that trickles its headers a byte at a time, slowloris, would otherwise hold its
/// connection for ever: the idle timeout only counts silence), and which are sending a
/// file that has shrunk under them (libmicrohttpd 0.9.75's sendfile loop spins on a short
/// file for ever instead of ending the response).
///
/// A connection waits for a head from when it opens and again from when each response
/// ends (keep-alive); once its head is complete, only the idle timeout applies. The table
/// is locked only when a connection opens or closes and by the sweep: what changes per
/// request lives in the connection's own `WatchedConnection`, which the adapter keeps with
/// the connection.
final class ConnectionWatch: Sendable {
    /// Connections one client address may hold before its requests are refused with 503;
    /// 0: no limit.
    let maxPerClient: Int
    /// Seconds a connection has to send a complete request head; 0: no limit.
    let headTimeout: Int

    private struct State {
        var connections: [ObjectIdentifier: WatchedConnection] = [:]
        var perClient: [String: Int] = [:]
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

    /// A connection was accepted: its record, for the adapter to keep with the connection.
    func opened(socket: Int32, client: String) -> WatchedConnection {
        state.withLock { state in
            let count = state.perClient[client, default: 0] + 1
            state.perClient[client] = count
            let connection = WatchedConnection(socket: socket, client: client, overLimit: maxPerClient > 0 && count > maxPerClient)
            state.connections[ObjectIdentifier(connection)] = connection
            return connection
        }
    }

    /// A request head arrived on the connection. Returns how many connections its client
    /// holds when that is over the limit (the request is then refused), nil otherwise.
    func headArrived(_ connection: WatchedConnection) -> Int? {
        connection.waitingSince.store(WatchedConnection.notWaiting, ordering: .relaxed)
        guard connection.overLimit else { return nil }
        return state.withLock { $0.perClient[connection.client] }
    }

    /// The connection is sending `descriptor`'s file, which must stay `end` bytes long.
    func sending(_ connection: WatchedConnection, file descriptor: Int32, upTo end: UInt64) {
        let copy = dup(descriptor)
        guard copy >= 0 else { return }
        connection.replaceFile(with: WatchedConnection.FileBeingSent(descriptor: copy, end: end))
    }

    /// The connection's request is complete: it now waits for the next head.
    func requestEnded(_ connection: WatchedConnection) {
        connection.waitingSince.store(Self.now(), ordering: .relaxed)
        connection.replaceFile(with: nil)
    }

    /// The connection is closing. libmicrohttpd says so before it closes the socket, so a
    /// socket in this table, or not yet marked closed, is never one that has been reused
    /// for another connection.
    func closed(_ connection: WatchedConnection) {
        connection.markClosed()
        state.withLock { state in
            guard state.connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
            let count = state.perClient[connection.client, default: 1] - 1
            state.perClient[connection.client] = count > 0 ? count : nil
        }
        connection.replaceFile(with: nil)
    }

    /// Shuts down the sockets of connections that waited longer than `headTimeout` for a
    /// head, or whose file has shrunk below what their response promised (the client then
    /// sees a body shorter than its `Content-Length`: an error, as it should); libmicrohttpd
    /// sees them close and cleans up as for any client that left.
    func sweep() {
        let deadline = Self.now() - headTimeout * 1000
        state.withLock { state in
            for connection in state.connections.values {
                let since = connection.waitingSince.load(ordering: .relaxed)
                if headTimeout > 0, since != WatchedConnection.notWaiting, since <= deadline {
                    connection.shutDown()
                    connection.waitingSince.store(WatchedConnection.notWaiting, ordering: .relaxed)
                }
                if connection.fileHasShrunk() { connection.shutDown() }
            }
        }
    }

    /// Milliseconds on the monotonic clock.
    static func now() -> Int {
        Int(MonotonicClock.seconds() * 1000)
    }
}

/// One open connection as the watch sees it. Its own thread and the sweep touch it; the
/// parts that change are atomic or behind the connection's own (uncontended) lock.
final class WatchedConnection: Sendable {
    /// A file response in progress: its own descriptor of the file, and the size the
    /// file must keep for the response to be sent whole.
    struct FileBeingSent {
        var descriptor: Int32
        var end: UInt64
    }

    static let notWaiting = Int.min

    let socket: Int32
    /// The client's address as text, made once for all the connection's requests.
    let client: String
    let overLimit: Bool
    /// When (in milliseconds) the connection began waiting for its next head;
    /// `notWaiting` while a request is in progress.
    let waitingSince: Atomic<Int>
    private let file = Mutex<FileBeingSent?>(nil)
    /// False once libmicrohttpd has said the connection closed, which it does before it
    /// closes the socket: the socket is shut down only under this lock while it is true, so
    /// never after its number may have been reused.
    private let isOpen = Mutex(true)

    init(socket: Int32, client: String, overLimit: Bool) {
        self.socket = socket
        self.client = client
        self.overLimit = overLimit
        waitingSince = Atomic(ConnectionWatch.now())
    }

    /// Shuts the socket down, if the connection is still open: libmicrohttpd's poll sees its
    /// end, and cleans the connection up as for a client that left (its request ends cut).
    func shutDown() {
        isOpen.withLock { open in
            if open { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    fileprivate func markClosed() {
        isOpen.withLock { $0 = false }
    }

    func replaceFile(with new: FileBeingSent?) {
        let old = file.withLock { current in
            defer { current = new }
            return current
        }
        if let old { close(old.descriptor) }
    }

    /// Whether the file being sent is now shorter than the response needs; it is let go then.
    func fileHasShrunk() -> Bool {
        file.withLock { current in
            guard let sent = current else { return false }
            var info = stat()
            guard fstat(sent.descriptor, &info) == 0, UInt64(info.st_size) < sent.end else { return false }
            close(sent.descriptor)
            current = nil
            return true
        }
    }
}
