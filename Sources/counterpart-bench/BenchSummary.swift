// The machine-readable summary of a run (`--json PATH`, by default .build/bench/summary.json):
// the machine, the load, the options, every figure with its runs, the ratios and the targets,
// so that a run can be compared with another without parsing the printed report.

import Foundation

enum BenchSummary {
    struct Header {
        let date: String
        let processor: String
        let processors: String
        let kernel: String
        let congestionControl: String
        let build: String
        let loadAtStart: String
    }

    /// Writes the summary; returns the path written, or why it could not be.
    static func write(_ context: BenchContext, header: Header, loadAtEnd: String, seconds: Double) -> Result<String, BenchFailure> {
        let options = context.options
        let summary: [String: Any] = [
            "date": header.date,
            "machine": ["cpu": header.processor, "cpus": header.processors, "kernel": header.kernel, "tcp_congestion_control": header.congestionControl],
            "build": header.build,
            "load_average": ["start": header.loadAtStart, "end": loadAtEnd],
            "options": [
                "only": options.only, "filters": options.filters, "runs": options.runs, "quick": options.quick,
                "wrk_seconds": options.wrkSeconds, "peers": options.peersFolder,
                "baseline": options.baselinePath ?? NSNull(),
            ] as [String: Any],
            "seconds": seconds,
            "figures": context.figures.map { figure -> [String: Any] in
                [
                    "section": figure.section, "subject": figure.subject, "metric": figure.metric, "unit": figure.unit,
                    "median": number(figure.samples.median), "min": number(figure.samples.min), "max": number(figure.samples.max),
                    "runs": figure.samples.values.map(number),
                ]
            },
            // The verdicts are in "targets" alone, each with its source, so that no verdict
            // is written twice.
            "ratios": context.ratios.map { ratio -> [String: Any] in
                ["section": ratio.section, "name": ratio.name, "ratio": number(ratio.ratio)]
            },
            "targets": context.targets.map { target -> [String: Any] in
                [
                    "name": target.name, "measured": number(target.measured),
                    "target": (target.comparison == .atLeast ? ">= " : "< ") + format(target.target) + " " + target.unit,
                    "passes": target.passes, "source": target.source,
                ]
            },
        ]
        do {
            let data = try JSONSerialization.data(withJSONObject: summary, options: [.prettyPrinted, .sortedKeys])
            let url = URL(fileURLWithPath: options.jsonPath)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url)
            return .success(options.jsonPath)
        } catch {
            return .failure(BenchFailure("cannot write \(options.jsonPath): \(error)"))
        }
    }

    /// JSON has no NaN or infinity: a figure that was not measured is null.
    private static func number(_ value: Double) -> Any { value.isFinite ? value : NSNull() }
}
