import Foundation

/// `counterpart healthcheck`: asks the server the same flags and variables describe for
/// `GET /__counterpart/health` over plain HTTP/1.0 and exits 0 on a 200. It exists so that a
/// container image needs no HTTP client of its own for its HEALTHCHECK.
enum HealthCheck {
    /// 0 when the server answered 200 within `seconds`, 1 otherwise (with the reason on stderr).
    static func run(host: String, port: UInt16, seconds: Int = 3) -> Int32 {
        // A server listening on every address is reachable on loopback.
        let target = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host
        do throws(HealthCheckError) {
            let status = try statusLine(host: target, port: port, seconds: seconds)
            guard status.hasPrefix("HTTP/1.1 200") || status.hasPrefix("HTTP/1.0 200") else {
                throw HealthCheckError(reason: "answered \(status)")
            }
            return 0
        } catch {
            FileHandleWriter.standardError("counterpart healthcheck: \(target) port \(port): \(error.reason)\n")
            return 1
        }
    }

    private static func statusLine(host: String, port: UInt16, seconds: Int) throws(HealthCheckError) -> String {
        var hints = addrinfo()
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            throw HealthCheckError(reason: "cannot resolve the address")
        }
        defer { freeaddrinfo(found) }
        let socket = Foundation.socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
        guard socket >= 0 else { throw HealthCheckError(reason: String(cString: strerror(errno))) }
        defer { close(socket) }
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            throw HealthCheckError(reason: String(cString: strerror(errno)))
        }
        let request = Array("GET /__counterpart/health HTTP/1.0\r\nHost: localhost\r\n\r\n".utf8)
        guard send(socket, request, request.count, 0) == request.count else {
            throw HealthCheckError(reason: "could not send the request")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !answer.contains(UInt8(ascii: "\r")) {
            let count = recv(socket, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            answer += buffer[..<count]
        }
        let line = answer.split(separator: UInt8(ascii: "\r"), maxSplits: 1).first.map { String(decoding: $0, as: UTF8.self) }
        guard let line, !line.isEmpty else { throw HealthCheckError(reason: "no answer") }
        return line
    }
}

struct HealthCheckError: Error {
    let reason: String
}
