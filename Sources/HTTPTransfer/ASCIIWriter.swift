/// Writes ASCII text straight into a new string's storage: numbers in any radix, fixed
/// letters, single bytes. Header values made on every request (ETags, dates,
/// `Content-Range`) are written so: interpolation would make and join a string per piece.
package struct ASCIIWriter {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    package private(set) var count = 0

    /// A string of at most `capacity` bytes, as `write` writes it.
    package static func string(capacity: Int, _ write: (inout ASCIIWriter) -> Void) -> String {
        String(unsafeUninitializedCapacity: capacity) { buffer in
            var writer = ASCIIWriter(buffer)
            write(&writer)
            return writer.count
        }
    }

    /// A string of at most `capacity` bytes, as `write` writes it; nil when it declines.
    package static func optionalString(capacity: Int, _ write: (inout ASCIIWriter) -> Bool) -> String? {
        var declined = false
        let text = String(unsafeUninitializedCapacity: capacity) { buffer in
            var writer = ASCIIWriter(buffer)
            declined = !write(&writer)
            return declined ? 0 : writer.count
        }
        return declined ? nil : text
    }

    /// Writes into `buffer`, which must hold what is written.
    package init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    package mutating func byte(_ byte: UInt8) {
        buffer[count] = byte
        count += 1
    }

    package mutating func text(_ text: StaticString) {
        for offset in 0..<text.utf8CodeUnitCount { byte(text.utf8Start[offset]) }
    }

    /// The `index`-th run of `width` letters of `table` (`"SunMon…"`, 1, 3 is `Mon`).
    package mutating func text(_ table: StaticString, index: Int, width: Int) {
        for offset in 0..<width { byte(table.utf8Start[index * width + offset]) }
    }

    /// `value` in `radix` (lowercase letters past 9), at least `minimumDigits` long with
    /// leading zeros.
    package mutating func number(_ value: UInt64, radix: UInt64 = 10, minimumDigits: Int = 1) {
        // The common radixes as constants: their divisions become multiplies and shifts
        // (a division by a variable is tens of cycles, and every digit takes two).
        switch radix {
        case 10: digits(value, radix: 10, minimumDigits: minimumDigits)
        case 16: digits(value, radix: 16, minimumDigits: minimumDigits)
        default: digits(value, radix: radix, minimumDigits: minimumDigits)
        }
    }

    @inline(__always)
    private mutating func digits(_ value: UInt64, radix: UInt64, minimumDigits: Int) {
        var digits = 1
        var rest = value / radix
        while rest > 0 { digits += 1; rest /= radix }
        digits = max(digits, minimumDigits)
        rest = value
        for position in stride(from: count + digits - 1, through: count, by: -1) {
            let digit = UInt8(rest % radix)
            buffer[position] = digit < 10 ? 0x30 + digit : 0x57 + digit
            rest /= radix
        }
        count += digits
    }
}
