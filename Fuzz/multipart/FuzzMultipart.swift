// libFuzzer target for the streaming multipart parsers (`MultipartParser`, `FormDataParser`)
// and `MultipartWriter`. Built by `scripts/fuzz`; a plain `swift build` compiles it with a
// stub entry point instead (see the end of the file).
//
// Input layout (every field optional: a short input takes defaults):
//
//   byte 0   boundary. < 0x80: one of `knownBoundaries` (byte % count). >= 0x80: an
//            explicit boundary of length (byte & 0x7F) % 70 + 1 taken from the next bytes
//            (a byte that is a bchar stands for itself; others are mapped into bchars).
//   byte 1   flags. bits 0-1: limits (0, 1 default; 2 small; 3 three more bytes follow:
//            maxHeaderBytes, maxParts % 9, maxFieldBytes). bits 2-4: k, the number of
//            chunk-size bytes that follow (size = byte + 1; none: a default pattern).
//            bit 5: round trip (the body is a recipe for `MultipartWriter`). bit 6: feed an
//            empty chunk before every chunk.
//   rest     the body.
//
// Checks (a violation is a `fatalError`, which libFuzzer reports as a crash):
// - split invariance: the body fed whole, in the input's chunk pattern, and byte by byte
//   (bodies < 512 bytes) gives the same parts (name, filename, content type, headers,
//   number, content) and the same error, for `FormDataParser` and `MultipartParser`
//   (after an error, the content of the part left open may stop at another byte: a limit
//   is checked per event; one must then be a prefix of the other);
// - event order: data only inside a part, partBegin not inside one, end once, nothing
//   after end, parts numbered 1, 2, 3..., `finish` succeeds exactly when end was seen;
// - bounded memory (byte by byte): a part's header section is at most
//   `limits.maxHeaderBytes`, and a content byte is handed out at most
//   `delimiter length + 1` bytes after it was fed (the parser holds no more back);
//   `bytesConsumed` counts what was fed;
// - limits: never more than `maxParts` parts, text fields within `maxFieldBytes`;
// - the form layer agrees with the raw parser;
// - round trip: a form written by `MultipartWriter` parses back to its parts.

import FuzzSupport
import HTTPTransfer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Decoding the input

let knownBoundaries = [
    "abc", "itcast", "AaB03x", "x", "----WebKitFormBoundary0IQAt0HA7oxwIx3f",
    "------------------------d74496d66958873e", "boundary", "a'()+_,-./:=? z",
]

let boundaryAlphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'()+_,-./:=? ".utf8)

let defaultChunkSizes = [1, 3, 64, 7, 200, 2, 16]

struct ByteReader {
    let bytes: [UInt8]
    var index = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var rest: [UInt8] { Array(bytes[index...]) }
    mutating func byte() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }
    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, index + count)
        defer { index = end }
        return Array(bytes[index..<end])
    }
}

struct MultipartFuzzInput {
    var boundary: MultipartBoundary
    var limits: MultipartLimits
    var chunkSizes: [Int]
    var roundTrip: Bool
    var emptyChunks: Bool
    var body: [UInt8]

    init(_ data: [UInt8]) {
        var reader = ByteReader(data)
        let selector = reader.byte() ?? 0
        var boundaryText: String
        if selector < 0x80 {
            boundaryText = knownBoundaries[Int(selector) % knownBoundaries.count]
        } else {
            let length = Int(selector & 0x7F) % 70 + 1
            var chars = reader.take(length).map { boundaryAlphabet.contains($0) ? $0 : boundaryAlphabet[Int($0) % boundaryAlphabet.count] }
            if chars.isEmpty { chars = [UInt8(ascii: "b")] }
            if chars.last == UInt8(ascii: " ") { chars[chars.count - 1] = UInt8(ascii: "_") }
            boundaryText = String(decoding: chars, as: UTF8.self)
        }
        do {
            boundary = try MultipartBoundary(boundaryText)
        } catch {
            fatalError("harness: boundary \"\(boundaryText)\" built from bchars was refused: \(error)")
        }
        let flags = reader.byte() ?? 0
        switch flags & 3 {
        case 2:
            limits = MultipartLimits(maxHeaderBytes: 64, maxParts: 3, maxFieldBytes: 16)
        case 3:
            let header = Int(reader.byte() ?? 64)
            let parts = Int(reader.byte() ?? 3) % 9
            let fields = Int(reader.byte() ?? 16)
            limits = MultipartLimits(maxHeaderBytes: header, maxParts: parts, maxFieldBytes: fields)
        default:
            limits = MultipartLimits()
        }
        let sizeCount = Int(flags >> 2) & 7
        chunkSizes = reader.take(sizeCount).map { Int($0) + 1 }
        if chunkSizes.isEmpty { chunkSizes = defaultChunkSizes }
        roundTrip = flags & 0x20 != 0
        emptyChunks = flags & 0x40 != 0
        body = reader.rest
    }
}

