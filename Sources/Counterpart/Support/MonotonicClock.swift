
/// The clock the server measures time spans with: monotonic, so that a change of the
/// wall clock never makes a request look longer or a throttle let more through.
enum MonotonicClock {
    /// Seconds from an arbitrary start (`CLOCK_MONOTONIC`): only the difference of two
    /// readings means anything.
    static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// `seconds()` in nanoseconds, as an integer (for a clock kept in an atomic).
    static func nanoseconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return now.tv_sec * 1_000_000_000 + now.tv_nsec
    }
}

extension Duration {
    /// The span in seconds, with its fraction.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
