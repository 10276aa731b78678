import Counterpart
import Foundation
import Testing

/// The live page (/__counterpart/) in headless Chromium, driven through the DevTools protocol
/// by Tests/Browser/live_page.py while curl and Python make the traffic. Screenshots go to
/// .build/test-artifacts/live/ (docs/screenshots/ has the ones the README shows).
@Suite("The live page in a real browser")
struct LivePageBrowserTests {
    @Test func progressRulesDetailsKeyboardAndTenThousandRequests() throws {
        let python = buildPython
        try #require(FileManager.default.isExecutableFile(atPath: python),
                     "no .build/python: run scripts/setup chromium (make test does) to install the browser test's tools")
        let chromium = ["/usr/bin/chromium", "/usr/local/bin/chromium"].first { FileManager.default.isExecutableFile(atPath: $0) }
        try #require(chromium != nil, "chromium is not installed: run scripts/setup chromium (make test does)")

        // The journal keeps every request of the run, the 10,000 of the flood too; the page's
        // stream sends at most 100 requests a second, so that the flood is thinned (however
        // slow the machine) and the log fills in from the journal after it.
        let server = try TestServer(configure: {
            $0.journalCapacity = 20_000
            $0.latestRequestsPerSecond = 100
        })
        let file = server.root.appendingPathComponent("four.bin")
        try testBytes(count: 4 << 20).write(to: file)
        let artifacts = repositoryRoot.appendingPathComponent(".build/test-artifacts/live")
        let run = try runCommand(python, [repositoryRoot.appendingPathComponent("Tests/Browser/live_page.py").path, server.url(""),
                                          "--file", file.path, "--artifacts", artifacts.path])
        try #require(run.status == 0, "the live page's driver failed (screenshots in \(artifacts.path)):\n\(run.output)")
        let reportLine = try #require(run.output.split(separator: "\n").last { $0.hasPrefix("{") })
        let report = try #require(try JSONSerialization.jsonObject(with: Data(reportLine.utf8)) as? [String: Any])
        print("live page: \(report["timings"] ?? ""), bar \(report["bar"] ?? "")")

        // What the server saw: the throttled upload whole, the cut one hung up with the rule's
        // fault, the next one whole again; the rule, once armed from the page, removed from it.
        let posts = server.server.journal.requests(path: "/upload", method: "POST")
        #expect(posts.count == 3)
        if posts.count == 3 {
            #expect(posts[0].status == 200 && posts[0].fault?.fault == "rate=1048576")
            #expect(posts[1].fault?.rule == 1 && posts[1].fault?.fault == "cut=1000" && posts[1].clientHungUp)
            #expect(posts[2].status == 200 && posts[2].fault == nil)
        }
        #expect(server.server.faults.rules.isEmpty)
        #expect(server.server.journal.requests(method: "GET").filter { $0.path.hasPrefix("/bytes/") }.count == 10_000)
        #expect((report["screenshots"] as? [String])?.count == 4)
        #expect((report["skipped"] as? Int ?? 0) > 0, "the page's stream skipped none of the flood: \(report["skipped"] ?? "")")
    }
}
