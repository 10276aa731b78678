/// An IPv4 or IPv6 socket address to listen on.
struct SocketAddress {
    private var storage = sockaddr_storage()
    private(set) var isIPv6 = false

    /// Resolves `host` (an address such as `127.0.0.1`, `::`, or a name such as `localhost`).
    init(host: String, port: UInt16) throws(CounterpartServer.StartError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Platform.streamSocketType
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let first = result else {
            throw .cannotListen(host: host, port: port, reason: "the host cannot be resolved: \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(result) }
        withUnsafeMutableBytes(of: &storage) { destination in
            destination.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(first.pointee.ai_addrlen)))
        }
        isIPv6 = first.pointee.ai_family == AF_INET6
    }

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>) throws -> T) rethrows -> T {
        var copy = storage
        return try withUnsafePointer(to: &copy) { try $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }

    /// `address` as text (`127.0.0.1`, `::1`), or "-" when unknown.
    static func describe(_ address: UnsafePointer<sockaddr>?) -> String {
        guard let address else { return "-" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 in
                var raw = ipv4.pointee.sin_addr
                _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
            }
        case AF_INET6:
            address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { ipv6 in
                var raw = ipv6.pointee.sin6_addr
                _ = inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
            }
        default:
            return "-"
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
