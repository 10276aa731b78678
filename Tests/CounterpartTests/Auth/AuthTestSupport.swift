@testable import Counterpart
import Foundation
import Testing

/// The credentials the auth tests use: one user and one token per right, and one user
/// with every right. The hashes are bcrypt at cost 4 and yescrypt at cost 1 — the cheapest
/// libcrypt makes — so that a thousand guesses take a second, not a minute; a real auth
/// file uses the defaults (`counterpart hash-password`).
enum TestCredentials {
    static let users: [(name: String, password: String, rights: String)] = [
        ("reader", "pw-reader", "read"),
        ("writer", "pw-writer", "write"),
        ("controller", "pw-controller", "control"),
        ("admin", "pw-admin ünï:cöde", "read,write,control"),
    ]
    static let tokens: [(name: String, token: String, rights: String)] = [
        ("ci-reader", "read-token-0123456789abcdef", "read"),
        ("ci-writer", "write-token-0123456789abcdef", "write"),
        ("ci-controller", "control-token-0123456789abcdef", "control"),
    ]

    /// The auth file's text: admin's hash is yescrypt, the others' bcrypt.
    static let authFile: String = users.map { user in
        let method: PasswordHash.Method = user.name == "admin" ? .yescrypt : .bcrypt
        let hash = try! PasswordHash.make(password: Array(user.password.utf8), method: method, cost: method == .yescrypt ? 1 : 4)
        return "\(user.name):\(hash.encoded):\(user.rights)"
    }.joined(separator: "\n") + "\n"

    static let tokenFile: String = "# name:token:rights\n" + tokens.map { "\($0.name):\($0.token):\($0.rights)" }.joined(separator: "\n") + "\n"

    static func accessControl(users: Bool = true, tokens: Bool = true) throws -> AccessControl {
        try AccessControl(authFileText: users ? authFile : nil, tokenFileText: tokens ? tokenFile : nil)
    }

    /// curl's arguments for a credential: `-u user:password` or a Bearer header.
    static func curlArguments(user name: String) -> [String] {
        if let user = users.first(where: { $0.name == name }) { return ["-u", "\(user.name):\(user.password)"] }
        let token = tokens.first { $0.name == name }!
        return ["-H", "Authorization: Bearer \(token.token)"]
    }

    /// `Authorization: Basic …` for a raw request.
    static func basic(_ user: String, _ password: String) -> String {
        "Authorization: Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }
}

/// A server whose every request needs the test credentials.
func makeAuthServer(users: Bool = true, tokens: Bool = true, configure: (inout Configuration) -> Void = { _ in }) throws -> TestServer {
    let accessControl = try TestCredentials.accessControl(users: users, tokens: tokens)
    return try TestServer(configure: {
        $0.accessControl = accessControl
        configure(&$0)
    }, populate: { root in
        try Data("hello\n".utf8).write(to: root.appendingPathComponent("hello.txt"))
    })
}
