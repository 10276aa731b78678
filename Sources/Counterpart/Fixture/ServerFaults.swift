import Synchronization

/// The faults a server applies of its own accord: the one for every request (`--fault`),
/// and the rules armed on it (`--fault-rule`, `POST /__counterpart/faults`, `arm`), each
/// counting the requests it matches. Shared by every server thread; counting is exact
/// under concurrency (one lock around the rules).
///
/// ```swift
/// try server.faults.arm(method: "POST", path: "/upload", fault: "cut=1MiB", times: 2)
/// ```
public final class ServerFaults: Sendable {
    /// An armed rule and what it has counted.
    public struct Armed: Sendable, Equatable {
        public let id: Int
        public let rule: FaultRule
        /// Matching requests it counted (those it let through with `skip` too).
        public fileprivate(set) var matched = 0
        /// Requests it faulted.
        public fileprivate(set) var applied = 0
        /// Requests it will still fault; nil: no limit.
        public var remaining: Int? { rule.times.map { $0 - applied } }

        var hasFaultsLeft: Bool { remaining.map { $0 > 0 } ?? true }
    }

    /// What the rules made of one request.
    struct Count: Equatable {
        /// The rule that counted it.
        var rule: Int
        /// The rule's fault; nil when the rule let it through (`skip`).
        var fault: FaultSpec?
        /// The request's place among those the rule faulted (0 for the first): where its
        /// draws of `fail` and `jitter` come from.
        var draw: UInt64
    }

    /// The faults of every request (`--fault`); an armed rule and a request's own override them.
    public let serverWide: FaultSpec
    private let armed: Mutex<(rules: [Armed], nextID: Int)>
    /// How many rules are armed, read without the lock: a server without rules (the usual
    /// case) counts its requests without serialising its threads on it.
    private let armedCount = Atomic<Int>(0)
    private let serverWideDraws = Atomic<UInt64>(0)
    private let cleared: @Sendable () -> Void
    private let events: ServerEvents?

    /// `cleared` runs on `clear()`: other counters of the fixture start over with the rules.
    init(serverWide: FaultSpec, rules: [FaultRule], cleared: @escaping @Sendable () -> Void = {}, events: ServerEvents? = nil) {
        self.events = events
        self.serverWide = serverWide
        armed = Mutex((rules.enumerated().map { Armed(id: $0.offset + 1, rule: $0.element) }, rules.count + 1))
        armedCount.store(rules.count, ordering: .releasing)
        self.cleared = cleared
    }

    /// Arms `rule` after those armed before it; the rule as armed, with its id.
    @discardableResult
    public func arm(_ rule: FaultRule) -> Armed {
        let armed = armed.withLock { state in
            let rule = Armed(id: state.nextID, rule: rule)
            state.nextID += 1
            state.rules.append(rule)
            armedCount.store(state.rules.count, ordering: .releasing)
            return rule
        }
        events?.rule(.armed, armed)
        return armed
    }

    /// Arms a rule: `fault` in the fault-spec grammar (`cut=1MiB`, `status=503`).
    @discardableResult
    public func arm(method: String? = nil, path: String, fault: String, times: Int? = nil, skip: Int = 0) throws(FaultRuleError) -> Armed {
        let spec: FaultSpec
        do { spec = try FaultSpec(parsing: fault) } catch { throw FaultRuleError(field: "fault", "invalid fault: \(error)") }
        return arm(try FaultRule(method: method, path: path, fault: spec, times: times, skip: skip))
    }

    /// Removes the rule `id`; false when there is none.
    @discardableResult
    public func remove(id: Int) -> Bool {
        let removed = armed.withLock { state -> Armed? in
            guard let index = state.rules.firstIndex(where: { $0.id == id }) else { return nil }
            armedCount.store(state.rules.count - 1, ordering: .releasing)
            return state.rules.remove(at: index)
        }
        if let removed { events?.rule(.removed, removed) }
        return removed != nil
    }

    /// Removes every rule, and starts the fixture's other counters (`/bytes` `change-after`) over.
    public func clear() {
        armed.withLock { state in
            state.rules.removeAll()
            armedCount.store(0, ordering: .releasing)
        }
        cleared()
        events?.rule(.cleared, nil)
    }

    /// The rules armed, in the order they are tried, with their counts.
    public var rules: [Armed] { armed.withLock { $0.rules } }

    /// Counts a request against the rules: the first that matches and has faults left counts it.
    /// `path` (the decoded path, a new string) is made only when some rule is armed.
    func count(method: String, path makePath: @autoclosure () -> String) -> Count? {
        guard armedCount.load(ordering: .acquiring) > 0 else { return nil }
        let path = makePath()
        let (count, fired) = armed.withLock { state -> (Count?, Armed?) in
            guard let index = state.rules.firstIndex(where: { $0.hasFaultsLeft && $0.rule.matches(method: method, path: path) }) else {
                return (nil, nil)
            }
            state.rules[index].matched += 1
            let rule = state.rules[index]
            guard rule.matched > rule.rule.skip else { return (Count(rule: rule.id, fault: nil, draw: 0), nil) }
            state.rules[index].applied += 1
            return (Count(rule: rule.id, fault: rule.rule.fault, draw: UInt64(rule.applied)), state.rules[index])
        }
        if let fired { events?.rule(.fired, fired) }
        return count
    }

    /// The place of a request among those the server-wide fault applied to.
    func nextServerWideDraw() -> UInt64 {
        serverWideDraws.add(1, ordering: .relaxed).oldValue
    }
}
