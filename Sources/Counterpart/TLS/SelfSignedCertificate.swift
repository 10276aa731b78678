import CGnuTLS

/// Why a throwaway certificate could not be made: which GnuTLS call failed and why.
struct CertificateError: Error, CustomStringConvertible {
    var description: String
}

/// A throwaway self-signed certificate for HTTPS in tests (`--tls-self-signed`), made with
/// GnuTLS, which libmicrohttpd already links.
struct SelfSignedCertificate: Sendable {
    /// The certificate, PEM ("-----BEGIN CERTIFICATE-----...").
    let certificatePEM: String
    /// The unencrypted private key, PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----...").
    let privateKeyPEM: String
    /// SHA-256 of the DER certificate as uppercase hex pairs separated by colons (as
    /// `openssl x509 -fingerprint -sha256` prints it after "sha256 Fingerprint=").
    let sha256Fingerprint: String

    /// The certificate's subject (and issuer) common name.
    static let commonName = "Counterpart test certificate"

    /// Generates an ECDSA P-256 key and a certificate for `hosts` (DNS names and IP
    /// literals, which become subjectAltNames; an IPv6 literal may be in brackets), CN
    /// "Counterpart test certificate", valid from an hour ago to `days` days ahead, with a
    /// random 16-byte positive serial, basicConstraints CA:TRUE (so that a client can take
    /// it as its own trust anchor), key usage digitalSignature + keyCertSign, extended key
    /// usage serverAuth, self-signed with SHA-256.
    static func generate(hosts: [String], days: Int = 30) throws(CertificateError) -> SelfSignedCertificate {
        guard (1...36_500).contains(days) else {
            throw CertificateError(description: "the certificate's validity must be 1 to 36500 days, not \(days)")
        }
        let names = try subjectAltNames(hosts)
        guard !names.isEmpty else {
            throw CertificateError(description: "a certificate needs at least one host name or address")
        }

        // The key.
        var key: gnutls_x509_privkey_t?
        try check(gnutls_x509_privkey_init(&key), "gnutls_x509_privkey_init")
        defer { gnutls_x509_privkey_deinit(key) }
        // GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1): the macro does not import.
        // An explicit curve rather than a security level, whose mapping GnuTLS may change.
        let curveBits = UInt32(1) << 31 | GNUTLS_ECC_CURVE_SECP256R1.rawValue
        try check(gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, curveBits, 0), "gnutls_x509_privkey_generate")

        // The certificate.
        var certificate: gnutls_x509_crt_t?
        try check(gnutls_x509_crt_init(&certificate), "gnutls_x509_crt_init")
        defer { gnutls_x509_crt_deinit(certificate) }
        try check(gnutls_x509_crt_set_version(certificate, 3), "gnutls_x509_crt_set_version")

        // A positive serial of exactly 16 bytes in DER: top bit clear, first byte non-zero.
        var serial = [UInt8](repeating: 0, count: 16)
        try check(gnutls_rnd(GNUTLS_RND_NONCE, &serial, serial.count), "gnutls_rnd")
        serial[0] = serial[0] & 0x7F | 0x01
        try check(gnutls_x509_crt_set_serial(certificate, serial, serial.count), "gnutls_x509_crt_set_serial")

        let now = time(nil)
        try check(gnutls_x509_crt_set_activation_time(certificate, now - 3600), "gnutls_x509_crt_set_activation_time")
        try check(gnutls_x509_crt_set_expiration_time(certificate, now + time_t(days) * 86_400),
                  "gnutls_x509_crt_set_expiration_time")

        let name = Array(commonName.utf8)
        try check(gnutls_x509_crt_set_dn_by_oid(certificate, GNUTLS_OID_X520_COMMON_NAME, 0, name, UInt32(name.count)),
                  "gnutls_x509_crt_set_dn_by_oid")
        try check(gnutls_x509_crt_set_key(certificate, key), "gnutls_x509_crt_set_key")

        for san in names {
            try check(gnutls_x509_crt_set_subject_alt_name(certificate, san.type, san.bytes, UInt32(san.bytes.count),
                                                           UInt32(GNUTLS_FSAN_APPEND)),
                      "gnutls_x509_crt_set_subject_alt_name")
        }
        try check(gnutls_x509_crt_set_basic_constraints(certificate, 1, -1), "gnutls_x509_crt_set_basic_constraints")
        try check(gnutls_x509_crt_set_key_usage(certificate, UInt32(GNUTLS_KEY_DIGITAL_SIGNATURE | GNUTLS_KEY_KEY_CERT_SIGN)),
                  "gnutls_x509_crt_set_key_usage")
        try check(gnutls_x509_crt_set_key_purpose_oid(certificate, GNUTLS_KP_TLS_WWW_SERVER, 0),
                  "gnutls_x509_crt_set_key_purpose_oid")