// MARK: - Feeding

/// How a body is cut.
enum Cut: CustomStringConvertible {
    case whole
    case pattern([Int], emptyChunks: Bool)
    case byteByByte

    func ranges(_ count: Int) -> [Range<Int>] {
        switch self {
        case .whole:
            return [0..<count]
        case .byteByByte:
            return (0..<count).map { $0..<($0 + 1) }
        case .pattern(let sizes, let emptyChunks):
            var ranges: [Range<Int>] = []
            var start = 0
            var which = 0
            while start < count {
                if emptyChunks { ranges.append(start..<start) }
                let end = min(count, start + sizes[which % sizes.count])
                ranges.append(start..<end)
                start = end
                which += 1
            }
            if emptyChunks { ranges.append(count..<count) }
            return ranges
        }
    }

    var description: String {
        switch self {
        case .whole: return "whole"
        case .byteByByte: return "byte by byte"
        case .pattern(let sizes, let emptyChunks):
            return "chunks of \(sizes)\(emptyChunks ? " with empty chunks between" : "")"
        }
    }
}

/// Feeds `body[range]` from its own exactly-sized allocation, so that AddressSanitizer
/// catches a read past the chunk's end (a slice of the whole body would not).
func withChunk<R>(_ body: [UInt8], _ range: Range<Int>, _ work: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    if range.isEmpty {
        return try work(UnsafeRawBufferPointer(start: nil, count: 0))
    }
    let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: range.count, alignment: 1)
    defer { storage.deallocate() }
    body.withUnsafeBytes { storage.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[range])) }
    return try work(UnsafeRawBufferPointer(storage))
}

// MARK: - Flattened results

struct FlatPart: Equatable, CustomStringConvertible {
    var name: String?          // nil for raw parts
    var filename: String?
    var contentType: String?
    var headers: [MultipartHeaders.Field]
    var number: Int
    var offset: Int?           // raw parts only
    var content: [UInt8] = []
    var ended = false

    var description: String {
        var text = "#\(number)"
        if let name { text += " name=\(name.debugDescription)" }
        if let filename { text += " filename=\(filename.debugDescription)" }
        if let contentType { text += " type=\(contentType.debugDescription)" }
        if let offset { text += " at \(offset)" }
        text += " headers=\(headers.map { "\($0.name): \($0.value)" }.debugDescription)"
        text += " content(\(content.count))=\(escaped(content.prefix(80)))\(ended ? "" : " (not ended)")"
        return text
    }
}

struct Outcome: Equatable, CustomStringConvertible {
    var parts: [FlatPart] = []
    var sawEnd = false
    var error: MultipartError?

    var description: String {
        "\(parts.count) parts\(sawEnd ? ", end" : ""), error: \(error.map { "\($0.kind) at \($0.offset) part \($0.part.map(String.init) ?? "-")" } ?? "none")\n    "
            + parts.map(\.description).joined(separator: "\n    ")
    }
}

func escaped<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    var text = "\""
    for byte in bytes {
        switch byte {
        case 0x0D: text += "\\r"
        case 0x0A: text += "\\n"
        case 0x09: text += "\\t"
        case 0x22: text += "\\\""
        case 0x5C: text += "\\\\"
        case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            let hex = String(byte, radix: 16)
            text += "\\x" + (hex.count == 1 ? "0" + hex : hex)
        }
    }
    return text + "\""
}

func violation(_ what: String, _ context: @autoclosure () -> String = "") -> Never {
    let extra = context()
    fatalError("fuzz-multipart: \(what)\(extra.isEmpty ? "" : "\n  " + extra)")
}

