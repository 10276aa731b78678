import Foundation
import Testing

/// A client that wrote its parts with another boundary than its Content-Type declares is
/// told so, rather than getting 200 with no parts.
@Suite("Uploads: the wrong boundary")
struct WrongBoundaryTests {
    @Test func partsWithAnotherBoundaryClosedWithTheDeclaredOneAre400NamingBoth() throws {
        let server = try TestServer()
        let body = "--written-with-this\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\nhello\r\n--written-with-this--\r\n--declared--\r\n"
        let result = try curl(["-H", "Content-Type: multipart/form-data; boundary=declared", "--data-binary", body, server.url("/upload")])
        #expect(result.status == 400)
        let error = try #require(try result.json()["error"] as? String)
        #expect(error.contains("\"--declared--\"") && error.contains("\"--written-with-this\""), "\(error)")
        #expect(server.uploadedNames().isEmpty)
    }

    @Test func theCloseDelimiterAloneIsAnEmptyForm() throws {
        let server = try TestServer()
        for body in ["--declared--\r\n", "\r\n--declared--"] {
            let result = try curl(["-H", "Content-Type: multipart/form-data; boundary=declared", "--data-binary", body, server.url("/upload")])
            #expect(result.status == 200, "\(result.text)")
        }
    }
}
