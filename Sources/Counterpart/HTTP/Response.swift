import HTTPTransfer

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
        headers.contains { ASCII.equalsIgnoringCase($0.name, "Connection") && ASCII.equalsIgnoringCase(ASCII.trimmed($0.value).description, "close") }
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

/// What a response's body is made of.
enum ResponseBody {
    case empty
    case bytes([UInt8])
    /// `length` bytes of an open file from `offset`, sent with sendfile.
    case file(OpenFile, offset: UInt64, length: UInt64)
    /// `length` bytes produced on demand.
    case stream(length: UInt64, any ResponseStream)

    /// GET bodies up to this size are sent from memory (a file's read into a buffer
    /// libmicrohttpd owns, generated ones made at once): libmicrohttpd then sends the
    /// headers and the body in one write, where sendfile or a stream costs more.
    static let inMemoryLimit: UInt64 = 64 * 1024
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
    /// End the connection with a TCP reset once what was sent has left (a `reset=N` fault).
    case reset
}

/// How long an exchange holds still.
enum Pause: Equatable {
    case duration(Duration)
    /// Until the client gives up and closes (a `stall` fault).
    case untilClientLeaves
}
