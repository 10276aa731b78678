// A client that reads a Counterpart's `/__counterpart/events` all along, as the live page
// does, for the rows measured "with an events reader". It is a process of its own, as a
// browser or `curl -N` is: the bench itself re-run as `--events-reader-process PORT MODE`.
// A thread of the bench's own (as it was until 2026-12-08) shared the bench's process with
// its timing and could not be told apart from the server's cost.

import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The bench's side: starts the reader's process and, once stopped, keeps what it read.
final class EventsReader: Sendable {
    /// `latest` (the live page's stream) or `all`.
    let requests: String
    private let process: SessionProcess
    private struct State {
        /// The write end of the process's stdin: closed, it tells the process to stop.
        var input: Int32
        var counts: EventsReading.Counts?
    }
    private let state: Mutex<State>
    private let output: Int32

    static let processFlag = "--events-reader-process"

    /// Returns once the stream has begun (its headers and snapshot), before the measuring does.
    init(port: UInt16, requests: String) throws {
        self.requests = requests
        let input = try Self.pipe()
        let output = try Self.pipe()
        let spawned = Result { try SessionProcess(Self.executable(), [Self.processFlag, String(port), requests], input: input.read, output: output.write) }
        // The child's ends are its own now: the bench keeps only the other two.
        close(input.read)
        close(output.write)
        do {
            process = try spawned.get()
        } catch {
            close(input.write)
            close(output.read)
            throw error
        }
        state = Mutex(State(input: input.write))
        self.output = output.read
        let first = Self.readLine(output.read, seconds: 10)
        guard first == "started" else {
            stop()
            throw BenchFailure("the events reader's process did not begin reading port \(port): \(first ?? "no answer in 10 s")")
        }
    }

    /// Ends the process (no more reconnecting: the server is about to stop) and keeps its
    /// counts; again, nothing.
    func stop() {
        let input = state.withLock { state -> Int32 in
            defer { state.input = -1 }
            return state.input
        }
        guard input >= 0 else { return }
        close(input)
        let counts = Self.readLine(output, seconds: 10).flatMap(EventsReading.Counts.init(line:))
        close(output)
        if !waitForExit(process, seconds: 5) { kill(process.pid, SIGKILL); _ = waitForExit(process, seconds: 5) }
        state.withLock { $0.counts = counts }
    }

    /// What `readers` (one server's, one after another, each stopped) read together.
    static func summary(of readers: [EventsReader]) -> String {
        guard let requests = readers.first?.requests else { return "no events reader" }
        let counts = readers.map { $0.state.withLock { $0.counts } }
        let lost = counts.filter { $0 == nil }.count
        let known = counts.compactMap { $0 }
        let megabytes = Double(known.reduce(0) { $0 + $1.bytes }) / 1e6
        let events = known.reduce(0) { $0 + $1.events }
        let dropped = known.reduce(0) { $0 + $1.drops }
        return "the events reader\(readers.count > 1 ? "s" : "") (requests=\(requests), a process of \(readers.count > 1 ? "their" : "its") own"
            + "\(readers.count > 1 ? ", one for each of the server's \(readers.count) processes" : ""))"
            + " read \(events) events (\(String(format: "%.1f", megabytes)) MB)"
            + (dropped == 0 ? ", never dropped" : "; dropped \(dropped) time\(dropped == 1 ? "" : "s") for falling behind the backlog, back each time 2 s later with Last-Event-ID")
            + (lost == 0 ? "" : "; \(lost) of them did not report their counts")
    }

    private static func executable() throws -> String {
        guard let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else {
            throw BenchFailure("cannot find the bench's own executable (/proc/self/exe) to run the events reader")
        }
        return path
    }

