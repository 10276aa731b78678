// Processes and files of the server suites: running commands (curl, wrk, sha256sum, dd),
// /proc readings (CPU time, peak RSS), and the clean-up of the servers under test
// (ServersUnderTest.swift) and their folders, also on Ctrl-C or SIGTERM.

import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Clean-up

/// The child processes and temporary folders alive right now. The sections remove what
/// they start in `defer`s; this registry is for an interruption (SIGINT, SIGTERM, SIGHUP),
/// when the `defer`s do not run: then every registered process is stopped and every
/// registered folder removed before the benchmark exits.
final class CleanupRegistry: Sendable {
    static let shared = CleanupRegistry()

    private struct State {
        var processes: [Int32: Int32] = [:]  // pid → the signal that stops it
        var folders: Set<String> = []
    }
    private let state = Mutex(State())
    private let installed = Atomic<Bool>(false)

    func add(process pid: Int32, stopSignal: Int32 = SIGTERM) { state.withLock { $0.processes[pid] = stopSignal } }
    func remove(process pid: Int32) { _ = state.withLock { $0.processes.removeValue(forKey: pid) } }
    func add(folder path: String) { _ = state.withLock { $0.folders.insert(path) } }
    func remove(folder path: String) { _ = state.withLock { $0.folders.remove(path) } }

    /// Installs the signal handlers, once. A handler only writes a byte to a pipe (what a
    /// signal handler may do); a thread waiting on the pipe does the clean-up. Handlers
    /// (unlike ignored signals) are reset in the children at exec, so the servers still
    /// get their own SIGTERM.
    func installSignalHandlers() {
        guard !installed.exchange(true, ordering: .relaxed) else { return }
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else { return }
        signalPipeWriteEnd.store(descriptors[1], ordering: .relaxed)
        let readEnd = descriptors[0]
        let thread = Thread { [self] in
            var signalNumber: UInt8 = 0
            while read(readEnd, &signalNumber, 1) != 1 {}
            printError("\ncounterpart-bench: interrupted (signal \(signalNumber)): stopping the servers and removing temporary files")
            cleanUpEverything()
            _exit(128 + Int32(signalNumber))
        }
        thread.start()
        for signalNumber in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = forwardSignal
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(signalNumber, &action, nil)
        }
    }

    private func cleanUpEverything() {
        let (processes, folders) = state.withLock { ($0.processes, $0.folders) }
        var all = processes
        for (pid, _) in processes {
            for child in ProcFS.children(of: pid) { all[child] = SIGKILL }
        }
        for (pid, stopSignal) in all { kill(pid, stopSignal) }
        let deadline = monotonicNanoseconds() + 3_000_000_000
        while monotonicNanoseconds() < deadline, all.keys.contains(where: { ProcFS.isAlive($0) }) { usleep(20_000) }
        for pid in all.keys where ProcFS.isAlive(pid) { kill(pid, SIGKILL) }
        for folder in folders { try? FileManager.default.removeItem(atPath: folder) }
    }
}

private let signalPipeWriteEnd = Atomic<Int32>(-1)

private let forwardSignal: @convention(c) (Int32) -> Void = { signalNumber in
    var byte = UInt8(truncatingIfNeeded: signalNumber)
    _ = write(signalPipeWriteEnd.load(ordering: .relaxed), &byte, 1)
}

// MARK: - /proc

enum ProcFS {
    /// Whether `pid` exists and is not a zombie.
    static func isAlive(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = MachineContext.readTextFile("/proc/\(pid)/stat"),
              let close = stat.lastIndex(of: ")") else { return false }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.first != "Z"
    }

    /// The processes whose parent is `pid` (e.g. nginx's workers).
    static func children(of pid: Int32) -> [Int32] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var children: [Int32] = []
        for name in names {
            guard let child = Int32(name), let stat = MachineContext.readTextFile("/proc/\(child)/stat"),
                  let close = stat.lastIndex(of: ")") else { continue }
            // "pid (comm) state ppid …": comm may hold spaces and parentheses.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == pid { children.append(child) }
        }
        return children
    }

    /// All processes below `pid`: its children, theirs, and so on.
    static func descendants(of pid: Int32) -> [Int32] {
        var found: [Int32] = []
        var pending = [pid]
        while let next = pending.popLast() {
            let direct = children(of: next)
            found += direct
            pending += direct
        }
        return found
    }

    /// CPU time of `pid` in seconds: user + system of all its threads (exited ones included)
    /// and of its children it has waited for.
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let stat = MachineContext.readTextFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        // After "(comm)": state is field 3; utime, stime, cutime and cstime are fields 14–17.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 14, let user = Double(fields[11]), let system = Double(fields[12]),
              let childrenUser = Double(fields[13]), let childrenSystem = Double(fields[14]) else { return nil }
        return (user + system + childrenUser + childrenSystem) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A `kB` field of /proc/PID/status (`VmHWM`, `VmRSS`), in bytes.
    static func statusBytes(_ pid: Int32, field: String) -> Int? {
        guard let status = MachineContext.readTextFile("/proc/\(pid)/status") else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.dropFirst(field.count + 1).filter { $0.isNumber }
            return Int(number).map { $0 * 1024 }
        }
        return nil
    }

    /// Resets the peak RSS (`VmHWM`) of `pid` to its current RSS (`echo 5 > clear_refs`,
    /// Linux ≥ 4.0). False when not permitted.
    @discardableResult
    static func resetPeakRSS(_ pid: Int32) -> Bool {
        let descriptor = open("/proc/\(pid)/clear_refs", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return write(descriptor, "5", 1) == 1
    }

    /// Free bytes for an unprivileged user on the file system of `path`.
    static func freeBytes(at path: String) -> UInt64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }
}

