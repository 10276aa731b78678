// The many-clients section of the server suite (`--only server/many-clients`): Counterpart
// beside nginx (its default timeouts) in the same run, each holding many connections at once
// while a fresh client fetches the 4 KiB file:
//   - slow heads (1,000, then 5,000) from 127.0.0.2: each sends the start of a head and
//     nothing more; each one the server closes is opened again at once, so the pressure
//     stays while the fresh client measures;
//   - idle keep-alive connections (1,000, then 10,000), each having had one GET answered.
// It prints RSS per connection and the p50 and p99 of the fresh client's GET during each.

import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ServerBench {
    static let slowHeadLevels = [1_000, 5_000]
    static let idleLevels = [1_000, 10_000]
    /// The start of a request head that never ends.
    static let slowHead = Array("GET / HTTP/1.1\r\nHost: x\r\nX-a: ".utf8)

    func runManyClients(context: BenchContext) {
        let options = context.options
        guard options.wants(key: "many-clients") else { return }
        let ready = prepare(options)
        let slowLevels = options.quick ? [200, 1_000] : Self.slowHeadLevels
        let idleLevels = options.quick ? [200, 2_000] : Self.idleLevels
        let samples = options.quick ? 40 : 100
        print("""

            Many clients: Counterpart (defaults for slow heads, and with the new rules off as before them; for idle connections
            --max-connections 20000, and idle and head timeouts of 300 s: opening 10,000 takes longer than 30 s here) beside nginx
            (1 worker, worker_connections 20000, its default timeouts: client_header_timeout 60 s, keepalive_timeout 75 s)
              slow heads: N connections from 127.0.0.2 send "GET / HTTP/1.1\\r\\nHost: x\\r\\nX-a: " and nothing more; each one the
                server closes is opened again at once. idle: N keep-alive connections, one GET /\(ServerFixture.smallName) answered on each.
              fresh GET: \(samples) GETs (3 with the rules off) of /\(ServerFixture.smallName) (4 KiB) from 127.0.0.1, each on a new connection, one every 50 ms,
                starting 1 s after the N are open; p50/p99 of the time to the whole answer (a 60 s timeout counts as 60 s)
              RSS: VmRSS of the server (nginx: its worker) with the N open, minus before; per connection = that / N
            """)
        MachineContext.printLoadAverage("at start")
        defer { MachineContext.printLoadAverage("at end") }
        guard ready, let fixture else { return }

        var table = Table([
            ("server", .left), ("load", .left), ("RSS before MiB", .right), ("RSS with them MiB", .right),
            ("KiB per connection", .right), ("fresh GET p50 ms", .right), ("p99 ms", .right), ("answered", .right),
            ("theirs open at end", .right),
        ])
        // The rules off, as before them: each fresh GET waits for the head timeout, so a few.
        let rulesOff = ["--evict-at", "0", "--min-head-rate", "0"]
        // Opening 10,000 connections takes longer than the 30 s idle and head timeouts here.
        let idleFlags = ["--max-connections", "20000", "--idle-timeout", "300", "--head-timeout", "300"]
        let lineUp: [(label: String, spec: ServerSpec, extra: [String], load: Load, samples: Int)] =
            [("Counterpart", .counterpartDefault, rulesOff, .slowHeads(slowLevels[0]), 3)]
            + slowLevels.map { ("Counterpart", .counterpartDefault, [], .slowHeads($0), samples) }
            + idleLevels.map { ("Counterpart", .counterpartDefault, idleFlags, .idle($0), samples) }
            // The smallest pool --connection-memory takes: libmicrohttpd zeroes the whole pool
            // before each request, so an idle connection that has served one holds all of it.
            + [("Counterpart", .counterpartDefault, idleFlags + ["--connection-memory", "16KiB"], .idle(idleLevels[1]), samples)]
            + slowLevels.map { ("nginx", .nginx(workers: "1"), [], .slowHeads($0), samples) }
            + idleLevels.map { ("nginx", .nginx(workers: "1"), [], .idle($0), samples) }
        for entry in lineUp {
            printError("  [server/many-clients] \(entry.label): \(entry.load.name)…")
            let server: ServerUnderTest
            do {
                let started = try startServers([entry.spec], fixture: fixture, counterpartExtra: entry.extra, nginxWorkerConnections: 20_000)
                guard let first = started.servers.first else {
                    print("  SKIPPED \(entry.label): \(started.missing.joined(separator: "; "))")
                    continue
                }
                server = first
            } catch {
                print("  FAILED to start \(entry.label): \(error)")
                continue
            }
            defer { server.stop() }
            Thread.sleep(forTimeInterval: 0.5)
            let before = server.currentRSS
            let figure = Self.measure(entry.load, port: server.port, samples: entry.samples) { server.currentRSS }
            let kib = Double(max(0, figure.rss - before)) / 1024 / Double(entry.load.count)
            let p50 = Self.latencyPercentile(figure.latencies, 50) * 1000
            let p99 = Self.latencyPercentile(figure.latencies, 99) * 1000
            table.append([entry.label + (entry.extra.isEmpty ? "" : " " + entry.extra.joined(separator: " ")), entry.load.name,
                          format(Double(before) / Double(1 << 20), decimals: 1), format(Double(figure.rss) / Double(1 << 20), decimals: 1),
                          format(kib, decimals: 1), format(p50, decimals: 1), format(p99, decimals: 1),
                          "\(figure.answered)/\(figure.latencies.count)", format(figure.stillOpen)])
            let subject = "\(entry.label), \(entry.load.name)"
            context.record(FigureRecord(section: "server/many-clients", subject: subject, metric: "RSS per connection", unit: "KiB",
                                        samples: Samples([kib])))
            context.record(FigureRecord(section: "server/many-clients", subject: subject, metric: "fresh GET p50", unit: "ms",
                                        samples: Samples([p50])))
            context.record(FigureRecord(section: "server/many-clients", subject: subject, metric: "fresh GET p99", unit: "ms",
                                        samples: Samples([p99])))
            guard entry.spec.isCounterpart, entry.extra == [] || entry.extra == idleFlags else { continue }
            switch entry.load {
            case .slowHeads(let count) where count == Self.slowHeadLevels.last:
                context.record(TargetCheck(name: "fresh GET p99 beside \(format(count)) slow heads (defaults)", measured: p99,
                                           target: 1_000, unit: "ms", source: "issue 25", comparison: .below))
            case .idle(let count) where count == Self.idleLevels.last:
                context.record(TargetCheck(name: "RSS per idle keep-alive connection (\(format(count)))", measured: kib,
                                           target: 16, unit: "KiB", source: "issue 25", comparison: .below))
                context.record(TargetCheck(name: "fresh GET p99 beside \(format(count)) idle connections", measured: p99,
                                           target: 50, unit: "ms", source: "issue 25", comparison: .below))
            default:
                break
            }
        }
        print(table.render(indent: "  "))
    }

    enum Load {
        case slowHeads(Int)
        case idle(Int)

        var count: Int {
            switch self {
            case .slowHeads(let count), .idle(let count): count
            }
        }

        var name: String {
            switch self {
            case .slowHeads(let count): "\(format(count)) slow heads"
            case .idle(let count): "\(format(count)) idle"
            }
        }
    }

    struct ManyClientsFigure {
        var rss: Int
        var latencies: [Double]
        var answered: Int
        /// The load's connections still open when the fresh client is done.
        var stillOpen: Int
    }

    private static func measure(_ load: Load, port: UInt16, samples: Int, rss: () -> Int) -> ManyClientsFigure {
        switch load {
        case .slowHeads(let count):
            let flood = SlowHeadFlood(port: port, count: count)
            flood.start()
            defer { flood.stop() }
            Thread.sleep(forTimeInterval: 1)
            let held = rss()
            let (latencies, answered) = freshGets(port: port, samples: samples)
            return ManyClientsFigure(rss: held, latencies: latencies, answered: answered, stillOpen: flood.openNow)
        case .idle(let count):
            var sockets: [Int32] = []
            defer { sockets.forEach { close($0) } }
            for _ in 0..<count {
                guard let socket = try? openKeptAlive(port: port) else { break }
                sockets.append(socket)
            }
            Thread.sleep(forTimeInterval: 1)
            let held = rss()
            let (latencies, answered) = freshGets(port: port, samples: samples)
            return ManyClientsFigure(rss: held, latencies: latencies, answered: answered,
                                     stillOpen: sockets.filter(isStillOpen).count)
        }
    }

    /// `samples` GETs of the small file, each on a new connection, one every 50 ms: the
    /// seconds each took (60 for one unanswered), and how many were answered 200 in full.
    private static func freshGets(port: UInt16, samples: Int) -> ([Double], Int) {
        var latencies: [Double] = []
        var answered = 0
        let request = Array("GET /\(ServerFixture.smallName) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        for _ in 0..<samples {
            let start = monotonicNanoseconds()
            var complete = false
            if let socket = try? connectLoopback(port: port, from: nil, receiveTimeout: 60) {
                if write(socket, request, request.count) == request.count {
                    var received: [UInt8] = []
                    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
                    while true {
                        let count = read(socket, &buffer, buffer.count)
                        if count <= 0 { break }
                        received += buffer[0..<count]
                    }
                    complete = received.starts(with: Array("HTTP/1.1 200".utf8)) && received.count >= ServerFixture.smallSize
                }
                close(socket)
            }
            let seconds = Double(monotonicNanoseconds() - start) / 1e9
            latencies.append(complete ? seconds : max(seconds, 60))
            if complete { answered += 1 }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return (latencies, answered)
    }

    private static func latencyPercentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        let rank = max(1, Int((Double(sorted.count) * p / 100).rounded(.up)))
        return sorted[rank - 1]
    }
}

