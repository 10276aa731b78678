/// Limits that bound the memory and work one multipart body may cost.
public struct MultipartLimits: Equatable, Sendable {
    /// Bytes of one part's header section, line ends and the closing empty line included.
    public var maxHeaderBytes: Int
    /// Parts in one body.
    public var maxParts: Int
    /// Bytes of the form's text together: field values, part names and file names (file
    /// contents do not count; see `FormDataParser`).
    public var maxFieldBytes: Int

    public static let defaultMaxHeaderBytes = 16 * 1024
    public static let defaultMaxParts = 1_000
    public static let defaultMaxFieldBytes = 1 << 20

    public init(
        maxHeaderBytes: Int = defaultMaxHeaderBytes,
        maxParts: Int = defaultMaxParts,
        maxFieldBytes: Int = defaultMaxFieldBytes
    ) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxParts = maxParts
        self.maxFieldBytes = maxFieldBytes
    }
}

/// A part as it begins: its headers, its number (1-based), where its header section
/// starts in the body and where its content starts.
public struct MultipartPart: Equatable, Sendable {
    public var headers: MultipartHeaders
    public var number: Int
    public var offset: Int
    public var contentOffset: Int
}

/// What the parser reports while it reads a body.
public enum MultipartEvent {
    case partBegin(MultipartPart)
    /// Bytes of the current part's content. The buffer is a slice of the chunk being fed
    /// (or, for a few bytes held back at a chunk's end, of the parser's own storage) and is
    /// valid only during the call.
    case partData(UnsafeRawBufferPointer)
    case partEnd
    /// The close delimiter was read; anything after it is the epilogue and is ignored.
    case end
}

/// A streaming, push-fed parser of multipart bodies (RFC 2046 §5.1, RFC 7578).
///
/// Feed it chunks of any size; it calls the handler with events as soon as it can tell
/// them. Memory stays bounded by `limits.maxHeaderBytes` plus the boundary's length,
/// whatever the size of the body or of its parts.
///
/// - The preamble and the epilogue are ignored; transport padding (spaces, tabs) after a
///   delimiter is accepted; `--boundary--` ends the body.
/// - Line ends: the first delimiter line decides, as in Go's `mime/multipart`: if it ends
///   in a bare LF, the body's delimiters are `LF--boundary`, otherwise `CRLF--boundary`.
///   Header lines may end in CRLF or LF either way.
/// - `--boundary` followed by a character other than `-`, space, tab, CR or LF is not a
///   delimiter but data (Go does the same), so a boundary that is a prefix of a longer
///   string in the data does not split a part.
/// - Header lines starting with a space or tab continue the previous value (obsolete line
///   folding, joined with one space).
///
/// After it throws, the parser must not be fed again.
public struct MultipartParser {
    public let boundary: MultipartBoundary
    public let limits: MultipartLimits
    /// Bytes of the body fed so far.
    public private(set) var bytesConsumed = 0
    /// Parts begun so far.
    public private(set) var partCount = 0
    /// Whether the close delimiter has been read.
    public var isComplete: Bool { if case .epilogue = state { return true } else { return false } }

    private enum State {
        case preamble
        case afterDelimiter(DelimiterTail)
        case headers
        case data
        case epilogue
        case failed
    }

    /// Progress through what follows `--boundary` on its line.
    private enum DelimiterTail {
        case start, oneDash, padding, carriageReturn
    }

    private var state = State.preamble
    /// The pattern being searched: `LF--boundary` until the first delimiter line has told
    /// the line ends, then `CRLF--boundary` or `LF--boundary`.
    private var delimiter: [UInt8]
    private var sawFirstDelimiter = false
    private var inPart = false
    /// Bytes held between chunks: a possible delimiter prefix, or a partial header section.
    private var carry: [UInt8] = []
    /// How many of the delimiter bytes held in `carry` (or just matched) were never in the
    /// body: the line end pretended before the body's start and before each part's data,
    /// where the line end that precedes a delimiter was already read (see `openData`).
    /// They are never handed out as data.
    private var pretended = 0
    /// The header section being read: its fields so far and its size in complete lines.
    private var headers = MultipartHeaders()
    private var headerBytes = 0
    private var partOffset = 0
    private var firstBytes: [UInt8] = []
    /// The error that stopped the parser: feeding it again throws the same.
    private var failedWith: (any Error)?

    private static let firstBytesKept = 72