// MARK: - Commands

/// Finds an executable in PATH and the sbin folders (nginx is in /usr/sbin, which is not
/// in every user's PATH).
func findExecutable(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let folders = path.split(separator: ":").map(String.init) + ["/usr/local/sbin", "/usr/sbin", "/sbin"]
    for folder in folders where access(folder + "/" + name, X_OK) == 0 {
        return folder + "/" + name
    }
    return nil
}

/// The folder of this executable (where `swift build` also puts `counterpart`).
func executableFolder() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { return ".build/release" }
    let path = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
}

struct CommandResult {
    var status: Int32
    var output: String
    var errorOutput: String
    var timedOut: Bool
}

/// Collects what a background reader reads.
private final class DataBox: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ value: Data) { lock.lock(); data = value; lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}

/// Runs a command to its end and returns its status and output; it is killed after
/// `timeout` seconds.
func runCommand(_ executable: String, _ arguments: [String], timeout: Double = 600) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    do {
        try process.run()
    } catch {
        throw BenchFailure("cannot run \(executable): \(error)")
    }
    let pid = process.processIdentifier
    CleanupRegistry.shared.add(process: pid, stopSignal: SIGKILL)
    defer { CleanupRegistry.shared.remove(process: pid) }

    let errorBox = DataBox()
    let errorsRead = DispatchSemaphore(value: 0)
    let errorHandle = errors.fileHandleForReading
    DispatchQueue.global().async {
        errorBox.set(errorHandle.readDataToEndOfFile())
        errorsRead.signal()
    }
    let timedOut = Atomic<Bool>(false)
    let watchdog = DispatchWorkItem {
        if process.isRunning {
            timedOut.store(true, ordering: .relaxed)
            kill(pid, SIGKILL)
        }
    }
    DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
    let outputData = output.fileHandleForReading.readDataToEndOfFile()
    errorsRead.wait()
    process.waitUntilExit()
    watchdog.cancel()
    return CommandResult(
        status: process.terminationStatus,
        output: String(decoding: outputData, as: UTF8.self),
        errorOutput: String(decoding: errorBox.get(), as: UTF8.self),
        timedOut: timedOut.load(ordering: .relaxed))
}

/// A server started in a session of its own (`setsid`), as a service manager or a shell's
/// `setsid`/`nohup &` starts one, and as independent benchmark harnesses do. It matters on
/// Linux: the scheduler shares the CPU between sessions first (autogroups), so a server in
/// the benchmark's own session would get the CPU time of the clients measuring it, and one
/// with several threads would be measured as if it had a machine of its own.
final class SessionProcess: @unchecked Sendable {
    let pid: Int32
    private let lock = NSLock()
    private var exitStatus: Int32?

    /// Runs `executable` with `arguments`; its stdin comes from `input` (nil: /dev/null), its
    /// stdout goes to `output` (nil: /dev/null), its stderr to the file at `errorPath` (nil:
    /// /dev/null).
    init(_ executable: String, _ arguments: [String], input: Int32? = nil, output: Int32? = nil, errorPath: String? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let output {
            posix_spawn_file_actions_adddup2(&actions, output, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, errorPath ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The children get the default signal dispositions and mask, whatever the bench set.
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        // POSIX_SPAWN_SETSID: glibc's value (since 2.26), which Swift's Glibc module does not
        // import (it is a GNU extension); elsewhere no new session.
        #if canImport(Glibc)
        let newSession: Int16 = 0x80
        let environment = Glibc.environ
        #else
        let newSession: Int16 = 0
        let environment = Musl.environ
        #endif
        posix_spawnattr_setflags(&attributes, newSession | Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, environment)
        guard status == 0 else { throw BenchFailure("cannot run \(executable): \(String(cString: strerror(status)))") }
        pid = child
    }

    /// False once the process has ended (it is reaped then).
    var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        guard exitStatus == nil else { return false }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        guard reaped == pid || (reaped < 0 && errno == ECHILD) else { return true }
        exitStatus = status
        return false
    }

    /// The raw wait status once the process has ended.
    var terminationStatus: Int32? {
        guard !isRunning else { return nil }
        lock.lock()
        defer { lock.unlock() }
        return exitStatus
    }
}

/// Waits until `process` has exited, for up to `seconds`; false if it still runs.
func waitForExit(_ process: SessionProcess, seconds: Double) -> Bool {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    while process.isRunning {
        if monotonicNanoseconds() > deadline { return false }
        usleep(10_000)
    }
    return true
}

// MARK: - Sockets

enum LoopbackPort {
    /// A port that was free a moment ago (bound to port 0, read back, closed).
    static func free() -> UInt16? {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { return nil }
        defer { close(socketDescriptor) }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(socketDescriptor, pointer, length) == 0 && getsockname(socketDescriptor, pointer, &length) == 0
            }
        }
        return bound ? UInt16(bigEndian: address.sin_port) : nil
    }

    /// Whether something accepts connections on 127.0.0.1:`port`.
    static func accepts(_ port: UInt16) -> Bool {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { return false }
        defer { close(socketDescriptor) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