        // The subject key identifier (GnuTLS does not add one by itself; some clients
        // expect one on a CA certificate).
        var keyID = [UInt8](repeating: 0, count: 64)
        var keyIDSize = keyID.count
        try check(gnutls_x509_crt_get_key_id(certificate, 0, &keyID, &keyIDSize), "gnutls_x509_crt_get_key_id")
        try check(gnutls_x509_crt_set_subject_key_id(certificate, keyID, keyIDSize), "gnutls_x509_crt_set_subject_key_id")

        try check(gnutls_x509_crt_sign2(certificate, certificate, key, GNUTLS_DIG_SHA256, 0), "gnutls_x509_crt_sign2")

        // The results.
        let certificatePEM = try export("gnutls_x509_crt_export2") { gnutls_x509_crt_export2(certificate, GNUTLS_X509_FMT_PEM, &$0) }
        let privateKeyPEM = try export("gnutls_x509_privkey_export2_pkcs8") {
            gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, nil, GNUTLS_PKCS_PLAIN.rawValue, &$0)
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var digestSize = digest.count
        try check(gnutls_x509_crt_get_fingerprint(certificate, GNUTLS_DIG_SHA256, &digest, &digestSize),
                  "gnutls_x509_crt_get_fingerprint")
        let hexDigits = Array("0123456789ABCDEF")
        let fingerprint = digest.prefix(digestSize)
            .map { String([hexDigits[Int($0 >> 4)], hexDigits[Int($0 & 0x0F)]]) }
            .joined(separator: ":")
        return SelfSignedCertificate(certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM,
                                     sha256Fingerprint: fingerprint)
    }

    /// A subjectAltName entry as GnuTLS takes it: a DNS name's text or an address's bytes.
    private struct AltName: Equatable {
        var type: gnutls_x509_subject_alt_name_t
        var bytes: [UInt8]
    }

    /// `hosts` as subjectAltNames, IP literals as their raw address bytes (as
    /// GNUTLS_SAN_IPADDRESS wants them), without duplicates or empty names.
    private static func subjectAltNames(_ hosts: [String]) throws(CertificateError) -> [AltName] {
        var names: [AltName] = []
        for host in hosts {
            var literal = host
            if literal.hasPrefix("["), literal.hasSuffix("]") { literal = String(literal.dropFirst().dropLast()) }
            let name: AltName
            if let address = addressBytes(literal, family: AF_INET, size: 4) ?? addressBytes(literal, family: AF_INET6, size: 16) {
                name = AltName(type: GNUTLS_SAN_IPADDRESS, bytes: address)
            } else if host.isEmpty {
                continue
            } else if host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }) {
                name = AltName(type: GNUTLS_SAN_DNSNAME, bytes: Array(host.utf8))
            } else {
                throw CertificateError(description: "\"\(host)\" is neither an ASCII host name nor an IP address")
            }
            if !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// The bytes of `text` as an address of `family`, or nil if it is not one.
    private static func addressBytes(_ text: String, family: Int32, size: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: 16)
        return inet_pton(family, text, &bytes) == 1 ? Array(bytes.prefix(size)) : nil
    }

    /// Throws, naming `call`, if `result` is a GnuTLS error code.
    private static func check(_ result: Int32, _ call: String) throws(CertificateError) {
        guard result < 0 else { return }
        throw CertificateError(description: "\(call) failed: \(String(cString: gnutls_strerror(result)))")
    }

    /// The text of the datum that `body` exports, freed afterwards with gnutls_free.
    private static func export(_ call: String, _ body: (inout gnutls_datum_t) -> Int32) throws(CertificateError) -> String {
        var datum = gnutls_datum_t(data: nil, size: 0)
        let result = body(&datum)
        defer { cp_gnutls_free(datum.data) }
        try check(result, call)
        guard let data = datum.data else { throw CertificateError(description: "\(call) returned no data") }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(datum.size)), as: UTF8.self)
    }
}
