import HTTPTransfer

/// A header field as sent or received.
struct HTTPField: Equatable, Sendable {
    var name: String
    var value: String
}

/// What a request's field names say about it, noted as each field is read, so that no one
/// searches the fields for them again: whether a field frames a body (`Content-Length`,
/// `Transfer-Encoding`: most GETs have neither), whether one is a precondition (`If-…`), and
/// where the first `Range` is (every file request asks).
struct FieldKinds: Sendable {
    var framesBody = false
    var hasConditions = false
    var rangeIndex: Int?

    /// Notes the field named `name` (its bytes, as read), the `index`-th of the head.
    mutating func note(_ name: UnsafeBufferPointer<UInt8>, at index: Int) {
        switch name.count {
        case 5 where rangeIndex == nil && ASCII.equalsIgnoringCase(name, Self.range):
            rangeIndex = index
        case 14 where ASCII.equalsIgnoringCase(name, Self.contentLength), 17 where ASCII.equalsIgnoringCase(name, Self.transferEncoding):
            framesBody = true
        case 3...:
            hasConditions = hasConditions || ASCII.equalsIgnoringCase(UnsafeBufferPointer(rebasing: name[0..<3]), Self.conditionPrefix)
        default:
            break
        }
    }

    init() {}

    init(of headers: [HTTPField]) {
        for (index, field) in headers.enumerated() {
            var name = field.name
            name.withUTF8 { note($0, at: index) }
        }
    }

    private static let range = Array("range".utf8)
    private static let contentLength = Array("content-length".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)
    private static let conditionPrefix = Array("if-".utf8)
}

/// A request as it is known once its head has arrived.
///
/// What arrived is kept in one shared, immutable object: the head is handed from the
/// callback to the router, the endpoints, the journal and the access log, and each copy then
/// costs one reference count instead of one per string and array (measured: about a hundred
/// atomic reference-count operations fewer per request).
struct RequestHead: Sendable {
    private final class Arrived: Sendable {
        let method: String
        let path: String
        let decodedPath: RequestPath
        let query: [(name: String, value: String?)]
        let version: String
        let headers: [HTTPField]
        let clientAddress: String
        let connection: WatchedConnection?
        let framing: Result<MessageFraming, MessageFraming.Refusal>
        let hasConditions: Bool
        let rangeIndex: Int?

        init(method: String, path: String, query: [(name: String, value: String?)], version: String,
             headers: [HTTPField], kinds: FieldKinds, clientAddress: String, connection: WatchedConnection?) {
            self.method = method
            self.path = path
            self.decodedPath = RequestPath(path)
            self.query = query
            self.version = version
            self.headers = headers
            self.clientAddress = clientAddress
            self.connection = connection
            // Without a framing field there is no body and nothing to frame (most GETs).
            framing = kinds.framesBody ? Self.framing(of: headers) : .success(.none)
            hasConditions = kinds.hasConditions
            rangeIndex = kinds.rangeIndex
        }

        private static func framing(of headers: [HTTPField]) -> Result<MessageFraming, MessageFraming.Refusal> {
            do throws(MessageFraming.Refusal) {
                return .success(try MessageFraming(headers: headers.map { ($0.name, $0.value) }))
            } catch {
                return .failure(error)
            }
        }
    }

    private let arrived: Arrived
    var method: String { arrived.method }
    /// The request target's path, exactly as sent: still percent-encoded.
    var path: String { arrived.path }
    /// `path` decoded into segments, once for everything that routes or records the request.
    var decodedPath: RequestPath { arrived.decodedPath }
    /// Query arguments in order, still percent-encoded (libmicrohttpd has turned `+` into
    /// a space); nil value for an argument without `=`.
    var query: [(name: String, value: String?)] { arrived.query }
    var version: String { arrived.version }
    var headers: [HTTPField] { arrived.headers }
    var clientAddress: String { arrived.clientAddress }
    /// The connection the request came on (nil for a head made without one): an upload a
    /// newer request takes over shuts it down.
    var connection: WatchedConnection? { arrived.connection }
    /// How the body is framed (RFC 9112 §6.3), decided once from the headers, or why it
    /// cannot be.
    var framing: Result<MessageFraming, MessageFraming.Refusal> { arrived.framing }
    /// Whether a field's name starts `If-` (only then are preconditions looked for).
    var hasConditionalFields: Bool { arrived.hasConditions }
    /// The first `Range` field's value (what `header("Range")` gives), found as the head was read.
    var range: String? { arrived.rangeIndex.map { arrived.headers[$0].value } }
    /// The fault the router applied, noted for the journal.
    var fault: AppliedFault?
    /// Who the request's credentials name, once the auth gate has let it in (nil without
    /// credentials): the owner of what it creates.
    var user: String? = nil

