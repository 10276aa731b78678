import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

// `Response` values turned into libmicrohttpd responses and queued: bytes, small files from
// memory, larger ones with sendfile, streams with their pauses.

/// Turns a `Response` into an MHD response and queues it — after its delay, if it has one:
/// the connection is suspended meanwhile and MHD calls the handler again when it resumes.
func queue(_ response: Response, on connection: OpaquePointer, for state: RequestState, _ dispatcher: Dispatcher) -> MHD_Result {
    if let delay = response.delay {
        var later = response
        later.delay = nil
        switch dispatcher.pauses.hold(connection, for: .duration(delay)) {
        case .suspended:
            state.pending = later
            return MHD_Result.YES
        case .waited:
            return queue(later, on: connection, for: state, dispatcher)
        case .refused:
            return MHD_Result.NO
        }
    }
    state.pending = nil
    state.answered = true
    state.status = response.status
    // HEAD answers, 204 and 304 carry no content (RFC 9110 §6.4.1), whatever length a 304
    // announces: the journal and the access log count what the body holds.
    let hasContent = state.head.method != "HEAD" && response.status != 204 && response.status != 304
    state.bodyBytes = hasContent ? response.bodyLength : 0

    if let reusable = response.reusable {
        // Made once, then queued on every connection that sends it: libmicrohttpd counts
        // its users, and the cache entry holds one until it goes.
        guard let made = reusable.made(orMake: { mhdResponse(for: response, on: connection, state, dispatcher).map(SharedResponse.init) }) else {
            return MHD_Result.NO
        }
        return MHD_queue_response(connection, UInt32(response.status), made.pointer)
    }
    guard let created = mhdResponse(for: response, on: connection, state, dispatcher) else { return MHD_Result.NO }
    let result = MHD_queue_response(connection, UInt32(response.status), created)
    MHD_destroy_response(created)
    return result
}

/// libmicrohttpd's response for `response`: its body and its fields.
private func mhdResponse(for response: Response, on connection: OpaquePointer, _ state: RequestState, _ dispatcher: Dispatcher) -> OpaquePointer? {
    let created: OpaquePointer?
    switch response.body {
    case .empty:
        created = MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode.RESPMEM_PERSISTENT)
    case .bytes(let bytes):
        created = bytes.withUnsafeBytes { buffer in
            MHD_create_response_from_buffer(buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
        }
    case .file(_, _, 0):
        created = MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode.RESPMEM_PERSISTENT)
    case .file(let file, let offset, let length) where length <= ResponseBody.inMemoryLimit && state.head.method == "GET":
        created = smallFileResponse(file, offset: offset, length: Int(length))
            ?? fileResponse(file, offset: offset, length: length, watchedBy: state.head.connection, dispatcher)
    case .file(let file, let offset, let length):
        created = fileResponse(file, offset: offset, length: length, watchedBy: state.head.connection, dispatcher)
    case .stream(let length, let stream):
        let counter = StreamCounter()
        state.streamed = counter
        let box = Unmanaged.passRetained(StreamBox(stream, connection: connection, dispatcher: dispatcher, counter: counter,
                                                   queuedAt: state.lastCallback)).toOpaque()
        created = MHD_create_response_from_callback(length, streamBlockSize, readStream, box, freeStream)
        if created == nil { Unmanaged<StreamBox>.fromOpaque(box).release() }
    }
    guard let created else { return nil }
    for field in response.headers {
        // withCString lends a native string's own bytes; passing a String where C wants a
        // pointer would copy each name and value into a new array first.
        _ = field.name.withCString { name in field.value.withCString { value in MHD_add_response_header(created, name, value) } }
    }
    return created
}

/// A libmicrohttpd response kept for reuse; released when its cache entry goes. Once
/// made it is only read (libmicrohttpd counts its users under the response's own lock).
final class SharedResponse: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { MHD_destroy_response(pointer) }
}

/// A response with `length` bytes of `file` read into a buffer libmicrohttpd frees; nil when
/// the file no longer has them all (it shrank since it was measured).
func smallFileResponse(_ file: OpenFile, offset: UInt64, length: Int) -> OpaquePointer? {
    guard let buffer = malloc(max(length, 1)) else { return nil }
    guard file.readFully(at: offset, into: UnsafeMutableRawBufferPointer(start: buffer, count: length)) else {
        free(buffer)
        return nil
    }
    guard let response = MHD_create_response_from_buffer(length, buffer, MHD_ResponseMemoryMode.RESPMEM_MUST_FREE) else {
        free(buffer)
        return nil
    }
    return response
}

/// A response that sends `length` bytes of `file` from `offset` with sendfile; libmicrohttpd
/// takes the descriptor. The watch cuts the connection if the file shrinks under it.
func fileResponse(_ file: OpenFile, offset: UInt64, length: UInt64, watchedBy watched: WatchedConnection?, _ dispatcher: Dispatcher) -> OpaquePointer? {
    let descriptor = file.take()
    guard let created = MHD_create_response_from_fd_at_offset64(length, descriptor, offset) else {
        close(descriptor)
        return nil
    }
    if let watched { dispatcher.watch.sending(watched, file: descriptor, upTo: offset + length) }
    return created
}

/// Bytes a stream has produced, read at completion (possibly from another MHD thread).
final class StreamCounter: Sendable {
    let count = Atomic<UInt64>(0)
}

/// A stream with what its reader needs to pause the connection.
final class StreamBox {
    let stream: any ResponseStream
    let connection: OpaquePointer
    let dispatcher: Dispatcher
    let counter: StreamCounter
    /// When the last read returned (first: when the response was queued).
    var lastRead: Double

    init(_ stream: any ResponseStream, connection: OpaquePointer, dispatcher: Dispatcher, counter: StreamCounter, queuedAt: Double) {
        self.stream = stream
        self.connection = connection
        self.dispatcher = dispatcher
        self.counter = counter
        lastRead = queuedAt
    }
}

let readStream: MHD_ContentReaderCallback = { cls, position, buffer, max in
    guard let cls, let buffer else { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
    let box = Unmanaged<StreamBox>.fromOpaque(cls).takeUnretainedValue()
    if box.dispatcher.pauses.clientLeft(box.connection) { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
    let read = box.stream.read(at: position, into: UnsafeMutableRawBufferPointer(start: buffer, count: max))
    // A read from a slow store is the server's wait, not the client's silence.
    box.dispatcher.calledBack(box.connection, &box.lastRead)
    switch read {
    case .bytes(let count) where count > 0:
        box.counter.count.add(UInt64(count), ordering: .relaxed)
        return count
    case .pause(let pause):
        // Returning 0 asks MHD to call again: once resumed, or at once after a sleep.
        switch box.dispatcher.pauses.hold(box.connection, for: pause) {
        case .refused:
            return Int(MHD_CONTENT_READER_END_WITH_ERROR)
        case .suspended(let suspension):
            box.stream.suspended(Waker(pauses: box.dispatcher.pauses, key: connectionKey(box.connection), suspension: suspension))
            return 0
        case .waited:
            return 0
        }
    case .reset:
        resetConnection(box.connection, afterSending: true)
        return Int(MHD_CONTENT_READER_END_WITH_ERROR)
    case .bytes, .cut:
        return Int(MHD_CONTENT_READER_END_WITH_ERROR)
    }
}

let freeStream: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<StreamBox>.fromOpaque(cls).release()
}

/// The size of the pieces a stream is asked for.
let streamBlockSize = 64 * 1024
