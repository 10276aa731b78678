import Synchronization

/// Requests counted per generated resource, for `/bytes/N?…&change-after=K`: the file
/// "changes" (its version goes up) every K requests. Cleared with the fault rules.
final class ChangeCounters: Sendable {
    /// Resources counted at most; past that the counts start over, so that a client making
    /// up URLs cannot make the table grow without end.
    static let capacity = 10_000
    private let counts = Mutex<[String: UInt64]>([:])

    /// The requests `resource` had before this one; this one is counted.
    func count(_ resource: String) -> UInt64 {
        counts.withLock { counts in
            if counts[resource] == nil, counts.count >= Self.capacity { counts.removeAll() }
            defer { counts[resource, default: 0] += 1 }
            return counts[resource] ?? 0
        }
    }

    func reset() {
        counts.withLock { $0.removeAll() }
    }
}
