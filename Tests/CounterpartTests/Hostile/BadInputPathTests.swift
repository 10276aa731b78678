import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

@Suite("Bad input corpus: paths")
struct BadInputCorpusPathTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    // README: paths are percent-decoded once; a segment that decodes to `.` or `..`, or holds
    // `/` or NUL, is 404; a malformed escape is 400; the kernel keeps the rest beneath the root.
    @Test(arguments: [
        // Double encoding: decoded once, `%252e%252e` is the literal name `%2e%2e`.
        ("/%252e%252e/secret.txt", 404), ("/%252e%252e/%252e%252e/secret.txt", 404),
        ("/sub/%252e%252e/%252e%252e/secret.txt", 404), ("/%252e%252e%252fsecret.txt", 404),
        // Overlong UTF-8 for `.` and `/`: not UTF-8 at all, refused.
        ("/%c0%ae%c0%ae/secret.txt", 404), ("/%e0%80%ae%e0%80%ae/secret.txt", 404),
        ("/%c0%ae%c0%ae%c0%afsecret.txt", 404), ("/%f0%80%80%ae%f0%80%80%ae/secret.txt", 404),
        // Encoded NUL.
        ("/%00", 404), ("/hello.txt%00", 404), ("/hello.txt%00.png", 404), ("/..%00/secret.txt", 404),
        // Backslashes are plain characters on Linux.
        ("/..\\secret.txt", 404), ("/..%5csecret.txt", 404), ("/sub\\..\\..\\secret.txt", 404), ("/..%5c..%5csecret.txt", 404),
        // Dot segments, plain and encoded (README: refused, not normalized).
        ("/sub/./in.txt", 404), ("/sub/%2e/in.txt", 404), ("/./hello.txt", 404), ("/sub/../../secret.txt", 404),
        ("/sub/%2e%2e/%2e%2e/secret.txt", 404), ("/uploads/%2e%2e/%2e%2e/secret.txt", 404),
        // Malformed escapes.
        ("/%", 400), ("/%zz/secret.txt", 400), ("/%u002e%u002e/secret.txt", 400),
        // Very long paths (about 8 KB).
        ("/" + String(repeating: "a/", count: 4_000) + "x", 404),
        ("/" + String(repeating: "../", count: 2_700) + "secret.txt", 404),
        ("/" + String(repeating: "%2e%2e/", count: 1_200) + "secret.txt", 404),
    ])
    func nothingOutsideTheRootIsReachable(_ path: String, _ status: Int) throws {
        let result = try curl(["--path-as-is", server.url(path)])
        #expect(result.status == status, "\(path.prefix(60)) → \(result.status)")
        #expect(!result.text.contains(corpusSecret), "\(path.prefix(60)) leaked the secret")
        if status >= 400 { #expect(try result.json()["error"] is String) }
        try expectStillServing(server)
    }

    @Test func aDoubleEncodedDotDotIsALiteralNameNeverDecodedTwice() throws {
        let result = try curl(["--path-as-is", server.url("/%252e%252e/literal.txt")])
        #expect(result.status == 200)
        #expect(result.text == "literal\n")
    }

    // README: a relative symlink that stays inside is followed; one that leads out, and any
    // absolute symlink, is 404; listings leave them out.
    @Test(arguments: ["/link-file-relative", "/link-file-absolute", "/link-folder-relative/secret.txt", "/link-folder-relative/",
                      "/link-folder-absolute/secret.txt", "/link-folder-absolute/", "/link-folder-relative", "/sub/link-up"])
    func symlinksLeadingOutAre404(_ path: String) throws {
        let result = try curl(["--path-as-is", server.url(path)])
        #expect(result.status == 404, "\(path) → \(result.status)")
        #expect(!result.text.contains(corpusSecret))
        try expectStillServing(server)
    }

    @Test func symlinksLeadingOutAreNotListed() throws {
        let linkNames = ["link-file-relative", "link-file-absolute", "link-folder-relative", "link-folder-absolute"]
        let json = try curl(["-H", "Accept: application/json", server.url("/")]).json()
        let names = (json["entries"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
        #expect(names.contains("hello.txt"))
        #expect(names.filter { linkNames.contains($0) } == [])
        let html = try curl(["-H", "Accept: text/html", server.url("/")])
        #expect(html.status == 200)
        #expect(linkNames.allSatisfy { !html.text.contains($0) })
        let sub = try curl(["-H", "Accept: application/json", server.url("/sub/")]).json()
        #expect((sub["entries"] as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["in.txt"])
    }
}
