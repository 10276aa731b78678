import HTTPTransfer

/// What the journal keeps of a header: its value, except for the headers that carry
/// secrets, whose length alone is kept (`<redacted 24 bytes>`) so that a test can still see
/// that they were sent. The journal is readable over HTTP; a password in it would be
/// handed to whoever reads it.
enum JournalRedaction {
    static func value(_ value: String, ofHeader name: String) -> String {
        isSecret(name) ? "<redacted \(value.utf8.count) bytes>" : value
    }

    /// Whether `name` carries credentials (RFC 9110 §11.6.2, §11.7.2: `Authorization`,
    /// `Proxy-Authorization`) or cookies (RFC 6265 §4: `Cookie`, `Set-Cookie`), in any
    /// case: compared in place, without a lowercase copy of every name (a request's event
    /// checks each of its headers).
    static func isSecret(_ name: String) -> Bool {
        switch name.utf8.count {
        case 6: return ASCII.equalsIgnoringCase(name, "cookie")
        case 10: return ASCII.equalsIgnoringCase(name, "set-cookie")
        case 13: return ASCII.equalsIgnoringCase(name, "authorization")
        case 19: return ASCII.equalsIgnoringCase(name, "proxy-authorization")
        default: return false
        }
    }
}
