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
        #expect(frames.map(\.entry.sequence).sorted() == entries.map(\.sequence).sorted(), "each event has its request's place in the journal")
        let expected = JSON.object([("requests", .array(entries.map(Self.oracle)))]).bytes + [0x0A]
        #expect(Array(answer.body) == expected, "\(answer.text)")
    }

    /// An event stream writes every frame with one writer, emptied in between, that keeps
    /// the last date's text: each date comes out as its own, whichever came before.
    @Test func aWriterUsedAgainWritesEachDateAsItsOwn() {
        var out = JSONWriter()
        let dates = [1_796_500_000, 1_796_500_000, 1_796_500_001, 1_796_500_000, 0, -1, 253_402_300_800, 1_796_500_001].map { HTTPDate(secondsSince1970: Int64($0)) }
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
        // A fixed sequence (a 64-bit LCG's high bits), so that a failure can be run again.
        var state: UInt64 = 26
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33) % bound
        }
        for _ in 0..<20_000 {
            // Mostly bytes that need no escape, so that a string without one comes up often.
            let bytes = (0..<next(41)).map { _ in next(12) == 0 ? UInt8(next(256)) : UInt8(0x23 + next(0x5B - 0x23 + 1)) }
            if fast(bytes) != slow(bytes) { disagreements += 1 }
        }
        #expect(disagreements == 0)
    }

    /// A stream whose connection takes a few bytes at a time sends the same bytes as one
    /// that takes them all: a frame goes on from where the last read stopped, nothing lost,
    /// repeated or reordered.
    @Test(arguments: [1, 7, 64, 4096]) func aStreamReadInSmallPiecesLosesAndRepeatsNothing(size: Int) throws {
        let events = ServerEvents(backlog: 64)
        let opening = try #require(events.openReader(lastEventID: nil, socket: nil))
        var preamble = JSONWriter()
        preamble.raw("retry: 2000\n\n")
        let body = EventStreamBody(events: events, reader: opening.reader, socket: nil, preamble: preamble)
        var expected = Array("retry: 2000\n\n".utf8)
        for index in 0..<20 {
            let transfer = ServerEvent.Transfer(id: index, direction: .upload, method: "POST",
                                                path: "/upload/" + String(repeating: "x", count: index * 7), bytes: UInt64(index),
                                                total: 100, bytesPerSecond: 0, ended: false)
            events.transfer(transfer)
            expected += ServerEvent(id: opening.lastID + 1 + UInt64(index), stored: .transfer(transfer)).frame()
        }
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: size)
        while got.count <= expected.count {
            let read = buffer.withUnsafeMutableBytes { body.read(at: UInt64(got.count), into: $0) }
            guard case .bytes(let count) = read else { break }
            got += buffer[..<count]
        }
        #expect(got == expected)
    }
}
