import Foundation
import Testing

/// A TCP socket connected to 127.0.0.1:`port`, from `source` (another loopback address,
/// e.g. 127.0.0.2, to look like another client) when given.
func connectedSocket(port: UInt16, from source: String? = nil) throws -> Int32 {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(socket >= 0, "cannot make a socket")
    func endpoint(_ host: String, _ port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }
    if let source {
        var local = endpoint(source, 0)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound != 0 { close(socket) }
        try #require(bound == 0, "cannot bind to \(source)")
    }
    var address = endpoint("127.0.0.1", port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if connected != 0 { close(socket) }
    try #require(connected == 0, "cannot connect to port \(port)")
    return socket
}

/// A TCP connection for writing HTTP by hand and reading exactly what comes back, 1xx
/// responses included.
final class RawHTTPConnection {
    private let socket: Int32
    private var buffered: [UInt8] = []

    /// Connects to 127.0.0.1, from `source` (another loopback address, e.g. 127.0.0.2, to
    /// look like another client) when given.
    init(port: UInt16, from source: String? = nil) throws {
        socket = try connectedSocket(port: port, from: source)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(socket) }

    func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            sent += count
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// The next response head (status line and headers, up to the empty line), as text.
    func readHead() -> String? {
        while true {
            if let end = buffered.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: buffered[..<end.upperBound], as: UTF8.self)
                buffered.removeSubrange(..<end.upperBound)
                return head
            }
            guard fill() else { return nil }
        }
    }

    /// `count` bytes of body.
    func readBody(_ count: Int) -> [UInt8] {
        while buffered.count < count, fill() {}
        let body = Array(buffered.prefix(count))
        buffered.removeFirst(body.count)
        return body
    }

    /// The next final response: its head and its body (by Content-Length), skipping
    /// nothing — a 1xx must have been read with `readHead` before.
    func readResponse() -> (head: String, body: [UInt8])? {
        guard let head = readHead() else { return nil }
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        return (head, readBody(length))
    }

    /// Whether the server closes the connection (end of stream or reset) within `seconds`,
    /// discarding whatever it sends before.
    func closedByServer(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while Date() < deadline {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 100) == 1 else { continue }
            let count = recv(socket, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return true }
        }
        return false
    }

    /// Hangs up (after what was sent so far).
    func close() {
        shutdown(socket, Int32(SHUT_RDWR))
    }

    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(socket, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffered += chunk[0..<count]
        return true
    }
}

/// The value of a header in a response head.
func headerValue(_ name: String, in head: String) -> String? {
    head.split(separator: "\r\n").dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
        .map { String($0.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces) }
}

func statusCode(of head: String) -> Int? {
    head.split(separator: " ").dropFirst().first.flatMap { Int($0) }
}
