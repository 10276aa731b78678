// Shared machinery of counterpart-bench: options, suites, timing, statistics, tables,
// targets and the machine context. Suites (parsers, and later the server) only use these.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Suites

/// A named group of benchmarks, run by `--only NAME` (or all, by default).
struct BenchmarkSuite {
    let name: String
    let summary: String
    let sections: [BenchmarkSection]
    /// Called once after the suite's selected sections ran (e.g. to remove shared files).
    var finish: () -> Void = {}
}

/// One part of a suite, selectable alone as `--only SUITE/SECTION`.
struct BenchmarkSection {
    let name: String
    let summary: String
    /// False for a section that only runs when named (`--only SUITE/SECTION`): neither by
    /// default nor with `--only SUITE`.
    var runsByDefault = true
    let run: (BenchContext) -> Void
}

/// Command-line options, shared by every suite.
struct BenchOptions {
    /// `suite` or `suite/section` selectors; empty means everything.
    var only: [String] = []
    /// Only benchmarks whose key contains one of these substrings (suites decide what a key is).
    var filters: [String] = []
    /// Timed runs per figure (the median is reported): 3, or 2 with `--quick`, unless given.
    var runs: Int { explicitRuns ?? (quick ? 2 : 3) }
    var explicitRuns: Int?
    /// Smaller inputs and shorter runs, for a smoke run.
    var quick = false
    /// Seconds of each timed wrk run (server suite), when given.
    var duration: Int?
    /// Seconds of each timed wrk run: 5, or 2 with `--quick`, unless given.
    var wrkSeconds: Int { duration ?? (quick ? 2 : 5) }
    /// nginx's `worker_processes` in the threads section: a number or `auto`.
    var nginxWorkers = "1"
    /// Where the machine-readable summary goes.
    var jsonPath = ".build/bench/summary.json"
    /// Where the C peers built by `make bench` are (`bench/peers/*.c`, compiled with gcc).
    var peersFolder = ".build/bench/bin"
    /// Measure the small-request and upload rows also with a client reading
    /// `/__counterpart/events` throughout (as the live page does), beside the same server
    /// without one.
    var eventsReader = false
    /// What the events reader asks for: `latest` (the live page's stream) or `all`; `none`
    /// attaches no reader (a control: how the bench judges two of the same server).
    var eventsReaderRequests = "latest"
    /// Keep the reader's server and its twin for the whole run instead of starting them
    /// afresh before every round, as the bench did before: to reproduce earlier figures.
    var keepProcesses = false
    /// A second Counterpart binary (an earlier build) measured beside the current one in
    /// the server sections' line-ups, with the same flags; nil: none.
    var baselinePath: String?

    static let usage = """
        usage: counterpart-bench [--only SUITE[/SECTION][,…]] [--filter KEY[,…]] [--runs N] [--quick] [--list]
                                 [--duration SECONDS] [--nginx-workers N|auto] [--json PATH] [--peers DIR]
                                 [--events-reader[=latest|all|none]] [--keep-processes] [--baseline PATH]

          --only     run only these suites or sections (e.g. --only parsers, --only server/small,scaling)
          --filter   run only the benchmarks whose key contains one of these strings
                     (e.g. --filter salted; --list shows the keys)
          --runs     timed runs per figure, default 3 (2 with --quick); the median and the min–max are printed
          --quick    a smoke run: bodies 1/8 of their size, 2 s wrk runs, 2 runs; figures are indicative only
          --list     list suites, sections and benchmark keys, and exit
          --duration       seconds of each timed wrk run in the server suite (default 5; 2 with --quick)
          --nginx-workers  nginx's worker_processes in the threads section (default 1; a number or auto)
          --json     where the machine-readable summary is written (default .build/bench/summary.json)
          --peers    the folder of the compiled C peers (default .build/bench/bin; make bench builds them
                     from bench/peers/*.c with gcc -O2 -lmicrohttpd)
          --events-reader[=…]  in server/small and server/upload, measure Counterpart a second time with a
                     client reading GET /__counterpart/events?requests=latest all along (the live page's stream; the
                     client is a process of its own, as a browser is: this program run again), and
                     a third time as its twin (the same again, no reader), in the same run, the two started afresh
                     before every round, each first in turn; the reader is within the noise unless, round by round
                     against the twin, Wilcoxon's signed-rank test puts the chance of two of the same differing so
                     below 5 % (5 runs at least); =all reads ?requests=all instead (every request, as curl -N does);
                     =none attaches no reader: a control, two of the same
          --keep-processes  keep every server for the whole run, as the bench did before it started the pairs of
                     --events-reader and --baseline afresh each round (to reproduce earlier figures)
          --baseline PATH  another counterpart binary (e.g. a release build of an earlier commit): in server/small,
                     range-rate, upload, download and ranges, each Counterpart row is measured a second time from it,
                     started with the same flags ("(baseline)" rows), the two started afresh before every round, each
                     first in turn; round by round, this build is worse or better than the baseline only where
                     Wilcoxon's signed-rank test puts the chance of two of the same differing so below 5 % (5 runs at
                     least); this build's own binary as the baseline is the control, two of the same

        Sections marked "only when named" in --list run only with --only SUITE/SECTION
        (e.g. --only server/threads).
        """

