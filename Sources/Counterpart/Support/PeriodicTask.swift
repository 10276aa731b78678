import Dispatch
import Synchronization

/// Work done every so often on a queue of its own, until cancelled.
final class PeriodicTask: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let queue = DispatchQueue(label: "counterpart.periodic")

    init(every seconds: Double, _ work: @escaping @Sendable () -> Void) {
        schedule(after: seconds, work)
    }

    func cancel() {
        cancelled.store(true, ordering: .relaxed)
    }

    private func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) {
        queue.asyncAfter(deadline: .now() + seconds) { [self] in
            guard !cancelled.load(ordering: .relaxed) else { return }
            work()
            schedule(after: seconds, work)
        }
    }
}
