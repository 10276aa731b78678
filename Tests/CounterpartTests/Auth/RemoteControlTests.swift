@testable import Counterpart
import Foundation
import Testing

/// An IPv4 address of this machine that is not loopback (a client from it is "remote"), or
/// nil on a machine without one.
let nonLoopbackAddress: String? = {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0 else { return nil }
    defer { freeifaddrs(list) }
    var entry = list
    while let current = entry?.pointee {
        defer { entry = current.ifa_next }
        guard let address = current.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET),
              current.ifa_flags & UInt32(IFF_LOOPBACK) == 0, current.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var ipv4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
        guard inet_ntop(AF_INET, &ipv4, &text, socklen_t(text.count)) != nil else { continue }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    return nil
}()

/// A server on a network address, asked from that address: the control endpoints and the
/// journal answer such a client only with `--allow-remote-control`, with or without
/// credentials; files and uploads answer it as they answer this machine.
@Suite("Access control: clients on other machines", .enabled(if: nonLoopbackAddress != nil, "no network address but loopback"))
struct RemoteControlTests {
    func server(credentials: Bool, allowRemote: Bool) throws -> TestServer {
        let accessControl = credentials ? try TestCredentials.accessControl() : nil
        return try TestServer(configure: {
            $0.host = nonLoopbackAddress!
            $0.accessControl = accessControl
            $0.allowsRemoteControl = allowRemote
        }, populate: { try Data("hello\n".utf8).write(to: $0.appendingPathComponent("hello.txt")) })
    }

    @Test(arguments: [false, true], [false, true])
    func controlAnswersOtherMachinesOnlyWhenAllowed(credentials: Bool, allowRemote: Bool) throws {
        let server = try server(credentials: credentials, allowRemote: allowRemote)
        let controller = credentials ? TestCredentials.curlArguments(user: "controller") : []
        let reader = credentials ? TestCredentials.curlArguments(user: "reader") : []
        let journal = try curl(controller + [server.url("/__counterpart/requests")])
        #expect(journal.status == (allowRemote ? 200 : 403), "\(journal.text)")
        if !allowRemote {
            #expect(try journal.json()["error"] as? String == "GET /__counterpart/requests answers only clients on this machine (start the server with --allow-remote-control)")
        }
        #expect(try curl(controller + ["-X", "DELETE", server.url("/__counterpart/uploads")]).status == (allowRemote ? 200 : 403))
        #expect(try curl(reader + [server.url("/hello.txt")]).status == 200)
        #expect(try curl([server.url("/__counterpart/health")]).status == 200)
        if credentials {
            // Credentials are asked for first: a stranger learns nothing of the rule.
            #expect(try curl([server.url("/__counterpart/requests")]).status == 401)
        }
    }
}