    func wants(suite: String, section: BenchmarkSection) -> Bool {
        if only.contains("\(suite)/\(section.name)") { return true }
        return section.runsByDefault && (only.isEmpty || only.contains(suite))
    }

    func wants(key: String) -> Bool {
        filters.isEmpty || filters.contains { key.contains($0) }
    }

    /// Parses the arguments; on a bad one, prints the usage and exits with status 2.
    static func parse(_ arguments: [String]) -> (options: BenchOptions, list: Bool) {
        var options = BenchOptions()
        var list = false
        var iterator = arguments.makeIterator()
        func fail(_ message: String) -> Never {
            printError("counterpart-bench: \(message)\n\(usage)")
            exit(2)
        }
        func value(of flag: String, inline: String?) -> String {
            if let inline { return inline }
            guard let next = iterator.next() else { fail("\(flag) needs a value") }
            return next
        }
        while let argument = iterator.next() {
            // Both `--flag value` and `--flag=value`.
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let flag = parts[0]
            let inline = parts.count > 1 ? parts[1] : nil
            switch flag {
            case "--only":
                options.only += value(of: flag, inline: inline).split(separator: ",").map(String.init)
            case "--filter":
                options.filters += value(of: flag, inline: inline).split(separator: ",").map(String.init)
            case "--runs":
                guard let runs = Int(value(of: flag, inline: inline)), runs >= 1 else { fail("--runs needs a positive number") }
                options.explicitRuns = runs
            case "--quick":
                options.quick = true
            case "--duration":
                guard let duration = Int(value(of: flag, inline: inline)), duration >= 1 else { fail("--duration needs a positive number of seconds") }
                options.duration = duration
            case "--nginx-workers":
                let workers = value(of: flag, inline: inline)
                guard workers == "auto" || (Int(workers).map { $0 >= 1 } ?? false) else { fail("--nginx-workers needs a positive number or auto") }
                options.nginxWorkers = workers
            case "--json":
                options.jsonPath = value(of: flag, inline: inline)
            case "--peers":
                options.peersFolder = value(of: flag, inline: inline)
            case "--events-reader":
                options.eventsReader = true
                if let inline {
                    guard ["latest", "all", "none"].contains(inline) else { fail("--events-reader takes latest (the default), all or none") }
                    options.eventsReaderRequests = inline
                }
            case "--keep-processes":
                options.keepProcesses = true
            case "--baseline":
                let path = value(of: flag, inline: inline)
                guard access(path, X_OK) == 0 else { fail("--baseline \(path) is not an executable file") }
                // Absolute, as the header and the JSON summary name it.
                options.baselinePath = path.hasPrefix("/") ? path : (currentDirectory() + "/" + path)
            case "--list":
                list = true
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                fail("unknown argument \(argument)")
            }
        }
        return (options, list)
    }
}

