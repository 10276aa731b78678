import HTTPTransfer

/// A form part as a test sees it once the body is parsed: the event stream flattened.
struct ParsedFormPart: Equatable, CustomStringConvertible {
    var name: String
    var filename: String?
    var contentType: String
    var headers: [MultipartHeaders.Field]
    var content: [UInt8]

    var description: String {
        "\(name)\(filename.map { " [file \($0)]" } ?? "") \(contentType) \(content.count) bytes: \(String(decoding: content.prefix(40), as: UTF8.self))"
    }
}

/// How a body is cut into chunks before it is fed.
enum Chunking: CustomStringConvertible {
    case whole
    case split(at: Int)
    case every(Int)

    func chunks(of body: [UInt8]) -> [ArraySlice<UInt8>] {
        switch self {
        case .whole:
            return [body[...]]
        case .split(let at):
            return [body[..<at], body[at...]]
        case .every(let size):
            return stride(from: 0, to: body.count, by: size).map { body[$0..<min($0 + size, body.count)] }
        }
    }

    /// Whole, byte by byte, and every split point into two chunks.
    static func all(for body: [UInt8]) -> [Chunking] {
        [.whole, .every(1), .every(7)] + (0...body.count).map { .split(at: $0) }
    }

    var description: String {
        switch self {
        case .whole: return "whole"
        case .split(let at): return "split at \(at)"
        case .every(let n): return "every \(n) bytes"
        }
    }
}

/// Parses `body` as multipart/form-data fed in `chunking`'s chunks, checking the event
/// order on the way (begin, data*, end per part; one final end; nothing after it).
func parseForm(
    _ body: [UInt8], boundary: String, limits: MultipartLimits = MultipartLimits(),
    chunking: Chunking = .whole
) -> Result<[ParsedFormPart], MultipartError> {
    var parser = FormDataParser(boundary: try! MultipartBoundary(boundary), limits: limits)
    var parts: [ParsedFormPart] = []
    var open = false
    var ended = false
    do {
        for chunk in chunking.chunks(of: body) {
            try parser.feed(Array(chunk)) { event in
                precondition(!ended, "event after end")
                switch event {
                case .partBegin(let part):
                    precondition(!open, "part begins inside a part")
                    open = true
                    parts.append(ParsedFormPart(name: part.name, filename: part.filename,
                                                contentType: part.contentType, headers: part.headers.fields,
                                                content: []))
                case .partData(let bytes):
                    precondition(open, "data outside a part")
                    parts[parts.count - 1].content += bytes
                case .partEnd:
                    precondition(open, "part end outside a part")
                    open = false
                case .end:
                    precondition(!open, "end inside a part")
                    ended = true
                }
            }
        }
        try parser.finish()
        precondition(ended, "finish succeeded without an end event")
        return .success(parts)
    } catch let error as MultipartError {
        return .failure(error)
    } catch {
        fatalError("unexpected error \(error)")
    }
}

/// Parses `body` every way `Chunking.all` cuts it and returns the distinct results with
/// the chunkings that produced them; one entry means the parse is split-invariant.
func parseFormEveryWay(
    _ body: [UInt8], boundary: String, limits: MultipartLimits = MultipartLimits()
) -> [(result: Result<[ParsedFormPart], MultipartError>, chunking: Chunking)] {
    var distinct: [(result: Result<[ParsedFormPart], MultipartError>, chunking: Chunking)] = []
    for chunking in Chunking.all(for: body) {
        let result = parseForm(body, boundary: boundary, limits: limits, chunking: chunking)
        if !distinct.contains(where: { $0.result == result }) { distinct.append((result, chunking)) }
    }
    return distinct
}

extension Array where Element == UInt8 {
    init(_ text: String) { self = Array(text.utf8) }
}
