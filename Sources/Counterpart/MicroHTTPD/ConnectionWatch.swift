import CMicroHTTPD
import Synchronization

/// The connections open now: how many each client address holds (for the per-client
/// limit), which have kept the server waiting too long for a request head (a client
/// that trickles its headers a byte at a time, slowloris, would otherwise hold its
/// connection for ever: the idle timeout only counts silence), which send a request body
/// too slowly, which to close first when the server runs out of connections, and which
/// are sending a file that has shrunk under them (libmicrohttpd 0.9.75's sendfile loop
/// spins on a short file for ever instead of ending the response).
///
/// A connection waits for a head from when it opens and again from when each response
/// ends (keep-alive); once its head is complete, only the idle timeout and the body rate
/// apply. While it waits, the bytes its socket has received (the kernel counts them) tell
/// an idle connection (none since it began to wait) from a head on its way, and how fast
/// that head comes. The table is locked only when a connection opens or closes and by the
/// sweep: what changes per request lives in the connection's own `WatchedConnection`,
/// which the adapter keeps with the connection.

final class ConnectionWatch: Sendable {
    /// What the watch enforces; `Rules()` enforces nothing.
    struct Rules: Sendable {
        /// Connections one client address may hold before its requests are refused with
        /// 503; 0: no limit.
        var maxPerClient = 0
        /// Seconds a connection has to send a complete request head; 0: no limit.
        var headTimeout = 0
        /// Seconds a head may take before `minHeadRate` applies.
        var headGrace = 0
        /// Bytes a second a head must keep arriving at past its grace (each `minHeadRate`
        /// bytes buys another second, as Apache's mod_reqtimeout `MinRate`); 0: no minimum.
        var minHeadRate = 0
        /// Connections the server takes at once (libmicrohttpd's limit).
        var maxConnections = 0
        /// Percent of `maxConnections` at which connections waiting for a head (idle
        /// keep-alive ones and unfinished heads) are closed, the longest silent first, to
        /// make room for new ones; 0: never.
        var evictAtPercent = 0
        /// Bytes a second a request body must arrive at, over each `bodyRateWindow`; 0: no
        /// minimum.
        var minBodyRate = 0
        /// Seconds over which a body's rate is measured: a window in which the server itself
        /// held the connection (a stall or rate fault) does not count.
        var bodyRateWindow = 10
        /// Whether connections are TLS (no plain-text 408 can be written on them then).
        var tls = false
    }

    /// Under pressure a connection silent for less than this (milliseconds) is not closed:
    /// its head may be on its way (a head comes in one round trip; progress is seen at each
    /// pass).
    static let evictionMinimumSilence = 100
    /// How often (seconds) the sweep looks at the number of connections; under pressure it
    /// applies the rules each time, otherwise every `passEvery` times. Under a flood the
    /// rate at which the server makes room is what a new client waits for. Measured with
    /// 5,000 slow heads reopened as they close (`scripts/stress --only slow-heads`), a new
    /// client waited in the listen queue 3.6 s (p50) with a quarter second between passes,
    /// eviction down to four fifths of the mark and 250 ms of silence; 1.2 s with a tenth,
    /// down to half and 200 ms; 0.9 s with 100 ms.
    static let sweepInterval = 0.1
    static let passEvery = 3

    let rules: Rules
    var maxPerClient: Int { rules.maxPerClient }

    private struct State {
        var connections: [ObjectIdentifier: WatchedConnection] = [:]
        var perClient: [String: Int] = [:]
    }

    private let state = Mutex(State())
    private let sweeper = Mutex<PeriodicTask?>(nil)
    private let ticks = Atomic<Int>(0)

    init(rules: Rules) {
        self.rules = rules
        sweeper.withLock { $0 = PeriodicTask(every: Self.sweepInterval) { [weak self] in self?.tick() } }
    }

    func stop() {
        sweeper.withLock { $0?.cancel() }
    }