/// What a section gets: the options, and where to put its figures and target checks (the
/// report's last table and the JSON summary).
final class BenchContext {
    let options: BenchOptions
    private(set) var targets: [TargetCheck] = []
    private(set) var figures: [FigureRecord] = []
    private(set) var ratios: [RatioRecord] = []

    init(options: BenchOptions) { self.options = options }

    func record(_ target: TargetCheck) { targets.append(target) }
    func record(_ figure: FigureRecord) { figures.append(figure) }
    func record(_ ratio: RatioRecord) { ratios.append(ratio) }
}

/// One measured figure of one subject (a server, a parser, a command), for the JSON summary.
struct FigureRecord {
    /// `suite/section`, e.g. `server/upload`.
    let section: String
    let subject: String
    let metric: String
    let unit: String
    let samples: Samples
}

/// A ratio of two medians measured in the same run, for the JSON summary.
struct RatioRecord {
    let section: String
    let name: String
    /// Numerator's median over the denominator's.
    let ratio: Double
    let target: String?
    let passes: Bool?
}

// MARK: - Timing and statistics

/// Monotonic time, in nanoseconds.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Seconds taken by `work`.
@inline(__always)
func seconds(_ work: () throws -> Void) rethrows -> Double {
    let start = monotonicNanoseconds()
    try work()
    return Double(monotonicNanoseconds() - start) / 1e9
}

/// The figures of several runs.
struct Samples {
    private(set) var values: [Double] = []

    init(_ values: [Double] = []) { self.values = values }

    mutating func append(_ value: Double) { values.append(value) }

    var isEmpty: Bool { values.isEmpty }

    var median: Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    var min: Double { values.min() ?? .nan }
    var max: Double { values.max() ?? .nan }

    /// The same samples mapped one by one (e.g. seconds to a rate).
    func map(_ transform: (Double) -> Double) -> Samples { Samples(values.map(transform)) }

    /// `median [min–max]`, with `decimals` digits.
    func formatted(decimals: Int = 0) -> String {
        guard !values.isEmpty else { return "—" }
        return "\(format(median, decimals: decimals)) [\(format(min, decimals: decimals))–\(format(max, decimals: decimals))]"
    }
}

/// Wilcoxon's signed-rank test, one-sided and exact (ties share their ranks, zeros are left
/// out): how likely differences that are only noise (each as likely either sign) were to
/// lean as far to the positive side as these do.
enum SignedRank {
    /// Below this chance, the differences are taken not to be noise.
    static let significance = 0.05
    /// The fewest differences that can go below `significance` (1/32 for five).
    static let fewestRounds = 5

    /// The chance that the rank sum of the positive differences is as large as it is here,
    /// had every sign been a coin toss; nil with fewer than `fewestRounds` nonzero differences.
    static func oneSidedChance(_ differences: [Double]) -> Double? {
        let nonzero = differences.filter { $0 != 0 && $0.isFinite }
        guard nonzero.count >= fewestRounds else { return nil }
        // Ranks of the sizes, ties sharing the mean of theirs, doubled to stay whole.
        let order = nonzero.indices.sorted { abs(nonzero[$0]) < abs(nonzero[$1]) }
        var doubledRanks = [Int](repeating: 0, count: nonzero.count)
        var first = 0
        while first < order.count {
            var last = first
            while last + 1 < order.count, abs(nonzero[order[last + 1]]) == abs(nonzero[order[first]]) { last += 1 }
            for position in first...last { doubledRanks[order[position]] = first + last + 2 }
            first = last + 1
        }
        let observed = zip(nonzero, doubledRanks).reduce(0) { $0 + ($1.0 > 0 ? $1.1 : 0) }
        // How many of the 2^n sign choices give each sum: one rank at a time.
        let total = doubledRanks.reduce(0, +)
        var ways = [Double](repeating: 0, count: total + 1)
        ways[0] = 1
        for rank in doubledRanks {
            for sum in stride(from: total, through: rank, by: -1) { ways[sum] += ways[sum - rank] }
        }
        let atLeast = ways[observed...].reduce(0, +)
        return atLeast / pow(2, Double(nonzero.count))
    }
}

