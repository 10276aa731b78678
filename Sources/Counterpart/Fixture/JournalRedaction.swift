/// What the journal keeps of a header: its value, except for the headers that carry
/// secrets, whose length alone is kept (`<redacted 24 bytes>`) so that a test can still see
/// that they were sent. The journal is readable over HTTP; a password in it would be
/// handed to whoever reads it.
enum JournalRedaction {
    /// Credentials (RFC 9110 §11.6.2, §11.7.2) and cookies (RFC 6265 §4), by lowercase name.
    static let secretHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

    static func value(_ value: String, ofHeader name: String) -> String {
        secretHeaders.contains(name.lowercased()) ? "<redacted \(value.utf8.count) bytes>" : value
    }
}
