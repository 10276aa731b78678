/// A 1xx response sent before the final one (RFC 9110 §15.2), such as the
/// `104 Upload Resumption Supported` of resumable uploads.
struct InformationalResponse: Equatable, Sendable {
    var status: Int
    var reason: String
    var headers: [HTTPField]

    /// The bytes on the wire (HTTP/1.1).
    var serialized: [UInt8] {
        var text = "HTTP/1.1 \(status) \(reason)\r\n"
        for field in headers { text += "\(field.name): \(field.value)\r\n" }
        return Array((text + "\r\n").utf8)
    }
}