/// Two servers' figures compared round by round (each measured in every round, side by
/// side): one's over the other's in each round, and how likely two of the same were to
/// differ so by chance, each way.
struct RoundByRound {
    let ratios: Samples
    /// The chance that two of the same differ so with the first worse (a lower rate, or more
    /// CPU per unit of work), and with it better; nil with too few rounds.
    let worseChance: Double?
    let betterChance: Double?

    /// nil unless every round of both was measured.
    init?(_ over: Samples, _ under: Samples, higherIsBetter: Bool) {
        guard over.values.count == under.values.count, !under.isEmpty else { return nil }
        ratios = Samples(zip(over.values, under.values).map { $0 / $1 })
        let worse = ratios.values.map { higherIsBetter ? -log($0) : log($0) }
        worseChance = SignedRank.oneSidedChance(worse)
        betterChance = SignedRank.oneSidedChance(worse.map { -$0 })
    }

    /// `0.98× [0.85–1.10]`: the median ratio and its range.
    var text: String { "\(format(ratios.median, decimals: 2))× [\(format(ratios.min, decimals: 2))–\(format(ratios.max, decimals: 2))]" }
}

/// Keeps a value alive as far as the optimizer can tell.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

// MARK: - Formatting

/// `value` with `decimals` digits after the point and thin thousands separators (`,`).
func format(_ value: Double, decimals: Int = 0) -> String {
    guard value.isFinite else { return value.isNaN ? "—" : "∞" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    let whole = UInt64(scaled / scale)
    let fraction = UInt64(scaled - Double(whole) * scale)
    var digits = String(whole)
    var grouped = ""
    while digits.count > 3 {
        grouped = "," + digits.suffix(3) + grouped
        digits.removeLast(3)
    }
    grouped = digits + grouped
    if decimals > 0 {
        let fractionText = String(fraction)
        grouped += "." + String(repeating: "0", count: decimals - fractionText.count) + fractionText
    }
    return (value < 0 && scaled != 0 ? "-" : "") + grouped
}

func format(_ value: Int) -> String { format(Double(value)) }

/// A byte count in binary units when it is a round one (`256 MiB`), else in bytes.
func formatBytes(_ count: Int) -> String {
    if count >= 1 << 30, count % (1 << 30) == 0 { return "\(count >> 30) GiB" }
    if count >= 1 << 20, count % (1 << 20) == 0 { return "\(count >> 20) MiB" }
    if count >= 1 << 10, count % (1 << 10) == 0 { return "\(count >> 10) KiB" }
    return "\(format(count)) B"
}

/// A plain text table with columns sized to their contents.
struct Table {
    enum Alignment { case left, right }

    let headers: [String]
    let alignments: [Alignment]
    private var rows: [[String]] = []

    init(_ columns: [(String, Alignment)]) {
        headers = columns.map(\.0)
        alignments = columns.map(\.1)
    }

    mutating func append(_ row: [String]) {
        precondition(row.count == headers.count, "a row needs one cell per column")
        rows.append(row)
    }

    func render(indent: String = "  ") -> String {
        var widths = headers.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = Swift.max(widths[index], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var text = indent
            for (index, cell) in cells.enumerated() {
                let padding = String(repeating: " ", count: widths[index] - cell.count)
                text += alignments[index] == .left ? cell + padding : padding + cell
                if index < cells.count - 1 { text += "  " }
            }
            while text.last == " " { text.removeLast() }
            return text
        }
        var lines = [line(headers)]
        lines.append(indent + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        lines += rows.map(line)
        return lines.joined(separator: "\n")
    }
}

/// The working directory, for making a relative path absolute.
func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return "." }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func printError(_ text: String) {
    var standardError = StandardError()
    print(text, to: &standardError)
}

private struct StandardError: TextOutputStream {
    mutating func write(_ string: String) { writeToStandardError(string) }
}

private func writeToStandardError(_ string: String) {
    flushOutput()
    var text = string
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { break }
            offset += written
        }
    }
}

/// Flushes standard output (all C streams), so progress shows while a benchmark runs.
func flushOutput() { fflush(nil) }

// MARK: - Targets

