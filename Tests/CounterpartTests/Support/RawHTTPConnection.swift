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

/// The tests' one raw HTTP client: a TCP connection for writing HTTP by hand and reading
/// exactly what comes back, 1xx responses included, at the pace the test chooses.
final class RawHTTPConnection {
    private let socket: Int32
    private var buffered: [UInt8] = []

    /// Connects to 127.0.0.1, from `source` (another loopback address, e.g. 127.0.0.2, to
    /// look like another client) when given.
    init(port: UInt16, from source: String? = nil) throws {
        socket = try connectedSocket(port: port, from: source)
        setReceiveTimeout(5)
    }

    deinit { Glibc.close(socket) }

    /// Sends `request` on a new connection and reads until the server closes or nothing
    /// comes for `timeout` seconds; with `closeAfterSending`, hangs up right after sending
    /// (the response is then empty).
    static func exchange(port: UInt16, _ request: [UInt8], closeAfterSending: Bool = false,
                         timeout: Double = 5) throws -> RawResponse {
        let start = Date()
        let connection = try RawHTTPConnection(port: port)
        connection.setReceiveTimeout(timeout)
        connection.send(request)
        if closeAfterSending { return RawResponse(bytes: [], seconds: Date().timeIntervalSince(start)) }
        while connection.fill() {}
        return RawResponse(bytes: connection.takeBuffered(), seconds: Date().timeIntervalSince(start))
    }

    /// Sends all of `bytes`, or as much as the server takes before it closes.
    func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            sent += count
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// The next response head (status line and headers, up to and with the empty line), as text.
    func readHead() -> String? {
        readHead(minimumBody: 0)?.head
    }

    /// The next response head, and the body bytes after it once at least `minimumBody` came
    /// (all that came by then).
    func readHead(minimumBody: Int) -> (head: String, body: [UInt8])? {
        while true {
            if let end = buffered.firstRange(of: RawResponse.headEnd), buffered.count - end.upperBound >= minimumBody {
                let head = String(decoding: buffered[..<end.upperBound], as: UTF8.self)
                buffered.removeSubrange(..<end.upperBound)
                return (head, minimumBody > 0 ? takeBuffered() : [])
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
        return (head, readBody(headerValue("Content-Length", in: head).flatMap { Int($0) } ?? 0))
    }

    /// Everything until the server closes; `closed` is false when `timeout` passed first.
    func readToEnd(timeout: Double) -> (bytes: [UInt8], closed: Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            setReceiveTimeout(max(0.05, deadline.timeIntervalSinceNow))
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = recv(socket, &chunk, chunk.count, 0)
            if count > 0 { buffered += chunk[0..<count]; continue }
            return (takeBuffered(), count == 0)
        }
        return (takeBuffered(), false)
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

    private func setReceiveTimeout(_ seconds: Double) {
        var limit = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1e6))
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Reads what the server sends next into `buffered`: false at its end, on an error or
    /// when the receive timeout passes.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = recv(socket, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffered += chunk[0..<count]
        return true
    }

    private func takeBuffered() -> [UInt8] {
        defer { buffered = [] }
        return buffered
    }
}