    /// A pipe whose ends the children do not inherit (but for the one given as their stdin or stdout).
    private static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        // pipe2 is a GNU extension Swift's Glibc does not import; the bench starts its
        // children from this one thread, so no spawn comes between the two calls.
        guard Glibc.pipe(&ends) == 0 else { throw BenchFailure("pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    /// One line from `descriptor`, waiting up to `seconds` in all; nil at the end or the deadline.
    private static func readLine(_ descriptor: Int32, seconds: Double) -> String? {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while monotonicNanoseconds() < deadline {
            var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let left = Int32((deadline - min(deadline, monotonicNanoseconds())) / 1_000_000)
            guard poll(&waiting, 1, max(left, 1)) > 0 else { continue }
            guard Glibc.read(descriptor, &byte, 1) == 1 else { return nil }
            if byte == 0x0A { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }
}

/// The reader's process: reads the stream on a thread while its stdin stays open; at its
/// end, writes its counts as one line and exits.
enum EventsReaderProcess {
    static func run(_ arguments: [String]) -> Never {
        guard arguments.count == 2, let port = UInt16(arguments[0]), ["latest", "all"].contains(arguments[1]) else {
            print("usage: counterpart-bench \(EventsReader.processFlag) PORT latest|all")
            exit(2)
        }
        let reading: EventsReading
        do {
            reading = try EventsReading(port: port, requests: arguments[1])
        } catch {
            print("\(error)")
            exit(1)
        }
        print("started")
        flushOutput()
        var byte: UInt8 = 0
        while Glibc.read(0, &byte, 1) > 0 {}
        reading.stop()
        print(reading.counts.line)
        flushOutput()
        exit(0)
    }
}

/// Reads the stream on a thread of its own and counts what it got; dropped, it comes back
/// as a browser would.
final class EventsReading: Sendable {
    struct Counts {
        let events: Int
        let bytes: Int
        /// Times the server dropped the stream (the reader fell behind its backlog).
        let drops: Int

        var line: String { "\(events) \(bytes) \(drops)" }
    }

    private let bytes = Atomic<Int>(0)
    private let events = Atomic<Int>(0)
    private let drops = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)

    var counts: Counts {
        Counts(events: events.load(ordering: .relaxed), bytes: bytes.load(ordering: .relaxed), drops: drops.load(ordering: .relaxed))
    }

    /// Waits `retry: 2000` after a drop and comes back with `Last-Event-ID`, as a browser's
    /// EventSource does, until `stop()`. Returns once the first bytes came, or after 5 s.
    init(port: UInt16, requests: String) throws {
        let first = try Self.connect(port: port, requests: requests, lastEventID: nil)
        let thread = Thread { [self] in
            var socket = first
            while true {
                let lastID = read(socket)
                close(socket)
                if stopped.load(ordering: .relaxed) { return }
                drops.add(1, ordering: .relaxed)
                usleep(2_000_000)
                guard !stopped.load(ordering: .relaxed), let again = try? Self.connect(port: port, requests: requests, lastEventID: lastID) else { return }
                socket = again
            }
        }
        thread.start()
        let deadline = Date().addingTimeInterval(5)
        while bytes.load(ordering: .relaxed) == 0, Date() < deadline { usleep(10_000) }
    }

    /// Reads until the stream ends; the last `id:` seen. It must not itself eat the CPU the
    /// server is measured on: lines are found with memchr over the bytes received, and only
    /// an `id:` line is looked into (its digits read as a number, no string made).
    private func read(_ socket: Int32) -> UInt64? {
        let capacity = 64 << 10
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { buffer.deallocate() }
        var lines = SSELines()
        while true {
            let count = recv(socket, buffer, capacity, 0)
            if count <= 0 { return lines.lastID }
            bytes.add(count, ordering: .relaxed)
            events.add(lines.scan(UnsafeBufferPointer(start: buffer, count: count)), ordering: .relaxed)
        }
    }

    private static func connect(port: UInt16, requests: String, lastEventID: UInt64?) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard socket >= 0, connected == 0 else {
            if socket >= 0 { close(socket) }
            throw BenchFailure("the events reader cannot connect to port \(port)")
        }
        let request = "GET /__counterpart/events?requests=\(requests) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            + (lastEventID.map { "Last-Event-ID: \($0)\r\n" } ?? "") + "\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        return socket
    }

    /// No more reconnecting: the server is about to stop.
    func stop() { stopped.store(true, ordering: .relaxed) }
}

extension EventsReading.Counts {
    /// The process's last line (`line`) read back; nil for anything else.
    init?(line: String) {
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        guard numbers.count == 3 else { return nil }
        self.init(events: numbers[0], bytes: numbers[1], drops: numbers[2])
    }
}

/// The lines of an SSE stream as they arrive in pieces: counts the events (each ends with an
/// empty line) and keeps the last `id:`.
struct SSELines {
    private(set) var lastID: UInt64?
    /// Whether the bytes so far end a line (the start counts as one).
    private var atLineStart = true
    /// The beginning of a line cut by the end of a piece, while it may be an `id:` line.
    private var cut: [UInt8] = []
    private var cutIsID = false

    /// The events that `piece` ends.
    mutating func scan(_ piece: UnsafeBufferPointer<UInt8>) -> Int {
        guard let base = piece.baseAddress else { return 0 }
        var ended = 0
        var start = 0
        while start < piece.count {
            guard let found = memchr(base + start, 0x0A, piece.count - start) else {
                take(UnsafeBufferPointer(start: base + start, count: piece.count - start), ends: false)
                return ended
            }
            let end = UnsafeRawPointer(found).assumingMemoryBound(to: UInt8.self) - base
            if end == start, atLineStart, cut.isEmpty, !cutIsID {
                ended += 1  // an empty line: an event (or a comment, or `retry`) ends
            } else {
                take(UnsafeBufferPointer(start: base + start, count: end - start), ends: true)
            }
            atLineStart = true
            start = end + 1
        }
        return ended
    }

    /// Part of a line; `ends` when its newline follows.
    private mutating func take(_ part: UnsafeBufferPointer<UInt8>, ends: Bool) {
        if atLineStart {
            // Only `id: ` lines are kept, and only until their end.
            cutIsID = part.count >= 1 && part[0] == 0x69  // "i"
            cut.removeAll(keepingCapacity: true)
        }
        if cutIsID, cut.count + part.count <= 40 { cut.append(contentsOf: part) } else { cutIsID = false }
        atLineStart = false
        guard ends else { return }
        if cutIsID, cut.count > 4, cut[0] == 0x69, cut[1] == 0x64, cut[2] == 0x3A, cut[3] == 0x20 {
            var id: UInt64 = 0
            var digits = 0
            for byte in cut[4...] {
                guard byte >= 0x30, byte <= 0x39 else { digits = 0; break }
                id = id &* 10 &+ UInt64(byte - 0x30)
                digits += 1
            }
            if digits > 0 { lastID = id }
        }
        cut.removeAll(keepingCapacity: true)
        cutIsID = false
    }
}
