import Counterpart
import Foundation
import Testing

/// The upload page (public/) in headless Chromium, driven through the DevTools protocol by
/// Tests/Browser/drive.py: files picked and dropped, progress, cancel, an error, the
/// results table, a phone-sized screen, a listing and a download. Screenshots go to
/// .build/test-artifacts/browser/ (docs/screenshots/ has the ones the README shows).
@Suite("The upload page in a real browser")
struct BrowserTests {
    static let limit: UInt64 = 40 << 20
    static let nonASCIIName = "résumé Ωμέγα.txt"

    @Test func uploadsFromThePageAreStoredShownAndDownloadable() throws {
        let python = buildPython
        try #require(FileManager.default.isExecutableFile(atPath: python),
                     "no .build/python: run scripts/setup chromium (make test does) to install the browser test's tools")
        let imports = try runCommand(python, ["-c", "import websocket"])
        try #require(imports.status == 0, "websocket-client is missing from .build/python: run scripts/setup chromium (make test does)")
        let chromium = ["/usr/bin/chromium", "/usr/local/bin/chromium"].first { FileManager.default.isExecutableFile(atPath: $0) }
        try #require(chromium != nil, "chromium is not installed: run scripts/setup chromium (make test does)")

        let server = try TestServer(configure: { $0.maxUploadBytes = Self.limit }) { root in
            for name in try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("public").path) {
                try FileManager.default.copyItem(at: repositoryRoot.appendingPathComponent("public/\(name)"),
                                                 to: root.appendingPathComponent(name))
            }
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("browser-\(UUID().uuidString)")
        let files = scratch.appendingPathComponent("files")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let contents: [String: Data] = [
            // Larger than what the loopback's socket buffers take at once, so that progress
            // is seen to move while the server reads it slowly.
            "big.bin": mebibytes(24, seed: 1),
            Self.nonASCIIName: Data("Grüße — a file whose name is not ASCII.\n".utf8),
            "notes.txt": Data("three files from the browser test\n".utf8),
            "cancel-me.bin": mebibytes(30, seed: 2),
            "too-large.bin": mebibytes(41, seed: 3),
        ]
        for (name, data) in contents {
            try data.write(to: files.appendingPathComponent(name))
        }

        let artifacts = repositoryRoot.appendingPathComponent(".build/test-artifacts/browser")
        let started = ContinuousClock.now
        let run = try runCommand(python, [repositoryRoot.appendingPathComponent("Tests/Browser/drive.py").path, server.url(""),
                                          "--files", files.path, "--artifacts", artifacts.path,
                                          "--downloads", scratch.appendingPathComponent("downloads").path])
        try #require(run.status == 0, "the browser driver failed (screenshots in \(artifacts.path)):\n\(run.output)")
        let reportLine = try #require(run.output.split(separator: "\n").last { $0.hasPrefix("{") })
        let report = try #require(try JSONSerialization.jsonObject(with: Data(reportLine.utf8)) as? [String: Any])
        print("browser test: \(ContinuousClock.now - started), driver timings \(report["timings"] ?? "")")

        // What the server stored: the three files, byte for byte, and notes.txt again from
        // the plain form; nothing of the cancelled and the refused ones, not even a
        // temporary file.
        let uploaded = ["big.bin", Self.nonASCIIName, "notes.txt"]
        var stored = Dictionary(uniqueKeysWithValues: uploaded.map { ($0, $0) })
        stored["notes-1.txt"] = "notes.txt"
        #expect(server.eventually { server.uploadedNames() == stored.keys.sorted() }, "\(server.uploadedNames())")
        for (name, original) in stored {
            let data = try server.uploadedData(name)
            #expect(try sha256(data) == sha256(contents[original]!), "\(name)")
        }
        let shown = try #require(report["results"] as? [[String: Any]])
        for row in shown {
            let name = try #require(row["name"] as? String)
            #expect(row["sha256"] as? String == (try sha256(contents[name] ?? Data())), "\(name)")
        }

        // What the server saw: one request per file, asking for JSON, with the note; the
        // cancelled one hung up; the too large one refused before or by the server; the
        // plain form's, asking for HTML.
        let posts = server.server.journal.requests(path: "/upload", method: "POST")
        let scripted = posts.filter { $0.header("Accept") == "application/json" }
        for name in uploaded {
            let post = try #require(scripted.first { $0.parts.contains { $0.filename == name } }, "no POST for \(name)")
            #expect(post.status == 200)
            #expect(post.parts.map(\.name) == ["note", "file"])
        }
        let plain = try #require(posts.first { $0.header("Accept")?.hasPrefix("text/html") == true }, "no POST from the plain form")
        #expect(plain.status == 200)
        #expect(plain.parts.map(\.name) == ["note", "file"])
        #expect(posts.contains { $0.clientHungUp && $0.status != 200 }, "the cancelled upload: \(posts.map(\.status))")
        if report["limitFromHealth"] is NSNull {
            #expect(posts.contains { $0.status == 413 }, "the too large file was not refused by the server")
        } else {
            #expect(posts.count == 5, "the page sent the too large file although it knew the limit")
        }
        #expect((report["download"] as? [String: Any])?["suggestedFilename"] as? String == Self.nonASCIIName)
        #expect((report["screenshots"] as? [String])?.count == 8)
    }

    /// `count` MiB of test bytes, each MiB different.
    private func mebibytes(_ count: Int, seed: UInt64) -> Data {
        let block = testBytes(count: 1 << 20, seed: seed)
        var data = Data(capacity: count << 20)
        for index in 0..<count {
            var copy = block
            copy[0] = UInt8(index)
            data.append(copy)
        }
        return data
    }
}
