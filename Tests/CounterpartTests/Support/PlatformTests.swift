@testable import Counterpart
import Foundation
import Glibc
import Testing

/// The portable fallbacks of Support/Platform.swift (what macOS runs), run on Linux beside
/// the Linux calls they stand in for. `make test` also runs the static-file, escape and
/// upload suites with COUNTERPART_PORTABLE_FALLBACKS=1, so the whole server uses them.
@Suite("Platform: the portable fallbacks")
struct PlatformTests {
    enum Outcome: Equatable, Sendable {
        case contents(String)
        case error(Int32)
    }

    /// A folder `served` with a file, a subfolder, and symlinks in and out, beside a file `outside`.
    final class Tree {
        let top = FileManager.default.temporaryDirectory.appendingPathComponent("platform-\(UUID().uuidString)")
        let served: URL
        let folder: Int32

        init() throws {
            served = top.appendingPathComponent("served")
            let manager = FileManager.default
            try manager.createDirectory(at: served.appendingPathComponent("sub/deeper"), withIntermediateDirectories: true)
            try Data("file".utf8).write(to: served.appendingPathComponent("file.txt"))
            try Data("inner".utf8).write(to: served.appendingPathComponent("sub/deeper/inner.txt"))
            try Data("secret".utf8).write(to: top.appendingPathComponent("outside.txt"))
            let links = [
                ("inside", "file.txt"), ("sub/up", "../file.txt"), ("subfolder", "sub"), ("sub/deeper/toTop", "../../file.txt"),
                ("out", "../outside.txt"), ("absolute", top.appendingPathComponent("outside.txt").path),
                ("sub/outFromSub", "../../outside.txt"), ("loopA", "loopB"), ("loopB", "loopA"),
                ("dangling", "missing.txt"), ("here", "."),
            ]
            for (name, target) in links {
                try manager.createSymbolicLink(atPath: served.appendingPathComponent(name).path, withDestinationPath: target)
            }
            folder = open(served.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard folder >= 0 else { throw POSIXError(.ENOENT) }
        }

        deinit {
            close(folder)
            try? FileManager.default.removeItem(at: top)
        }

        /// The contents read through the descriptor, or the errno of a failed open.
        func read(_ path: String, portable: Bool) -> Outcome {
            let descriptor = Platform.openBeneath(folder, path, flags: O_RDONLY | O_CLOEXEC | O_NONBLOCK, portable: portable)
            guard descriptor >= 0 else { return .error(errno) }
            defer { close(descriptor) }
            var info = stat()
            fstat(descriptor, &info)
            if info.st_mode & S_IFMT == S_IFDIR { return .contents("<folder>") }
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = Glibc.read(descriptor, &buffer, buffer.count)
            return .contents(String(decoding: buffer[..<max(0, count)], as: UTF8.self))
        }
    }

    static let cases: [(path: String, expected: Outcome)] = [
        ("file.txt", .contents("file")),
        (".", .contents("<folder>")),
        ("sub", .contents("<folder>")),
        ("sub/deeper/inner.txt", .contents("inner")),
        ("sub//deeper/./inner.txt", .contents("inner")),
        ("sub/../file.txt", .contents("file")),
        ("inside", .contents("file")),
        ("sub/up", .contents("file")),
        ("subfolder/deeper/inner.txt", .contents("inner")),
        ("sub/deeper/toTop", .contents("file")),
        ("here/here/file.txt", .contents("file")),
        ("out", .error(EXDEV)),
        ("absolute", .error(EXDEV)),
        ("sub/outFromSub", .error(EXDEV)),
        ("..", .error(EXDEV)),
        ("../outside.txt", .error(EXDEV)),
        ("sub/../../outside.txt", .error(EXDEV)),
        ("loopA", .error(ELOOP)),
        ("dangling", .error(ENOENT)),
        ("missing.txt", .error(ENOENT)),
        ("file.txt/more", .error(ENOTDIR)),
    ]

