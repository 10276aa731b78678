import CCurl
import Synchronization

/// One HTTP exchange as the S3 client asks for it: libcurl does the HTTP and the SigV4 signing.
struct CurlRequest {
    enum Method: String { case get = "GET", head = "HEAD", put = "PUT", post = "POST", delete = "DELETE" }

    var method: Method
    /// Already percent-encoded, with the query's keys sorted: curl 7.88 signs the path and
    /// the query exactly as written.
    var url: String
    /// `Name: value` lines; never a removal (`Name:`), which curl would sign but not send.
    var headers: [String]
    /// The body of a PUT or POST (empty for a PUT without one, such as a copy).
    var body: S3Body?
}

/// What came back: the final response's status and headers, and its body when it was not
/// streamed to a sink (or when it was an error).
struct CurlResponse {
    var status: Int
    /// Names lower-cased, in the order received.
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

/// A request body: bytes in memory, or a stretch of an open file, read with `pread` as the
/// request goes out (a part of hundreds of MiB need not be in memory; the descriptor's own
/// offset is not moved), or `count` bytes another thread writes into a pipe as they come
/// (a client's upload on its way through). Each must stay valid until the call returns.
public enum S3Body {
    case bytes(UnsafeRawBufferPointer)
    case file(descriptor: Int32, offset: Int64, count: Int64)
    case stream(BytePipe, count: Int64)

    static var empty: S3Body { .bytes(UnsafeRawBufferPointer(start: nil, count: 0)) }

    var count: Int64 {
        switch self {
        case .bytes(let bytes): return Int64(bytes.count)
        case .file(_, _, let count), .stream(_, let count): return count
        }
    }
}

/// The SigV4 signing parameters libcurl takes.
struct CurlSigning: Sendable {
    /// `aws:amz:REGION:s3`, CURLOPT_AWS_SIGV4's form.
    var provider: String
    var accessKeyID: String
    var secretAccessKey: String
}

/// Easy handles kept for reuse: each one keeps its own connection cache, so a handle checked
/// out for one call and put back after it keeps its connection to the endpoint alive for the
/// next call (HTTP keep-alive) without any handle being shared between threads.
final class CurlHandlePool: Sendable {
    /// Handles kept idle at most; more are made when more threads call at once, and cleaned
    /// up when they come back to a full pool.
    static let idleLimit = 32
    /// How long a connection may take to open: an endpoint that is down fails at once
    /// (connection refused); one that drops packets fails after this.
    static let connectTimeoutMilliseconds = 5_000
    /// The receive and send buffers of a handle.
    static let bufferBytes = 128 << 10
    private let idle = Mutex<[CurlHandle]>([])
    private let connections = Atomic<Int>(0)
    private let signing: CurlSigning
    /// A transfer that moves less than one byte a second for this long is abandoned.
    private let stallSeconds: Int

    /// libcurl is loaded (and curl_global_init run) by the first pool, once per process.
    init(signing: CurlSigning, stallSeconds: Int) throws(S3Error) {
        if let failure = ccurl_load() { throw .transport("libcurl could not be loaded: \(String(cString: failure))") }
        self.signing = signing
        self.stallSeconds = stallSeconds
    }

    /// The connections opened so far by this pool's handles (a new one for each request
    /// means keep-alive is not happening).
    var connectionsOpened: Int { connections.load(ordering: .relaxed) }

    /// Performs `request` on an idle handle (or a new one). With `sink`, a 2xx response's body
    /// goes to it as it arrives, after `head` is given the response's status and headers;
    /// any other body is collected into the response.
    func perform(_ request: CurlRequest, head: ((CurlResponse) -> Void)? = nil,
                 sink: ((UnsafeRawBufferPointer) throws -> Void)? = nil) throws -> CurlResponse {
        let handle = try idle.withLock { $0.popLast() } ?? CurlHandle()
        defer {
            idle.withLock { handles in
                if handles.count < Self.idleLimit { handles.append(handle) }
            }
        }
        let (response, opened) = try handle.perform(request, signing: signing, stallSeconds: stallSeconds, head: head, sink: sink)
        connections.add(opened, ordering: .relaxed)
        return response
    }
}

/// One libcurl easy handle. It is used by one thread at a time: the pool hands it out to one
/// caller and takes it back after the call.
final class CurlHandle: @unchecked Sendable {
    private let handle: UnsafeMutableRawPointer
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    init() throws(S3Error) {
        guard let handle = ccurl_easy_init() else { throw .transport("libcurl could not make a handle (curl_easy_init)") }
        self.handle = handle
    }

