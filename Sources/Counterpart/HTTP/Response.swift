import HTTPTransfer
import Synchronization

struct Response {
    var status: Int { didSet { reusable = nil } }
    var headers: [HTTPField] { didSet { reusable = nil } }
    var body: ResponseBody { didSet { reusable = nil } }
    /// A wait before the response headers go out (a `delay` fault).
    var delay: Duration?
    /// Set on a response that is sent the same, field for field and byte for byte, each
    /// time (a cached small file): the adapter may keep what it made of it and send that
    /// again. A change to the status, the headers or the body drops it.
    var reusable: ReusableResponse?

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

/// Where the adapter keeps what it made of a reusable response, for as long as the
/// response is cached.
final class ReusableResponse: Sendable {
    private let made = Mutex<(any AnyObject & Sendable)?>(nil)

    /// What `make` made the first time it was asked for (by any thread), or nil when it
    /// failed (it is then asked again next time).
    func made<Made: AnyObject & Sendable>(orMake make: () -> Made?) -> Made? {
        made.withLock { stored in
            if let existing = stored as? Made { return existing }
            let new = make()
            stored = new
            return new
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

    /// The connection is suspended for the pause the last read asked for; `waker` resumes
    /// it sooner (a stream waiting for events is woken by the next one).
    func suspended(_ waker: Waker)
}

extension ResponseStream {
    func suspended(_ waker: Waker) {}
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
