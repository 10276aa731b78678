import Counterpart
import Foundation
import Testing

/// A date in 2021, `day` days and `second` seconds in, for modification times.
private func date(day: Int, second: Int = 0) -> Date {
    Date(timeIntervalSince1970: 1_609_459_200 + Double(day * 86_400 + second))
}

/// Names with the characters HTML and URLs treat specially.
private let oddNames = ["<img src=x onerror=alert(1)>.txt", "\"quoted\" & 'single'.txt", "100% sure.txt", "a#b?c=d.txt",
                        "naïve café.txt", "back\\slash.txt"]

/// File sizes and how listings show them: three figures at most, binary units.
private let sizeTexts: [(bytes: Int64, title: String, text: String)] = [
    (0, "0", "0 B"), (1_023, "1,023", "1023 B"), (1_024, "1,024", "1.0 KiB"), (10_188, "10,188", "9.9 KiB"),
    (10_189, "10,189", "10 KiB"), (1_023_487, "1,023,487", "999 KiB"), (1_023_488, "1,023,488", "1.0 MiB"),
    (5 << 30, "5,368,709,120", "5.0 GiB"), (1 << 42, "4,398,046,511,104", "4.0 TiB"),
]

/// A root with a folder whose entries differ in name case, size and modification time.
private func makeListingServer() throws -> TestServer {
    try TestServer(populate: { root in
        let list = root.appendingPathComponent("list")
        try FileManager.default.createDirectory(at: list.appendingPathComponent("d"), withIntermediateDirectories: true)
        let files: [(name: String, size: Int, modified: Date)] = [
            ("b.txt", 300, date(day: 1)), ("A.txt", 10, date(day: 3)), ("c.bin", 2_000, date(day: 2)),
            ("a.txt", 10, date(day: 3)), ("big.bin", 1_572_864, date(day: 4, second: 3_723)),
        ]
        for file in files {
            let url = list.appendingPathComponent(file.name)
            try Data(repeating: 0x61, count: file.size).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: file.modified], ofItemAtPath: url.path)
        }
        try FileManager.default.setAttributes([.modificationDate: date(day: 0)], ofItemAtPath: list.appendingPathComponent("d").path)
        // Sparse files: their sizes cost no disk.
        let sizes = root.appendingPathComponent("sizes")
        try FileManager.default.createDirectory(at: sizes, withIntermediateDirectories: true)
        for size in sizeTexts {
            let url = sizes.appendingPathComponent("\(size.bytes).bin")
            try Data().write(to: url)
            let handle = try FileHandle(forWritingTo: url)
            try handle.truncate(atOffset: UInt64(size.bytes))
            try handle.close()
        }
        let odd = root.appendingPathComponent("odd")
        try FileManager.default.createDirectory(at: odd, withIntermediateDirectories: true)
        for name in oddNames {
            try Data(name.utf8).write(to: odd.appendingPathComponent(name))
        }
    })
}

/// The entries an HTML listing links to, in order (not the parent folder), as shown.
private func listedNames(_ html: String) -> [String] {
    html.components(separatedBy: "<td class=\"name\"><a href=\"").dropFirst().compactMap { cell in
        guard !cell.hasPrefix("../"), let start = cell.range(of: "\">"), let end = cell.range(of: "</a>") else { return nil }
        return unescapeHTML(String(cell[start.upperBound..<end.lowerBound]))
    }
}

private func unescapeHTML(_ text: String) -> String {
    text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
        .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
        .replacingOccurrences(of: "&amp;", with: "&")
}

private func jsonNames(_ result: CurlResult) throws -> [String] {
    try #require(try result.json()["entries"] as? [[String: Any]]).compactMap { $0["name"] as? String }
}

@Suite("Folder listings: sorting, HTML and JSON")
struct ListingTests {
    let server: TestServer
    init() throws { server = try makeListingServer() }

    // Ties (A.txt and a.txt share size and time) go by name, A to Z, in both directions.
    @Test(arguments: [
        ("", ["A.txt", "a.txt", "b.txt", "big.bin", "c.bin", "d"]),
        ("?sort=name", ["A.txt", "a.txt", "b.txt", "big.bin", "c.bin", "d"]),
        ("?sort=name&order=desc", ["d", "c.bin", "big.bin", "b.txt", "a.txt", "A.txt"]),
        ("?order=desc", ["d", "c.bin", "big.bin", "b.txt", "a.txt", "A.txt"]),
        ("?sort=time&order=asc", ["d", "b.txt", "c.bin", "A.txt", "a.txt", "big.bin"]),
        ("?sort=time&order=desc", ["big.bin", "A.txt", "a.txt", "c.bin", "b.txt", "d"]),
        ("?sort=size&order=asc", ["d", "A.txt", "a.txt", "b.txt", "c.bin", "big.bin"]),
        ("?sort=size&order=desc", ["big.bin", "c.bin", "b.txt", "A.txt", "a.txt", "d"]),
    ])
    func theSameOrderInHTMLAndJSON(_ query: String, _ expected: [String]) throws {
        let json = try curl(["-H", "Accept: application/json", server.url("/list/\(query)")])
        #expect(json.status == 200)
        #expect(try jsonNames(json) == expected)
        let html = try curl(["-H", "Accept: text/html", server.url("/list/\(query)")])
        #expect(html.status == 200)
        #expect(listedNames(html.text) == expected.map { $0 == "d" ? "d/" : $0 })
    }

