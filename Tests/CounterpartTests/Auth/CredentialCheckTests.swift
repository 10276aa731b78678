@testable import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// Credentials that are wrong, unknown, malformed or huge; what a refused request leaves
/// behind (nothing); who may touch a resumable upload; what the journal shows.
@Suite("Access control: refused credentials, owners, the journal")
struct CredentialCheckTests {
    let server: TestServer
    init() throws { server = try makeAuthServer { $0.corsOrigin = "*" } }

    func status(_ authorization: String?, _ path: String = "/hello.txt") throws -> (status: Int, error: String?) {
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\(authorization.map { $0 + "\r\n" } ?? "")Connection: close\r\n\r\n")
        let (head, body) = try #require(connection.readResponse(), "no answer")
        let error = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["error"] as? String
        return (statusCode(of: head) ?? 0, error)
    }

    @Test func theRightPasswordOpensAndEveryWrongOneIs401() throws {
        #expect(try status(TestCredentials.basic("reader", "pw-reader")).status == 200)
        #expect(try status(TestCredentials.basic("admin", "pw-admin ünï:cöde")).status == 200)
        let cases: [(String, String)] = [
            ("wrong password", TestCredentials.basic("reader", "pw-writer")),
            ("empty password", TestCredentials.basic("reader", "")),
            ("password with a NUL", TestCredentials.basic("reader", "pw-reader\u{0}x")),
            ("unknown user", TestCredentials.basic("nobody", "pw-reader")),
            ("user name in another case", TestCredentials.basic("Reader", "pw-reader")),
            ("another user's password", TestCredentials.basic("writer", "pw-reader")),
        ]
        for (name, header) in cases {
            let answer = try status(header)
            #expect(answer.status == 401, "\(name)")
            // The same words for an unknown user and a wrong password: they do not tell which names exist.
            #expect(answer.error == "wrong user name or password", "\(name)")
        }
    }

    @Test func malformedAuthorizationHeadersAre401WithTheReason() throws {
        let cases: [(String, String, String)] = [
            ("not base64", "Authorization: Basic !!!!", "the Basic credentials are not base64 of user:password"),
            ("no colon", "Authorization: Basic " + Data("reader".utf8).base64EncodedString(), "the Basic credentials have no colon between the user and the password"),
            ("no parameter", "Authorization: Basic", "the Basic credentials are not base64 of user:password"),
            ("another scheme", "Authorization: Digest username=\"reader\"", "the Authorization scheme \"Digest\" is not Basic or Bearer"),
            ("empty token", "Authorization: Bearer ", "the Bearer token is empty or has characters a token cannot have"),
            ("token with a space", "Authorization: Bearer read-token 0123456789abcdef", "the Bearer token is empty or has characters a token cannot have"),
            ("two headers", TestCredentials.basic("reader", "pw-reader") + "\r\n" + TestCredentials.basic("reader", "pw-reader"),
             "the request has 2 Authorization headers; send one"),
        ]
        for (name, header, reason) in cases {
            let answer = try status(header)
            #expect(answer.status == 401, "\(name)")
            #expect(answer.error == reason, "\(name)")
        }
        // The scheme is case-insensitive (RFC 9110 §11.1).
        #expect(try status("Authorization: bAsIc " + Data("reader:pw-reader".utf8).base64EncodedString()).status == 200)
    }

    /// A 40 KB header is refused unread; a 60 KB one does not fit libmicrohttpd's connection
    /// memory and gets its 431. Neither reaches a password check; the server goes on.
    @Test func aHugeAuthorizationHeaderIsRefused() throws {
        let value = "Basic " + Data(("reader:" + String(repeating: "x", count: 30_000)).utf8).base64EncodedString()
        let huge = try status("Authorization: " + value)
        #expect(huge.status == 401)
        #expect(huge.error == "the Authorization header is \(value.utf8.count) bytes; credentials of more than 4096 are not taken")
        #expect(try status("Authorization: Bearer " + String(repeating: "t", count: 70_000)).status == 431)
        #expect(try status(TestCredentials.basic("reader", "pw-reader")).status == 200)
    }

    @Test func aTokenWithTheWrongRightIs403AndAnUnknownOne401() throws {
        let upload = try curl(["-H", "Authorization: Bearer read-token-0123456789abcdef", "-F", "note=hi", server.url("/upload")])
        #expect(upload.status == 403)
        #expect(try upload.json()["error"] as? String == "ci-reader may not upload (POST /upload needs the right \"write\"; ci-reader has \"read\")")
        let unknown = try curl(["-H", "Authorization: Bearer read-token-0123456789abcdeX", server.url("/hello.txt")])
        #expect(unknown.status == 401)
        #expect(unknown.header("WWW-Authenticate") != nil)
    }