/// The content-lag trace of a byte-by-byte run: after each byte, the part being read
/// (index into parts) and how many of its content bytes were out.
struct LagSample {
    var fed: Int
    var part: Int
    var delivered: Int
}

/// Checks the event order as events arrive and collects the flattened outcome.
struct EventRecorder {
    let mode: String
    var outcome = Outcome()
    var open = false
    /// Byte-by-byte runs: where each part's content starts (bytes fed when it began).
    var contentStarts: [Int] = []
    var fedSoFar = 0
    var currentByteEnd = 0

    init(mode: String) { self.mode = mode }

    mutating func begin(_ part: FlatPart) {
        if outcome.sawEnd { violation("[\(mode)] partBegin after end") }
        if open { violation("[\(mode)] partBegin inside part \(outcome.parts.count)") }
        if part.number != outcome.parts.count + 1 {
            violation("[\(mode)] part numbered \(part.number), expected \(outcome.parts.count + 1)")
        }
        open = true
        outcome.parts.append(part)
        contentStarts.append(currentByteEnd)
    }

    mutating func data(_ bytes: UnsafeRawBufferPointer) {
        if outcome.sawEnd { violation("[\(mode)] partData after end") }
        if !open { violation("[\(mode)] partData outside a part (\(bytes.count) bytes)") }
        outcome.parts[outcome.parts.count - 1].content.append(contentsOf: bytes)
    }

    mutating func end() {
        if outcome.sawEnd { violation("[\(mode)] partEnd after end") }
        if !open { violation("[\(mode)] partEnd outside a part") }
        open = false
        outcome.parts[outcome.parts.count - 1].ended = true
    }

    mutating func close() {
        if outcome.sawEnd { violation("[\(mode)] a second end event") }
        if open { violation("[\(mode)] end inside part \(outcome.parts.count)") }
        outcome.sawEnd = true
    }
}

/// What one run gives back besides the outcome.
struct Run {
    var outcome: Outcome
    var lag: [LagSample]
    var contentStarts: [Int]
}

protocol FuzzedParser {
    init(boundary: MultipartBoundary, limits: MultipartLimits)
    var bytesConsumed: Int { get }
    var isComplete: Bool { get }
    mutating func feedRecording(_ chunk: UnsafeRawBufferPointer, _ recorder: inout EventRecorder) throws
    mutating func finish() throws
}

extension MultipartParser: FuzzedParser {
    mutating func feedRecording(_ chunk: UnsafeRawBufferPointer, _ recorder: inout EventRecorder) throws {
        try feed(chunk) { event in
            switch event {
            case .partBegin(let part):
                recorder.begin(FlatPart(headers: part.headers.fields, number: part.number, offset: part.offset))
            case .partData(let bytes): recorder.data(bytes)
            case .partEnd: recorder.end()
            case .end: recorder.close()
            }
        }
    }
}

extension FormDataParser: FuzzedParser {
    mutating func feedRecording(_ chunk: UnsafeRawBufferPointer, _ recorder: inout EventRecorder) throws {
        try feed(chunk) { event in
            switch event {
            case .partBegin(let part):
                recorder.begin(FlatPart(name: part.name, filename: part.filename, contentType: part.contentType,
                                        headers: part.headers.fields, number: part.number, offset: nil))
            case .partData(let bytes): recorder.data(bytes)
            case .partEnd: recorder.end()
            case .end: recorder.close()
            }
        }
    }
}

