import HTTPTransfer

/// The server's side of every request: the router.
protocol RequestHandler: Sendable {
    /// The action for a request; the handler may note what it decided on the head.
    func handle(_ head: inout RequestHead) -> RequestAction
    func completed(_ request: CompletedRequest)
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
