@testable import Counterpart
import HTTPTransfer
import Foundation
import Testing

/// A request's event and `/__counterpart/requests` write the journal's JSON with one byte
/// writer (`RequestJournal.writeEntry`): byte for byte what the value tree wrote before it,
/// kept here as the oracle, for requests with a query, escapes, secrets in any case,
/// non-ASCII, upload parts and a fault.
@Suite("The journal's JSON, written byte by byte")
struct EventJSONTests {
    /// An entry as `JSON` values, as the journal wrote it before the byte writer.
    static func oracle(_ entry: RequestJournal.Entry) -> JSON {
        .object([
            ("sequence", .number(Int64(entry.sequence))),
            ("method", .string(entry.method)),
            ("target", .string(entry.target)),
            ("path", .string(entry.path)),
            ("headers", .array(entry.headers.map { .array([.string($0.name), .string($0.value)]) })),
            ("requestBodyBytes", .unsigned(entry.requestBodyBytes)),
            ("parts", .array(entry.parts.map { part in
                .object([
                    ("name", .string(part.name)),
                    ("filename", part.filename.map(JSON.string) ?? .null),
                    ("contentType", .string(part.contentType)),
                    ("size", .unsigned(part.size)),
                    ("sha256", part.sha256.map(JSON.string) ?? .null),
                ])
            })),
            ("status", .number(Int64(entry.status))),
            ("responseBodyBytes", .unsigned(entry.responseBodyBytes)),
            ("bytesSent", entry.bytesSent.map(JSON.unsigned) ?? .null),
            ("clientHungUp", .bool(entry.clientHungUp)),
            ("receivedAt", .string(entry.receivedAt.description)),
            ("durationMilliseconds", .number(Int64((entry.durationSeconds * 1000).rounded()))),
            ("clientAddress", .string(entry.clientAddress)),
            ("fault", entry.fault.map { .object([("fault", .string($0.fault)), ("rule", $0.rule.map { .number(Int64($0)) } ?? .null)]) } ?? .null),
        ])
    }

    @Test(.timeLimit(.minutes(1))) func eventsAndTheJournalWriteWhatTheValueTreeWrote() async throws {
        let server = try TestServer(serving: ["a.txt": Data("hello".utf8), "é dir/b \"q\".txt": Data("b".utf8),
                                              "data.bin": Data(repeating: 1, count: 200_000)])
        let subscription = server.server.events.subscribe()
        let upload = try makeTemporaryFolder("event-json")
        defer { try? FileManager.default.removeItem(at: upload) }
        let file = upload.appendingPathComponent("line\u{2028}sep \\ \"x\".bin")
        try Data(repeating: 7, count: 3000).write(to: file)
        try server.server.faults.arm(path: "/a.txt", fault: "status=503", times: 1)
        let requests: [[String]] = [
            ["-H", "Authorization: Bearer twelve-chars", "-H", "cookie: a=b", "-H", "PROXY-AUTHORIZATION: Basic eA==",
             "-H", "X-Tab: a\tb", "-H", "X-Quote: say \"hi\" \\ ok", server.url("/a.txt?x=1&y=%22&z")],
            [server.url("/%C3%A9%20dir/b%20%22q%22.txt")],
            [server.url("/a.txt")],
            ["-F", "file=@\(file.path)", "-F", "note=été", server.url("/upload")],
            [server.url("/missing%0Aline")],
            [server.url("/bad%zzescape")],
            [server.url("/data.bin?cut=70000")],
        ]
        for arguments in requests { _ = try curl(arguments) }

        var iterator = subscription.makeAsyncIterator()
        var frames: [(entry: RequestJournal.Entry, frame: [UInt8])] = []
        while frames.count < requests.count, let event = await iterator.next() {
            if case .request(let entry) = event.kind { frames.append((entry, event.frame())) }
        }
        #expect(frames.contains { !$0.entry.parts.isEmpty } && frames.contains { $0.entry.fault != nil })
        #expect(frames.contains { $0.entry.clientHungUp } && frames.contains { !$0.entry.clientHungUp })
        #expect(frames.contains { $0.entry.headers.contains { $0.value.hasPrefix("<redacted") } })
        for (entry, frame) in frames {
            let expected = Array("id: ".utf8) + Array(String(frame.split(separator: 0x0A)[0].dropFirst(4).map { Character(Unicode.Scalar($0)) }).utf8)
                + Array("\nevent: request\ndata: ".utf8) + Self.oracle(entry).bytes + [0x0A, 0x0A]
            #expect(frame == expected, "\(String(decoding: frame, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
        }

        let answer = try curl([server.url("/__counterpart/requests")])
        let entries = server.server.journal.requests()
        #expect(entries.count == requests.count)
        let expected = JSON.object([("requests", .array(entries.map(Self.oracle)))]).bytes + [0x0A]
        #expect(Array(answer.body) == expected, "\(answer.text)")
    }

    /// An event stream writes every frame with one writer, emptied in between, that keeps
    /// the last date's text: each date comes out as its own, whichever came before.
    @Test func aWriterUsedAgainWritesEachDateAsItsOwn() {
        var out = JSONWriter()
        let dates = [1_796_500_000, 1_796_500_000, 1_796_500_001, 1_796_500_000, 0, -1, 253_402_300_800].map { HTTPDate(secondsSince1970: Int64($0)) }
        for date in dates {
            out.removeAll()
            out.beginArray()
            out.number(1)
            out.date(date)
            out.endArray()
            #expect(out.bytes == JSON.array([.number(1), .string(date.description)]).bytes, "\(date.secondsSince1970)")
        }
    }

    /// The eight-bytes-at-a-time test agrees with the byte-by-byte one: every byte value at
    /// every place of strings up to three words long, every pair of neighbours across a
    /// word's boundary and inside one, and random strings.
    @Test func theWordAtATimeEscapeTestAgreesWithTheBytes() {
        func slow(_ bytes: [UInt8]) -> Bool { bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F || $0 == 0xE2 } }
        func fast(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { JSONWriter.needsEscape($0) } }
        var disagreements = 0
        for length in 0...24 {
            #expect(fast(Array(repeating: 0x61, count: length)) == false)
            for place in 0..<length {
                for value in 0...255 {
                    var bytes = Array(repeating: UInt8(0x61), count: length)
                    bytes[place] = UInt8(value)
                    if fast(bytes) != slow(bytes) { disagreements += 1 }
                }
            }
        }
        for first in 0...255 {
            for second in 0...255 {
                for place in [3, 7] {
                    var bytes = Array(repeating: UInt8(0xC3), count: 16)
                    bytes[place] = UInt8(first)
                    bytes[place + 1] = UInt8(second)
                    if fast(bytes) != slow(bytes) { disagreements += 1 }
                }
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...40, using: &generator)
            // Mostly bytes that need no escape, so that a string without one comes up often.
            let bytes = (0..<length).map { _ in
                Int.random(in: 0..<12, using: &generator) == 0 ? UInt8.random(in: 0...255, using: &generator) : UInt8.random(in: 0x23...0x5B, using: &generator)
            }
            if fast(bytes) != slow(bytes) { disagreements += 1 }
        }
        #expect(disagreements == 0)
    }
}
