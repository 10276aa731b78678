import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

@Suite("Embedding the server in tests")
struct EmbeddingTests {
    @Test func severalServersRunAtOnceOnFreePorts() async throws {
        let servers = try (0..<3).map { index in
            try TestServer(populate: { root in try Data("server \(index)".utf8).write(to: root.appendingPathComponent("who.txt")) })
        }
        #expect(Set(servers.map(\.server.port)).count == 3)
        for (index, server) in servers.enumerated() {
            #expect(server.server.baseURL.absoluteString == "http://127.0.0.1:\(server.server.port)")
            let (data, _) = try await makeSession().data(from: server.server.baseURL.appendingPathComponent("who.txt"))
            #expect(String(decoding: data, as: UTF8.self) == "server \(index)")
        }
    }

    @Test func stopIsIdempotentAndFreesThePort() throws {
        let server = try TestServer()
        let port = server.server.port
        server.server.stop()
        server.server.stop()
        #expect(try curl(["--max-time", "2", "http://127.0.0.1:\(port)/"]).exitCode != 0)
        // The port can be taken again at once.
        let again = try CounterpartServer(Configuration(port: port, root: server.root.path, uploads: server.uploads.path))
        again.stop()
    }

    @Test func aPortInUseIsAClearError() throws {
        let server = try TestServer()
        #expect {
            try CounterpartServer(Configuration(port: server.server.port, root: server.root.path, uploads: server.uploads.path))
        } throws: { error in
            String(describing: error).contains("cannot listen on 127.0.0.1 port \(server.server.port)")
        }
    }

    @Test func anUploadInFlightFinishesDuringTheGracePeriod() throws {
        let server = try TestServer()
        let path = try temporaryFile("slow.bin", testBytes(count: 2_000_000))
        let url = server.url("/upload")
        // curl sends slowly (1 MB/s): the upload is in flight when stop begins. It runs on
        // a thread of its own, not a task: the test blocks while it runs.
        let upload = BackgroundCall { try curl(["--limit-rate", "1M", "-F", "f=@\(path)", url]) }
        #expect(server.eventually { server.uploadedNames().contains { $0.hasSuffix(".part") } })
        server.server.stop(grace: .seconds(10))
        let result = try upload.wait()
        #expect(result.status == 200)
        #expect(server.uploadedNames() == ["slow.bin"])
    }

    @Test(arguments: ["::1", "localhost"])
    func otherHosts(_ host: String) throws {
        let server = try TestServer(configure: { $0.host = host }, populate: { root in
            try Data("ok".utf8).write(to: root.appendingPathComponent("ok.txt"))
        })
        #expect(try curl([server.server.baseURL.absoluteString + "/ok.txt"]).text == "ok")
    }
}