    @Test func theJSONSaysHowItIsSorted() throws {
        let plain = try curl(["-H", "Accept: application/json", server.url("/list/")]).json()
        #expect(plain["sort"] as? String == "name")
        #expect(plain["order"] as? String == "asc")
        let byTime = try curl(["-H", "Accept: application/json", server.url("/list/?sort=time&order=desc")]).json()
        #expect(byTime["sort"] as? String == "time")
        #expect(byTime["order"] as? String == "desc")
        let entries = try #require(byTime["entries"] as? [[String: Any]])
        #expect(entries[0]["name"] as? String == "big.bin")
        #expect(entries[0]["size"] as? Int == 1_572_864)
        #expect(entries[0]["modified"] as? String == "Tue, 05 Jan 2021 01:02:03 GMT")
        #expect(entries[0]["url"] as? String == "/list/big.bin")
    }

    @Test(arguments: [("?sort=colour", "sort must be one of name, time, size (got \"colour\")"),
                      ("?sort", "sort must be one of name, time, size (it has no value)"),
                      ("?sort=time&order=up", "order must be one of asc, desc (got \"up\")"),
                      ("?sort=NAME", "sort must be one of name, time, size (got \"NAME\")")])
    func anUnknownSortIs400(_ query: String, _ message: String) throws {
        for accept in ["application/json", "text/html"] {
            let result = try curl(["-H", "Accept: \(accept)", server.url("/list/\(query)")])
            #expect(result.status == 400)
            #expect(try result.json()["error"] as? String == message)
        }
    }

    @Test func columnHeadersSortAndSayHow() throws {
        let byName = try curl(["-H", "Accept: text/html", server.url("/list/")]).text
        // The sorted column flips its direction; the others start with their natural one.
        #expect(byName.contains("<th scope=\"col\" aria-sort=\"ascending\"><a href=\"?sort=name&amp;order=desc\">Name"))
        #expect(byName.contains("<th scope=\"col\" class=\"n\"><a href=\"?sort=size&amp;order=desc\">Size"))
        #expect(byName.contains("<th scope=\"col\"><a href=\"?sort=time&amp;order=desc\">Modified (UTC)"))
        #expect(byName.components(separatedBy: "aria-sort=").count == 2)
        let byTime = try curl(["-H", "Accept: text/html", server.url("/list/?sort=time&order=desc")]).text
        #expect(byTime.contains("<th scope=\"col\" aria-sort=\"descending\"><a href=\"?sort=time&amp;order=asc\">Modified (UTC)"))
        #expect(byTime.contains("<th scope=\"col\"><a href=\"?sort=name&amp;order=asc\">Name"))
        #expect(byTime.contains("sorted by time, newest first."))
    }

    @Test func rowsShowSizeTimeAndADownloadLink() throws {
        let html = try curl(["-H", "Accept: text/html", server.url("/list/")]).text
        #expect(html.contains("<td class=\"n\" title=\"1,572,864 bytes\">1.5 MiB</td>"))
        #expect(html.contains("<td class=\"n\" title=\"2,000 bytes\">2.0 KiB</td>"))
        #expect(html.contains("<td class=\"n\" title=\"10 bytes\">10 B</td>"))
        #expect(html.contains("<time datetime=\"2021-01-05T01:02:03Z\">2021-01-05<span class=\"clock\"> 01:02:03</span></time>"))
        #expect(html.contains("<a href=\"/list/big.bin?download\" aria-label=\"Download big.bin\">download</a>"))
        #expect(html.contains("<p class=\"summary\">5 files (1.5 MiB), 1 folder; sorted by name, A to Z.</p>"))
        // Folders have no download link; links to them and to the parent keep a chosen order.
        #expect(html.contains("<a href=\"/list/d/\">d/</a>"))
        #expect(!html.contains("/list/d/?download"))
        let byTime = try curl(["-H", "Accept: text/html", server.url("/list/?sort=time&order=desc")]).text
        #expect(byTime.contains("<a href=\"/list/d/?sort=time&amp;order=desc\">d/</a>"))
        #expect(byTime.contains("<a href=\"../?sort=time&amp;order=desc\">../"))
    }

