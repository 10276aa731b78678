/// Comparisons of secrets whose time does not tell an attacker how much of a guess was
/// right: both sides are hashed to SHA-256 (so their lengths do not show either) and every
/// byte of the digests is looked at.
enum ConstantTime {
    static func equals(_ a: some Sequence<UInt8>, _ b: some Sequence<UInt8>) -> Bool {
        digestsEqual(digest(a), digest(b))
    }

    /// Whether two digests (of one length) are equal, with no early exit.
    static func digestsEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    static func digest(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        let hash = MessageDigest(.sha256)
        Array(bytes).withUnsafeBytes { hash.update($0) }
        return hash.finish()
    }
}
