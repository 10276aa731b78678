import Foundation
import Testing

/// The command's `COUNTERPART_<FLAG>` variables, `--log-format json` and `counterpart healthcheck`,
/// run as a process.
@Suite("The command's environment and log format")
struct EnvironmentTests {
    @Test func variablesSetWhatFlagsSet() throws {
        let folder = try makeFolder(serving: ["env.txt": "from env"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun([], environment: [
            "COUNTERPART_PORT": "0", "COUNTERPART_QUIET": "yes", "COUNTERPART_MAX_UPLOAD_BYTES": "1K",
            "COUNTERPART_ROOT": folder.appendingPathComponent("public").path,
            "COUNTERPART_UPLOADS": folder.appendingPathComponent("stored").path,
        ])
        let line = run.firstLine()
        #expect(line.hasPrefix("listening on http://127.0.0.1:") && !line.hasSuffix(":8080"))
        let base = String(line.dropFirst("listening on ".count))
        #expect(try curl([base + "/env.txt"]).text == "from env")
        #expect(try curl(["-F", "f=@-;filename=big.bin", base + "/upload"], stdin: Data(count: 5000)).status == 413)
        #expect(try curl(["-F", "f=@-;filename=small.bin", base + "/upload"], stdin: Data(count: 10)).status == 200)
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("stored/small.bin").path))
        run.process.terminate()
        let result = run.waitForExit()
        #expect(result.status == 0)
        #expect(!result.stderr.contains("/env.txt"), "COUNTERPART_QUIET=yes still logged: \(result.stderr)")
    }

    @Test func faultVariable() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--quiet"], in: folder, environment: ["COUNTERPART_PORT": "0", "COUNTERPART_FAULT": "status=503"])
        let base = String(run.firstLine().dropFirst("listening on ".count))
        defer { run.process.terminate(); _ = run.waitForExit() }
        #expect(try curl([base + "/anything"]).status == 503)
    }

    /// A flag wins over its variable, which is then not read at all (a bad value there is no error).
    @Test func flagsWinOverVariables() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--max-upload-bytes", "1M", "--threads=2"], in: folder,
                                 environment: ["COUNTERPART_PORT": "8080", "COUNTERPART_MAX_UPLOAD_BYTES": "10",
                                               "COUNTERPART_THREADS": "lots", "COUNTERPART_QUIET": "0"])
        let line = run.firstLine()
        #expect(!line.hasSuffix(":8080"), "COUNTERPART_PORT won over --port: \(line)")
        let base = String(line.dropFirst("listening on ".count))
        #expect(try curl(["-F", "f=@-;filename=a.bin", base + "/upload"], stdin: Data(count: 1000)).status == 200)
        run.process.terminate()
        let result = run.waitForExit()
        #expect(result.status == 0)
        #expect(!result.stderr.contains("/upload"))
    }

    @Test(arguments: [
        ("COUNTERPART_PORT", "http"), ("COUNTERPART_MAX_UPLOAD_BYTES", "lots"), ("COUNTERPART_THREADS", "-1"),
        ("COUNTERPART_QUIET", "maybe"), ("COUNTERPART_FAULT", "cut=x"), ("COUNTERPART_CORS", "example.com"),
        ("COUNTERPART_HOST", ""), ("COUNTERPART_LOG_FORMAT", "xml"), ("COUNTERPART_MIN_FREE_DISK", "much"),
        ("COUNTERPART_MAX_PARTS", "0"), ("COUNTERPART_ALLOW_REMOTE_CONTROL", "2"), ("COUNTERPART_S3_TIMEOUT", "0"),
    ])
    func aBadVariableExitsWith2AndNamesIt(_ variable: String, _ value: String) throws {
        let result = try CommandRun([], environment: [variable: value]).waitForExit()
        #expect(result.status == 2)
        let first = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(first.hasPrefix("counterpart: \(variable)"), "first line: \(first)")
        #expect(result.stderr.contains("usage: counterpart"))
        #expect(result.stdout.isEmpty)
    }

    /// Every flag the usage lists has its variable beside it, spelled from the flag.
    @Test func everyFlagHasItsVariable() throws {
        let help = try CommandRun(["--help"]).waitForExit().stdout
        let entries = help.split(separator: "\n").filter { $0.hasPrefix("  --") }
        #expect(entries.count >= 25)
        for entry in entries {
            let flag = entry.dropFirst(2).split(whereSeparator: { $0 == " " || $0 == "," }).first.map(String.init) ?? ""
            let variable = "COUNTERPART_" + flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
            #expect(entry.hasSuffix(", " + variable), "\(entry)")
        }
    }

    /// `--log-format json`: one JSON object per request with the text line's fields.
    @Test func jsonLogLinesParse() throws {
        let folder = try makeFolder(serving: ["ten.txt": "0123456789"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--log-format", "json"], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        _ = try curl(["-r", "2-5", base + "/ten.txt?x=%22q%22"])
        _ = try curl(["-I", base + "/ten.txt"])
        _ = try curl([base + "/missing"])
        run.process.terminate()
        let result = run.waitForExit()
        let objects = try result.stderr.split(separator: "\n").filter { $0.hasPrefix("{") }.map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 3)
        guard objects.count == 3 else { return }
        #expect(objects[0]["client"] as? String == "127.0.0.1")
        #expect(objects[0]["method"] as? String == "GET")
        #expect(objects[0]["target"] as? String == "/ten.txt?x=%22q%22")
        #expect(objects[0]["status"] as? Int == 206)
        #expect(objects[0]["bytes"] as? Int == 4)
        #expect(objects[0]["ms"] is Int)
        #expect(objects[0]["completed"] as? Bool == true)
        #expect(objects[1]["method"] as? String == "HEAD" && objects[1]["bytes"] as? Int == 0)
        #expect(objects[2]["status"] as? Int == 404)
        // Nothing but the objects and the stop line.
        #expect(result.stderr.split(separator: "\n").filter { !$0.hasPrefix("{") } == ["counterpart: SIGTERM: stopping"])
    }

    @Test func healthcheckAsksTheServerTheVariablesDescribe() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--host", "0.0.0.0"], in: folder)
        let port = try #require(run.firstLine().split(separator: ":").last.map(String.init))
        defer { run.process.terminate(); _ = run.waitForExit() }
        let healthy = try CommandRun(["healthcheck"], environment: ["COUNTERPART_PORT": port, "COUNTERPART_HOST": "0.0.0.0"]).waitForExit()
        #expect(healthy.status == 0)
        #expect(healthy.stdout.isEmpty && healthy.stderr.isEmpty)
        let closed = try CommandRun(["healthcheck", "--port", "1"]).waitForExit()
        #expect(closed.status == 1)
        #expect(closed.stderr.hasPrefix("counterpart healthcheck: 127.0.0.1 port 1: "))
    }
}
