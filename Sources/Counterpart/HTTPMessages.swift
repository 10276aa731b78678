import HTTPTransfer

/// A header field as sent or received.
struct HTTPField: Equatable, Sendable {
    var name: String
    var value: String
}

/// A request as it is known once its head has arrived.
struct RequestHead: Sendable {
    var method: String
    /// The request target's path, exactly as sent: still percent-encoded.
    var path: String
    /// Query arguments in order, exactly as sent (still percent-encoded); nil value for
    /// an argument without `=`.
    var query: [(name: String, value: String?)]
    var version: String
    var headers: [HTTPField]
    var clientAddress: String

    /// The first value of the header `name`, compared case-insensitively.
    func header(_ name: String) -> String? {
        headers.first { field in
            field.name.utf8.count == name.utf8.count
                && zip(field.name.utf8, name.utf8).allSatisfy { asciiLowercase($0) == asciiLowercase($1) }
        }?.value
    }

    /// Whether the request says a body follows (a non-zero Content-Length, or chunked).
    var announcesBody: Bool {
        if header("Transfer-Encoding") != nil { return true }
        return header("Content-Length").map { $0 != "0" } ?? false
    }

    /// The first value of the query argument `name`, percent-decoded (`+` as a space);
    /// `.some(nil)` when it is present without a value.
    func queryArgument(_ name: String) -> String?? {
        guard let argument = query.first(where: { $0.name == name }) else { return nil }
        return .some(argument.value.map { PercentDecoding.decode($0, plusAsSpace: true) ?? $0 })
    }
}

private func asciiLowercase(_ byte: UInt8) -> UInt8 {
    (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
}

/// What a response's body is made of.
enum ResponseBody {
    case empty
    case bytes([UInt8])
    /// `length` bytes of an open file from `offset`, sent with sendfile. The response
    /// takes ownership of the descriptor and closes it.
    case file(descriptor: Int32, offset: UInt64, length: UInt64)
    /// `length` bytes produced on demand.
    case stream(length: UInt64, any ResponseStream)
}

/// A body produced piece by piece, as the connection can take it.
protocol ResponseStream: AnyObject {
    /// Fills `buffer` with the bytes from `position` on; returns how many it wrote (at
    /// least one while the body is not complete), or nil on an error, which cuts the
    /// connection.
    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int?
    /// Releases what the stream holds; called once, when the response is done with it.
    func close()
}

struct Response {
    var status: Int
    var headers: [HTTPField]
    var body: ResponseBody

    init(status: Int, headers: [HTTPField] = [], body: ResponseBody = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The length of the body.
    var bodyLength: UInt64 {
        switch body {
        case .empty: return 0
        case .bytes(let bytes): return UInt64(bytes.count)
        case .file(_, _, let length), .stream(let length, _): return length
        }
    }
}

/// What an endpoint does with a request once its head has arrived.
enum RequestAction {
    /// Answer now, without reading a body.
    case respond(Response)
    /// Read the body into this receiver, then answer with what it returns.
    case receiveBody(any RequestBodyReceiver)
}

/// Takes a request body as it arrives. Called from one connection thread at a time.
protocol RequestBodyReceiver: AnyObject {
    /// A chunk of the body. Returns false to close the connection at once (the body goes
    /// past what the server is willing to read).
    func receive(_ chunk: UnsafeRawBufferPointer) -> Bool
    /// The body is complete: the response.
    func finish() -> Response
    /// The request ended before `finish` (the client left, the server stopped): undo.
    func abandon()
}

/// How a request ended, for the access log.
struct CompletedRequest: Sendable {
    var head: RequestHead
    var status: Int
    var bodyBytes: UInt64
    var seconds: Double
    /// False when the connection ended before the response was sent in full.
    var completed: Bool
}

/// The server's side of every request: the router.
protocol RequestHandler: Sendable {
    func handle(_ head: RequestHead) -> RequestAction
    func completed(_ request: CompletedRequest)
}
