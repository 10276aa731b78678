import Foundation

/// The certificate and key a server speaks HTTPS with, as PEM text.
public struct TLSCredentials: Sendable, Equatable {
    public var certificatePEM: String
    public var privateKeyPEM: String
    /// SHA-256 of the certificate (uppercase hex pairs joined by colons), when known: for
    /// clients that pin it.
    public var sha256Fingerprint: String?

    public init(certificatePEM: String, privateKeyPEM: String, sha256Fingerprint: String? = nil) {
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
        self.sha256Fingerprint = sha256Fingerprint
    }

    /// Reads a PEM certificate (chain) and its PEM private key.
    public init(certificateFile: String, privateKeyFile: String) throws(CounterpartServer.StartError) {
        func read(_ path: String) throws(CounterpartServer.StartError) -> String {
            do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw .unusableTLS(reason: "cannot read \(path): \(error.localizedDescription)")
            }
        }
        self.init(certificatePEM: try read(certificateFile), privateKeyPEM: try read(privateKeyFile))
    }

    /// A throwaway self-signed certificate for `hosts` (names and IP addresses; localhost,
    /// 127.0.0.1 and ::1 are always included), valid for 30 days.
    public static func selfSigned(hosts: [String] = []) throws(CounterpartServer.StartError) -> TLSCredentials {
        let all = ["localhost", "127.0.0.1", "::1"] + hosts.filter { !["localhost", "127.0.0.1", "::1", "0.0.0.0", "::"].contains($0) }
        do {
            let certificate = try SelfSignedCertificate.generate(hosts: all)
            return TLSCredentials(certificatePEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM,
                                  sha256Fingerprint: certificate.sha256Fingerprint)
        } catch {
            throw .unusableTLS(reason: error.description)
        }
    }
}