func run<P: FuzzedParser>(
    _: P.Type, _ body: [UInt8], boundary: MultipartBoundary, limits: MultipartLimits, cut: Cut
) -> Run {
    let mode = "\(P.self), \(cut)"
    var parser = P(boundary: boundary, limits: limits)
    var recorder = EventRecorder(mode: mode)
    var lag: [LagSample] = []
    let isByteByByte: Bool
    if case .byteByByte = cut { isByteByByte = true } else { isByteByByte = false }
    // Byte by byte, one exactly-sized byte of storage serves every feed (a fresh
    // allocation per byte costs more than the parsing).
    let oneByte = UnsafeMutableRawBufferPointer.allocate(byteCount: 1, alignment: 1)
    defer { oneByte.deallocate() }
    do {
        for range in cut.ranges(body.count) {
            recorder.currentByteEnd = range.upperBound
            if isByteByByte {
                oneByte[0] = body[range.lowerBound]
                try parser.feedRecording(UnsafeRawBufferPointer(oneByte), &recorder)
            } else {
                try withChunk(body, range) { try parser.feedRecording($0, &recorder) }
            }
            if parser.bytesConsumed != range.upperBound {
                violation("[\(mode)] bytesConsumed is \(parser.bytesConsumed) after \(range.upperBound) bytes were fed")
            }
            if parser.isComplete != recorder.outcome.sawEnd {
                violation("[\(mode)] isComplete is \(parser.isComplete) but the end event was\(recorder.outcome.sawEnd ? "" : " not") seen")
            }
            if isByteByByte, recorder.open {
                let part = recorder.outcome.parts.count - 1
                lag.append(LagSample(fed: range.upperBound, part: part, delivered: recorder.outcome.parts[part].content.count))
            }
        }
        try parser.finish()
        if !recorder.outcome.sawEnd { violation("[\(mode)] finish() succeeded without an end event") }
    } catch let error as MultipartError {
        if recorder.outcome.sawEnd { violation("[\(mode)] threw after the end event: \(error)") }
        recorder.outcome.error = error
    } catch {
        violation("[\(mode)] threw a \(type(of: error)), not a MultipartError: \(error)")
    }
    return Run(outcome: recorder.outcome, lag: lag, contentStarts: recorder.contentStarts)
}

// MARK: - Checks

/// Whether two runs agree. On an error, the content of the part that was open may have
/// been cut at a different byte (a limit is checked per event, so how much of the last
/// chunk got out depends on the cut): one must then be a prefix of the other.
func agree(_ a: Outcome, _ b: Outcome) -> Bool {
    if a == b { return true }
    guard a.error != nil, a.error == b.error, a.sawEnd == b.sawEnd, a.parts.count == b.parts.count,
          let lastA = a.parts.last, let lastB = b.parts.last, !lastA.ended, !lastB.ended,
          a.parts.dropLast() == b.parts.dropLast() else { return false }
    var (x, y) = (lastA, lastB)
    let shorter = min(x.content.count, y.content.count)
    guard x.content.prefix(shorter) == y.content.prefix(shorter) else { return false }
    x.content = []
    y.content = []
    return x == y
}

func checkInvariance(_ runs: [(Cut, Run)], _ label: String, _ body: [UInt8], _ boundary: MultipartBoundary) {
    guard let (firstCut, first) = runs.first else { return }
    for (cut, other) in runs.dropFirst() where !agree(other.outcome, first.outcome) {
        var diff = ""
        if first.outcome.error != other.outcome.error {
            diff += "errors differ: \(first.outcome.error.map { "\($0)" } ?? "none") | \(other.outcome.error.map { "\($0)" } ?? "none")\n  "
        }
        for (index, (a, b)) in zip(first.outcome.parts, other.outcome.parts).enumerated() where a != b {
            diff += "part \(index + 1) differs\n  "
            break
        }
        violation("\(label) is not split-invariant: \(firstCut) and \(cut) disagree (boundary \(boundary.value.debugDescription), body \(body.count) bytes)",
                  diff + "\(firstCut): \(first.outcome)\n  \(cut): \(other.outcome)")
    }
}

func checkLimits(_ outcome: Outcome, _ limits: MultipartLimits, form: Bool, _ label: String) {
    if outcome.parts.count > limits.maxParts {
        violation("[\(label)] \(outcome.parts.count) parts began with maxParts = \(limits.maxParts)")
    }
    if form {
        let fieldBytes = outcome.parts.filter { $0.filename == nil }.reduce(0) { $0 + $1.content.count }
        if fieldBytes > limits.maxFieldBytes {
            violation("[\(label)] the form handed out \(fieldBytes) bytes of text fields, over maxFieldBytes = \(limits.maxFieldBytes)")
        }
    }
    if let error = outcome.error {
        if error.description.isEmpty { violation("[\(label)] an error with an empty description: \(error.kind)") }
        if error.offset < 0 { violation("[\(label)] an error at a negative offset: \(error)") }
    }
}

