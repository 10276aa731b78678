import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

/// Holds connections still for a while (faults: delay, rate, stall). In the thread pool
/// the connection is suspended and a timer resumes it; MHD must resume every suspended
/// connection before it stops, and a suspended connection sees no client disconnect, so a
/// stalled one is checked every second. With a thread per connection (where MHD cannot
/// suspend) the connection's own thread sleeps instead, checking the same things.
final class Pauses: Sendable {
    /// What became of a request to hold a connection.
    enum Hold: Equatable {
        /// Suspended (the `n`th suspension): MHD calls again once it resumes.
        case suspended(UInt64)
        /// The wait is over already (a thread per connection slept through it).
        case waited
        /// The server is stopping, or the client left: end the exchange.
        case refused
    }

    private struct State {
        var suspended: [UInt: ConnectionPointer] = [:]
        /// Which suspension each connection in `suspended` is in, for `wake`.
        var suspensions: [UInt: UInt64] = [:]
        var lastSuspension: UInt64 = 0
        /// Stalled connections whose client has gone: cut when they resume.
        var abandoned: Set<UInt> = []
        var stopping = false
    }

    private let state = Mutex(State())
    private let timers = DispatchQueue(label: "counterpart.pauses")
    private let blocking: Bool
    private static let livenessInterval = Duration.seconds(1)

    init(blocking: Bool) { self.blocking = blocking }

    /// Holds `connection` still (from an MHD callback of its own) for `pause`.
    func hold(_ connection: OpaquePointer, for pause: Pause) -> Hold {
        blocking ? sleep(connection, for: pause) : suspend(connection, for: pause)
    }

    private func suspend(_ connection: OpaquePointer, for pause: Pause) -> Hold {
        let key = connectionKey(connection)
        let suspension = state.withLock { state -> UInt64? in
            guard !state.stopping else { return nil }
            // In the table: suspended and not yet asked to resume. libmicrohttpd may still
            // call back before the suspension takes hold (the next chunk of a chunked body);
            // suspending twice is undefined there (its suspended list breaks, connections
            // are lost and the stop aborts), so the second hold only adds its wait.
            if state.suspended[key] == nil {
                MHD_suspend_connection(connection)
                state.suspended[key] = ConnectionPointer(pointer: connection)
                state.lastSuspension += 1
                state.suspensions[key] = state.lastSuspension
            }
            return state.suspensions[key]
        }
        guard let suspension else { return .refused }
        switch pause {
        case .duration(let duration):
            schedule(after: duration) { [self] in resume(key) }
        case .untilClientLeaves:
            watch(key, socket: cp_connection_fd(connection))
        }
        return .suspended(suspension)
    }

    private func sleep(_ connection: OpaquePointer, for pause: Pause) -> Hold {
        let deadline: ContinuousClock.Instant? = switch pause {
        case .duration(let duration): .now + duration
        case .untilClientLeaves: nil
        }
        let socket = cp_connection_fd(connection)
        while true {
            if state.withLock({ $0.stopping }) { return .refused }
            let remaining = deadline.map { $0 - .now } ?? Self.livenessInterval
            if remaining <= .zero { return .waited }
            Thread.sleep(forTimeInterval: min(remaining, Self.livenessInterval).seconds)
            if deadline == nil, Self.peerClosed(socket) { return .refused }
        }
    }

    /// Whether the client of a stalled connection has gone (asked once, after it resumes).
    func clientLeft(_ connection: OpaquePointer) -> Bool {
        state.withLock { $0.abandoned.remove(connectionKey(connection)) != nil }
    }

    /// Resumes every suspended connection and refuses new holds: before MHD stops.
    func resumeAllForStop() {
        state.withLock { state in
            state.stopping = true
            for connection in state.suspended.values { MHD_resume_connection(connection.pointer) }
            state.suspended.removeAll()
            state.suspensions.removeAll()
        }
    }

    private func resume(_ key: UInt) {
        state.withLock { state in
            // Gone from the table: already resumed for the stop.
            if let connection = state.suspended.removeValue(forKey: key) {
                state.suspensions.removeValue(forKey: key)
                MHD_resume_connection(connection.pointer)
            }
        }
    }

    /// Resumes `key`'s connection before its pause is over, if it is still in `suspension`
    /// (not resumed since, by its timer or the stop, and not a later connection at the same
    /// address): the timer's resume then finds it gone. From any thread.
    func wake(_ key: UInt, suspension: UInt64) {
        state.withLock { state in
            guard state.suspensions[key] == suspension, let connection = state.suspended.removeValue(forKey: key) else { return }
            state.suspensions.removeValue(forKey: key)
            MHD_resume_connection(connection.pointer)
        }
    }

    /// Every second, peeks at a stalled connection's socket; once the client has left,
    /// the connection is resumed to be cut.
    private func watch(_ key: UInt, socket: Int32) {
        schedule(after: Self.livenessInterval) { [self] in
            let gone = Self.peerClosed(socket)
            let stillSuspended = state.withLock { state -> Bool in
                guard state.suspended[key] != nil else { return false }
                if gone { state.abandoned.insert(key) }
                return true
            }
            guard stillSuspended else { return }
            if gone { resume(key) } else { watch(key, socket: socket) }
        }
    }

    /// The client has shut its side down or the socket has failed: it has gone (also when
    /// bytes it sent are still unread, as a stalled upload's rest).
    private static func peerClosed(_ socket: Int32) -> Bool { Platform.peerHasClosed(socket) }

    private func schedule(after duration: Duration, _ work: @escaping @Sendable () -> Void) {
        let nanoseconds = Int(duration.seconds * 1e9)
        timers.asyncAfter(deadline: .now() + .nanoseconds(max(0, nanoseconds)), execute: work)
    }
}

/// Resumes one suspension of a connection early (an event stream woken by the next event).
struct Waker: Sendable {
    let pauses: Pauses
    let key: UInt
    let suspension: UInt64

    func wake() { pauses.wake(key, suspension: suspension) }
}

/// A connection handle kept while it is suspended; MHD keeps the connection alive until
/// it is resumed, so the pointer stays valid as long as it is in the table.
struct ConnectionPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}
