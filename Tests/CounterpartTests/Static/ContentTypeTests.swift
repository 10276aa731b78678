@testable import Counterpart
import Testing

/// The media type a file is served with, from its name's extension.
@Suite("Content types by extension")
struct ContentTypeTests {
    @Test(arguments: [
        ("photo.png", "image/png"), ("PHOTO.PNG", "image/png"), ("Photo.JpEg", "image/jpeg"),
        ("archive.tar.gz", "application/gzip"), ("site.webmanifest", "application/manifest+json"),
        ("font.woff2", "font/woff2"), ("index.html", "text/html; charset=utf-8"), ("a.7z", "application/x-7z-compressed"),
        ("deck.pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ])
    func aKnownExtensionGivesItsType(_ name: String, _ type: String) {
        #expect(ContentTypes.forName(name) == type)
    }

    @Test(arguments: [
        "no-extension", "trailing-dot.", ".png.unknown", "a.pngx", "a.pn", "a.png\u{0}", "a.pnğ",
        "a." + String(repeating: "x", count: 17), "a.webmanifestx", "",
    ])
    func anythingElseIsOctetStream(_ name: String) {
        #expect(ContentTypes.forName(name) == "application/octet-stream")
    }
}
