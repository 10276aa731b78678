@testable import Counterpart
import Foundation
import Testing

/// The command with `--auth-file` and `--token-file`, `counterpart hash-password`, the
/// warning on a network address, and a brute-force run against the running process.
@Suite("Access control: the command")
struct AuthCommandTests {
    func writeFile(_ folder: URL, _ name: String, _ text: String) throws -> String {
        let file = folder.appendingPathComponent(name)
        try Data(text.utf8).write(to: file)
        return file.path
    }

    func hashPassword(_ arguments: [String], stdin: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = try counterpartExecutable()
        process.arguments = ["hash-password"] + arguments
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(Data(stdin.utf8))
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }

    /// The line hash-password prints goes into an auth file as it is, and its password opens the server.
    @Test func hashPasswordMakesALineTheServerTakes() throws {
        let yescrypt = try hashPassword(["alice", "read,write"], stdin: "correct horse\n")
        #expect(yescrypt.status == 0, "\(yescrypt.stderr)")
        #expect(yescrypt.stdout.hasPrefix("alice:$y$j9T$") && yescrypt.stdout.hasSuffix(":read,write\n"), "\(yescrypt.stdout)")
        let bcrypt = try hashPassword(["--bcrypt", "--cost", "4"], stdin: "correct horse\r\n")
        #expect(bcrypt.status == 0)
        #expect(bcrypt.stdout.hasPrefix("$2b$04$") && bcrypt.stdout.count == 61, "\(bcrypt.stdout)")
        #expect(try hashPassword(["--bcrypt"], stdin: "x\n").stdout.hasPrefix("$2b$10$"))
        #expect(try hashPassword([], stdin: "").status == 2)
        #expect(try hashPassword(["bob", "read,admin"], stdin: "x\n").status == 2)

        let folder = try makeFolder(serving: ["hi.txt": "hi"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let auth = try writeFile(folder, "users", "# made by hash-password\n" + yescrypt.stdout + "bob:" + bcrypt.stdout.dropLast() + ":read\n")
        let run = try CommandRun(["--port", "0", "--quiet", "--auth-file", auth], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        #expect(try curl(["-u", "alice:correct horse", base + "/hi.txt"]).text == "hi")
        #expect(try curl(["-u", "bob:correct horse", base + "/hi.txt"]).text == "hi")
        #expect(try curl(["-u", "alice:correct horsf", base + "/hi.txt"]).status == 401)
        run.process.terminate()
        #expect(run.waitForExit().status == 0)
    }

    /// A file that cannot be used stops the start with its name and line, and never shows a secret.
    @Test func aBadCredentialFileExits1NamingTheLine() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let cases: [(flag: String, text: String, message: String)] = [
            ("--auth-file", "alice:$1$abc$md5isnotok:read\n", "line 1: the hash is not a complete yescrypt ($y$) or bcrypt ($2b$) crypt(3) hash"),
            ("--auth-file", "\n\nalice:$y$j9T$:read\n", "line 3: the hash is not a complete"),
            ("--auth-file", "alice:hash\n", "line 1: a line is name:secret:rights (three fields separated by colons), this one has 2"),
            ("--auth-file", "# nobody\n", "has no credentials"),
            ("--token-file", "ci:short-token:read\n", "line 1: the token must be at least 16 characters"),
            ("--token-file", "ci:read-token-0123456789abcdef:read,delete\n", "line 1: the rights \"read,delete\" are not a comma-separated set of read, write and control"),
            ("--token-file", "a:read-token-0123456789abcdef:read\nb:read-token-0123456789abcdef:write\n", "line 2: this token is already on an earlier line"),
        ]
        for (flag, text, message) in cases {
            let file = try writeFile(folder, "credentials", text)
            let result = try runCommand(try counterpartExecutable().path, ["--port", "0", flag, file])
            #expect(result.status == 1, "\(text)")
            #expect(result.output.contains(file + " " + message), "\(result.output)")
            #expect(!result.output.contains("read-token-0123456789abcdef") && !result.output.contains("md5isnotok"))
        }
        let missing = try runCommand(try counterpartExecutable().path, ["--port", "0", "--auth-file", folder.appendingPathComponent("none").path])
        #expect(missing.status == 1)
        #expect(missing.output.contains("cannot read"))
    }

    @Test func anAddressOtherThanLoopbackWithoutCredentialsIsSaidOnce() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--host", "0.0.0.0"], in: folder)
        #expect(run.firstLine().hasPrefix("listening on http://0.0.0.0:"))
        run.process.terminate()
        let result = run.waitForExit()
        let warnings = result.stderr.split(separator: "\n").filter { $0.contains("warning") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.hasPrefix("counterpart: warning: listening on 0.0.0.0 without --auth-file or --token-file: anyone who reaches port") == true)
        #expect(warnings.first?.hasSuffix("/__counterpart/ (the journal, clearing uploads) answers only this machine") == true)

        let loopback = try CommandRun(["--port", "0"], in: folder)
        _ = loopback.firstLine()
        loopback.process.terminate()
        #expect(!loopback.waitForExit().stderr.contains("warning"))
    }

    /// 1,000 wrong passwords on four keep-alive connections: every one answered 401, the
    /// right password still works, memory stays flat, and the log (the access log on) says
    /// so in at most a line a second. (The users' hashes are bcrypt at cost 4: see
    /// TestCredentials.)
    @Test func aThousandWrongPasswordsAreAnsweredAndLoggedAtMostOnceASecond() throws {
        let folder = try makeFolder(serving: ["hi.txt": "hi"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let auth = try writeFile(folder, "users", TestCredentials.authFile)
        let run = try CommandRun(["--port", "0", "--auth-file", auth], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
        @Sendable func guess(_ count: Int, _ worker: Int) throws -> [Int] {
            let connection = try RawHTTPConnection(port: port)
            return (0..<count).map { attempt in
                connection.send("GET /hi.txt HTTP/1.1\r\nHost: x\r\n\(TestCredentials.basic("reader", "guess-\(worker)-\(attempt)"))\r\n\r\n")
                return connection.readResponse().flatMap { statusCode(of: $0.head) } ?? 0
            }
        }
        _ = try guess(20, 9)
        let before = try residentKilobytes(run.process.processIdentifier)
        let started = Date()
        let workers = (0..<4).map { worker in BackgroundCall { try guess(250, worker) } }
        let statuses = try workers.flatMap { try $0.wait() }
        let seconds = Date().timeIntervalSince(started)
        let after = try residentKilobytes(run.process.processIdentifier)
        #expect(statuses.count == 1000)
        #expect(statuses.allSatisfy { $0 == 401 }, "\(Set(statuses))")
        #expect(after - before < 16_384, "resident memory grew from \(before) to \(after) KiB")
        #expect(try curl(["-u", "reader:pw-reader", base + "/hi.txt"]).text == "hi")
        run.process.terminate()
        let result = run.waitForExit()
        let lines = result.stderr.split(separator: "\n").filter { $0.contains("refused credential") }
        #expect(!lines.isEmpty)
        #expect(!result.stderr.contains(" 401 "), "a refusal got an access-log line of its own")
        #expect(result.stderr.contains("127.0.0.1 GET /hi.txt 200 2 "))
        #expect(Double(lines.count) <= seconds.rounded(.up) + 1, "\(lines.count) lines in \(seconds) s")
        #expect(lines.last?.contains("(the latest user \"reader\" from 127.0.0.1)") == true, "\(lines)")
        let counted = lines.compactMap { Int($0.split(separator: " ")[1]) }.reduce(0, +)
        #expect(counted >= 1 && counted <= 1020)
        print("1,000 wrong passwords (bcrypt cost 4) in \(String(format: "%.2f", seconds)) s; resident memory \(before) → \(after) KiB; \(lines.count) log lines")
    }

    /// yescrypt at its default cost takes 16 MiB a check. With a thread per connection, 16
    /// connections guessing at once would take 256 MiB; the checks wait for one of four
    /// slots instead, so the peak stays near 4 × 16 MiB.
    @Test func guessesAgainstYescryptWaitForAFewSlotsInsteadOfTakingMemory() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let hash = try PasswordHash.make(password: Array("right".utf8))
        #expect(hash.encoded.hasPrefix("$y$j9T$"))
        let auth = try writeFile(folder, "users", "alice:\(hash.encoded):read\n")
        let run = try CommandRun(["--port", "0", "--quiet", "--threads", "0", "--auth-file", auth], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
        let before = try residentKilobytes(run.process.processIdentifier, field: "VmHWM")
        let workers = (0..<16).map { worker in
            BackgroundCall { () throws -> [Int] in
                let connection = try RawHTTPConnection(port: port)
                return (0..<3).map { attempt in
                    connection.send("GET / HTTP/1.1\r\nHost: x\r\n\(TestCredentials.basic("alice", "wrong-\(worker)-\(attempt)"))\r\n\r\n")
                    return connection.readResponse().flatMap { statusCode(of: $0.head) } ?? 0
                }
            }
        }
        let statuses = try workers.flatMap { try $0.wait() }
        let peak = try residentKilobytes(run.process.processIdentifier, field: "VmHWM")
        #expect(statuses == Array(repeating: 401, count: 48))
        #expect(peak - before < 100 << 10, "peak resident memory grew from \(before) to \(peak) KiB")
        run.process.terminate()
        #expect(run.waitForExit().status == 0)
        print("48 yescrypt guesses on 16 connections: peak resident memory \(before) → \(peak) KiB")
    }

    private func residentKilobytes(_ pid: Int32, field: String = "VmRSS") throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix(field + ":") })
        return try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }
}
