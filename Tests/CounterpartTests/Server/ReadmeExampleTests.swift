// The README's embedding example, verbatim: if the public API changes, this stops compiling.
import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

@Test func uploadsAndResumes() async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
    try FileManager.default.createDirectory(at: folder.appendingPathComponent("files"), withIntermediateDirectories: true)
    try Data(repeating: 7, count: 100_000).write(to: folder.appendingPathComponent("files/big.bin"))

    // Port 0: a free port. Several servers may run at once.
    let server = try CounterpartServer(Configuration(root: folder.appendingPathComponent("files").path,
                                                     uploads: folder.appendingPathComponent("uploads").path))
    defer { server.stop() }

    var request = URLRequest(url: server.baseURL.appendingPathComponent("big.bin"))
    request.setValue("bytes=50000-", forHTTPHeaderField: "Range")
    let (data, response) = try await URLSession.shared.data(for: request)
    #expect((response as? HTTPURLResponse)?.statusCode == 206)
    #expect(data.count == 50_000)
}
