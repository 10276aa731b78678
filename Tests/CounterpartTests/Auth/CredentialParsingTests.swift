@testable import Counterpart
import Testing

/// The pure parts: rights, the Authorization header, which right a path needs, the journal's redaction.
@Suite("Access control: parsing")
struct CredentialParsingTests {
    @Test(arguments: [
        ("read", AccessRights.read), ("write", .write), ("control", .control), ("read,write", [.read, .write]),
        ("control,read", [.read, .control]), ("read,write,control", [.read, .write, .control]),
    ] as [(String, AccessRights)])
    func rightsParse(_ text: String, _ rights: AccessRights) {
        #expect(AccessRights(parsing: text) == rights)
    }

    @Test(arguments: ["", "Read", "read,", ",read", "read,read", "read write", "admin", "read;write"])
    func rightsRefuse(_ text: String) {
        #expect(AccessRights(parsing: text) == nil)
    }

    @Test func authorizationHeaders() {
        #expect(PresentedCredentials(parsing: "Basic YTpiOmM=") == .basic(user: Array("a".utf8), password: Array("b:c".utf8)))
        #expect(PresentedCredentials(parsing: "basic   YTo=") == .basic(user: Array("a".utf8), password: []))
        #expect(PresentedCredentials(parsing: "Bearer abc-._~+/=") == .bearer(token: Array("abc-._~+/=".utf8)))
        #expect(PresentedCredentials(parsing: "BEARER x") == .bearer(token: Array("x".utf8)))
        for malformed in ["Basic YTo", "Basic YQ==", "Basic", "Bearer", "Bearer a b", "Negotiate abc", "", "Basic\tYTo="] {
            guard case .malformed = PresentedCredentials(parsing: malformed) else {
                Issue.record("\"\(malformed)\" was not refused")
                continue
            }
        }
    }

    @Test func whichRightAPathNeeds() {
        func requirement(_ method: String, _ path: String, _ headers: [HTTPField] = []) -> AccessPolicy.Requirement {
            AccessPolicy.requirement(for: RequestHead(method: method, path: path, query: [], version: "HTTP/1.1", headers: headers, clientAddress: "1.2.3.4"),
                                     path: RequestPath(path))
        }
        let id = String(repeating: "a", count: 32)
        #expect(requirement("GET", "/a.txt") == .init(right: .read))
        #expect(requirement("GET", "/%75ploads/") == .init(right: .read))
        #expect(requirement("GET", "/bad%zz") == .init(right: .read))
        #expect(requirement("POST", "//upload") == .init(right: .write))
        #expect(requirement("GET", "/upload/x") == .init(right: .read))
        #expect(requirement("PATCH", "/files/\(id)") == .init(right: .write, uploads: [id]))
        #expect(requirement("POST", "/files", [HTTPField(name: "Upload-Concat", value: "final;/files/a http://h/files/b")])
            == .init(right: .write, uploads: ["a", "b"]))
        #expect(requirement("DELETE", "/resumable/\(id)") == .init(right: .write, uploads: [id]))
        #expect(requirement("GET", "/__counterpart/health") == .init(right: nil))
        #expect(requirement("GET", "/__counterpart/requests") == .init(right: .control))
        #expect(requirement("POST", "/__counterpart/faults") == .init(right: .control))
        #expect(requirement("OPTIONS", "/upload", [HTTPField(name: "Origin", value: "https://a"),
                                                   HTTPField(name: "Access-Control-Request-Method", value: "POST")]) == .init(right: nil))
        #expect(requirement("OPTIONS", "/upload") == .init(right: .write))
    }

    @Test func theJournalRedactsSecretsByName() {
        #expect(JournalRedaction.value("Basic YTpi", ofHeader: "authorization") == "<redacted 10 bytes>")
        #expect(JournalRedaction.value("a=1", ofHeader: "COOKIE") == "<redacted 3 bytes>")
        #expect(JournalRedaction.value("a=1", ofHeader: "Set-Cookie") == "<redacted 3 bytes>")
        #expect(JournalRedaction.value("x", ofHeader: "Proxy-Authorization") == "<redacted 1 bytes>")
        #expect(JournalRedaction.value("bytes=0-1", ofHeader: "Range") == "bytes=0-1")
    }
}
