@testable import Counterpart
import Foundation
import Testing

/// The upload page behind Basic credentials in headless Chromium (Tests/Browser/basic_auth.py):
/// the browser's prompt is answered once, and the page, its health check and its upload
/// go through with those credentials.
@Suite("Access control: the upload page in a real browser")
struct BrowserAuthTests {
    @Test func thePageUploadsWithTheBrowsersOwnCredentials() throws {
        let python = buildPython
        try #require(FileManager.default.isExecutableFile(atPath: python),
                     "no .build/python: run scripts/setup chromium (make test does) to install the browser test's tools")
        let server = try TestServer(configure: { $0.accessControl = try! TestCredentials.accessControl() }) { root in
            for name in ["index.html", "upload.js", "upload.css"] {
                try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("public/\(name)"), to: root.appendingPathComponent(name))
            }
        }
        let file = try temporaryFile("behind-auth.bin", testBytes(count: 200_000, seed: 16))
        let run = try runCommand(python, [repositoryRoot.appendingPathComponent("Tests/Browser/basic_auth.py").path, server.url(""),
                                          "--user", "admin", "--password", "pw-admin ünï:cöde", "--file", file])
        try #require(run.status == 0, "the browser driver failed:\n\(run.output)")
        #expect(try server.uploadedData("behind-auth.bin") == testBytes(count: 200_000, seed: 16))
        // The page's own requests carried the credentials; the journal shows only their length.
        let upload = try #require(server.server.journal.waitForRequests(path: "/upload", method: "POST").first)
        #expect(upload.status == 200)
        let basic = "Basic " + Data("admin:pw-admin ünï:cöde".utf8).base64EncodedString()
        #expect(upload.header("Authorization") == "<redacted \(basic.utf8.count) bytes>")
        #expect(server.server.journal.requests(path: "/").map(\.status).contains(401))
    }
}
