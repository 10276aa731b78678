import HTTPTransfer

/// Faults to inject into one exchange, so that a client's handling of broken transfers
/// can be tested on purpose. Written `cut=1048576,delay=200` (also with `;` between, or as
/// query parameters `?cut=1048576&delay=200`).
public struct FaultSpec: Equatable, Sendable, CustomStringConvertible {
    /// Send the headers (full Content-Length), then close after this many body bytes; on
    /// an upload, close after reading this many request-body bytes.
    public var cut: UInt64?
    /// After this many body bytes, stop sending (or reading) but keep the connection open.
    public var stall: UInt64?
    /// Throttle the response body, or the reading of the upload body, to this many bytes
    /// per second.
    public var rate: UInt64?
    /// Wait this many milliseconds before the response headers.
    public var delayMilliseconds: UInt64?
    /// Answer with this status and a small JSON body instead; with `failProbability`, the
    /// status of a request that fails (503 when not given).
    public var status: Int?
    /// Close the connection without any response (a TCP reset).
    public var reset: Bool
    /// After this many body bytes (sent, or read from an upload), end the connection with a
    /// TCP reset (RST) instead of a FIN: the client sees ECONNRESET, not a short body.
    public var resetAfter: UInt64?
    /// Each request fails (with `status`, default 503) with this probability, 0 to 1.
    public var failProbability: Double?
    /// The seed of the draws of `failProbability` and `jitterMilliseconds` (default 0): the
    /// outcomes of a rule, or of the server's fault, come in the same order in every run.
    public var seed: UInt64?
    /// A random extra wait of 0 to this many milliseconds before the headers, on top of
    /// `delayMilliseconds`.
    public var jitterMilliseconds: UInt64?
    /// The headers go out at once; the body waits this many milliseconds (a slow first byte).
    public var firstByteMilliseconds: UInt64?

    /// The fault names, in the order they are described.
    public static let names = ["cut", "stall", "rate", "delay", "status", "reset", "fail", "seed", "jitter", "first-byte"]

    public init(cut: UInt64? = nil, stall: UInt64? = nil, rate: UInt64? = nil, delayMilliseconds: UInt64? = nil,
                status: Int? = nil, reset: Bool = false, resetAfter: UInt64? = nil, failProbability: Double? = nil,
                seed: UInt64? = nil, jitterMilliseconds: UInt64? = nil, firstByteMilliseconds: UInt64? = nil) {
        self.cut = cut
        self.stall = stall
        self.rate = rate
        self.delayMilliseconds = delayMilliseconds
        self.status = status
        self.reset = reset
        self.resetAfter = resetAfter
        self.failProbability = failProbability
        self.seed = seed
        self.jitterMilliseconds = jitterMilliseconds
        self.firstByteMilliseconds = firstByteMilliseconds
    }

    /// Whether it does nothing (a seed alone does nothing).
    public var isEmpty: Bool {
        var effective = self
        effective.seed = nil
        return effective == FaultSpec()
    }

    /// Whether it draws from its seed (`fail`, `jitter`).
    var draws: Bool { failProbability != nil || jitterMilliseconds != nil }

    /// The spec with its draws made: `fail` becomes `status` or nothing, `jitter` more
    /// `delay`. `draw` is the request's place in the sequence of its source (a rule's
    /// faulted requests, the server-wide fault's requests; 0 for a request's own): draw
    /// `2·draw` decides `fail`, `2·draw + 1` the jitter, both from SplitMix64 of `seed`.
    func resolved(draw: UInt64) -> FaultSpec {
        var spec = self
        let generator = GeneratedBytes(seed: seed ?? 0)
        if let probability = failProbability {
            // The top 53 bits as a fraction in [0, 1).
            let fraction = Double(generator.word(2 &* draw) >> 11) / Double(UInt64(1) << 53)
            spec.status = fraction < probability ? status ?? 503 : nil
            spec.failProbability = nil
        }
        if let jitter = jitterMilliseconds {
            spec.delayMilliseconds = (delayMilliseconds ?? 0) + generator.word(2 &* draw &+ 1) % (jitter + 1)
            spec.jitterMilliseconds = nil
        }
        spec.seed = nil
        return spec
    }

    /// Parses `cut=1048576, delay=200` (`,` or `;` between faults). Byte counts take the
    /// suffixes of `ByteCount`: `cut=1M`, `rate=64KiB`.
    public init(parsing text: String) throws(FaultSpecError) {
        self.init()
        for item in text.split(whereSeparator: { $0 == "," || $0 == ";" }) {
            let pair = item.split(separator: "=", maxSplits: 1).map { String(ASCII.trimmed($0)) }
            guard let name = pair.first, !name.isEmpty else { continue }
            try set(name, pair.count == 2 ? pair[1] : nil)
        }
    }

    /// The faults named in query arguments (`?cut=…&delay=…`); other arguments are ignored.
    /// `seed` counts only beside `fail` or `jitter`: `/bytes/N?seed=S` names the bytes.
    init(query: [(name: String, value: String?)]) throws(FaultSpecError) {
        self.init()
        let draws = query.contains { $0.name == "fail" || $0.name == "jitter" }
        for argument in query where Self.names.contains(argument.name) && (argument.name != "seed" || draws) {
            try set(argument.name, argument.value.map { PercentEncoding.decode($0) ?? $0 })
        }
    }

