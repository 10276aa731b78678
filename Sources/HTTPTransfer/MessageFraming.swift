/// How a request's body is delimited (RFC 9112 §6.3), decided from its header fields, or
/// why the head must be refused. A refused head leaves the connection unusable: a server
/// and an intermediary that read the framing differently would disagree on where the next
/// request starts (request smuggling), so the server answers and closes.
public enum MessageFraming: Equatable, Sendable {
    /// No body.
    case none
    /// `Content-Length` bytes.
    case length(UInt64)
    /// The chunked transfer coding.
    case chunked

    /// Why a head's framing cannot be used, with the status to answer (400, or 501 for a
    /// transfer coding this library does not decode).
    public struct Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        public let status: Int
        public let description: String
    }

    /// Decides the framing from every header field of the request, in order.
    public init(headers: [(name: String, value: String)]) throws(Refusal) {
        var lengths: [String] = []
        var codings: [String] = []
        var hasTransferEncoding = false
        for field in headers {
            // RFC 9112 §5.1: no whitespace between a field name and its colon ("MUST
            // reject ... with 400"); a name is a token (RFC 9110 §5.1).
            guard !field.name.isEmpty, field.name.utf8.allSatisfy(ASCII.isTokenChar) else {
                throw Refusal(status: 400, description: "the header name \"\(field.name)\" is not a token (no spaces, no whitespace before the colon)")
            }
            switch ASCII.lowercased(field.name) {
            case "content-length":
                lengths += Self.listMembers(field.value)
            case "transfer-encoding":
                hasTransferEncoding = true
                codings += Self.listMembers(field.value).map(ASCII.lowercased)
            default:
                break
            }
        }
        if hasTransferEncoding {
            // RFC 9112 §6.1: a server may go by Transfer-Encoding alone and then close; refusing
            // is the safer of the two, as nginx does.
            guard lengths.isEmpty else {
                throw Refusal(status: 400, description: "the request has both Content-Length and Transfer-Encoding: its length is ambiguous")
            }
            // §6.3: chunked must be the final coding, and (§7) applied once.
            guard codings.last == "chunked", codings.filter({ $0 == "chunked" }).count == 1 else {
                throw Refusal(status: 400, description: "Transfer-Encoding \"\(codings.joined(separator: ", "))\" does not end with chunked (once): the body's length cannot be known")
            }
            // A coding is a token, with optional parameters (RFC 9110 §10.1.4): anything else is
            // malformed (400), not a coding this library lacks (501).
            if let bad = codings.first(where: { coding in
                let name = coding.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
                return name.isEmpty || !name.utf8.allSatisfy(ASCII.isTokenChar)
            }) {
                throw Refusal(status: 400, description: "Transfer-Encoding member \"\(bad)\" is not a transfer coding")
            }
            if codings.count > 1 {
                throw Refusal(status: 501, description: "the transfer coding \(codings.dropLast().joined(separator: ", ")) is not supported; send the body chunked only")
            }
            self = .chunked
            return
        }
        guard let first = lengths.first else {
            self = .none
            return
        }
        // §6.3: a list of identical values may be taken as one; anything else is invalid.
        guard lengths.allSatisfy({ $0 == first }), let length = ASCII.decimalNumber(first) else {
            throw Refusal(status: 400, description: "Content-Length \"\(lengths.joined(separator: ", "))\" is not one number of bytes")
        }
        self = .length(length)
    }

    /// The members of a comma-separated field value, without the whitespace around them
    /// (RFC 9110 §5.6.1); empty members are kept so that an empty value stays visible.
    private static func listMembers(_ value: String) -> [String] {
        value.split(separator: ",", omittingEmptySubsequences: false).map { String(ASCII.trimmed($0)) }
    }
}
