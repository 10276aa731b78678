@testable import Counterpart
import Foundation
import Testing

/// Each right against each endpoint, over real sockets with curl: a credential with the
/// right gets the endpoint's own answer, one without it 403, none 401.
@Suite("Access control: each right × each endpoint")
struct AccessMatrixTests {
    struct Row: CustomStringConvertible {
        var method: String
        var path: String
        var arguments: [String] = []
        /// The right it needs; nil: open to anyone.
        var right: String?
        /// What a client allowed in gets.
        var status: Int

        var description: String { "\(method) \(path)" }
    }

    static let missingUpload = "/resumable/" + String(repeating: "0", count: 32)
    static let rows: [Row] = [
        Row(method: "GET", path: "/hello.txt", right: "read", status: 200),
        Row(method: "HEAD", path: "/hello.txt", arguments: ["--head"], right: "read", status: 200),
        Row(method: "GET", path: "/uploads/", arguments: ["-H", "Accept: application/json"], right: "read", status: 200),
        Row(method: "GET", path: "/uploads/stored.txt", right: "read", status: 200),
        Row(method: "GET", path: "/bytes/100?seed=3", right: "read", status: 200),
        Row(method: "POST", path: "/upload", arguments: ["-F", "note=hi"], right: "write", status: 200),
        Row(method: "OPTIONS", path: "/files", right: "write", status: 204),
        Row(method: "POST", path: "/files", arguments: ["-H", "Tus-Resumable: 1.0.0", "-H", "Upload-Length: 5"], right: "write", status: 201),
        Row(method: "HEAD", path: missingUpload, arguments: ["--head", "-H", "Upload-Draft-Interop-Version: 6"], right: "write", status: 404),
        Row(method: "GET", path: "/__counterpart/health", right: nil, status: 200),
        Row(method: "GET", path: "/__counterpart/requests", right: "control", status: 200),
        Row(method: "DELETE", path: "/__counterpart/requests", right: "control", status: 204),
        Row(method: "DELETE", path: "/__counterpart/uploads", right: "control", status: 200),
        Row(method: "GET", path: "/__counterpart/", right: "control", status: 200),
        // HEAD: a GET would stay open, reading events.
        Row(method: "HEAD", path: "/__counterpart/events", arguments: ["--head"], right: "control", status: 200),
    ]

    static let credentials = TestCredentials.users.map { ($0.name, $0.rights) } + TestCredentials.tokens.map { ($0.name, $0.rights) }

    @Test(arguments: credentials)
    func eachCredentialAgainstEachEndpoint(_ name: String, _ rights: String) throws {
        let server = try makeAuthServer()
        try Data("stored\n".utf8).write(to: server.uploads.appendingPathComponent("stored.txt"))
        for row in Self.rows {
            let result = try curl(["-X", row.method] + row.arguments + TestCredentials.curlArguments(user: name) + [server.url(row.path)])
            let allowed = row.right.map { rights.split(separator: ",").contains(Substring($0)) } ?? true
            #expect(result.status == (allowed ? row.status : 403), "\(name) (\(rights)): \(row) answered \(result.status) \(result.text)")
            if !allowed, row.method != "HEAD" {
                #expect(try result.json()["error"] as? String != nil)
            }
        }
    }

    @Test func withoutCredentialsEveryEndpointButHealthIs401WithBothChallenges() throws {
        let server = try makeAuthServer()
        for row in Self.rows {
            let result = try curl(["-X", row.method] + row.arguments + [server.url(row.path)])
            guard row.right != nil else {
                #expect(result.status == 200, "\(row)")
                continue
            }
            #expect(result.status == 401, "\(row) answered \(result.status)")
            let challenges = result.headers.filter { $0.name.lowercased() == "www-authenticate" }.map(\.value)
            #expect(challenges == ["Basic realm=\"Counterpart\", charset=\"UTF-8\"", "Bearer realm=\"Counterpart\""], "\(row)")
            if row.method != "HEAD" {
                #expect(try result.json()["error"] as? String == "this server needs credentials: a user and password (Basic) or a token (Bearer)")
            }
        }
    }

    /// Only the challenges of what is configured: a browser asked for Basic credentials
    /// only when there are users.
    @Test func theChallengesFollowWhatIsConfigured() throws {
        let usersOnly = try makeAuthServer(tokens: false)
        #expect(try curl([usersOnly.url("/hello.txt")]).headers.filter { $0.name.lowercased() == "www-authenticate" }.map(\.value)
            == ["Basic realm=\"Counterpart\", charset=\"UTF-8\""])
        let tokensOnly = try makeAuthServer(users: false)
        let refused = try curl(["-H", "Authorization: Bearer not-a-token-at-all-000", tokensOnly.url("/hello.txt")])
        #expect(refused.status == 401)
        #expect(refused.headers.filter { $0.name.lowercased() == "www-authenticate" }.map(\.value)
            == ["Bearer realm=\"Counterpart\", error=\"invalid_token\""])
        #expect(try curl(["-u", "admin:pw-admin ünï:cöde", tokensOnly.url("/hello.txt")]).status == 401)
    }
}