/// Byte-by-byte run: header sections within the limit, and content handed out promptly.
func checkBounded(_ run: Run, boundary: MultipartBoundary, limits: MultipartLimits, _ label: String) {
    for (index, part) in run.outcome.parts.enumerated() {
        guard let offset = part.offset else { break }
        let headerBytes = run.contentStarts[index] - offset
        if headerBytes > limits.maxHeaderBytes {
            violation("[\(label)] part \(index + 1) has a header section of \(headerBytes) bytes (from \(offset) to \(run.contentStarts[index])) with maxHeaderBytes = \(limits.maxHeaderBytes)")
        }
        if headerBytes < 1 {
            violation("[\(label)] part \(index + 1)'s content starts at \(run.contentStarts[index]), before its header section at \(offset)")
        }
    }
    // "\r\n--" + boundary, and one more "-" that might start a close delimiter.
    let maxHeldBack = boundary.value.utf8.count + 4 + 1
    for sample in run.lag {
        let part = run.outcome.parts[sample.part]
        let start = run.contentStarts[sample.part]
        let certain = min(part.content.count, sample.fed - start)
        if certain - sample.delivered > maxHeldBack {
            violation("[\(label)] after \(sample.fed) bytes, part \(sample.part + 1) (content from byte \(start), \(part.content.count) bytes in all) had handed out \(sample.delivered) content bytes: \(certain - sample.delivered) held back, more than \(maxHeldBack)")
        }
    }
}

/// The form layer must agree with the multipart layer under it.
func checkFormAgainstRaw(_ form: Outcome, _ raw: Outcome) {
    func same(_ f: FlatPart, _ r: FlatPart) -> Bool {
        f.headers == r.headers && f.number == r.number && f.content == r.content && f.ended == r.ended
    }
    let formKinds: Bool
    switch form.error?.kind {
    case .missingContentDisposition?, .invalidContentDisposition?, .duplicateHeader?, .fieldBytesExceeded?:
        formKinds = true
    default:
        formKinds = false
    }
    if formKinds, let error = form.error {
        // The form stopped at a part the multipart layer read past.
        let partNumber = error.part ?? 0
        if raw.parts.count < partNumber {
            violation("the form failed at part \(partNumber) (\(error.kind)) but the multipart parser began only \(raw.parts.count) parts",
                      "form: \(form)\n  raw: \(raw)")
        }
        for (f, r) in zip(form.parts, raw.parts) where f.number < partNumber && !same(f, r) {
            violation("form and multipart parsers disagree on part \(f.number) before the form's error", "form: \(form)\n  raw: \(raw)")
        }
        return
    }
    if form.error != raw.error || form.sawEnd != raw.sawEnd || form.parts.count != raw.parts.count
        || zip(form.parts, raw.parts).contains(where: { !same($0, $1) }) {
        violation("the form parser and the multipart parser disagree", "form: \(form)\n  raw: \(raw)")
    }
    if form.error == nil {
        for part in form.parts {
            let disposition = part.headers.first { $0.name.lowercased() == "content-disposition" }
            if disposition == nil { violation("form part \(part.number) has no Content-Disposition but was accepted") }
        }
    }
}

func parseEveryWay(_ body: [UInt8], boundary: MultipartBoundary, limits: MultipartLimits, cuts: [Cut]) -> (form: Run, raw: Run) {
    let formRuns = cuts.map { ($0, run(FormDataParser.self, body, boundary: boundary, limits: limits, cut: $0)) }
    checkInvariance(formRuns, "FormDataParser", body, boundary)
    let rawRuns = cuts.map { ($0, run(MultipartParser.self, body, boundary: boundary, limits: limits, cut: $0)) }
    checkInvariance(rawRuns, "MultipartParser", body, boundary)
    for (cut, formRun) in formRuns { checkLimits(formRun.outcome, limits, form: true, "FormDataParser, \(cut)") }
    for (cut, rawRun) in rawRuns {
        checkLimits(rawRun.outcome, limits, form: false, "MultipartParser, \(cut)")
        if case .byteByByte = cut { checkBounded(rawRun, boundary: boundary, limits: limits, "MultipartParser, byte by byte") }
    }
    checkFormAgainstRaw(formRuns[0].1.outcome, rawRuns[0].1.outcome)
    return (formRuns[0].1, rawRuns[0].1)
}

// MARK: - Round trip through MultipartWriter

