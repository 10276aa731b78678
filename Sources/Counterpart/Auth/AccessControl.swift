import Dispatch
import Foundation

/// Who may use a server: users with password hashes (`--auth-file`, HTTP Basic) and bearer
/// tokens (`--token-file`), each with its rights. With one configured, every request but
/// the health check and CORS preflights needs a credential with the right for its path.
public struct AccessControl: Sendable {
    struct User: Sendable {
        var name: String
        var nameDigest: [UInt8]
        var hash: PasswordHash
        var rights: AccessRights
    }

    struct Token: Sendable {
        var name: String
        var digest: [UInt8]
        var rights: AccessRights
    }

    let users: [User]
    let tokens: [Token]
    /// Password checks running at once: yescrypt takes tens of milliseconds and megabytes
    /// per check, so a flood of guesses waits here instead of taking every core and
    /// growing memory with each connection.
    private let hashing: DispatchSemaphore

    /// The realm of the challenges (RFC 9110 §11.5).
    static let realm = "Counterpart"

    /// Credentials from the text of an auth file and of a token file (either may be nil,
    /// not both); `authSource` and `tokenSource` name them in errors.
    public init(authFileText: String? = nil, tokenFileText: String? = nil,
                authSource: String = "the auth file", tokenSource: String = "the token file") throws(CredentialFileError) {
        users = try authFileText.map { text throws(CredentialFileError) in
            try CredentialFile.users(text, file: authSource).map {
                User(name: $0.name, nameDigest: ConstantTime.digest($0.name.utf8), hash: $0.hash, rights: $0.rights)
            }
        } ?? []
        tokens = try tokenFileText.map { text throws(CredentialFileError) in
            try CredentialFile.tokens(text, file: tokenSource).map {
                Token(name: $0.name, digest: ConstantTime.digest($0.token), rights: $0.rights)
            }
        } ?? []
        guard !users.isEmpty || !tokens.isEmpty else { throw .nothingGiven }
        hashing = DispatchSemaphore(value: max(1, min(4, ProcessInfo.processInfo.activeProcessorCount)))
    }

    /// Credentials from the files `--auth-file` and `--token-file` name.
    public static func load(authFile: String?, tokenFile: String?) throws(CredentialFileError) -> AccessControl {
        func read(_ path: String?) throws(CredentialFileError) -> String? {
            guard let path else { return nil }
            do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw .unreadable(file: path, reason: (error as NSError).localizedDescription)
            }
        }
        return try AccessControl(authFileText: read(authFile), tokenFileText: read(tokenFile),
                                 authSource: authFile ?? "", tokenSource: tokenFile ?? "")
    }

    /// How a credential fared.
    enum Verdict: Equatable {
        case authenticated(name: String, rights: AccessRights)
        /// For the client: what to fix; for the log: who was tried.
        case rejected(reason: String, triedName: String?)
    }

    /// Checks a credential against every configured one. Names and tokens are compared in
    /// constant time and all of them every time; an unknown user costs a password check
    /// too, so the time does not tell which names exist.
    func authenticate(_ credentials: PresentedCredentials) -> Verdict {
        switch credentials {
        case .none:
            return .rejected(reason: "this server needs credentials: \(schemesText)", triedName: nil)
        case .malformed(let reason):
            return .rejected(reason: reason, triedName: nil)
        case .basic(let user, let password):
            let name = String(decoding: user, as: UTF8.self)
            guard let decoy = users.first else {
                return .rejected(reason: "this server takes no passwords: send Authorization: Bearer with a token", triedName: name)
            }
            let digest = ConstantTime.digest(user)
            var match: User?
            for candidate in users where ConstantTime.digestsEqual(candidate.nameDigest, digest) { match = candidate }
            hashing.wait()
            let matches = (match ?? decoy).hash.matches(password)
            hashing.signal()
            guard let match, matches else { return .rejected(reason: "wrong user name or password", triedName: name) }
            return .authenticated(name: match.name, rights: match.rights)
        case .bearer(let token):
            guard !tokens.isEmpty else {
                return .rejected(reason: "this server takes no tokens: send Authorization: Basic with a user and password", triedName: nil)
            }
            let digest = ConstantTime.digest(token)
            var match: Token?
            for candidate in tokens where ConstantTime.digestsEqual(candidate.digest, digest) { match = candidate }
            guard let match else { return .rejected(reason: "the bearer token is not valid", triedName: nil) }
            return .authenticated(name: match.name, rights: match.rights)
        }
    }

    /// `WWW-Authenticate` challenges for a 401 (RFC 9110 §11.6.1): Basic when there are
    /// users (a browser then asks for them), Bearer when there are tokens (RFC 6750 §3,
    /// with `invalid_token` when a token was sent and refused).
    func challenges(after credentials: PresentedCredentials) -> [HTTPField] {
        var fields: [HTTPField] = []
        if !users.isEmpty {
            fields.append(HTTPField(name: "WWW-Authenticate", value: "Basic realm=\"\(Self.realm)\", charset=\"UTF-8\""))
        }
        if !tokens.isEmpty {
            var bearer = "Bearer realm=\"\(Self.realm)\""
            if case .bearer = credentials { bearer += ", error=\"invalid_token\"" }
            fields.append(HTTPField(name: "WWW-Authenticate", value: bearer))
        }
        return fields
    }

    private var schemesText: String {
        switch (users.isEmpty, tokens.isEmpty) {
        case (false, false): return "a user and password (Basic) or a token (Bearer)"
        case (false, true): return "a user and password (Basic)"
        default: return "a token (Authorization: Bearer)"
        }
    }
}
