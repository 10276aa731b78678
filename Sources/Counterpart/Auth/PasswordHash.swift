import CCrypt

/// A password hash in the format of crypt(3), yescrypt (`$y$`) or bcrypt (`$2b$`, `$2y$`,
/// `$2a$`), checked and made by the system's libxcrypt: Counterpart hashes nothing by hand.
public struct PasswordHash: Sendable, Equatable, CustomStringConvertible {
    /// The hash as written in an auth file, e.g. `$y$j9T$salt$hash`.
    public let encoded: String

    public enum Method: String, Sendable, CaseIterable {
        case yescrypt
        case bcrypt

        /// The prefix crypt_gensalt takes.
        var prefix: String { self == .yescrypt ? "$y$" : "$2b$" }
    }

    static let defaultBcryptCost = 10
    static let acceptedPrefixes = ["$y$", "$2b$", "$2y$", "$2a$"]
    /// libxcrypt's CRYPT_MAX_PASSPHRASE_SIZE: a longer password never matches.
    static let maxPasswordBytes = 512

    /// The hash, or nil when it is not a complete yescrypt or bcrypt hash libcrypt takes.
    /// Checking it hashes once (a few tens of milliseconds for yescrypt's default cost).
    public init?(_ encoded: String) {
        guard Self.acceptedPrefixes.contains(where: encoded.hasPrefix), crypt_checksalt(encoded) == CRYPT_SALT_OK,
              let output = Self.crypt([], setting: encoded), output.utf8.count == encoded.utf8.count else {
            return nil
        }
        self.encoded = encoded
    }

    /// A new hash of `password` with a random salt from the system. `cost` is crypt_gensalt's
    /// count; 0 is yescrypt's default of libcrypt (5: about 16 MiB and 20 ms a check) or
    /// bcrypt 10 (libcrypt's own default, 5, is cheaper to guess than OWASP's minimum of 10).
    public static func make(password: [UInt8], method: Method = .yescrypt, cost: Int = 0) throws(PasswordHashError) -> PasswordHash {
        let cost = cost == 0 && method == .bcrypt ? defaultBcryptCost : cost
        guard password.count < maxPasswordBytes else { throw .passwordTooLong(limit: maxPasswordBytes - 1) }
        guard !password.contains(0) else { throw .containsNUL }
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        guard crypt_gensalt_rn(method.prefix, UInt(cost), nil, 0, &setting, Int32(setting.count)) != nil else {
            throw .libcrypt("cannot make a \(method.rawValue) salt with cost \(cost): \(FileSystem.lastError())")
        }
        let settingText = String(decoding: setting.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let hash = crypt(password, setting: settingText), let made = PasswordHash(hash) else {
            throw .libcrypt("cannot hash with \(method.rawValue): \(FileSystem.lastError())")
        }
        return made
    }

    /// Whether `password` is the one hashed; the hashes are compared in constant time.
    func matches(_ password: [UInt8]) -> Bool {
        guard let output = Self.crypt(password, setting: encoded) else { return false }
        return ConstantTime.equals(output.utf8, encoded.utf8)
    }

    public var method: Method { encoded.hasPrefix("$y$") ? .yescrypt : .bcrypt }

    /// What a log may show: the method, never the hash.
    public var description: String { "a \(method.rawValue) hash" }

    /// crypt_rn with a work area of its own (so any thread may call it), wiped after use
    /// because it held the password; nil when libcrypt refuses (a password too long or
    /// holding NUL, a setting it does not know).
    private static func crypt(_ password: [UInt8], setting: String) -> String? {
        guard password.count < maxPasswordBytes, !password.contains(0) else { return nil }
        let size = MemoryLayout<crypt_data>.size
        let area = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<crypt_data>.alignment)
        memset(area, 0, size)
        defer {
            memset(area, 0, size)
            area.deallocate()
        }
        let phrase = password.map { CChar(bitPattern: $0) } + [0]
        guard let output = crypt_rn(phrase, setting, area, Int32(size)) else { return nil }
        return String(cString: output)
    }
}

public enum PasswordHashError: Error, Equatable, CustomStringConvertible {
    case passwordTooLong(limit: Int)
    case containsNUL
    case libcrypt(String)

    public var description: String {
        switch self {
        case .passwordTooLong(let limit): return "the password is longer than \(limit) bytes"
        case .containsNUL: return "the password contains a NUL byte"
        case .libcrypt(let reason): return reason
        }
    }
}
