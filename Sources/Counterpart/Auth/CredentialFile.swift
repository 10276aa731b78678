import HTTPTransfer
/// The two credential files, parsed: `--auth-file` with lines `user:HASH:RIGHTS` (HASH a
/// yescrypt or bcrypt crypt(3) hash) and `--token-file` with lines `name:TOKEN:RIGHTS` (a
/// bearer token of at least 16 characters, e.g. `openssl rand -hex 32`). Blank lines and
/// lines starting with `#` are skipped; RIGHTS is a comma-separated set of read, write and
/// control.
enum CredentialFile {
    struct UserLine: Equatable {
        var name: String
        var hash: PasswordHash
        var rights: AccessRights
    }

    struct TokenLine: Equatable {
        var name: String
        var token: [UInt8]
        var rights: AccessRights
    }

    static let maxNameBytes = 256
    static let minTokenBytes = 16

    static func users(_ text: String, file: String) throws(CredentialFileError) -> [UserLine] {
        var users: [UserLine] = []
        for (number, fields) in try lines(text, file: file) {
            guard let hash = PasswordHash(fields.secret) else {
                throw .invalidLine(file: file, line: number, reason: "the hash is not a complete yescrypt ($y$) or bcrypt ($2b$) crypt(3) hash; make one with counterpart hash-password")
            }
            guard !users.contains(where: { $0.name == fields.name }) else {
                throw .invalidLine(file: file, line: number, reason: "the user \(fields.name) is already on an earlier line")
            }
            users.append(UserLine(name: fields.name, hash: hash, rights: fields.rights))
        }
        guard !users.isEmpty else { throw .noCredentials(file: file) }
        return users
    }

    static func tokens(_ text: String, file: String) throws(CredentialFileError) -> [TokenLine] {
        var tokens: [TokenLine] = []
        for (number, fields) in try lines(text, file: file) {
            let token = Array(fields.secret.utf8)
            guard token.count >= minTokenBytes, PresentedCredentials(parsing: "Bearer " + fields.secret) == .bearer(token: token) else {
                throw .invalidLine(file: file, line: number, reason: "the token must be at least \(minTokenBytes) characters of A-Z a-z 0-9 - . _ ~ + / (e.g. openssl rand -hex 32)")
            }
            guard !tokens.contains(where: { $0.token == token }) else {
                throw .invalidLine(file: file, line: number, reason: "this token is already on an earlier line")
            }
            tokens.append(TokenLine(name: fields.name, token: token, rights: fields.rights))
        }
        guard !tokens.isEmpty else { throw .noCredentials(file: file) }
        return tokens
    }

    /// The lines that are not blank or comments, split into their three fields.
    private static func lines(_ text: String, file: String) throws(CredentialFileError) -> [(Int, (name: String, secret: String, rights: AccessRights))] {
        var result: [(Int, (name: String, secret: String, rights: AccessRights))] = []
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = ASCII.trimmed(raw)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let number = index + 1
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 3 else {
                throw .invalidLine(file: file, line: number, reason: "a line is name:secret:rights (three fields separated by colons), this one has \(fields.count)")
            }
            let name = String(fields[0])
            guard !name.isEmpty, name.utf8.count <= maxNameBytes, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw .invalidLine(file: file, line: number, reason: "the name must be 1 to \(maxNameBytes) bytes without control characters")
            }
            guard let rights = AccessRights(parsing: fields[2]) else {
                throw .invalidLine(file: file, line: number, reason: "the rights \"\(fields[2])\" are not a comma-separated set of read, write and control")
            }
            result.append((number, (name, String(fields[1]), rights)))
        }
        return result
    }
}

/// Why a credential file cannot be used. Never shows a hash or a token.
public enum CredentialFileError: Error, Equatable, CustomStringConvertible {
    case unreadable(file: String, reason: String)
    case invalidLine(file: String, line: Int, reason: String)
    case noCredentials(file: String)
    case nothingGiven

    public var description: String {
        switch self {
        case .unreadable(let file, let reason): return "cannot read \(file): \(reason)"
        case .invalidLine(let file, let line, let reason): return "\(file) line \(line): \(reason)"
        case .noCredentials(let file): return "\(file) has no credentials (every line is blank or a comment)"
        case .nothingGiven: return "access control needs an auth file or a token file"
        }
    }
}