    deinit {
        ccurl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// The response and the number of connections opened for it (0 when one was reused).
    func perform(_ request: CurlRequest, signing: CurlSigning, stallSeconds: Int,
                 head: ((CurlResponse) -> Void)?, sink: ((UnsafeRawBufferPointer) throws -> Void)?) throws -> (CurlResponse, Int) {
        // reset keeps the handle's live connections; only the options go.
        ccurl_easy_reset(handle)
        let exchange = Exchange(handle: handle, body: request.body ?? .empty)
        var headerList: UnsafeMutablePointer<curl_slist>? = nil
        // Curl signs the headers it is given, x-amz-content-sha256 among them; 7.88 does not
        // add that one itself, and S3 refuses a request without it. The payload is not hashed:
        // a body streams through once.
        for line in ["x-amz-content-sha256: UNSIGNED-PAYLOAD"] + request.headers {
            guard let appended = ccurl_slist_append(headerList, line) else {
                ccurl_slist_free_all(headerList)
                throw S3Error.transport("libcurl could not append a header")
            }
            headerList = appended
        }
        defer { ccurl_slist_free_all(headerList) }

        errorBuffer[0] = 0
        var code = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if code == CURLE_OK { code = ccurl_setopt_long(handle, option, value) } }
        func set(_ option: CURLoption, _ value: String) { if code == CURLE_OK { code = ccurl_setopt_string(handle, option, value) } }
        func set(_ option: CURLoption, offset value: Int64) { if code == CURLE_OK { code = ccurl_setopt_off_t(handle, option, curl_off_t(value)) } }
        func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) { if code == CURLE_OK { code = ccurl_setopt_pointer(handle, option, value) } }

        let context = Unmanaged.passUnretained(exchange).toOpaque()
        set(CURLOPT_URL, request.url)
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        // Threads: no SIGALRM for DNS time-outs (the server's workers call this).
        set(CURLOPT_NOSIGNAL, 1)
        // An S3 key may hold `..` or `./`: it is a name, not a path to normalise.
        set(CURLOPT_PATH_AS_IS, 1)
        set(CURLOPT_CONNECTTIMEOUT_MS, CurlHandlePool.connectTimeoutMilliseconds)
        set(CURLOPT_LOW_SPEED_LIMIT, 1)
        set(CURLOPT_LOW_SPEED_TIME, stallSeconds)
        set(CURLOPT_AWS_SIGV4, signing.provider)
        set(CURLOPT_USERNAME, signing.accessKeyID)
        set(CURLOPT_PASSWORD, signing.secretAccessKey)
        set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        // Large bodies move in pieces of `bufferBytes`, not curl's 16 KiB: a GiB is 8,192
        // system calls and callbacks rather than 65,536. Only for them: a small request keeps
        // curl's small buffers (a 128 KiB one is an mmap of its own in glibc's malloc).
        if request.method == .get, sink != nil { set(CURLOPT_BUFFERSIZE, CurlHandlePool.bufferBytes) }
        if code == CURLE_OK { code = ccurl_setopt_headers(handle, headerList) }
        if code == CURLE_OK { code = ccurl_setopt_write_function(handle, CURLOPT_WRITEFUNCTION, curlWrite) }
        set(CURLOPT_WRITEDATA, pointer: context)
        if code == CURLE_OK { code = ccurl_setopt_write_function(handle, CURLOPT_HEADERFUNCTION, curlHeader) }
        set(CURLOPT_HEADERDATA, pointer: context)
        switch request.method {
        case .get:
            break
        case .head:
            set(CURLOPT_NOBODY, 1)
        case .delete:
            set(CURLOPT_CUSTOMREQUEST, "DELETE")
        case .put, .post:
            // curl sends `Expect: 100-continue` with a body and waits for the interim answer
            // before sending it (RGW gives it at once). Not waiting (EXPECT_100_TIMEOUT_MS 0)
            // was tried: RGW then answers an early error (403) without reading the body, keeps
            // the connection, and reads the body as the next request (a 400). A removal
            // (`Expect:`) would break the signature.
            set(CURLOPT_UPLOAD, 1)
            set(CURLOPT_INFILESIZE_LARGE, offset: exchange.body.count)
            if exchange.body.count > Int64(CurlHandlePool.bufferBytes) { set(CURLOPT_UPLOAD_BUFFERSIZE, CurlHandlePool.bufferBytes) }
            // A POST is sent as an upload with its method renamed: CURLOPT_POST would add
            // `Content-Type: application/x-www-form-urlencoded`, which S3 then stores as the
            // content type of a multipart upload's object.
            if request.method == .post { set(CURLOPT_CUSTOMREQUEST, "POST") }
            if code == CURLE_OK { code = ccurl_setopt_read_function(handle, curlRead) }
            set(CURLOPT_READDATA, pointer: context)
            // Lets curl send the body again on a fresh connection when a reused one died.
            if code == CURLE_OK { code = ccurl_setopt_seek_function(handle, curlSeek) }
            set(CURLOPT_SEEKDATA, pointer: context)
        }
        guard code == CURLE_OK else { throw S3Error.transport("libcurl refused an option: \(String(cString: ccurl_easy_strerror(code)))") }

