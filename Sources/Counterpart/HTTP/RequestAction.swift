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
    /// End the connection with a TCP reset (a `reset=N` fault).
    case reset
}

/// One part of an upload, as the journal records it.
struct ReceivedPart: Equatable, Sendable {
    var name: String
    var filename: String?
    var contentType: String
    var size: UInt64
    var sha256: String?
}
