// counterpart-bench: performance report of Counterpart (run by `make bench`).
//
// Each suite is a `BenchmarkSuite` (see BenchSupport.swift) listed below; a new one (e.g. the
// end-to-end server benchmarks) is added to `suites` and then runs by default and with
// `--only NAME`. The program prints a report and always exits 0 when it ran: the targets
// are printed as PASS/BELOW, not enforced.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

let suites: [BenchmarkSuite] = [
    ParserBenchmarks.suite,
    ServerBenchmarks.suite,
]

if CommandLine.arguments.dropFirst().first == EventsReader.processFlag {
    EventsReaderProcess.run(Array(CommandLine.arguments.dropFirst(2)))
}

let (options, listOnly) = BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))

if listOnly {
    for suite in suites {
        print("\(suite.name): \(suite.summary)")
        for section in suite.sections {
            print("  \(suite.name)/\(section.name)\(section.runsByDefault ? "" : " (only when named)"): \(section.summary)")
        }
    }
    exit(0)
}

let known = Set(suites.flatMap { suite in [suite.name] + suite.sections.map { "\(suite.name)/\($0.name)" } })
if let unknown = options.only.first(where: { !known.contains($0) }) {
    printError("counterpart-bench: no suite or section \"\(unknown)\"; known: \(known.sorted().joined(separator: ", "))")
    exit(2)
}

let startTime = monotonicNanoseconds()
let header = BenchSummary.Header(
    date: MachineContext.date(), processor: MachineContext.processorModel(), processors: MachineContext.processorCount(),
    kernel: MachineContext.kernel(), congestionControl: MachineContext.congestionControl(), build: MachineContext.buildConfiguration(), loadAtStart: MachineContext.loadAverage())
print("""
    counterpart-bench — \(header.date)
      machine:   \(header.processor), CPUs: \(header.processors), \(header.kernel), TCP congestion control: \(header.congestionControl)
      load avg:  \(header.loadAtStart) at start
      build:     \(header.build)
      method:    each figure is the median of \(options.runs) timed run(s) after one warm-up, [min–max] beside it\
    \(options.quick ? "\n  QUICK MODE: bodies are 1/8 of their size, short runs; figures are indicative only" : "")
    """)
flushOutput()

let context = BenchContext(options: options)
for suite in suites {
    let selected = suite.sections.filter { options.wants(suite: suite.name, section: $0) }
    guard !selected.isEmpty else { continue }
    for section in selected {
        section.run(context)
        flushOutput()
    }
    suite.finish()
    flushOutput()
}

if !context.ratios.isEmpty {
    print("\nRatios (medians of the same run; CPU ratios are server CPU per request or per GB, lower is cheaper)")
    var table = Table([("section", .left), ("ratio", .left), ("value", .right), ("target", .left), ("result", .left)])
    for ratio in context.ratios {
        table.append([ratio.section, ratio.name, format(ratio.ratio, decimals: 2) + "×", ratio.target ?? "",
                      ratio.passes.map { $0 ? "PASS" : "BELOW" } ?? ""])
    }
    print(table.render())
}

if !context.targets.isEmpty {
    print("\nTargets (from the issue; a report, not a test: the exit status is 0 either way)")
    print(renderTargets(context.targets))
}

let elapsed = Double(monotonicNanoseconds() - startTime) / 1e9
let loadAtEnd = MachineContext.loadAverage()
print("""

    load avg:  \(loadAtEnd) at end
    total:     \(format(elapsed, decimals: 1)) s
    """)
switch BenchSummary.write(context, header: header, loadAtEnd: loadAtEnd, seconds: elapsed) {
case .success(let path): print("summary:   \(path) (JSON)")
case .failure(let failure): print("summary:   NOT WRITTEN: \(failure)")
}
exit(0)
