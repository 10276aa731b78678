import HTTPTransfer

/// What a request's `Authorization` header offers (RFC 9110 §11.6.2), parsed without any
/// check against the configured credentials.
enum PresentedCredentials: Equatable {
    case none
    /// RFC 7617: the user-id and the password, as bytes (the challenge says UTF-8).
    case basic(user: [UInt8], password: [UInt8])
    /// RFC 6750 §2.1.
    case bearer(token: [UInt8])
    /// A header that is there but cannot be read: why.
    case malformed(String)

    /// Longer values are refused before they are decoded: no user name, password or token
    /// Counterpart takes comes near it.
    static let maxHeaderBytes = 4096

    init(_ head: RequestHead) {
        let values = head.headers.filter { ASCII.equalsIgnoringCase($0.name, "Authorization") }.map(\.value)
        guard let value = values.first else {
            self = .none
            return
        }
        guard values.count == 1 else {
            self = .malformed("the request has \(values.count) Authorization headers; send one")
            return
        }
        self = Self(parsing: value)
    }

    init(parsing value: String) {
        let bytes = Array(value.utf8)
        guard bytes.count <= Self.maxHeaderBytes else {
            self = .malformed("the Authorization header is \(bytes.count) bytes; credentials of more than \(Self.maxHeaderBytes) are not taken")
            return
        }
        // auth-scheme 1*SP token68 (RFC 9110 §11.4); the scheme is case-insensitive.
        let scheme = bytes.prefix { $0 != 0x20 }
        let parameter = Array(bytes.dropFirst(scheme.count).drop { $0 == 0x20 })
        let schemeName = String(decoding: scheme, as: UTF8.self)
        if ASCII.equalsIgnoringCase(schemeName, "Basic") {
            guard !parameter.isEmpty, let decoded = Base64.decode(String(decoding: parameter, as: UTF8.self)) else {
                self = .malformed("the Basic credentials are not base64 of user:password")
                return
            }
            guard let colon = decoded.firstIndex(of: 0x3A) else {
                self = .malformed("the Basic credentials have no colon between the user and the password")
                return
            }
            self = .basic(user: Array(decoded[..<colon]), password: Array(decoded[(colon + 1)...]))
        } else if ASCII.equalsIgnoringCase(schemeName, "Bearer") {
            guard !parameter.isEmpty, parameter.allSatisfy(Self.isToken68) else {
                self = .malformed("the Bearer token is empty or has characters a token cannot have")
                return
            }
            self = .bearer(token: parameter)
        } else {
            self = .malformed("the Authorization scheme \"\(schemeName.prefix(32))\" is not Basic or Bearer")
        }
    }

    /// token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
    private static func isToken68(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E, 0x2B, 0x2F, 0x3D: return true
        default: return false
        }
    }
}