    /// `kinds`: what the fields' names say, when the reader noted it as it read them.
    init(method: String, path: String, query: [(name: String, value: String?)], version: String,
         headers: [HTTPField], kinds: FieldKinds? = nil, clientAddress: String, connection: WatchedConnection? = nil) {
        arrived = Arrived(method: method, path: path, query: query, version: version, headers: headers,
                          kinds: kinds ?? FieldKinds(of: headers), clientAddress: clientAddress, connection: connection)
    }

    /// The first value of the header `name`, compared case-insensitively.
    func header(_ name: String) -> String? {
        // By index: iterating `for field in` would copy (and reference-count) each field.
        let headers = arrived.headers
        for index in headers.indices where ASCII.equalsIgnoringCase(headers[index].name, name) { return headers[index].value }
        return nil
    }

    /// The path of a request target: origin-form (`/a/b`) as sent; absolute-form
    /// (`http://host/a/b`, which RFC 9112 §3.2.2 says a server must accept, as a proxy
    /// would send it) reduced to its path.
    static func path(ofTarget target: String) -> String {
        // Origin-form, nearly every request: nothing to reduce (and no characters to count).
        if target.utf8.first == 0x2F { return target }
        for scheme in ["http://", "https://"] where target.utf8.count > scheme.utf8.count
            && ASCII.equalsIgnoringCase(String(target.prefix(scheme.count)), scheme) {
            let authorityAndPath = target.dropFirst(scheme.count)
            return authorityAndPath.firstIndex(of: "/").map { String(authorityAndPath[$0...]) } ?? "/"
        }
        return target
    }

    /// A CORS preflight: `OPTIONS` with `Origin` and `Access-Control-Request-Method`
    /// (Fetch standard, "CORS-preflight request").
    var isCORSPreflight: Bool {
        method == "OPTIONS" && header("Origin") != nil && header("Access-Control-Request-Method") != nil
    }

    /// The `Content-Length`, when the request's framing is a valid one.
    var contentLength: UInt64? {
        if case .success(.length(let length)) = framing { return length }
        return nil
    }

    /// Whether the request says a body follows: a non-zero Content-Length, chunked, or
    /// framing fields that cannot be trusted.
    var announcesBody: Bool {
        switch framing {
        case .success(.none): false
        case .success(.length(let length)): length > 0
        case .success(.chunked), .failure: true
        }
    }

    /// Whether the client waits for `100 Continue` before it sends its body.
    var expectsContinue: Bool {
        header("Expect").map { ASCII.equalsIgnoringCase($0, "100-continue") } ?? false
    }

    /// The first value of the query argument `name`, percent-decoded (`+` as a space);
    /// `.some(nil)` when it is present without a value.
    func queryArgument(_ name: String) -> String?? {
        guard let argument = query.first(where: { $0.name == name }) else { return nil }
        return .some(argument.value.map { PercentEncoding.decode($0, plusAsSpace: true) ?? $0 })
    }

    /// `?a=b&c` with what libmicrohttpd decoded encoded again, or "" without a query.
    var queryString: String {
        guard !query.isEmpty else { return "" }
        func encode(_ text: String) -> String {
            // Keep the client's own escapes; encode what is not allowed in a query.
            var out = ""
            for byte in text.utf8 {
                switch byte {
                case 0x21...0x7E where byte != 0x23 && byte != 0x26 && byte != 0x3D: out.unicodeScalars.append(Unicode.Scalar(byte))
                default: out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
                }
            }
            return out
        }
        return "?" + query.map { argument in
            encode(argument.name) + (argument.value.map { "=" + encode($0) } ?? "")
        }.joined(separator: "&")
    }

    /// The path and query, for the log.
    var target: String { path + queryString }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