/// A blocking TCP socket connected to 127.0.0.1:`port`, from `source` when given.
func connectLoopback(port: UInt16, from source: String?, receiveTimeout: Int) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw BenchFailure("socket: \(String(cString: strerror(errno)))") }
    var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    if let source, !bindSource(descriptor, source) {
        close(descriptor)
        throw BenchFailure("bind to \(source): \(String(cString: strerror(errno)))")
    }
    var address = loopbackAddress(port: port, host: "127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let reason = String(cString: strerror(errno))
        close(descriptor)
        throw BenchFailure("connect: \(reason)")
    }
    return descriptor
}

private func loopbackAddress(port: UInt16, host: String) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr(host)
    return address
}

private func bindSource(_ descriptor: Int32, _ source: String) -> Bool {
    var local = loopbackAddress(port: 0, host: source)
    return withUnsafePointer(to: &local) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// `count` connections from 127.0.0.2 that each send the start of a head and nothing more;
/// each one the server closes is opened again at once, on a thread of its own, until stopped.
final class SlowHeadFlood: Sendable {
    private let port: UInt16
    private let count: Int
    private let stopping = Atomic<Bool>(false)
    private let open = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)

    init(port: UInt16, count: Int) {
        self.port = port
        self.count = count
    }

    var openNow: Int { open.load(ordering: .relaxed) }

    func start() {
        Thread.detachNewThread { [self] in
            run()
            finished.signal()
        }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
    }

    /// A non-blocking connection that has sent the slow head, or -1.
    private func openOne() -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        // A connect the server's full listen queue holds up gives up after a second.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard bindSource(descriptor, "127.0.0.2") else {
            close(descriptor)
            return -1
        }
        var address = loopbackAddress(port: port, host: "127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        // A blocking connect: it completes once the kernel has queued it (the listen backlog).
        guard connected == 0, write(descriptor, ServerBench.slowHead, ServerBench.slowHead.count) > 0 else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    private func run() {
        var polled: [pollfd] = []
        for _ in 0..<count where !stopping.load(ordering: .relaxed) {
            let descriptor = openOne()
            if descriptor >= 0 { polled.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)) }
        }
        open.store(polled.count, ordering: .relaxed)
        while !stopping.load(ordering: .relaxed) {
            guard poll(&polled, nfds_t(polled.count), 50) > 0 else { continue }
            for index in polled.indices where polled[index].revents != 0 {
                close(polled[index].fd)
                polled[index].fd = openOne()
                polled[index].revents = 0
            }
            polled.removeAll { $0.fd < 0 }
            open.store(polled.count, ordering: .relaxed)
        }
        polled.forEach { close($0.fd) }
    }
}
