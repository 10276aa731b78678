import Synchronization

/// Refused credentials, told on stderr at most once a second, each line counting the
/// refusals since the one before: a run of thousands of guesses leaves a few lines, and
/// costs nothing per guess but a counter.
final class FailureLog: Sendable {
    private struct State {
        var unreported = 0
        var lastLine: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    static let interval = Duration.seconds(1)

    func record(client: String, name: String?) {
        let now = ContinuousClock.now
        let count: Int? = state.withLock { state in
            state.unreported += 1
            if let last = state.lastLine, now - last < Self.interval { return nil }
            defer {
                state.unreported = 0
                state.lastLine = now
            }
            return state.unreported
        }
        guard let count else { return }
        let who = name.map { "user \"\(Self.printable($0))\" from \(client)" } ?? "from \(client)"
        var line = "counterpart: \(count) refused credential\(count == 1 ? "" : "s") since the last report (the latest \(who))\n"
        // One write per line keeps lines from concurrent requests whole.
        try? line.withUTF8 { try POSIX.writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// A name a client sent, safe for a log line: at most 64 characters, control
    /// characters and quotes as `?`.
    private static func printable(_ name: String) -> String {
        String(name.prefix(64).map { $0.isASCII && ($0.asciiValue! < 0x20 || $0 == "\"" || $0.asciiValue! == 0x7F) ? "?" : $0 })
    }
}
