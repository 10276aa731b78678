import CGnuTLS

/// SHA-256 through GnuTLS, which libmicrohttpd already links (and which uses the CPU's
/// SHA extensions where there are some).
final class SHA256 {
    private var handle: gnutls_hash_hd_t?

    init() {
        // Only fails on allocation failure or a GnuTLS built without SHA-256.
        precondition(gnutls_hash_init(&handle, GNUTLS_DIG_SHA256) == 0, "GnuTLS cannot hash SHA-256")
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        _ = gnutls_hash(handle, base, bytes.count)
    }

    /// The digest as 64 lowercase hex digits. The hasher cannot be used afterwards.
    func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        gnutls_hash_deinit(handle, &digest)
        handle = nil
        return digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    deinit {
        if let handle { gnutls_hash_deinit(handle, nil) }
    }

    /// The digest of `bytes` in one call.
    static func hex(of bytes: [UInt8]) -> String {
        let hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }
}
