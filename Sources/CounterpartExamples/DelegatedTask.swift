import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One URLSession task driven by a session delegate and awaited: the way to see a transfer
/// as it happens (body bytes as they arrive, upload progress), which the async
/// `data(for:)` and `upload(for:from:)` do not report on Linux. The handlers run on the
/// session's serial delegate queue, one at a time, in the order of the events.
///
/// Unchecked: the handlers are only called from the delegate queue, one after another;
/// every other stored property is read and written under `lock`.
final class DelegatedTask: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Body {
        case none
        case data(Data)
        case file(URL)
    }

    private let onResponse: (HTTPURLResponse) throws -> Void
    private let onData: (Data) throws -> Void
    private let onSent: (_ sent: Int64, _ expected: Int64) -> Void

    private let lock = NSLock()
    private var task: URLSessionTask?
    private var cancelRequested = false
    private var response: HTTPURLResponse?
    private var handlerError: (any Error)?
    private var continuation: CheckedContinuation<HTTPURLResponse, any Error>?

    /// `onResponse` sees the head of the answer (throw to stop the task), `onData` each
    /// piece of its body as it arrives (throw to stop), `onSent` the request body's progress.
    init(onResponse: @escaping (HTTPURLResponse) throws -> Void = { _ in },
         onData: @escaping (Data) throws -> Void = { _ in },
         onSent: @escaping (_ sent: Int64, _ expected: Int64) -> Void = { _, _ in }) {
        self.onResponse = onResponse
        self.onData = onData
        self.onSent = onSent
    }

    /// Runs `request` to its end and returns the response; throws the transport's error
    /// (`URLError`), a handler's error, or `CancellationError` when the awaiting task is
    /// cancelled (which cancels the transfer).
    func run(_ request: URLRequest, body: Body = .none) async throws -> HTTPURLResponse {
        let session = URLSession(configuration: Sessions.configuration(), delegate: self, delegateQueue: nil)
        let task: URLSessionTask
        switch body {
        case .none: task = session.dataTask(with: request)
        case .data(let data): task = session.uploadTask(with: request, from: data)
        case .file(let file): task = session.uploadTask(with: request, fromFile: file)
        }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPURLResponse, any Error>) in
                    let cancelNow = lock.withLock {
                        self.continuation = continuation
                        self.task = task
                        return cancelRequested
                    }
                    task.resume()
                    if cancelNow { task.cancel() }
                }
            } onCancel: {
                cancel()
            }
        } catch let error as URLError where error.code == .cancelled && Task.isCancelled {
            throw CancellationError()
        }
    }

    /// Stops the transfer: no more body bytes are handed to `onData`, and `run` throws
    /// `URLError(.cancelled)`.
    func cancel() {
        let task: URLSessionTask? = lock.withLock {
            cancelRequested = true
            return self.task
        }
        task?.cancel()
    }

    private func record(_ error: any Error) {
        lock.withLock { if handlerError == nil { handlerError = error } }
    }

    /// A handler failed, or the task was cancelled: later body bytes are not handed on
    /// (URLSession may still deliver bytes it had received before the cancel).
    private var stopped: Bool { lock.withLock { handlerError != nil || cancelRequested } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        guard let http = response as? HTTPURLResponse else {
            record(ExampleError.notHTTP(response.url ?? URL(fileURLWithPath: "/")))
            completionHandler(.cancel)
            return
        }
        lock.withLock { self.response = http }
        do {
            try onResponse(http)
            completionHandler(.allow)
        } catch {
            record(error)
            completionHandler(.cancel)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard !stopped else { return }
        do {
            try onData(data)
        } catch {
            record(error)
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
                    totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        onSent(totalBytesSent, totalBytesExpectedToSend)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (waiting, result): (CheckedContinuation<HTTPURLResponse, any Error>?, Result<HTTPURLResponse, any Error>) = lock.withLock {
            let result: Result<HTTPURLResponse, any Error>
            if let handlerError {
                result = .failure(handlerError)
            } else if let error {
                result = .failure(error)
            } else if cancelRequested {
                // Cancelled after the last byte had arrived but before completion was seen:
                // the bytes after the cancel were not handed on, so it did not complete.
                result = .failure(URLError(.cancelled))
            } else if let response {
                result = .success(response)
            } else {
                result = .failure(URLError(.badServerResponse))
            }
            defer { continuation = nil }
            return (continuation, result)
        }
        waiting?.resume(with: result)
        session.finishTasksAndInvalidate()
    }
}