        exchange.sink = sink
        exchange.head = head
        let result = ccurl_easy_perform(handle)
        exchange.sink = nil
        exchange.head = nil
        if let error = exchange.sinkError { throw error }
        if let error = exchange.readError { throw error }
        guard result == CURLE_OK else {
            let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: ccurl_easy_strerror(result))
            throw S3Error.transport("\(request.method.rawValue) \(request.url): \(detail)")
        }
        var status = 0
        _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var opened = 0
        _ = ccurl_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &opened)
        return (CurlResponse(status: status, headers: exchange.headers, body: exchange.collected), opened)
    }

    /// What the C callbacks reach through their user pointer during one perform.
    fileprivate final class Exchange {
        let handle: UnsafeMutableRawPointer
        let body: S3Body
        var bodyOffset: Int64 = 0
        var headers: [(name: String, value: String)] = []
        var collected: [UInt8] = []
        var sink: ((UnsafeRawBufferPointer) throws -> Void)?
        /// Told the final response's status and headers before its body goes to `sink`.
        var head: ((CurlResponse) -> Void)?
        var sinkError: (any Error)?
        var readError: S3Error?
        /// Whether the body goes to the sink: known at its first bytes, when the status is.
        var streaming: Bool?

        init(handle: UnsafeMutableRawPointer, body: S3Body) {
            self.handle = handle
            self.body = body
        }

        func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if streaming == nil {
                var status = 0
                _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
                streaming = sink != nil && (200...299).contains(status)
                if streaming == true { head?(CurlResponse(status: status, headers: headers, body: [])) }
            }
            guard streaming == true, let sink else {
                collected.append(contentsOf: bytes)
                return true
            }
            do {
                try sink(bytes)
                return true
            } catch {
                sinkError = error
                return false
            }
        }

        /// One header line, or a status line: each response (a `100 Continue` too) starts
        /// the list afresh, so the final response's headers are what is left.
        func receiveHeader(_ line: UnsafeRawBufferPointer) {
            var end = line.count
            while end > 0, line[end - 1] == 0x0D || line[end - 1] == 0x0A { end -= 1 }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: line[..<end]), as: UTF8.self)
            if text.hasPrefix("HTTP/") {
                headers.removeAll()
                return
            }
            guard let colon = text.firstIndex(of: ":") else { return }
            let name = text[..<colon].lowercased()
            let value = text[text.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            headers.append((name, String(value)))
        }

        /// The next bytes of the body, 0 at its end, or CURL_READFUNC_ABORT when the file
        /// cannot be read (or ends before the length given).
        func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
            let wanted = Int(min(Int64(buffer.count), body.count - bodyOffset))
            guard wanted > 0, let destination = buffer.baseAddress else { return 0 }
            switch body {
            case .bytes(let bytes):
                destination.copyMemory(from: bytes.baseAddress! + Int(bodyOffset), byteCount: wanted)
                bodyOffset += Int64(wanted)
                return wanted
            case .file(let descriptor, let offset, _):
                let got = POSIX.retryingInterrupts { pread(descriptor, destination, wanted, off_t(offset + bodyOffset)) }
                guard got > 0 else {
                    readError = .invalidRequest(got == 0
                        ? "the file ended \(body.count - bodyOffset) bytes before the body's length"
                        : "the body could not be read from its file: \(POSIX.Failure.last)")
                    return Int(CURL_READFUNC_ABORT)
                }
                bodyOffset += Int64(got)
                return got
            case .stream(let pipe, _):
                guard let got = pipe.read(into: UnsafeMutableRawBufferPointer(start: destination, count: wanted)), got > 0 else {
                    readError = .invalidRequest("the upload stopped \(body.count - bodyOffset) bytes before the body's length")
                    return Int(CURL_READFUNC_ABORT)
                }
                bodyOffset += Int64(got)
                return got
            }
        }

        func seek(to offset: Int64, origin: Int32) -> Bool {
            let target: Int64
            switch origin {
            case SEEK_SET: target = offset
            case SEEK_CUR: target = bodyOffset + offset
            case SEEK_END: target = body.count + offset
            default: return false
            }
            guard (0...body.count).contains(target) else { return false }
            // A pipe's bytes are gone once read: it can only stay where it is.
            if case .stream = body, target != bodyOffset { return false }
            bodyOffset = target
            return true
        }
    }
}

private func exchange(_ user: UnsafeMutableRawPointer?) -> CurlHandle.Exchange {
    Unmanaged<CurlHandle.Exchange>.fromOpaque(user!).takeUnretainedValue()
}

private let curlWrite: curl_write_callback = { data, size, count, user in
    let bytes = UnsafeRawBufferPointer(start: data, count: size * count)
    return exchange(user).receive(bytes) ? size * count : 0
}

private let curlHeader: curl_write_callback = { data, size, count, user in
    exchange(user).receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

private let curlRead: curl_read_callback = { data, size, count, user in
    exchange(user).read(into: UnsafeMutableRawBufferPointer(start: data, count: size * count))
}

private let curlSeek: curl_seek_callback = { user, offset, origin in
    exchange(user).seek(to: Int64(offset), origin: origin) ? Int32(CURL_SEEKFUNC_OK) : Int32(CURL_SEEKFUNC_FAIL)
}