    public init(boundary: MultipartBoundary, limits: MultipartLimits = MultipartLimits()) {
        self.boundary = boundary
        self.limits = limits
        delimiter = [ASCII.lf, ASCII.dash, ASCII.dash] + Array(boundary.value.utf8)
        // The body's start counts as a line start: pretend a LF came before it.
        carry = [ASCII.lf]
        pretended = 1
        carry.reserveCapacity(max(delimiter.count + 1, 256))
    }

    /// Parses the next chunk of the body.
    public mutating func feed(
        _ chunk: UnsafeRawBufferPointer, _ handler: (MultipartEvent) throws -> Void
    ) throws {
        if let failedWith { throw failedWith }
        if firstBytes.count < Self.firstBytesKept {
            firstBytes.append(contentsOf: chunk.prefix(Self.firstBytesKept - firstBytes.count))
        }
        var position = 0
        do {
            while position < chunk.count {
                switch state {
                case .preamble, .data:
                    position = try scan(chunk, from: position, handler)
                case .afterDelimiter(let tail):
                    position = try readDelimiterTail(tail, chunk, from: position, handler)
                case .headers:
                    position = try readHeaders(chunk, from: position, handler)
                case .epilogue:
                    position = chunk.count
                case .failed:
                    preconditionFailure("unreachable: a failed parser throws before this")
                }
            }
        } catch {
            state = .failed
            failedWith = error
            throw error
        }
        bytesConsumed += chunk.count
    }

    /// Parses the next chunk of the body.
    public mutating func feed(_ chunk: [UInt8], _ handler: (MultipartEvent) throws -> Void) throws {
        try chunk.withUnsafeBytes { try feed($0, handler) }
    }

    /// Declares the end of the body: throws unless the close delimiter was read.
    public mutating func finish() throws {
        if let failedWith { throw failedWith }
        let error: MultipartError
        switch state {
        case .epilogue:
            return
        case .preamble:
            error = failure(.noDelimiter(firstLine: firstLine), offset: bytesConsumed)
        case .afterDelimiter:
            error = failure(.truncated(.delimiterLine), offset: bytesConsumed)
        case .headers:
            error = failure(.truncated(.headers), offset: bytesConsumed)
        case .data, .failed:
            error = failure(.truncated(.data), offset: bytesConsumed)
        }
        state = .failed
        failedWith = error
        throw error
    }

    // MARK: - Scanning for the delimiter

