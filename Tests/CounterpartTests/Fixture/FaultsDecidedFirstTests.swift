import Counterpart
import Foundation
import Testing

/// Faults that replace the answer are decided on the head, before an endpoint takes a lock,
/// a slot or a file: a dropped answer leaves nothing behind.
@Suite("Faults: decided before an endpoint takes anything")
struct FaultsDecidedFirstTests {
    @Test func aTusPatchAnswered503LeavesTheUploadWritable() throws {
        let server = try TestServer()
        let created = try tus(["-X", "POST", "-H", "Upload-Length: 11", server.url("/files")])
        let location = try #require(created.header("Location"))
        func patch(_ query: String) throws -> CurlResult {
            try tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                     "--data-binary", "hello world", server.url(location + query)])
        }
        #expect(try patch("?status=503").status == 503)
        #expect(try patch("?reset").exitCode == 56)
        let next = try patch("")
        #expect(next.status == 204, "\(next.text)")
        #expect(next.header("Upload-Offset") == "11")
    }

    @Test func aFaultedCreationTakesNoSlot() throws {
        let server = try TestServer { $0.resumableLimits.maxUploads = 1 }
        for fault in ["status=503", "reset"] {
            _ = try tus(["-X", "POST", "-H", "Upload-Length: 11", "-H", "Counterpart-Fault: \(fault)", server.url("/files")])
        }
        let created = try tus(["-X", "POST", "-H", "Upload-Length: 11", server.url("/files")])
        #expect(created.status == 201, "\(created.text)")
    }
}
