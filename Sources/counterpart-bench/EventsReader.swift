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

    /// Waits `retry: 2000` after a drop and comes back with `Last-Event-ID`, as a browser's
    /// EventSource does, until `stop()`.
    init(port: UInt16) throws {
        self.port = port
        let first = try Self.connect(port: port, lastEventID: nil)
        let thread = Thread { [self] in
            var socket = first
            while true {
                let lastID = read(socket)
                close(socket)
                if stopped.load(ordering: .relaxed) { return }
                drops.add(1, ordering: .relaxed)
                usleep(2_000_000)
                guard !stopped.load(ordering: .relaxed), let again = try? Self.connect(port: port, lastEventID: lastID) else { return }
                socket = again
            }
        }
        thread.start()
        // The stream has begun (its headers and snapshot) before the measuring does.
        let deadline = Date().addingTimeInterval(5)
        while bytes.load(ordering: .relaxed) == 0, Date() < deadline { usleep(10_000) }
    }

    /// Reads until the stream ends; the last `id:` seen.
    private func read(_ socket: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var previous: UInt8 = 0
        var line: [UInt8] = []
        var lastID: String?
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { return lastID }
            bytes.add(count, ordering: .relaxed)
            var found = 0
            for byte in buffer[0..<count] {
                // An event ends with an empty line.
                if byte == 0x0A {
                    if previous == 0x0A { found += 1 }
                    if line.starts(with: Array("id: ".utf8)) { lastID = String(decoding: line.dropFirst(4), as: UTF8.self) }
                    line.removeAll(keepingCapacity: true)
                } else if line.count < 32 {
                    line.append(byte)
                }
                previous = byte
            }
            events.add(found, ordering: .relaxed)
        }
    }

    private static func connect(port: UInt16, lastEventID: String?) throws -> Int32 {
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
        let request = "GET /__counterpart/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            + (lastEventID.map { "Last-Event-ID: \($0)\r\n" } ?? "") + "\r\n"
        _ = request.withCString { send(socket, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        return socket
    }

    /// No more reconnecting: the server is about to stop.
    func stop() { stopped.store(true, ordering: .relaxed) }

    var summary: String {
        let megabytes = Double(bytes.load(ordering: .relaxed)) / 1e6
        let dropped = drops.load(ordering: .relaxed)
        return "the events reader read \(events.load(ordering: .relaxed)) events (\(String(format: "%.1f", megabytes)) MB)"
            + (dropped == 0 ? ", never dropped" : "; dropped \(dropped) time\(dropped == 1 ? "" : "s") for falling behind the backlog, back each time 2 s later with Last-Event-ID")
    }
}
