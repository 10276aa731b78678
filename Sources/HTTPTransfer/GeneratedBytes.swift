/// Deterministic pseudo-random bytes of any length, readable at any offset without
/// producing what comes before: the bytes of `/bytes/N?seed=S`.
///
/// The stream is SplitMix64 from `seed`, each 64-bit output written little-endian:
/// byte `p` is byte `p % 8` of `mix(seed &+ (p / 8 &+ 1) &* 0x9E3779B97F4A7C15)`, where
/// `mix` is SplitMix64's finaliser. A test can compute the expected bytes of any range.
///
/// Version `V` of the same seed (`/bytes/N?seed=S&version=V`, a file that changed) is the
/// stream of the key `mix(seed &+ V &* 0xD1B54A32D192ED03)` in place of `seed`; version 0
/// is the seed's own stream.
public struct GeneratedBytes: Sendable, Equatable {
    public let seed: UInt64
    public let version: UInt64
    /// What the stream is made from: the seed, or for a later version a key mixed from both.
    private let key: UInt64

    public init(seed: UInt64, version: UInt64 = 0) {
        self.seed = seed
        self.version = version
        key = version == 0 ? seed : Self.mix(seed &+ version &* 0xD1B5_4A32_D192_ED03)
    }

    /// The 8 bytes starting at offset `8 * index`, as one little-endian word.
    @inline(__always)
    public func word(_ index: UInt64) -> UInt64 {
        Self.mix(key &+ (index &+ 1) &* 0x9E37_79B9_7F4A_7C15)
    }

    /// SplitMix64's finaliser.
    @inline(__always)
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The byte at `offset`.
    public func byte(at offset: UInt64) -> UInt8 {
        UInt8(truncatingIfNeeded: word(offset / 8) >> (8 * (offset % 8)))
    }

    /// Fills `buffer` with the bytes from `offset` on.
    public func fill(_ buffer: UnsafeMutableRawBufferPointer, from offset: UInt64) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        var position = 0
        var index = offset / 8
        // A first partial word, then whole words, then a last partial word.
        let skip = Int(offset % 8)
        if skip != 0 {
            let word = word(index)
            while position < buffer.count, skip + position < 8 {
                base.storeBytes(of: UInt8(truncatingIfNeeded: word >> (8 * UInt64(skip + position))), toByteOffset: position, as: UInt8.self)
                position += 1
            }
            index += 1
        }
        while buffer.count - position >= 8 {
            base.storeBytes(of: word(index).littleEndian, toByteOffset: position, as: UInt64.self)
            position += 8
            index += 1
        }
        if position < buffer.count {
            let word = word(index)
            var shift: UInt64 = 0
            while position < buffer.count {
                base.storeBytes(of: UInt8(truncatingIfNeeded: word >> shift), toByteOffset: position, as: UInt8.self)
                position += 1
                shift += 8
            }
        }
    }

    /// `count` bytes from `offset`.
    public func bytes(from offset: UInt64, count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer), from: offset)
            initialized = count
        }
    }
}