    /// A connection was accepted: its record, for the adapter to keep with the connection.
    func opened(socket: Int32, client: String) -> WatchedConnection {
        state.withLock { state in
            let count = state.perClient[client, default: 0] + 1
            state.perClient[client] = count
            let connection = WatchedConnection(socket: socket, client: client, overLimit: rules.maxPerClient > 0 && count > rules.maxPerClient)
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

    /// The connection's request has a body, which starts to arrive now.
    func bodyStarted(_ connection: WatchedConnection) {
        connection.body.withLock { $0 = WatchedConnection.BodyWindow(since: Self.now(), bytes: bytesReceived(connection.socket)) }
    }

    /// The connection's request body has all arrived (or is no longer read).
    func bodyEnded(_ connection: WatchedConnection) {
        connection.body.withLock { $0 = nil }
    }

    /// The server holds the connection still (a fault): its body does not arrive meanwhile,
    /// and that is not the client's doing.
    func held(_ connection: WatchedConnection) {
        connection.body.withLock { window in window?.held = true }
    }

    /// A body chunk arrived: the connection is not held any more.
    func bodyArrived(_ connection: WatchedConnection) {
        connection.body.withLock { window in
            if window?.held == true {
                window?.held = false
                window?.restart(at: Self.now(), bytes: bytesReceived(connection.socket))
            }
        }
    }

    /// The connection is sending `descriptor`'s file, which must stay `end` bytes long.
    func sending(_ connection: WatchedConnection, file descriptor: Int32, upTo end: UInt64) {
        let copy = dup(descriptor)
        guard copy >= 0 else { return }
        connection.replaceFile(with: WatchedConnection.FileBeingSent(descriptor: copy, end: end))
    }

    /// The connection's request is complete: it now waits for the next head.
    func requestEnded(_ connection: WatchedConnection) {
        connection.body.withLock { $0 = nil }
        connection.waitBaseline.store(bytesReceived(connection.socket) ?? 0, ordering: .relaxed)
        connection.headBegan.store(WatchedConnection.notWaiting, ordering: .relaxed)
        connection.lastReceived.store(WatchedConnection.unseen, ordering: .relaxed)
        let now = Self.now()
        connection.lastProgress.store(now, ordering: .relaxed)
        connection.waitingSince.store(now, ordering: .relaxed)
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

    /// The sweep's clock: a pass every `passEvery` ticks, or at once under pressure.
    private func tick() {
        let tick = ticks.add(1, ordering: .relaxed).newValue
        if tick % Self.passEvery == 0 || underPressure(open: state.withLock { $0.connections.count }) { sweep() }
    }

    /// Whether `open` connections are at the eviction mark.
    private func underPressure(open: Int) -> Bool {
        rules.evictAtPercent > 0 && rules.maxConnections > 0 && open >= evictionMark
    }

    private var evictionMark: Int { max(1, rules.maxConnections * rules.evictAtPercent / 100) }

    /// Applies the rules to every open connection. Shuts down the sockets of connections
    /// whose head is too late or too slow, whose body is too slow (a 408 first), or whose
    /// file has shrunk below what their response promised (the client then sees a body
    /// shorter than its `Content-Length`: an error, as it should); libmicrohttpd sees them
    /// close and cleans up as for any client that left. Then, if the server is near its
    /// connection limit, closes waiting connections, the longest silent first.
    func sweep() {
        let now = Self.now()
        // A snapshot: the sweep asks the kernel about each socket, which should not hold
        // up connections opening and closing. Shutting one down that has closed meanwhile
        // does nothing (`WatchedConnection.shutDown`).
        let connections = state.withLock { Array($0.connections.values) }
        var waiting: [Waiting] = []
        for connection in connections {
            if connection.fileHasShrunk() { connection.shutDown() }
            let since = connection.waitingSince.load(ordering: .relaxed)
            if since == WatchedConnection.notWaiting {
                checkBody(connection, now: now)
                continue
            }
            if rules.headTimeout > 0, since <= now - rules.headTimeout * 1000 {
                close(connection, waitingSince: since)
                continue
            }
            guard let received = bytesReceived(connection.socket) else {
                waiting.append(Waiting(silentSince: since, waitingSince: since, connection: connection))
                continue
            }
            let headBytes = received - connection.waitBaseline.load(ordering: .relaxed)
            guard headBytes > 0 else {
                // Idle: nothing has come since the connection began to wait.
                waiting.append(Waiting(silentSince: since, waitingSince: since, connection: connection))
                continue
            }
            if connection.headBegan.load(ordering: .relaxed) == WatchedConnection.notWaiting {
                // It began after the previous pass (or the wait, if that began later).
                connection.headBegan.store(max(since, now - Int(Self.sweepInterval * 1000) * Self.passEvery), ordering: .relaxed)
            }
            let seen = connection.lastReceived.exchange(received, ordering: .relaxed)
            if seen != WatchedConnection.unseen, seen != received {
                connection.lastProgress.store(now, ordering: .relaxed)
            }
            let began = connection.headBegan.load(ordering: .relaxed)
            if rules.minHeadRate > 0, now > began + rules.headGrace * 1000 + headBytes * 1000 / rules.minHeadRate {
                close(connection, waitingSince: since)
                continue
            }
            waiting.append(Waiting(silentSince: max(since, connection.lastProgress.load(ordering: .relaxed)), waitingSince: since, connection: connection))
        }
        evict(from: waiting, open: connections.count, now: now)
    }

    /// A connection waiting for a head, as the sweep saw it: since when it has sent nothing
    /// (the sweep's clock: its ties go to the one that began to wait first).
    private struct Waiting {
        var silentSince: Int
        var waitingSince: Int
        var connection: WatchedConnection
    }

    /// Under pressure (open connections at `evictAtPercent` of the limit), closes waiting
    /// connections, the longest silent first, until the open ones are at half that mark:
    /// room for the connections queued behind them. A request in progress, its body or its
    /// response on the way, is never one of them.
    private func evict(from waiting: [Waiting], open: Int, now: Int) {
        guard underPressure(open: open) else { return }
        var excess = open - evictionMark / 2
        let longestSilentFirst = waiting.sorted { ($0.silentSince, $0.waitingSince) < ($1.silentSince, $1.waitingSince) }
        for candidate in longestSilentFirst {
            guard excess > 0, candidate.silentSince <= now - Self.evictionMinimumSilence else { break }
            if close(candidate.connection, waitingSince: candidate.waitingSince) { excess -= 1 }
        }
    }

    /// Ends a body that arrives more slowly than `minBodyRate` over a whole window in which
    /// the server did not hold it: a 408, then the connection closes (the request ends cut,
    /// so an upload stores nothing and a resumable one keeps what it had).
    private func checkBody(_ connection: WatchedConnection, now: Int) {
        guard rules.minBodyRate > 0 else { return }
        let tooSlow = connection.body.withLock { window -> Bool in
            guard var current = window, !current.held, let received = bytesReceived(connection.socket) else { return false }
            defer { window = current }
            let start = current.bytes ?? received
            guard now - current.since >= rules.bodyRateWindow * 1000 else {
                if current.bytes == nil { current.bytes = received }
                return false
            }
            if received - start < rules.minBodyRate * rules.bodyRateWindow { return true }
            current.restart(at: now, bytes: received)
            return false
        }
        guard tooSlow else { return }
        connection.timedOut.store(true, ordering: .relaxed)
        if !rules.tls { connection.write(Self.requestTimeout(minBodyRate: rules.minBodyRate, window: rules.bodyRateWindow)) }
        connection.shutDown()
    }

    /// Closes a connection the sweep saw waiting since `since`, unless it has moved on
    /// since (its head arrived, or a new wait began).
    @discardableResult
    private func close(_ connection: WatchedConnection, waitingSince since: Int) -> Bool {
        guard connection.waitingSince.compareExchange(expected: since, desired: WatchedConnection.notWaiting, ordering: .relaxed).exchanged else { return false }
        connection.shutDown()
        return true
    }

    /// The 408 written straight to a connection whose body is too slow: libmicrohttpd cannot
    /// queue a response in the middle of a body (see `BodyDrain`), and writes nothing on
    /// the connection while it reads one.
    static func requestTimeout(minBodyRate: Int, window bodyRateWindow: Int) -> [UInt8] {
        let body = "{\"error\": \"the request body arrived more slowly than \(minBodyRate) bytes a second over \(bodyRateWindow) s (--min-body-rate)\"}\n"
        let head = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
        return Array((head + body).utf8)
    }

    /// Bytes the socket has received since it opened (the kernel's count); nil where it
    /// cannot tell (not Linux).
    func bytesReceived(_ socket: Int32) -> Int? {
        let bytes = cp_tcp_bytes_received(socket)
        return bytes >= 0 ? Int(bytes) : nil
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
    static let unseen = -1

    let socket: Int32
    /// The client's address as text, made once for all the connection's requests.
    let client: String
    let overLimit: Bool
    /// A request body on its way: when its current window began, and the bytes the socket
    /// had received then (nil until known).
    struct BodyWindow {
        var since: Int
        var bytes: Int?
        /// Whether the server holds the connection still (a fault) at the moment.
        var held = false

        mutating func restart(at now: Int, bytes received: Int?) {
            since = now
            bytes = received
        }
    }

    /// When (in milliseconds) the connection began waiting for its next head;
    /// `notWaiting` while a request is in progress.
    let waitingSince: Atomic<Int>
    /// Bytes the socket had received when the connection began to wait: more since means a
    /// head is on its way.
    let waitBaseline = Atomic<Int>(0)
    /// When the sweep first saw the head on its way (`notWaiting`: not yet).
    let headBegan = Atomic<Int>(WatchedConnection.notWaiting)
    /// The socket's received bytes at the last sweep (`unseen`: none yet since the wait
    /// began), and when they last grew after that.
    let lastReceived = Atomic<Int>(WatchedConnection.unseen)
    let lastProgress: Atomic<Int>
    let body = Mutex<BodyWindow?>(nil)
    /// Whether the watch ended the request for a body too slow (it is then a 408).
    let timedOut = Atomic<Bool>(false)
    private let file = Mutex<FileBeingSent?>(nil)
    /// False once libmicrohttpd has said the connection closed, which it does before it
    /// closes the socket: the socket is shut down only under this lock while it is true, so
    /// never after its number may have been reused.
    private let isOpen = Mutex(true)

    init(socket: Int32, client: String, overLimit: Bool) {
        self.socket = socket
        self.client = client
        self.overLimit = overLimit
        let now = ConnectionWatch.now()
        waitingSince = Atomic(now)
        lastProgress = Atomic(now)
    }

    /// Writes `bytes` on the socket, if the connection is still open; libmicrohttpd makes its
    /// sockets non-blocking, so this never waits (what does not fit is lost).
    func write(_ bytes: [UInt8]) {
        isOpen.withLock { open in
            if open { _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Platform.sendFlags) } }
        }
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