    /// Refused on the head: a body sent at once is read and thrown away so that the client
    /// gets the 401, and nothing of it is stored; curl with `Expect: 100-continue` sends none.
    @Test func aRefusedUploadStoresNothing() throws {
        let content = [UInt8](testBytes(count: 300_000, seed: 9))
        let body = MultipartWriter.formData([(MultipartWriter.formDataHeaders(name: "file", filename: "secret.bin"), content)],
                                            boundary: try MultipartBoundary("B0UND"))
        let attempts = [("", 401), (TestCredentials.basic("reader", "pw-reader") + "\r\n", 403), (TestCredentials.basic("writer", "nope") + "\r\n", 401)]
        for (index, (authorization, expected)) in attempts.enumerated() {
            let connection = try RawHTTPConnection(port: server.server.port)
            connection.send(Array("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B0UND\r\n\(authorization)Content-Length: \(body.count)\r\n\r\n".utf8) + body)
            let (head, _) = try #require(connection.readResponse())
            #expect(statusCode(of: head) == expected)
            // The journal records a request once its connection is done with it, which may
            // be after the client has its answer: wait, so that the entries keep this order.
            _ = server.server.journal.waitForRequests(path: "/upload", count: index + 1)
        }
        let file = try temporaryFile("big.bin", testBytes(count: 3 << 20))
        let curled = try curl(["-F", "file=@\(file)", server.url("/upload")])
        #expect(curled.status == 401)
        #expect(server.uploadedNames().isEmpty, "\(server.uploadedNames())")
        let entries = server.server.journal.waitForRequests(path: "/upload", count: 4)
        #expect(entries.map(\.status) == [401, 403, 401, 401])
        // The first three were drained whole (the client sent its body at once); curl waited
        // for 100 Continue and sent nothing.
        #expect(entries.prefix(3).allSatisfy { $0.requestBodyBytes == UInt64(body.count) })
        #expect(entries.last?.requestBodyBytes == 0)
    }

