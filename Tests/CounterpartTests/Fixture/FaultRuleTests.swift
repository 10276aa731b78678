import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing

/// POSTs a fault rule as JSON; the answer.
func armRule(_ server: TestServer, _ json: String, base: String? = nil) throws -> CurlResult {
    try curl(["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", json,
              (base ?? server.server.baseURL.absoluteString) + "/__counterpart/faults"])
}

@Suite("Faults: armed rules, counted")
struct FaultRuleTests {
    @Test func armedOverHTTPCurlRetryGetsThroughOnTheThirdTry() throws {
        let server = try makeStaticServer()
        #expect(try armRule(server, #"{"path": "/other", "fault": "status=500", "times": 1, "skip": 0}"#).status == 201)
        let armed = try armRule(server, #"{"method": "GET", "path": "/hello.txt", "fault": "status=503", "times": 2}"#)
        #expect(armed.status == 201, "\(armed.text)")
        let rule = try armed.json()
        let id = try #require(rule["id"] as? Int)
        #expect(rule["fault"] as? String == "status=503" && rule["times"] as? Int == 2 && rule["skip"] as? Int == 0)
        #expect(rule["matched"] as? Int == 0 && rule["applied"] as? Int == 0 && rule["remaining"] as? Int == 2)
        // curl retries a 503 (a transient error) and the third try gets the file.
        let fetched = try curl(["--retry", "3", "--retry-delay", "0", server.url("/hello.txt")])
        #expect(fetched.status == 200 && fetched.exitCode == 0)
        let listed = try #require(try curl([server.url("/__counterpart/faults")]).json()["faults"] as? [[String: Any]])
        #expect(listed.count == 2)
        #expect(listed.last?["matched"] as? Int == 2 && listed.last?["applied"] as? Int == 2 && listed.last?["remaining"] as? Int == 0)
        // The journal names the fault and the rule of each faulted request.
        let entries = server.server.journal.waitForRequests(path: "/hello.txt", count: 3)
        #expect(entries.map(\.status) == [503, 503, 200])
        #expect(entries.map(\.fault) == [AppliedFault(fault: "status=503", rule: id), AppliedFault(fault: "status=503", rule: id), nil])
        let journal = try #require(try curl([server.url("/__counterpart/requests?path=/hello.txt")]).json()["requests"] as? [[String: Any]])
        #expect((journal.first?["fault"] as? [String: Any])?["rule"] as? Int == id)
    }

    @Test func fiftyConcurrentRequestsAgainstTimesTenFaultExactlyTen() throws {
        let server = try makeStaticServer()
        try server.server.faults.arm(path: "/hello.txt", fault: "status=503", times: 10)
        let statuses = Statuses()
        DispatchQueue.concurrentPerform(iterations: 50) { _ in
            let answer = try? RawHTTPConnection.exchange(port: server.server.port, Array("GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            statuses.add(answer?.status ?? 0)
        }
        #expect(statuses.all.filter { $0 == 503 }.count == 10)
        #expect(statuses.all.filter { $0 == 200 }.count == 40)
        #expect(server.server.faults.rules.first?.applied == 10 && server.server.faults.rules.first?.matched == 10)
    }

    @Test func skipLetsRequestsThroughFirstAndRulesAreTriedInOrder() throws {
        let server = try makeStaticServer()
        let faults = server.server.faults
        let skipping = try faults.arm(method: "GET", path: "/hello.txt", fault: "status=500", times: 1, skip: 1)
        try faults.arm(path: "/hel*", fault: "status=502", times: 1)
        // First: the first rule lets it through (skip); second: faulted by it; third: the
        // first has no faults left, the prefix rule takes it; then none is left.
        let statuses = try (0..<4).map { _ in try curl([server.url("/hello.txt")]).status }
        #expect(statuses == [200, 500, 502, 200])
        // Another method does not match the first rule.
        try faults.arm(method: "HEAD", path: "/hello.txt", fault: "status=418")
        #expect(try curl([server.url("/hello.txt")]).status == 200)
        #expect(try curl(["--head", server.url("/hello.txt")]).status == 418)
        #expect(faults.rules.map(\.id) == [skipping.id, skipping.id + 1, skipping.id + 2])
        #expect(faults.rules[0].matched == 2 && faults.rules[0].applied == 1 && faults.rules[0].remaining == 0)
        #expect(faults.rules[2].remaining == nil)
    }

    @Test func aRequestsOwnFaultsWinOverARule() throws {
        let server = try makeStaticServer { $0.faults = try! FaultSpec(parsing: "status=500") }
        try server.server.faults.arm(path: "/hello.txt", fault: "status=502")
        #expect(try curl([server.url("/hello.txt")]).status == 502)
        #expect(try curl(["-H", "Counterpart-Fault: status=503", server.url("/hello.txt")]).status == 503)
        #expect(try curl(["-H", "Counterpart-Fault: status=503", server.url("/hello.txt?status=504")]).status == 504)
        #expect(try curl([server.url("/other.txt")]).status == 500)
    }

    @Test func deleteRemovesOneOrAll() throws {
        let server = try makeStaticServer()
        let id = try #require(try armRule(server, #"{"path": "/hello.txt", "fault": "reset"}"#).json()["id"] as? Int)
        #expect(try armRule(server, #"{"path": "/x", "fault": "delay=1"}"#).status == 201)
        #expect(try curl([server.url("/hello.txt")]).exitCode == 56)
        #expect(try curl(["-X", "DELETE", server.url("/__counterpart/faults/\(id)")]).status == 204)
        #expect(try curl(["-X", "DELETE", server.url("/__counterpart/faults/\(id)")]).status == 404)
        #expect(try curl([server.url("/hello.txt")]).status == 200)
        #expect(try curl(["-X", "DELETE", server.url("/__counterpart/faults")]).status == 204)
        #expect(server.server.faults.rules.isEmpty)
        #expect(try curl(["-X", "PUT", server.url("/__counterpart/faults")]).status == 405)
    }

    @Test(arguments: [
        (#"{"fault": "cut=1"}"#, "path"), (#"{"path": "upload", "fault": "cut=1"}"#, "path"),
        (#"{"path": "/upload"}"#, "fault"), (#"{"path": "/upload", "fault": "cutt=1"}"#, "fault"),
        (#"{"path": "/upload", "fault": ""}"#, "fault"), (#"{"path": "/upload", "fault": "cut=1", "times": 0}"#, "times"),
        (#"{"path": "/upload", "fault": "cut=1", "times": 1.5}"#, "times"), (#"{"path": "/upload", "fault": "cut=1", "times": true}"#, "times"), (#"{"path": "/upload", "fault": "cut=1", "skip": -1}"#, "skip"),
        (#"{"path": "/upload", "fault": "cut=1", "method": "PO ST"}"#, "method"), (#"{"path": "/upload", "fault": "cut=1", "time": 2}"#, "time"),
        (#"{"path": 5, "fault": "cut=1"}"#, "path"), ("[1]", "body"), ("not json", "body"),
    ])
    func aBadRuleIs400NamingTheField(_ json: String, _ field: String) throws {
        let server = try makeStaticServer()
        let answer = try armRule(server, json)
        #expect(answer.status == 400)
        let error = try #require(try answer.json()["error"] as? String)
        #expect(error.hasPrefix("invalid fault rule: \(field): "), "\(error)")
        #expect(server.server.faults.rules.isEmpty)
    }

    /// Arming, clearing and reading the rules are control: other machines only with
    /// `--allow-remote-control`.
    @Test(.enabled(if: nonLoopbackAddress != nil, "no network address but loopback"))
    func writingIsForLoopbackClientsUnlessRemoteControlIsAllowed() throws {
        let remoteAddress = try #require(nonLoopbackAddress)
        for allowed in [false, true] {
            let server = try makeStaticServer { $0.host = "0.0.0.0"; $0.allowsRemoteControl = allowed }
            let base = "http://\(remoteAddress):\(server.server.port)"
            let armed = try armRule(server, #"{"path": "/hello.txt", "fault": "status=503"}"#, base: base)
            #expect(armed.status == (allowed ? 201 : 403), "\(armed.text)")
            #expect(try curl(["-X", "DELETE", base + "/__counterpart/faults"]).status == (allowed ? 204 : 403))
            #expect(try curl([base + "/__counterpart/faults"]).status == (allowed ? 200 : 403))
        }
    }

    @Test func armedFromTheCommandLine() throws {
        let folder = try makeFolder(serving: ["hi.txt": "hi"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--fault-rule", "GET /hi.txt status=503 times=2",
                                  "--fault-rule", "/h* status=418 skip=1 times=1"], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        defer { run.process.terminate(); _ = run.waitForExit() }
        let statuses = try (0..<5).map { _ in try curl([base + "/hi.txt"]).status }
        #expect(statuses == [503, 503, 200, 418, 200])
        let rules = try #require(try curl([base + "/__counterpart/faults"]).json()["faults"] as? [[String: Any]])
        #expect(rules.map { $0["path"] as? String } == ["/hi.txt", "/h*"])
        #expect(rules.map { $0["method"] as? String } == ["GET", nil])
    }

    @Test(arguments: ["--fault-rule", "--fault-rule=GET status=503", "--fault-rule=/x cutt=1", "--fault-rule=/x cut=1 times=x"])
    func aBadFaultRuleFlagStopsTheCommand(_ argument: String) throws {
        let result = try CommandRun([argument]).waitForExit()
        #expect(result.status == 2)
        #expect(result.stderr.hasPrefix("counterpart: --fault-rule"), "\(result.stderr)")
    }

    @Test func theHelpAndTheContractListEveryFaultAndEndpoint() throws {
        let help = try CommandRun(["--help"]).waitForExit().stdout
        let contract = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/fixture-contract.md"), encoding: .utf8)
        for name in FaultSpec.names {
            #expect(help.contains(name), "--help does not name \(name)")
            #expect(contract.contains("`\(name)"), "the contract does not name \(name)")
        }
        for item in ["--fault-rule", "/__counterpart/faults", "/__counterpart/touch", "change-after", "version=V"] {
            #expect(help.contains(item) && contract.contains(item), "\(item) is missing from --help or the contract")
        }
    }

    @Test func theCommandLineFormParses() throws {
        let rule = try FaultRule(parsing: "POST /upload cut=1MiB,delay=5 times=2 skip=1")
        #expect(rule == (try FaultRule(method: "POST", path: "/upload", fault: FaultSpec(parsing: "cut=1048576,delay=5"), times: 2, skip: 1)))
        #expect(rule.description == "POST /upload cut=1048576,delay=5 times=2 skip=1")
        #expect(try FaultRule(parsing: "/files/* reset").method == nil)
    }
}

/// Statuses collected from many threads.
final class Statuses: Sendable {
    private let lock = Mutex<[Int]>([])
    func add(_ status: Int) { lock.withLock { $0.append(status) } }
    var all: [Int] { lock.withLock { $0 } }
}
