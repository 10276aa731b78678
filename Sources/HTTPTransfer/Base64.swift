/// RFC 4648 base64 (with padding): field values that are not UTF-8, tus metadata and
/// checksums.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = UInt32(0)
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0..<4 {
                out.append(position <= chunk.count ? alphabet[Int((value >> (18 - 6 * position)) & 0x3F)] : 0x3D)
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes `text` encodes, or nil when it is not padded base64.
    package static func decode(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        guard bytes.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count / 4 * 3)
        var index = 0
        while index < bytes.count {
            let group = bytes[index..<(index + 4)]
            let padding = group.reversed().prefix { $0 == 0x3D }.count
            guard padding <= 2, index + 4 == bytes.count || padding == 0 else { return nil }
            var value = UInt32(0)
            for (position, byte) in group.enumerated() {
                let digit: UInt8
                if position >= 4 - padding {
                    digit = 0
                } else {
                    digit = values[Int(byte)]
                    guard digit != 0xFF else { return nil }
                }
                value |= UInt32(digit) << (18 - 6 * position)
            }
            for position in 0..<(3 - padding) { out.append(UInt8(truncatingIfNeeded: value >> (16 - 8 * position))) }
            index += 4
        }
        return out
    }
}