    @Test func aTusUploadAnswersOnlyTheUserWhoCreatedIt() throws {
        let writer = TestCredentials.curlArguments(user: "writer")
        let created = try curl(writer + ["-X", "POST", "-H", "Tus-Resumable: 1.0.0", "-H", "Upload-Length: 10", server.url("/files")])
        #expect(created.status == 201)
        let location = try #require(created.header("Location"))
        let path = String(location[try #require(location.range(of: "/files/")).lowerBound...])
        let tus = ["-H", "Tus-Resumable: 1.0.0"]
        let patch = tus + ["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream", "--data-binary", "hello"]
        for other in ["admin", "ci-writer"] {
            let arguments = TestCredentials.curlArguments(user: other)
            #expect(try curl(arguments + patch + [server.url(path)]).status == 403, "\(other)")
            #expect(try curl(arguments + tus + ["--head", server.url(path)]).status == 403, "\(other)")
            #expect(try curl(arguments + tus + ["-X", "DELETE", server.url(path)]).status == 403, "\(other)")
            // Nor joined into another user's upload by tus concatenation.
            #expect(try curl(arguments + tus + ["-X", "POST", "-H", "Upload-Concat: final;\(path)", server.url("/files")]).status == 403)
        }
        #expect(try curl(writer + patch + [server.url(path)]).status == 204)
        let head = try curl(writer + tus + ["--head", server.url(path)])
        #expect(head.status == 200)
        #expect(head.header("Upload-Offset") == "5")
        #expect(try curl(writer + tus + ["-X", "DELETE", server.url(path)]).status == 204)
    }

    @Test func anIETFUploadAnswersOnlyTheUserWhoCreatedIt() throws {
        let client = DraftClient(version: 6, port: server.server.port)
        let (body, _) = resumableBody("owned.bin", size: 2000)
        let connection = try RawHTTPConnection(port: server.server.port)
        connection.send(client.creationHead(length: 1000, complete: false, extra: TestCredentials.basic("writer", "pw-writer") + "\r\n") + "\r\n")
        let interim = try #require(connection.readHead())
        #expect(statusCode(of: interim) == 104)
        let location = try #require(headerValue("Location", in: interim))
        let path = String(location[try #require(location.range(of: "/resumable/")).lowerBound...])
        connection.send(Array(body.prefix(1000)))
        #expect(connection.readResponse().flatMap { statusCode(of: $0.head) } == 201)

        func send(_ request: [UInt8]) throws -> Int? {
            let other = try RawHTTPConnection(port: server.server.port)
            other.send(request)
            return other.readResponse().flatMap { statusCode(of: $0.head) }
        }
        func authorized(_ request: String, _ header: String) -> [UInt8] {
            Array(request.replacingOccurrences(of: "Host: x\r\n", with: "Host: x\r\n\(header)\r\n").utf8)
        }
        let admin = TestCredentials.basic("admin", "pw-admin ünï:cöde")
        let patch = client.patch(path, offset: 1000, Array(body.dropFirst(1000)), complete: true)
        let patchHead = String(decoding: patch.prefix(patch.count - (body.count - 1000)), as: UTF8.self)
        #expect(try send(authorized(patchHead, admin) + Array(body.dropFirst(1000))) == 403)
        #expect(try send(authorized(client.head(path), admin)) == 403)
        #expect(try send(authorized("DELETE \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: 6\r\nConnection: close\r\n\r\n", admin)) == 403)
        let finished = try RawHTTPConnection(port: server.server.port)
        finished.send(authorized(patchHead, TestCredentials.basic("writer", "pw-writer")) + Array(body.dropFirst(1000)))
        let answer = try #require(finished.readResponse())
        #expect(statusCode(of: answer.head) == 200, "\(answer.head)\(String(decoding: answer.body, as: UTF8.self))")
        #expect(server.uploadedNames().contains("owned.bin"))
    }

    /// A preflight carries no credentials: it passes, so that the real request (with them) is sent.
    @Test func corsPreflightsAreNotBlocked() throws {
        let preflight = try curl(["-X", "OPTIONS", "-H", "Origin: https://app.example", "-H", "Access-Control-Request-Method: POST",
                                  "-H", "Access-Control-Request-Headers: authorization", server.url("/upload")])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Headers") == "authorization")
        // A refusal still carries the CORS headers, so the page can read the 401.
        let refused = try curl(["-H", "Origin: https://app.example", server.url("/hello.txt")])
        #expect(refused.status == 401)
        #expect(refused.header("Access-Control-Allow-Origin") == "*")
    }

    /// The upload page and its files load with the browser's Basic credentials, and the
    /// page's upload goes through with them.
    @Test func theUploadPageWorksBehindBasicAuth() throws {
        let page = try TestServer(configure: { $0.accessControl = try! TestCredentials.accessControl() },
                                  populate: { root in
                                      for name in ["index.html", "upload.js", "upload.css"] {
                                          try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("public/\(name)"),
                                                                           to: root.appendingPathComponent(name))
                                      }
                                  })
        #expect(try curl([page.url("/")]).status == 401)
        let admin = TestCredentials.curlArguments(user: "admin")
        for path in ["/", "/upload.js", "/upload.css", "/__counterpart/health"] {
            #expect(try curl(admin + [page.url(path)]).status == 200, "\(path)")
        }
        let upload = try curl(admin + ["-H", "Accept: application/json", "-F", "file=@\(try temporaryFile("a.txt", Data("a".utf8)))", page.url("/upload")])
        #expect(upload.status == 200)
    }

    /// Over HTTPS, as the README advises on a network: the challenge and the credentials
    /// travel inside TLS.
    @Test func credentialsWorkOverHTTPS() throws {
        let credentials = try TLSCredentials.selfSigned()
        let certificate = try temporaryFile("certificate.pem", Data(credentials.certificatePEM.utf8))
        let secure = try makeAuthServer { $0.tls = credentials }
        #expect(secure.url("/").hasPrefix("https://"))
        let refused = try curl(["--cacert", certificate, secure.url("/hello.txt")])
        #expect(refused.status == 401)
        #expect(refused.header("WWW-Authenticate")?.hasPrefix("Basic realm=\"Counterpart\"") == true)
        #expect(try curl(["--cacert", certificate, "-u", "reader:pw-reader", secure.url("/hello.txt")]).text == "hello\n")
        let upload = try curl(["--cacert", certificate, "-H", "Authorization: Bearer write-token-0123456789abcdef",
                               "-F", "file=@\(try temporaryFile("tls.txt", Data("over tls".utf8)))", secure.url("/upload")])
        #expect(upload.status == 200)
        #expect(secure.uploadedNames() == ["tls.txt"])
    }

    @Test func theJournalRedactsCredentialsAndCookies() throws {
        let cookie = "session=abc123; theme=dark"
        _ = try curl(TestCredentials.curlArguments(user: "reader") + ["-H", "Cookie: \(cookie)", "-H", "Proxy-Authorization: Basic eDp5",
                                                                      "-H", "X-Plain: kept", server.url("/hello.txt")])
        _ = try curl(["-H", "Authorization: Bearer wrong-token-0123456789", server.url("/hello.txt")])
        let entries = server.server.journal.waitForRequests(path: "/hello.txt", count: 2)
        let basic = "Basic " + Data("reader:pw-reader".utf8).base64EncodedString()
        #expect(entries.first?.header("Authorization") == "<redacted \(basic.utf8.count) bytes>")
        #expect(entries.first?.header("Cookie") == "<redacted \(cookie.utf8.count) bytes>")
        #expect(entries.first?.header("Proxy-Authorization") == "<redacted 10 bytes>")
        #expect(entries.first?.header("X-Plain") == "kept")
        #expect(entries.last?.header("Authorization") == "<redacted 29 bytes>")
        // Over HTTP too, where the journal is read.
        let journal = try curl(TestCredentials.curlArguments(user: "controller") + [server.url("/__counterpart/requests?path=/hello.txt")])
        #expect(journal.status == 200)
        #expect(!journal.text.contains("pw-reader") && !journal.text.contains(String(basic.dropFirst(6))) && !journal.text.contains("abc123"))
        #expect(journal.text.contains("<redacted"))
    }
}