    /// In the preamble or a part's data: finds the next delimiter, hands out the data
    /// before it, and holds back a possible delimiter prefix at the chunk's end.
    private mutating func scan(
        _ chunk: UnsafeRawBufferPointer, from start: Int, _ handler: (MultipartEvent) throws -> Void
    ) throws -> Int {
        let isData: Bool
        if case .data = state { isData = true } else { isData = false }
        var position = start

        // The delimiter's first byte (CR or LF) occurs nowhere else in it, so what is
        // carried is a delimiter prefix starting at its first byte, and if it does not
        // continue into this chunk, no delimiter starts inside it.
        if !carry.isEmpty {
            let have = carry.count
            let needed = delimiter.count - have
            let available = min(needed, chunk.count - position)
            let continues = delimiter.withUnsafeBytes { pattern in
                memcmp(pattern.baseAddress! + have, chunk.baseAddress! + position, available) == 0
            }
            if continues {
                if available < needed {
                    carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[position..<(position + available)]))
                    return chunk.count
                }
                carry.removeAll(keepingCapacity: true)
                state = .afterDelimiter(.start)
                return position + available
            }
            if isData, carry.count > pretended {
                try carry.withUnsafeBytes { try handler(.partData(UnsafeRawBufferPointer(rebasing: $0[pretended...]))) }
            }
            carry.removeAll(keepingCapacity: true)
        }
        pretended = 0

        let found = delimiter.withUnsafeBytes { ByteSearch.first($0, in: chunk, from: position) }
        if let found {
            if isData, found > position {
                try handler(.partData(UnsafeRawBufferPointer(rebasing: chunk[position..<found])))
            }
            state = .afterDelimiter(.start)
            return found + delimiter.count
        }

        var holdFrom = chunk.count
        let windowStart = max(position, chunk.count - delimiter.count + 1)
        var index = chunk.count - 1
        while index >= windowStart {
            if chunk[index] == delimiter[0] {
                let tail = UnsafeRawBufferPointer(rebasing: chunk[index...])
                let isPrefix = delimiter.withUnsafeBytes { ByteSearch.matches(tail, in: $0, at: 0) }
                if isPrefix { holdFrom = index }
                break
            }
            index -= 1
        }
        if isData, holdFrom > position {
            try handler(.partData(UnsafeRawBufferPointer(rebasing: chunk[position..<holdFrom])))
        }
        if holdFrom < chunk.count {
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[holdFrom...]))
        }
        position = chunk.count
        return position
    }

    /// After `--boundary`: `--` closes the body; padding and a line end open a part;
    /// any other character means the match was data after all.
    private mutating func readDelimiterTail(
        _ start: DelimiterTail, _ chunk: UnsafeRawBufferPointer, from: Int,
        _ handler: (MultipartEvent) throws -> Void
    ) throws -> Int {
        var tail = start
        var position = from
        while position < chunk.count {
            let byte = chunk[position]
            switch tail {
            case .start where byte == ASCII.dash:
                tail = .oneDash
            case .start, .padding:
                if ASCII.isWhitespace(byte) {
                    tail = .padding
                } else if byte == ASCII.cr {
                    tail = .carriageReturn
                } else if byte == ASCII.lf {
                    try openPart(lineEnd: [ASCII.lf], at: position + 1, handler)
                    return position + 1
                } else if tail == .start {
                    try notADelimiter(dashes: 0, handler)
                    return position
                } else {
                    throw failure(.malformedDelimiter, offset: bytesConsumed + position, part: partCount + 1)
                }
            case .oneDash:
                if byte == ASCII.dash {
                    if !sawFirstDelimiter, let firstLine = textBeforeOnlyCloseDelimiter(endingAt: bytesConsumed + position + 1) {
                        throw failure(.onlyCloseDelimiter(firstLine: firstLine), offset: bytesConsumed + position + 1)
                    }
                    if inPart { try handler(.partEnd) }
                    inPart = false
                    state = .epilogue
                    try handler(.end)
                    return position + 1
                }
                try notADelimiter(dashes: 1, handler)
                return position
            case .carriageReturn:
                guard byte == ASCII.lf else {
                    throw failure(.malformedDelimiter, offset: bytesConsumed + position, part: partCount + 1)
                }
                try openPart(lineEnd: [ASCII.cr, ASCII.lf], at: position + 1, handler)
                return position + 1
            }
            position += 1
        }
        state = .afterDelimiter(tail)
        return position
    }

    /// When the first delimiter is the close delimiter ending at `end`: the body's first
    /// line if text came before it, nil if only line ends and spaces did (`--boundary--`
    /// alone is an empty form). Text there means the parts were written with another
    /// boundary than the one declared: each of its delimiters went by as preamble.
    private func textBeforeOnlyCloseDelimiter(endingAt end: Int) -> String? {
        // The close delimiter is `--boundary--` after a LF (a pretended one at the start).
        let preamble = end - boundary.value.utf8.count - 4 - 1
        guard preamble > 0 else { return nil }
        let isBlank = preamble <= firstBytes.count
            && firstBytes.prefix(preamble).allSatisfy { ASCII.isWhitespace($0) || $0 == ASCII.cr || $0 == ASCII.lf }
        guard !isBlank else { return nil }
        return firstLine
    }

    /// The body's first line as text (for errors that name what the body starts with).
    private var firstLine: String {
        headerText(firstBytes.prefix { $0 != ASCII.cr && $0 != ASCII.lf })
    }

    /// The bytes matched as a delimiter were content: give them back as data (but for a
    /// pretended line end, which was never content).
    private mutating func notADelimiter(dashes: Int, _ handler: (MultipartEvent) throws -> Void) throws {
        defer { pretended = 0 }
        if inPart {
            try delimiter.withUnsafeBytes { try handler(.partData(UnsafeRawBufferPointer(rebasing: $0[pretended...]))) }
            if dashes > 0 { try [ASCII.dash].withUnsafeBytes { try handler(.partData($0)) } }
            state = .data
        } else {
            state = .preamble
        }
    }

    /// A complete delimiter line: close the current part, open the next.
    private mutating func openPart(
        lineEnd: [UInt8], at position: Int, _ handler: (MultipartEvent) throws -> Void
    ) throws {
        if !sawFirstDelimiter {
            sawFirstDelimiter = true
            delimiter = lineEnd + [ASCII.dash, ASCII.dash] + Array(boundary.value.utf8)
        }
        if inPart { try handler(.partEnd) }
        inPart = false
        guard partCount < limits.maxParts else {
            throw failure(.tooManyParts(limit: limits.maxParts), offset: bytesConsumed + position, part: partCount + 1)
        }
        partCount += 1
        partOffset = bytesConsumed + position
        headerBytes = 0
        state = .headers
    }

    // MARK: - Part headers

    /// Reads a part's header section line by line up to its empty line. Each line is
    /// parsed as soon as it is complete, in place when the chunk holds all of it, else
    /// through `carry`; the section may not exceed `limits.maxHeaderBytes`.
    private mutating func readHeaders(
        _ chunk: UnsafeRawBufferPointer, from start: Int, _ handler: (MultipartEvent) throws -> Void
    ) throws -> Int {
        var position = start
        while position < chunk.count {
            let budget = limits.maxHeaderBytes - headerBytes - carry.count
            let window = UnsafeRawBufferPointer(rebasing: chunk[position..<min(chunk.count, position + budget)])
            guard let lf = ByteSearch.first(ASCII.lf, in: window, from: 0) else {
                if window.count == budget {
                    throw failure(.headerSectionTooLarge(limit: limits.maxHeaderBytes), offset: partOffset, part: partCount)
                }
                carry.append(contentsOf: window)
                return chunk.count
            }
            let lineOffset = partOffset + headerBytes
            headerBytes += carry.count + lf + 1
            let sectionEnded: Bool
            if carry.isEmpty {
                sectionEnded = try takeHeaderLine(UnsafeRawBufferPointer(rebasing: window[0..<lf]), offset: lineOffset)
            } else {
                carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: window[0..<lf]))
                let line = carry
                carry.removeAll(keepingCapacity: true)
                sectionEnded = try line.withUnsafeBytes { try takeHeaderLine($0, offset: lineOffset) }
            }
            position += lf + 1
            if sectionEnded {
                let part = MultipartPart(headers: headers, number: partCount, offset: partOffset, contentOffset: partOffset + headerBytes)
                headers = MultipartHeaders()
                inPart = true
                openData()
                try handler(.partBegin(part))
                return position
            }
        }
        return position
    }

    /// A part's content begins. RFC 2046 §5.1.1 lets a part end right after its headers
    /// (`body-part := MIME-part-headers [CRLF *OCTET]`): the header section's last line end
    /// is then also the one before the next delimiter. So the delimiter's line end is
    /// pretended here, as at the body's start, and `--boundary` straight after the headers
    /// closes an empty part, as Go's `mime/multipart` reads it.
    private mutating func openData() {
        state = .data
        let lineEnd = delimiter.count - 2 - boundary.value.utf8.count
        carry.removeAll(keepingCapacity: true)
        carry.append(contentsOf: delimiter.prefix(lineEnd))
        pretended = lineEnd
    }

    /// Parses one header line (RFC 5322 §2.2 as RFC 7578 uses it), its LF removed.
    /// Returns true for the empty line that ends the section.
    private mutating func takeHeaderLine(_ rawLine: UnsafeRawBufferPointer, offset: Int) throws -> Bool {
        var line = rawLine
        if let last = line.last, last == ASCII.cr { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        if line.isEmpty { return true }
        func malformed(_ why: String) -> MultipartError {
            failure(.malformedHeader(why), offset: offset, part: partCount)
        }
        // memchr (the line is not empty here): two whole-line scans.
        if memchr(line.baseAddress!, 0, line.count) != nil { throw malformed("the line contains a NUL byte") }
        if memchr(line.baseAddress!, Int32(ASCII.cr), line.count) != nil {
            throw malformed("the line contains a carriage return that does not end it")
        }
        if ASCII.isWhitespace(line[0]) {
            guard !headers.fields.isEmpty else { throw malformed("the first header line starts with whitespace") }
            headers.continueLastValue(with: headerText(UnsafeRawBufferPointer(rebasing: ASCII.trimmed(line))))
            return false
        }
        guard let colon = line.firstIndex(of: ASCII.colon) else {
            throw malformed("\"\(Self.excerpt(line))\" has no colon (is the empty line after the headers missing?)")
        }
        let name = UnsafeRawBufferPointer(rebasing: line[0..<colon])
        guard !name.isEmpty, name.allSatisfy(ASCII.isTokenChar) else {
            throw malformed("\"\(Self.excerpt(name))\" is not a valid header name")
        }
        let value = UnsafeRawBufferPointer(rebasing: ASCII.trimmed(line[(colon + 1)...]))
        headers.append(.init(name: String(decoding: name, as: UTF8.self), value: headerText(value)))
        return false
    }

    private static func excerpt(_ bytes: UnsafeRawBufferPointer) -> String {
        let text = headerText(bytes.prefix(60))
        return bytes.count > 60 ? text + "…" : text
    }

    private func failure(_ kind: MultipartError.Kind, offset: Int, part: Int? = nil) -> MultipartError {
        MultipartError(kind, offset: offset, part: part ?? (partCount > 0 ? partCount : nil), boundary: boundary.value)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
