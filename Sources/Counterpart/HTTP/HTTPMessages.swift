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
    /// Query arguments in order, still percent-encoded (libmicrohttpd has turned `+` into
    /// a space); nil value for an argument without `=`.
    var query: [(name: String, value: String?)]
    var version: String
    var headers: [HTTPField]
    var clientAddress: String

    /// The first value of the header `name`, compared case-insensitively.
    func header(_ name: String) -> String? {
        headers.first { equalsIgnoringASCIICase($0.name, name) }?.value
    }

    /// The path of a request target: origin-form (`/a/b`) as sent; absolute-form
    /// (`http://host/a/b`, which RFC 9112 §3.2.2 says a server must accept, as a proxy
    /// would send it) reduced to its path.
    static func path(ofTarget target: String) -> String {
        for scheme in ["http://", "https://"] where target.utf8.count > scheme.utf8.count
            && equalsIgnoringASCIICase(String(target.prefix(scheme.count)), scheme) {
            let authorityAndPath = target.dropFirst(scheme.count)
            return authorityAndPath.firstIndex(of: "/").map { String(authorityAndPath[$0...]) } ?? "/"
        }
        return target
    }

    /// The `Content-Length`, when the request has a valid one.
    var contentLength: UInt64? {
        header("Content-Length").flatMap(UInt64.init)
    }

    /// Whether the request says a body follows (a non-zero Content-Length, or chunked).
    var announcesBody: Bool {
        if header("Transfer-Encoding") != nil { return true }
        return header("Content-Length").map { $0 != "0" } ?? false
    }

    /// Whether the client waits for `100 Continue` before it sends its body.
    var expectsContinue: Bool {
        header("Expect").map { equalsIgnoringASCIICase($0, "100-continue") } ?? false
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

/// A request path split into percent-decoded segments, once, for every endpoint.
enum RequestPath {
    case segments([String])
    /// A `%` escape that is not two hex digits.
    case malformed
    /// A segment that decodes to `.` or `..`, or holds `/` or NUL: only an escape attempt
    /// does that.
    case refused

    init(_ rawPath: String) {
        var segments: [String] = []
        for raw in rawPath.split(separator: "/", omittingEmptySubsequences: true) {
            guard let bytes = PercentEncoding.decodeBytes(String(raw)) else {
                self = .malformed
                return
            }
            guard !bytes.contains(0x2F), !bytes.contains(0), bytes != [0x2E], bytes != [0x2E, 0x2E],
                  let segment = String(validating: bytes, as: UTF8.self) else {
                self = .refused
                return
            }
            segments.append(segment)
        }
        self = .segments(segments)
    }

    /// `/a/b%20c` for segments `a`, `b c`.
    static func encoded(_ segments: [String]) -> String {
        "/" + segments.map { PercentEncoding.encode($0) }.joined(separator: "/")
    }
}

func equalsIgnoringASCIICase(_ a: String, _ b: String) -> Bool {
    a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { asciiLowercase($0) == asciiLowercase($1) }
}

func asciiLowercase(_ byte: UInt8) -> UInt8 {
    (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}

/// An open file descriptor with one owner: it is closed when the owner goes away, unless
/// it was taken (by libmicrohttpd, which then closes it).
final class OpenFile {
    private var descriptor: Int32

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    /// The descriptor, for reading; still owned here.
    var borrowed: Int32 { descriptor }

    /// Hands the descriptor over: from now on the taker closes it.
    func take() -> Int32 {
        defer { descriptor = -1 }
        return descriptor
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }
}

/// What a response's body is made of.
enum ResponseBody {
    case empty
    case bytes([UInt8])
    /// `length` bytes of an open file from `offset`, sent with sendfile.
    case file(OpenFile, offset: UInt64, length: UInt64)
    /// `length` bytes produced on demand.
    case stream(length: UInt64, any ResponseStream)
}

/// A body produced piece by piece, as the connection can take it. It releases what it
/// holds when it goes away.
protocol ResponseStream: AnyObject {
    /// Fills `buffer` with the bytes from `position` on (`position` counts from the start
    /// of this body).
    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> StreamRead
}

/// What a stream gives the connection next.
enum StreamRead: Equatable {
    /// This many bytes (at least one) are in the buffer.
    case bytes(Int)
    /// Nothing for now: ask again after the pause.
    case pause(Pause)
    /// Close the connection now (an error, or a `cut` fault).
    case cut
}

/// How long an exchange holds still.
enum Pause: Equatable {
    case duration(Duration)
    /// Until the client gives up and closes (a `stall` fault).
    case untilClientLeaves
}

struct Response {
    var status: Int
    var headers: [HTTPField]
    var body: ResponseBody
    /// A wait before the response headers go out (a `delay` fault).
    var delay: Duration?

    init(status: Int, headers: [HTTPField] = [], body: ResponseBody = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Whether the connection closes after this response (`Connection: close`).
    var closesConnection: Bool {
        headers.contains { equalsIgnoringASCIICase($0.name, "Connection") && equalsIgnoringASCIICase(trimmed($0.value).description, "close") }
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
    /// Answer without reading the body: at once when the client waits for `100 Continue`,
    /// announces more than can be drained or the response closes the connection, else
    /// after draining the body it sends.
    case respond(Response)
    /// Read the body into this receiver, then answer with what it returns; first send these
    /// informational (1xx) responses, before the body is read.
    case receiveBody(any RequestBodyReceiver, interim: [InformationalResponse] = [])
    /// Close the connection with a TCP reset, without any response (a `reset` fault).
    case reset
}

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

/// Takes a request body as it arrives. Called from one connection thread at a time.
protocol RequestBodyReceiver: AnyObject {
    /// A chunk of the body: what was done with it.
    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake
    /// The body is complete: the response.
    func finish() -> Response
    /// The request ended before `finish` (the client left, the server stopped): undo.
    func abandon()
    /// The parts the body held, for the request journal.
    var receivedParts: [ReceivedPart] { get }
}

/// What a receiver did with a chunk of body.
enum BodyIntake: Equatable {
    /// All of it.
    case consumed
    /// The first `consumed` bytes; the rest is offered again after the pause.
    case pause(consumed: Int, Pause)
    /// Close the connection now (the body goes past what the server will read, or a `cut`).
    case close
}

/// One part of an upload, as the journal records it.
struct ReceivedPart: Equatable, Sendable {
    var name: String
    var filename: String?
    var contentType: String
    var size: UInt64
    var sha256: String?
}

/// How a request ended: for the access log and the request journal.
struct CompletedRequest: Sendable {
    var head: RequestHead
    /// When the head arrived.
    var receivedAt: HTTPDate
    var status: Int
    /// Body bytes the request carried (as far as they were read).
    var requestBodyBytes: UInt64
    /// Body bytes of the response (0 for HEAD).
    var bodyBytes: UInt64
    /// Body bytes of the response that went out, when known: all of them when the
    /// request completed, what the stream produced when it was cut.
    var bytesSent: UInt64?
    var seconds: Double
    /// False when the connection ended before the response was sent in full.
    var completed: Bool
    var parts: [ReceivedPart]
}

/// The server's side of every request: the router.
protocol RequestHandler: Sendable {
    func handle(_ head: RequestHead) -> RequestAction
    func completed(_ request: CompletedRequest)
}

/// A field value that is `1*DIGIT`, as a number: nil for a sign, spaces or anything else,
/// and past 2^64 − 1 (`UInt64("+5")` alone would take the sign).
func decimalNumber(_ text: some StringProtocol) -> UInt64? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    return UInt64(text)
}
