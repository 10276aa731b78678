// A client that reads a Counterpart's `/__counterpart/events` all along, as the live page
// does, for the rows measured "with an events reader". It reads on a thread of its own
// and counts what it got; dropped, it comes back as a browser would.

import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

final class EventsReader: Sendable {
    private let bytes = Atomic<Int>(0)
    private let events = Atomic<Int>(0)
    /// Times the server dropped the stream (the reader fell behind its backlog).
    private let drops = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let port: UInt16
    /// `latest` (the live page's stream) or `all`.
    let requests: String

    /// Waits `retry: 2000` after a drop and comes back with `Last-Event-ID`, as a browser's
    /// EventSource does, until `stop()`.
    init(port: UInt16, requests: String) throws {
        self.port = port
        self.requests = requests
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
        // The stream has begun (its headers and snapshot) before the measuring does.
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

    /// What `readers` (one server's, one after another) read together.
    static func summary(of readers: [EventsReader]) -> String {
        guard let requests = readers.first?.requests else { return "no events reader" }
        let megabytes = Double(readers.reduce(0) { $0 + $1.bytes.load(ordering: .relaxed) }) / 1e6
        let events = readers.reduce(0) { $0 + $1.events.load(ordering: .relaxed) }
        let dropped = readers.reduce(0) { $0 + $1.drops.load(ordering: .relaxed) }
        return "the events reader\(readers.count > 1 ? "s" : "") (requests=\(requests)\(readers.count > 1 ? ", one for each of the server's \(readers.count) processes" : ""))"
            + " read \(events) events (\(String(format: "%.1f", megabytes)) MB)"
            + (dropped == 0 ? ", never dropped" : "; dropped \(dropped) time\(dropped == 1 ? "" : "s") for falling behind the backlog, back each time 2 s later with Last-Event-ID")
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
