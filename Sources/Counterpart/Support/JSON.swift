import HTTPTransfer

/// A JSON value with objects that keep their keys in order, so answers read the way the
/// contract shows them. Its text is written by `JSONWriter`, as is every JSON the server
/// writes on a hot path without making a value first (a request's event).
enum JSON: Equatable, Sendable {
    case string(String)
    case number(Int64)
    case unsigned(UInt64)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    static func == (a: JSON, b: JSON) -> Bool { a.bytes == b.bytes }

    /// Compact JSON text.
    var serialized: String { String(decoding: bytes, as: UTF8.self) }

    var bytes: [UInt8] {
        var out = JSONWriter()
        out.value(self)
        return out.bytes
    }
}

/// Compact JSON written byte by byte into memory of its own (grown by doubling), copied out
/// once as `bytes`: no value tree, no intermediate strings, and no check of an array's
/// uniqueness per byte (a request's event is a few hundred appends, on a hot path while
/// someone watches). A string that needs no escape is copied whole. Commas go in by
/// themselves: a value or a key after another member or item is preceded by one.
/// Not copyable: it owns its memory.
struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    /// Whether the next member or item follows another (and so takes a comma).
    private var follows = false
    /// The last date written (`date(_:)`) and its text, 29 bytes; nil before the first.
    private var lastDateSeconds: Int64?
    private var lastDateText: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    init(capacity: Int = 0) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// What has been written.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// How many bytes have been written.
    var written: Int { count }

    /// The bytes written from `offset` on, as long as `body` runs.
    func withWritten<Result>(from offset: Int, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        body(UnsafeRawBufferPointer(start: base + offset, count: count - offset))
    }

    /// Forgets what was written and keeps the memory: a writer used again and again (an
    /// event stream's) allocates only while its largest text grows.
    mutating func removeAll() {
        count = 0
        follows = false
    }

    /// Room for `more` bytes after the ones written.
    @inline(__always)
    private mutating func reserve(_ more: Int) {
        if count + more > capacity { grow(to: count + more) }
    }

    private mutating func grow(to needed: Int) {
        let larger = max(needed, 2 * capacity)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    @inline(__always)
    private mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    private mutating func put(_ more: UnsafeBufferPointer<UInt8>) {
        guard let from = more.baseAddress, !more.isEmpty else { return }
        reserve(more.count)
        (base + count).initialize(from: from, count: more.count)
        count += more.count
    }

    /// Bytes as they are: outside any JSON (an SSE frame's `data: ` and its end), or a
    /// run of JSON punctuation and keys written as one (`,"method":`). What comes next
    /// starts afresh, without a comma.
    mutating func raw(_ text: StaticString) {
        literal(text)
        follows = false
    }

    /// A value has just ended in bytes written `raw` (`…}`): what comes next takes a comma.
    mutating func closedValue() {
        follows = true
    }

    /// Bytes as they are, inside a value (no comma, nothing escaped).
    mutating func literal(_ text: StaticString) {
        put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func beginObject() {
        separate()
        put(0x7B)
        follows = false
    }

    mutating func endObject() {
        put(0x7D)
        follows = true
    }

    mutating func beginArray() {
        separate()
        put(0x5B)
        follows = false
    }

    mutating func endArray() {
        put(0x5D)
        follows = true
    }

    /// A member's key (plain ASCII that needs no escape) and its colon.
    mutating func key(_ name: StaticString) {
        separate()
        put(0x22)
        literal(name)
        append(0x22, 0x3A)
        follows = false
    }

    /// A key given at run time, escaped as a string is.
    mutating func key(dynamic name: String) {
        string(name)
        put(0x3A)
        follows = false
    }

    mutating func string(_ text: String) {
        separate()
        put(0x22)
        stringContent(text)
        put(0x22)
        follows = true
    }

    mutating func string(_ text: String?) {
        if let text { string(text) } else { null() }
    }

    /// A string written in pieces: `beginString()`, `stringContent(_:)` for each, `endString()`.
    mutating func beginString() {
        separate()
        put(0x22)
    }

    mutating func endString() {
        put(0x22)
        follows = true
    }

    /// `text` escaped, without quotes. Most strings (paths, header names and values) need
    /// no escape: one append, not one per byte. 0xE2 leads U+2028 and U+2029 (and others):
    /// those take the slow path.
    mutating func stringContent(_ text: String) {
        // A borrowed view of the string's bytes (a small string's are copied out first).
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { content(of: $0) }
        if done == nil { Array(text.utf8).withUnsafeBufferPointer { content(of: $0) } }
    }

    private mutating func content(of utf8: UnsafeBufferPointer<UInt8>) {
        if Self.needsEscape(utf8) { escaped(utf8) } else { put(utf8) }
    }

    /// Whether `utf8` holds a byte below 0x20, `"`, `\`, 0x7F or 0xE2: eight bytes at a
    /// time (a request's event is mostly header names and values that need none).
    static func needsEscape(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = utf8.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        var index = 0
        while index + 8 <= utf8.count {
            if wordNeedsEscape(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { return true }
            index += 8
        }
        while index < utf8.count {
            let byte = utf8[index]
            if byte < 0x20 || byte == 0x22 || byte == 0x5C || byte == 0x7F || byte == 0xE2 { return true }
            index += 1
        }
        return false
    }

    /// The same test on eight bytes at once: `(x - 0x01…) & ~x & 0x80…` is nonzero exactly
    /// when some byte of `x` is zero (a borrow only starts at a zero byte), and with 0x20
    /// for 0x01 when some byte is below 0x20; a byte equal to `c` is a zero byte of `x ^ c…`.
    @inline(__always)
    private static func wordNeedsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZeroByte(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
        let below20 = (word &- ones &* 0x20) & ~word & highs
        return below20 | hasZeroByte(word ^ (ones &* 0x22)) | hasZeroByte(word ^ (ones &* 0x5C))
            | hasZeroByte(word ^ (ones &* 0x7F)) | hasZeroByte(word ^ (ones &* 0xE2)) != 0
    }

    /// A string's bytes one by one: a Swift string is valid UTF-8, so a byte below 0x80 is
    /// a whole scalar, and U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
    private mutating func escaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            switch byte {
            case 0x22: append(0x5C, 0x22)
            case 0x5C: append(0x5C, 0x5C)
            case 0x0A: append(0x5C, 0x6E)
            case 0x0D: append(0x5C, 0x72)
            case 0x09: append(0x5C, 0x74)
            case 0..<0x20, 0x7F: unicodeEscape(UInt16(byte))
            case 0xE2 where index + 2 < utf8.count && utf8[index + 1] == 0x80 && (utf8[index + 2] == 0xA8 || utf8[index + 2] == 0xA9):
                unicodeEscape(utf8[index + 2] == 0xA8 ? 0x2028 : 0x2029)
                index += 2
            default: put(byte)
            }
            index += 1
        }
    }

    /// `\uXXXX`, lowercase hex.
    private mutating func unicodeEscape(_ value: UInt16) {
        append(0x5C, 0x75)
        for shift in stride(from: 12, through: 0, by: -4) {
            let digit = UInt8((value >> UInt16(shift)) & 0xF)
            put(digit < 10 ? 0x30 + digit : 0x57 + digit)
        }
    }

    mutating func number(_ value: Int64) {
        separate()
        if value < 0 { put(0x2D) }
        digits(value.magnitude)
        follows = true
    }

    mutating func number(_ value: Int) { number(Int64(value)) }

    mutating func unsigned(_ value: UInt64) {
        separate()
        digits(value)
        follows = true
    }

    mutating func unsigned(_ value: UInt64?) {
        if let value { unsigned(value) } else { null() }
    }

    mutating func bool(_ value: Bool) {
        separate()
        if value { literal("true") } else { literal("false") }
        follows = true
    }

    mutating func null() {
        separate()
        literal("null")
        follows = true
    }

    /// A value made as a tree (the answers that are not on a hot path).
    mutating func value(_ json: JSON) {
        switch json {
        case .string(let text): string(text)
        case .number(let n): number(n)
        case .unsigned(let n): unsigned(n)
        case .bool(let b): bool(b)
        case .null: null()
        case .array(let items):
            beginArray()
            for item in items { value(item) }
            endArray()
        case .object(let members):
            beginObject()
            for (name, member) in members {
                key(dynamic: name)
                value(member)
            }
            endObject()
        }
    }

    /// The IMF-fixdate of `date` as a JSON string, as `date.description` writes it. The
    /// last one is kept: the requests a stream of events writes arrived mostly in the same
    /// second.
    mutating func date(_ date: HTTPDate) {
        separate()
        put(0x22)
        if date.secondsSince1970 != lastDateSeconds {
            let length = withUnsafeMutableBytes(of: &lastDateText) { raw in raw.withMemoryRebound(to: UInt8.self) { date.write(into: $0) } }
            lastDateSeconds = length == HTTPDate.imfFixdateLength ? date.secondsSince1970 : nil
        }
        if lastDateSeconds == date.secondsSince1970 {
            withUnsafeBytes(of: lastDateText) { raw in
                raw.withMemoryRebound(to: UInt8.self) { put(UnsafeBufferPointer(rebasing: $0.prefix(HTTPDate.imfFixdateLength))) }
            }
        } else {
            stringContent(date.description)
        }
        put(0x22)
        follows = true
    }

    /// Bytes as they are, already JSON (a value written before).
    mutating func json(_ written: [UInt8]) {
        separate()
        written.withUnsafeBufferPointer { put($0) }
        follows = true
    }

    private mutating func append(_ first: UInt8, _ second: UInt8) {
        put(first)
        put(second)
    }

    private mutating func separate() {
        if follows { put(0x2C) }
    }

    /// `value` in decimal, inside a value (no comma).
    mutating func digits(_ value: UInt64) {
        if value < 10 {
            put(0x30 + UInt8(value))
            return
        }
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        reserve(digits)
        rest = value
        for position in stride(from: count + digits - 1, through: count, by: -1) {
            base[position] = 0x30 + UInt8(rest % 10)
            rest /= 10
        }
        count += digits
    }
}