/// A figure set by the issue, checked against a measurement.
struct TargetCheck {
    enum Comparison { case atLeast, below }

    let name: String
    /// The measured median (or, for a peak, the largest value measured).
    let measured: Double
    /// At least this much passes (`.atLeast`), or less than this (`.below`).
    let target: Double
    let unit: String
    /// Where the target comes from.
    let source: String
    var comparison: Comparison = .atLeast

    var passes: Bool { comparison == .atLeast ? measured >= target : measured < target }
}

func renderTargets(_ targets: [TargetCheck]) -> String {
    var table = Table([
        ("target (median ≥ target passes; peaks: < target)", .left), ("measured", .right), ("target", .right),
        ("", .left), ("of target", .right), ("result", .left), ("source", .left),
    ])
    for target in targets {
        table.append([
            target.name, format(target.measured, decimals: target.measured < 100 ? 1 : 0),
            (target.comparison == .atLeast ? "≥ " : "< ") + format(target.target), target.unit,
            format(100 * target.measured / target.target) + " %", target.passes ? "PASS" : "BELOW", target.source,
        ])
    }
    return table.render()
}

// MARK: - Machine context

/// What the machine was like when the figures were taken: the machine is shared and noisy.
enum MachineContext {
    static func date() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %z", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// One line with the load average, so that every section's figures name their load.
    static func printLoadAverage(_ when: String) {
        print("  load avg:  \(loadAverage()) \(when)")
        flushOutput()
    }

    static func loadAverage() -> String {
        guard let text = readTextFile("/proc/loadavg") else { return "unknown" }
        // "0.65 0.19 0.05 2/89 6367": 1, 5, 15 minutes, runnable/total tasks, last pid.
        let fields = text.split(separator: " ")
        guard fields.count >= 4 else { return text }
        return "\(fields[0]) \(fields[1]) \(fields[2]) (1/5/15 min; runnable/tasks \(fields[3]))"
    }

    static func processorCount() -> String {
        let online = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        // What `nproc` prints: the CPUs this process may run on (its affinity mask), which
        // /proc/self/status lists as e.g. "Cpus_allowed_list:\t0-1".
        let status = readTextFile("/proc/self/status") ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("Cpus_allowed_list:") {
            let list = line.dropFirst("Cpus_allowed_list:".count).filter { $0 != " " && $0 != "\t" }
            var usable = 0
            for item in list.split(separator: ",") {
                let bounds = item.split(separator: "-").compactMap { Int($0) }
                if bounds.count == 2 { usable += bounds[1] - bounds[0] + 1 } else if bounds.count == 1 { usable += 1 }
            }
            return "\(usable) (nproc; \(online) online)"
        }
        return "\(online) online"
    }

    static func processorModel() -> String {
        guard let text = readTextFile("/proc/cpuinfo") else { return "unknown" }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            if let colon = line.firstIndex(of: ":") {
                return String(line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" })
            }
        }
        return "unknown"
    }

    static func kernel() -> String {
        var names = utsname()
        uname(&names)
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return "\(text(names.sysname)) \(text(names.release)) \(text(names.machine))"
    }

    /// The TCP congestion control new connections get: every server here talks over
    /// loopback, and BBR's pacing there stalls some answers of a kept-alive connection
    /// (the README's object-store figures show what that does to a Range GET's p99).
    static func congestionControl() -> String {
        readTextFile("/proc/sys/net/ipv4/tcp_congestion_control")?.split(whereSeparator: \.isWhitespace).first.map(String.init) ?? "unknown"
    }

    static func buildConfiguration() -> String {
        var configuration: String
        #if DEBUG
        configuration = "DEBUG build (-Onone): figures are meaningless, use `swift build -c release`"
        #else
        configuration = "release (optimized, no DEBUG)"
        #endif
        #if compiler(>=6.3)
        configuration += ", Swift compiler ≥ 6.3"
        #elseif compiler(>=6.0)
        configuration += ", Swift compiler 6.0–6.2"
        #endif
        return configuration
    }

    static func readTextFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while text.last == "\n" { text.removeLast() }
        return text
    }
}