/// What `MultipartWriter` writes for CR and LF in a name (as browsers do).
func writtenName(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\r": out += "%0D"
        case "\n": out += "%0A"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// Whether `content` can be a part's content as is: it holds no delimiter line (one
/// that would be read as a delimiter, or rejected as a malformed one).
func isSafeContent(_ rawContent: [UInt8], boundary: MultipartBoundary) -> Bool {
    // The header section's last CRLF comes before the content: content that starts with
    // `--boundary` ends the part there (RFC 2046 §5.1.1, a part with no body).
    let content = Array("\r\n".utf8) + rawContent
    let delimiter = Array("\r\n--\(boundary.value)".utf8)
    guard content.count >= delimiter.count else { return true }
    for start in 0...(content.count - delimiter.count) where content[start..<(start + delimiter.count)].elementsEqual(delimiter) {
        let after = start + delimiter.count
        guard after < content.count else { return false }  // the writer's CRLF follows
        switch content[after] {
        case UInt8(ascii: "-"):
            if after + 1 >= content.count || content[after + 1] == UInt8(ascii: "-") { return false }
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"), UInt8(ascii: "\n"):
            return false
        default:
            continue
        }
    }
    return true
}

func roundTrip(_ recipe: [UInt8], boundary: MultipartBoundary, chunkSizes: [Int], emptyChunks: Bool) {
    var reader = ByteReader(recipe)
    var parts: [(headers: [MultipartHeaders.Field], content: [UInt8])] = []
    var expected: [FlatPart] = []
    while parts.count < 8, let control = reader.byte() {
        // Names: any text but NUL (which a header line cannot hold and the writer does not escape).
        let name = String(decoding: reader.take(Int(control & 0x0F)).map { $0 == 0 ? UInt8(ascii: "0") : $0 }, as: UTF8.self)
        var filename: String?
        if control & 0x10 != 0 {
            let length = Int(reader.byte() ?? 0) % 24
            filename = String(decoding: reader.take(length).map { $0 == 0 ? UInt8(ascii: "0") : $0 }, as: UTF8.self)
        }
        var contentType: String?
        if control & 0x20 != 0 {
            let length = Int(reader.byte() ?? 0) % 32
            contentType = String(decoding: reader.take(length).map { 0x21 + $0 % 0x5E }, as: UTF8.self)
        }
        var length = Int(reader.byte() ?? 0)
        if control & 0x40 != 0 { length *= 16 }
        let content = reader.take(length)
        guard isSafeContent(content, boundary: boundary) else { return }
        let headers = MultipartWriter.formDataHeaders(name: name, filename: filename, contentType: contentType)
        parts.append((headers, content))
        expected.append(FlatPart(
            name: writtenName(name), filename: filename.map(writtenName),
            contentType: contentType ?? (filename == nil ? "text/plain" : "application/octet-stream"),
            headers: headers, number: parts.count, offset: nil, content: content, ended: true))
    }
    let body = MultipartWriter.formData(parts, boundary: boundary)
    var cuts: [Cut] = [.whole, .pattern(chunkSizes, emptyChunks: emptyChunks)]
    if body.count < 512 { cuts.append(.byteByByte) }
    let (form, _) = parseEveryWay(body, boundary: boundary, limits: MultipartLimits(), cuts: cuts)
    let want = Outcome(parts: expected, sawEnd: true, error: nil)
    if form.outcome != want {
        violation("a form written by MultipartWriter does not parse back to its parts (boundary \(boundary.value.debugDescription))",
                  "body: \(escaped(body))\n  written: \(want)\n  parsed: \(form.outcome)")
    }
}

// MARK: - Entry

func fuzzMultipart(_ data: [UInt8]) {
    let input = MultipartFuzzInput(data)
    var cuts: [Cut] = [.whole, .pattern(input.chunkSizes, emptyChunks: input.emptyChunks)]
    if input.body.count < 512 { cuts.append(.byteByByte) }
    if input.roundTrip {
        roundTrip(input.body, boundary: input.boundary, chunkSizes: input.chunkSizes, emptyChunks: input.emptyChunks)
    } else {
        _ = parseEveryWay(input.body, boundary: input.boundary, limits: input.limits, cuts: cuts)
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func LLVMFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    fuzzMultipart(bytes)
    return 0
}
#else
@main
enum FuzzMultipartStub {
    static func main() { replayInputs(target: "fuzz-multipart", check: fuzzMultipart) }
}
#endif