    @Test func sizesAreShortAndBinaryWithTheBytesInTheTitle() throws {
        let html = try curl(["-H", "Accept: text/html", server.url("/sizes/")]).text
        for size in sizeTexts {
            #expect(html.contains("<td class=\"n\" title=\"\(size.title) bytes\">\(size.text)</td>"), "\(size.bytes) bytes should read \(size.text)")
        }
    }

    @Test func oddNamesAreEscapedAndEncoded() throws {
        let html = try curl(["-H", "Accept: text/html", server.url("/odd/")])
        #expect(html.status == 200)
        #expect(!html.text.contains("<img"))
        #expect(html.text.contains("&lt;img src=x onerror=alert(1)&gt;.txt"))
        #expect(html.text.contains("&quot;quoted&quot; &amp; &#39;single&#39;.txt"))
        #expect(Set(listedNames(html.text)) == Set(oddNames))
        let json = try curl(["-H", "Accept: application/json", server.url("/odd/")])
        #expect(Set(try jsonNames(json)) == Set(oddNames))
        // Every link leads to its file, and its download link names it.
        let entries = try #require(try json.json()["entries"] as? [[String: Any]])
        for entry in entries {
            let name = try #require(entry["name"] as? String)
            let url = try #require(entry["url"] as? String)
            #expect(!url.contains("#") && !url.contains("?") && !url.contains(" ") && !url.contains("<"), "\(url)")
            #expect(html.text.contains("href=\"\(url)?download\""), "\(name)")
            let file = try curl(["--globoff", server.url(url)])
            #expect(file.status == 200, "\(name)")
            #expect(file.text == name)
            let download = try curl(["--globoff", server.url(url + "?download")])
            #expect(download.status == 200, "\(name)")
            #expect(download.header("Content-Disposition")?.hasPrefix("attachment; filename=\"") == true, "\(name)")
        }
    }

    @Test func theDownloadLinkOfANonASCIINameNamesItInUTF8() throws {
        let download = try curl([server.url("/odd/na%C3%AFve%20caf%C3%A9.txt?download")])
        #expect(download.header("Content-Disposition")
            == "attachment; filename=\"na_ve caf_.txt\"; filename*=UTF-8''na%C3%AFve%20caf%C3%A9.txt")
        #expect(download.text == "naïve café.txt")
    }

    @Test func theRootIsListedSortedWhenItHasNoIndex() throws {
        let result = try curl(["-H", "Accept: application/json", server.url("/?sort=name&order=desc")])
        #expect(try jsonNames(result) == ["sizes", "odd", "list"])
        let html = try curl(["-H", "Accept: text/html", server.url("/")]).text
        #expect(html.contains("<h1>Index of <a href=\"/\">/</a></h1>"))
        #expect(!html.contains("parent folder"))
    }

    @Test func uploadsAreListedSortedWithDownloadLinks() throws {
        for (name, size) in [("small.txt", 5), ("large.bin", 50_000), ("medium.dat", 700)] {
            let path = try temporaryFile(name, testBytes(count: size))
            #expect(try curl(["-F", "file=@\(path)", server.url("/upload")]).status == 200)
        }
        let json = try curl(["-H", "Accept: application/json", server.url("/uploads/?sort=size&order=desc")])
        #expect(try jsonNames(json) == ["large.bin", "medium.dat", "small.txt"])
        // Uploads within one second sort by their time on disk (nanoseconds); an object
        // store keeps whole seconds only.
        if server.objectStore == nil {
            let newest = try curl(["-H", "Accept: application/json", server.url("/uploads/?sort=time&order=desc")])
            #expect(try jsonNames(newest) == ["medium.dat", "large.bin", "small.txt"])
        }
        let html = try curl(["-H", "Accept: text/html", server.url("/uploads/")]).text
        #expect(listedNames(html) == ["large.bin", "medium.dat", "small.txt"])
        #expect(html.contains("<h1>Index of <a href=\"/\">/</a><a href=\"/uploads/\">uploads/</a></h1>"))
        #expect(html.contains("<a href=\"/uploads/large.bin?download\" aria-label=\"Download large.bin\">download</a>"))
        let download = try curl([server.url("/uploads/large.bin?download")])
        #expect(download.header("Content-Disposition") == "attachment; filename=\"large.bin\"")
        #expect(download.body == testBytes(count: 50_000))
    }
}