    /// `other`'s faults where it has them, this one's elsewhere.
    func overridden(by other: FaultSpec) -> FaultSpec {
        FaultSpec(cut: other.cut ?? cut, stall: other.stall ?? stall, rate: other.rate ?? rate,
                  delayMilliseconds: other.delayMilliseconds ?? delayMilliseconds,
                  status: other.status ?? status, reset: other.reset || reset, resetAfter: other.resetAfter ?? resetAfter,
                  failProbability: other.failProbability ?? failProbability, seed: other.seed ?? seed,
                  jitterMilliseconds: other.jitterMilliseconds ?? jitterMilliseconds,
                  firstByteMilliseconds: other.firstByteMilliseconds ?? firstByteMilliseconds)
    }

    private mutating func set(_ name: String, _ value: String?) throws(FaultSpecError) {
        func bytes() throws(FaultSpecError) -> UInt64 {
            guard let value, let count = ByteCount.parse(value) else {
                throw FaultSpecError("\(name) needs a byte count (e.g. \(name)=1048576 or \(name)=1MiB)")
            }
            return count
        }
        func milliseconds() throws(FaultSpecError) -> UInt64 {
            guard let value, let milliseconds = ASCII.decimalNumber(value), milliseconds <= Self.maxDelayMilliseconds else {
                throw FaultSpecError("\(name) needs milliseconds from 0 to \(Self.maxDelayMilliseconds) (e.g. \(name)=200)")
            }
            return milliseconds
        }
        switch name {
        case "cut": cut = try bytes()
        case "stall": stall = try bytes()
        case "rate":
            let value = try bytes()
            guard value > 0 else { throw FaultSpecError("rate needs at least 1 byte per second") }
            rate = value
        case "delay": delayMilliseconds = try milliseconds()
        case "jitter": jitterMilliseconds = try milliseconds()
        case "first-byte": firstByteMilliseconds = try milliseconds()
        case "fail":
            // Digits with at most one point: no signs, exponents, nan or inf.
            guard let value, value.utf8.allSatisfy({ $0 == 0x2E || (0x30...0x39).contains($0) }),
                  let probability = Double(value), (0...1).contains(probability) else {
                throw FaultSpecError("fail needs a probability from 0 to 1 (e.g. fail=0.3)")
            }
            failProbability = probability
        case "seed":
            guard let value, let number = ASCII.decimalNumber(value) else {
                throw FaultSpecError("seed needs a number from 0 to \(UInt64.max) (e.g. seed=7)")
            }
            seed = number
        case "status":
            guard let value, let code = Int(value), (200...599).contains(code) else {
                throw FaultSpecError("status needs an HTTP status from 200 to 599 (e.g. status=503)")
            }
            status = code
        case "reset":
            if value == nil || value == "" {
                reset = true
            } else {
                guard let count = ByteCount.parse(value!) else {
                    throw FaultSpecError("reset takes no value, or a byte count to reset after (e.g. reset=65536)")
                }
                resetAfter = count
            }
        default:
            throw FaultSpecError("unknown fault \"\(name)\"; the faults are \(Self.names.joined(separator: ", "))")
        }
    }

    /// A delay longer than this is surely a mistake (10 minutes).
    public static let maxDelayMilliseconds: UInt64 = 600_000

    /// `cut=…,stall=…` with the faults set.
    public var description: String {
        var parts: [String] = []
        if let cut { parts.append("cut=\(cut)") }
        if let stall { parts.append("stall=\(stall)") }
        if let rate { parts.append("rate=\(rate)") }
        if let delayMilliseconds { parts.append("delay=\(delayMilliseconds)") }
        if let status { parts.append("status=\(status)") }
        if reset { parts.append("reset") }
        if let resetAfter { parts.append("reset=\(resetAfter)") }
        if let failProbability { parts.append("fail=\(failProbability)") }
        if let seed { parts.append("seed=\(seed)") }
        if let jitterMilliseconds { parts.append("jitter=\(jitterMilliseconds)") }
        if let firstByteMilliseconds { parts.append("first-byte=\(firstByteMilliseconds)") }
        return parts.joined(separator: ",")
    }
}

public struct FaultSpecError: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Byte counts as people write them: `1048576`, `512K`, `10MiB`, `2G` (binary units).
public enum ByteCount {
    public static func parse(_ text: String) -> UInt64? {
        let units: [(String, UInt64)] = [("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30), ("TIB", 1 << 40),
                                         ("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40),
                                         ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40), ("B", 1)]
        let upper = text.uppercased()
        for (suffix, factor) in units where upper.hasSuffix(suffix) {
            guard let number = ASCII.decimalNumber(upper.dropLast(suffix.count)) else { return nil }
            let (product, overflow) = number.multipliedReportingOverflow(by: factor)
            return overflow ? nil : product
        }
        return ASCII.decimalNumber(text)
    }
}