    /// The walk gives what openat2 with RESOLVE_BENEATH gives, path by path.
    @Test(arguments: cases)
    func confinedOpenMatchesTheKernel(_ path: String, _ expected: Outcome) throws {
        let tree = try Tree()
        #expect(tree.read(path, portable: false) == expected, "openat2")
        #expect(tree.read(path, portable: true) == expected, "the portable walk")
    }

    /// A folder swapped for a symlink that leads out is refused, not followed.
    @Test func aFolderSwappedForASymlinkIsRefused() throws {
        let tree = try Tree()
        let sub = tree.served.appendingPathComponent("sub")
        try FileManager.default.removeItem(at: sub)
        try FileManager.default.createSymbolicLink(atPath: sub.path, withDestinationPath: tree.top.path)
        #expect(tree.read("sub/outside.txt", portable: true) == .error(EXDEV))
        #expect(tree.read("sub/outside.txt", portable: false) == .error(EXDEV))
    }

    /// A kernel without openat2 (ENOSYS) or a seccomp filter that refuses it (EPERM) turns the
    /// portable walk on for opening beneath folders; any other failure of the probe does not.
    @Test func openat2IsGivenUpOnlyWhenTheCallItselfIsRefused() {
        #expect(!Platform.opensBeneath(probe: -1, errno: ENOSYS))
        #expect(!Platform.opensBeneath(probe: -1, errno: EPERM))
        #expect(Platform.opensBeneath(probe: -1, errno: EACCES))
        #expect(Platform.opensBeneath(probe: -1, errno: EMFILE))
        #expect(Platform.opensBeneath(probe: dup(0), errno: 0))
    }

    /// Both ends of a TCP connection on loopback: (the server's, the client's).
    func tcpPair() throws -> [Int32] {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        try #require(bound)
        let client = try connectedSocket(port: UInt16(bigEndian: address.sin_port))
        let server = accept(listener, nil, nil)
        try #require(server >= 0)
        return [server, client]
    }

    @Test func peerClosedIsSeenByBothChecks() throws {
        for portable in [false, true] {
            let pair = try tcpPair()
            defer { close(pair[0]) }
            #expect(!Platform.peerHasClosed(pair[0], portable: portable), "portable: \(portable)")
            close(pair[1])
            #expect(waitUntil { Platform.peerHasClosed(pair[0], portable: portable) }, "portable: \(portable)")
        }
    }

    /// The one difference, documented in Platform.peerHasClosed: a FIN behind unread bytes.
    @Test func aCloseBehindUnreadBytesIsSeenOnlyByPOLLRDHUP() throws {
        let pair = try tcpPair()
        defer { close(pair[0]) }
        #expect(send(pair[1], "unread", 6, 0) == 6)
        close(pair[1])
        #expect(waitUntil { Platform.peerHasClosed(pair[0], portable: false) })
        #expect(!Platform.peerHasClosed(pair[0], portable: true))
    }

    /// `make test` sets COUNTERPART_PORTABLE_FALLBACKS=1 for its second run: this makes sure
    /// the switch reached the server code in that run.
    @Test func theSwitchIsReadFromTheEnvironment() {
        let asked = ProcessInfo.processInfo.environment["COUNTERPART_PORTABLE_FALLBACKS"] == "1"
        #expect(Platform.usesPortableFallbacks == asked)
    }

    /// Support/Platform.swift is the only file of the server that imports the C library or
    /// CLinux, so that the rest compiles on Darwin as it is.
    @Test func onlyThePlatformFileImportsTheCLibrary() throws {
        let sources = repositoryRoot.appendingPathComponent("Sources/Counterpart")
        let files = try #require(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") && $0 != "Support/Platform.swift" }
        #expect(files.count > 20)
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for forbidden in ["import Glibc", "import Darwin", "import CLinux", "Glibc.", "st_mtim", "MSG_NOSIGNAL", "cp_open_beneath", "cp_start_write_back", "cp_peer_has_closed"] {
                #expect(!text.contains(forbidden), "\(file) uses \(forbidden): put it behind Support/Platform.swift")
            }
        }
    }
}
