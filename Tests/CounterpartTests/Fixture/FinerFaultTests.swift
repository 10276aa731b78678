import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// Sends `request` on a new connection, reads until the connection ends: the bytes that
/// came and the errno that ended it (0 for a clean end of stream).
func exchangeUntilEnd(port: UInt16, _ request: [UInt8]) throws -> (bytes: [UInt8], error: Int32) {
    let socket = try connectedSocket(port: port)
    defer { close(socket) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var sent = 0
    while sent < request.count {
        let count = request[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if count <= 0 { return ([], errno) }
        sent += count
    }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = recv(socket, &buffer, buffer.count, 0)
        if count < 0 { return (received, errno) }
        if count == 0 { return (received, 0) }
        received += buffer[0..<count]
    }
}

/// The body after the head of a raw response.
func body(of response: [UInt8]) -> [UInt8] {
    let separator: [UInt8] = [13, 10, 13, 10]
    guard let end = (0..<max(0, response.count - 3)).first(where: { Array(response[$0..<$0 + 4]) == separator }) else { return [] }
    return Array(response[(end + 4)...])
}

/// SplitMix64 written out here, apart from the server's `GeneratedBytes`: the outcomes a
/// test expects of `fail=P,seed=S` for the request at place `draw`.
func expectedFailure(probability: Double, seed: UInt64, draw: UInt64) -> Bool {
    var z = seed &+ (2 &* draw &+ 1) &* 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    return Double(z >> 11) / 9_007_199_254_740_992 < probability
}

@Suite("Faults: reset after N bytes, fail, jitter, first byte")
struct FinerFaultTests {
    @Test func resetAfterNBytesOfAResponseIsECONNRESETAfterExactlyThoseBytes() throws {
        let server = try makeStaticServer()
        let (response, error) = try exchangeUntilEnd(port: server.server.port, Array("GET /data.bin?reset=30000 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(error == ECONNRESET, "ended with errno \(error), not ECONNRESET")
        #expect(String(decoding: response.prefix(12), as: UTF8.self) == "HTTP/1.1 200")
        #expect(body(of: response) == [UInt8](sampleData.prefix(30_000)))
        // curl says so too: 56 (failure receiving network data: reset by peer), not 18 (partial file).
        let fetched = try curl([server.url("/bytes/1MiB?reset=65536")])
        #expect(fetched.exitCode == 56)
        #expect(fetched.header("Content-Length") == "1048576")
        // Plain reset is unchanged: no response at all.
        let plain = try exchangeUntilEnd(port: server.server.port, Array("GET /hello.txt?reset HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(plain.error == ECONNRESET && plain.bytes.isEmpty)
    }

    @Test func resetAfterNBytesAndFirstByteWithAThreadPerConnectionToo() throws {
        let server = try makeStaticServer { $0.threads = 0 }
        let (response, error) = try exchangeUntilEnd(port: server.server.port, Array("GET /data.bin?reset=20000 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(error == ECONNRESET && body(of: response) == [UInt8](sampleData.prefix(20_000)))
        let (late, seconds) = try timedCurl([server.url("/hello.txt?first-byte=500")])
        #expect(late.text == "hello\n" && seconds >= 0.45)
    }

    @Test func resetAfterNBytesOfAnUploadStoresNothing() throws {
        let server = try TestServer()
        let content = [UInt8](testBytes(count: 400_000))
        let body = MultipartWriter.formData([(MultipartWriter.formDataHeaders(name: "f", filename: "f.bin"), content)],
                                            boundary: try MultipartBoundary("X"))
        let head = "POST /upload HTTP/1.1\r\nHost: x\r\nCounterpart-Fault: reset=100000\r\nContent-Type: multipart/form-data; boundary=X\r\nContent-Length: \(body.count)\r\n\r\n"
        let (response, error) = try exchangeUntilEnd(port: server.server.port, Array(head.utf8) + body)
        #expect(error == ECONNRESET || error == EPIPE, "ended with errno \(error)")
        #expect(response.isEmpty)
        #expect(server.eventually { server.uploadedNames().isEmpty }, "left: \(server.uploadedNames())")
        let entry = try #require(server.server.journal.waitForRequests(path: "/upload").first)
        #expect(entry.requestBodyBytes < 400_000 && entry.fault == AppliedFault(fault: "reset=100000"))
    }

    @Test func failDrawsTheSameSequenceInEveryRunPerRuleAndServerWide() throws {
        let probability = 0.4
        var runs: [[Int]] = []
        for _ in 0..<2 {
            let armed = try makeStaticServer()
            try armed.server.faults.arm(path: "/hello.txt", fault: "fail=0.4,seed=7")
            let rule = try (0..<20).map { _ in try curl([armed.url("/hello.txt")]).status }
            let server = try makeStaticServer { $0.faults = try! FaultSpec(parsing: "fail=0.4,status=502,seed=11") }
            let serverWide = try (0..<20).map { _ in try curl([server.url("/empty.txt")]).status }
            #expect(rule == (0..<20).map { expectedFailure(probability: probability, seed: 7, draw: $0) ? 503 : 200 })
            #expect(serverWide == (0..<20).map { expectedFailure(probability: probability, seed: 11, draw: $0) ? 502 : 200 })
            #expect(Set(rule) == [200, 503] && Set(serverWide) == [200, 502], "both outcomes come up in 20 draws")
            runs.append(rule + serverWide)
        }
        #expect(runs[0] == runs[1])
    }

    @Test func failZeroNeverFailsAndOneAlwaysDoes() throws {
        let server = try makeStaticServer()
        #expect(try (0..<5).map { _ in try curl([server.url("/hello.txt?fail=0")]).status } == [200, 200, 200, 200, 200])
        #expect(try curl([server.url("/hello.txt?fail=1&status=429")]).status == 429)
        #expect(try curl(["-H", "Counterpart-Fault: fail=1", server.url("/hello.txt")]).status == 503)
    }

    @Test(arguments: ["fail=2", "fail=-0.1", "fail=nan", "fail=1e-1", "jitter=x", "first-byte=-1", "seed=-1", "reset=x"])
    func finerFaultsRefuseBadValues(_ fault: String) throws {
        let server = try makeStaticServer()
        let result = try curl(["-H", "Counterpart-Fault: \(fault)", server.url("/hello.txt")])
        #expect(result.status == 400)
        #expect((try result.json()["error"] as? String)?.hasPrefix("invalid fault: ") == true)
    }

    @Test func theSeedOfBytesIsNotAFaultSeed() throws {
        let server = try makeStaticServer()
        let result = try curl([server.url("/bytes/16?seed=5")])
        #expect(result.status == 200)
        #expect(server.server.journal.waitForRequests(path: "/bytes/16").first?.fault == nil)
    }

    @Test func jitterAddsASeededWait() throws {
        // With jitter=800 and seed 3, the first draw is fixed; find a seed whose wait is long.
        let seed = try #require((0..<100 as Range<UInt64>).first { GeneratedBytes(seed: $0).word(1) % 801 >= 500 })
        let expected = Double(GeneratedBytes(seed: seed).word(1) % 801) / 1000
        let server = try makeStaticServer()
        let (result, seconds) = try timedCurl([server.url("/hello.txt?jitter=800&seed=\(seed)")])
        #expect(result.status == 200)
        #expect(seconds >= expected - 0.05, "took \(seconds) s, the draw was \(expected) s")
        let quick = try #require((0..<100 as Range<UInt64>).first { GeneratedBytes(seed: $0).word(1) % 801 <= 50 })
        let (_, quickSeconds) = try timedCurl([server.url("/hello.txt?jitter=800&seed=\(quick)")])
        #expect(quickSeconds < seconds, "a short draw waited \(quickSeconds) s")
    }

    @Test func firstByteSendsTheHeadersAtOnceAndTheBodyLater() throws {
        let server = try makeStaticServer()
        for target in ["/data.bin?first-byte=1000", "/bytes/1000?first-byte=1000"] {
            let result = try runCommand("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{time_starttransfer} %{time_total}", server.url(target)])
            let fields = result.output.split(separator: " ")
            let times = fields.dropFirst().compactMap { Double($0) }
            try #require(times.count == 2, "\(result.output)")
            #expect(fields.first == "200")
            #expect(times[1] >= 0.95, "the body came after \(times[1]) s")
            #expect(times[1] - times[0] >= 0.7, "the headers came at \(times[0]) s, the end at \(times[1]) s")
        }
    }
}
