import HTTPTransfer

/// A folder's contents as an HTML page (browsers) or JSON (`Accept: application/json`),
/// sorted by `?sort=name|time|size` and `&order=asc|desc` (name, ascending by default).
/// Names starting with a dot are left out (hidden files, and uploads in progress).
struct DirectoryListing {
    struct Entry {
        var name: String
        var isFolder: Bool
        var size: UInt64
        /// Seconds and nanoseconds: uploads made within one second still sort by time.
        var modified: timespec
    }

    /// The URL path of this folder, encoded, ending in `/`.
    let urlPath: String
    /// Its files and subfolders, in any order (hidden names already left out).
    let entries: [Entry]

    func response(for head: RequestHead) -> Response {
        let order: ListingOrder
        switch ListingOrder.parse(sort: head.queryArgument("sort"), order: head.queryArgument("order")) {
        case .success(let parsed): order = parsed
        case .failure(let refusal): return Response.error(400, refusal.message)
        }
        let entries = order.sorted(self.entries)
        if AcceptHeader(head.header("Accept")).prefersJSON {
            return Response.json(200, json(entries, order))
        }
        return Response.html(200, html(entries, order))
    }

    /// The files and subfolders of the open folder `file`, at `relative` in `folder`. Other
    /// kinds of entries are left out, and so are symlinks that lead outside the served
    /// folder (their size and date too).
    static func entries(of file: OpenFile, at relative: String, in folder: ServedFolder) -> [Entry] {
        guard let handle = fdopendir(file.take()) else { return [] }
        defer { closedir(handle) }
        var entries: [Entry] = []
        while let entry = readdir(handle) {
            let name = FileSystem.entryName(entry)
            if name.hasPrefix(".") { continue }
            var info = stat()
            guard fstatat(dirfd(handle), name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFLNK {
                let target = folder.open(relative + "/" + name)
                guard target >= 0 else { continue }
                defer { close(target) }
                guard fstat(target, &info) == 0 else { continue }
            }
            let isFolder = info.st_mode & S_IFMT == S_IFDIR
            guard isFolder || info.st_mode & S_IFMT == S_IFREG else { continue }
            entries.append(Entry(name: name, isFolder: isFolder, size: isFolder ? 0 : UInt64(info.st_size), modified: Platform.modificationTime(info)))
        }
        return entries
    }

    private func url(of entry: Entry) -> String {
        urlPath + PercentEncoding.encode(entry.name) + (entry.isFolder ? "/" : "")
    }

    private func json(_ entries: [Entry], _ order: ListingOrder) -> JSON {
        .object([
            ("path", .string(urlPath)),
            ("sort", .string(order.key.rawValue)),
            ("order", .string(order.direction.rawValue)),
            ("entries", .array(entries.map { entry in
                .object([
                    ("name", .string(entry.name)),
                    ("type", .string(entry.isFolder ? "folder" : "file")),
                    ("size", .unsigned(entry.size)),
                    ("modified", .string(HTTPDate(secondsSince1970: Int64(entry.modified.tv_sec)).description)),
                    ("url", .string(url(of: entry))),
                ])
            })),
        ])
    }

    private func html(_ entries: [Entry], _ order: ListingOrder) -> String {
        let escape = Response.escapeHTML
        let title = escape(PercentEncoding.decode(urlPath) ?? urlPath)
        // Links to folders keep the order the reader chose.
        let keptQuery = order == .default ? "" : escape(order.query)
        var rows = ""
        if urlPath != "/" {
            rows += "<tr><td class=\"name\"><a href=\"../\(keptQuery)\">../<span class=\"vh\"> (parent folder)</span></a></td>"
                + "<td></td><td></td><td></td></tr>\n"
        }
        for entry in entries {
            let link = escape(url(of: entry))
            let name = escape(entry.name)
            if entry.isFolder {
                rows += "<tr class=\"folder\"><td class=\"name\"><a href=\"\(link)\(keptQuery)\">\(name)/</a></td>"
                    + "<td class=\"n\"></td><td>\(Self.timeCell(entry.modified))</td><td></td></tr>\n"
            } else {
                rows += "<tr><td class=\"name\"><a href=\"\(link)\">\(name)</a></td>"
                    + "<td class=\"n\" title=\"\(Self.grouped(entry.size)) bytes\">\(Self.humanSize(entry.size))</td>"
                    + "<td>\(Self.timeCell(entry.modified))</td>"
                    + "<td><a href=\"\(link)?download\" aria-label=\"Download \(name)\">download</a></td></tr>\n"
            }
        }
        let files = entries.filter { !$0.isFolder }
        let folders = entries.count - files.count
        var summary = files.count == 1 ? "1 file" : "\(files.count) files"
        if !files.isEmpty { summary += " (\(Self.humanSize(files.reduce(0) { total, file in total.addingReportingOverflow(file.size).overflow ? .max : total + file.size })))" }
        if folders > 0 { summary += folders == 1 ? ", 1 folder" : ", \(folders) folders" }
        summary += "; sorted by \(order.description)."
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="color-scheme" content="light dark">
            <title>Index of \(title)</title>
            <style>\(Self.style)</style>
            </head><body><main>
            <h1>Index of \(breadcrumbs())</h1>
            <p class="summary">\(summary)</p>
            <table><thead><tr>\(header("Name", .name, order))\(header("Size", .size, order, numeric: true))\(header("Modified (UTC)", .time, order))<th scope="col"><span class="vh">Download</span></th></tr></thead>
            <tbody>
            \(rows)</tbody></table>
            </main></body></html>

            """
    }

    /// `/`, `uploads/`, `sub/`: each a link to its folder.
    private func breadcrumbs() -> String {
        var links = "<a href=\"/\">/</a>"
        var path = "/"
        for segment in urlPath.split(separator: "/") {
            path += segment + "/"
            let name = PercentEncoding.decode(String(segment)) ?? String(segment)
            links += "<a href=\"\(Response.escapeHTML(path))\">\(Response.escapeHTML(name))/</a>"
        }
        return links
    }

    /// A column header that sorts by its column: by the other direction when it already
    /// does, else by the column's natural first direction.
    private func header(_ label: String, _ key: ListingOrder.Key, _ current: ListingOrder, numeric: Bool = false) -> String {
        let active = current.key == key
        let next = ListingOrder(key: key, direction: active ? current.direction.reversed : key.firstDirection)
        let sortState = active ? " aria-sort=\"\(current.direction == .asc ? "ascending" : "descending")\"" : ""
        let arrow = active ? "<span aria-hidden=\"true\">\(current.direction == .asc ? " ▲" : " ▼")</span>" : ""
        let numericClass = numeric ? " class=\"n\"" : ""
        return "<th scope=\"col\"\(numericClass)\(sortState)><a href=\"\(Response.escapeHTML(next.query))\">\(label)\(arrow)"
            + "<span class=\"vh\"> (sort by \(next.description))</span></a></th>"
    }

    /// `2024-11-30 22:09:13` (UTC), in a `<time>` element.
    private static func timeCell(_ time: timespec) -> String {
        var seconds = time.tv_sec
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "" }
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let date = "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
        let clock = "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
        return "<time datetime=\"\(date)T\(clock)Z\">\(date)<span class=\"clock\"> \(clock)</span></time>"
    }

    /// `517 B`, `1.5 KiB`, `12 MiB`: three figures at most, binary units.
    static func humanSize(_ bytes: UInt64) -> String {
        guard bytes >= 1024 else { return "\(bytes) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var value = Double(bytes) / 1024
        var unit = 0
        while value >= 999.5, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let tenths = (value * 10).rounded()
        if value < 9.95 {
            return "\(Int(tenths) / 10).\(Int(tenths) % 10) \(units[unit])"
        }
        return "\(Int(value.rounded())) \(units[unit])"
    }

    /// `1,572,864`.
    static func grouped(_ number: UInt64) -> String {
        var digits = String(number)
        var out = ""
        while digits.count > 3 {
            out = "," + digits.suffix(3) + out
            digits.removeLast(3)
        }
        return digits + out
    }

    private static let style = """
        :root{color-scheme:light dark;--fg:#1a1a1a;--muted:#555;--bg:#fff;--stripe:#f3f5f8;--line:#d5dae1;--link:#0b57d0;--focus:#b45309}
        @media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--muted:#b0b4ba;--bg:#17191c;--stripe:#202329;--line:#3a3f47;--link:#8ab4f8;--focus:#fbbf24}}
        body{font-family:system-ui,sans-serif;margin:0;color:var(--fg);background:var(--bg);line-height:1.45}
        main{max-width:60rem;margin:0 auto;padding:1.5rem 1rem}
        h1{font-size:1.4rem;margin:0 0 .3rem;overflow-wrap:anywhere}h1 a{text-decoration:none}
        a{color:var(--link)}a:focus-visible{outline:3px solid var(--focus);outline-offset:2px;border-radius:2px}
        .summary{color:var(--muted);margin:0 0 1rem}
        table{border-collapse:collapse;width:100%}
        th,td{padding:.45rem .6rem;text-align:left;vertical-align:top;border-bottom:1px solid var(--line)}
        th{white-space:nowrap}th a{color:inherit}tbody tr:nth-child(even){background:var(--stripe)}
        .n{text-align:right;white-space:nowrap}.name{overflow-wrap:anywhere;width:100%}.folder .name{font-weight:600}
        time{white-space:nowrap;font-variant-numeric:tabular-nums}
        .vh{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
        @media (max-width:36rem){th,td{padding:.4rem .3rem;font-size:.9rem}.clock{display:block}}
        """
}

/// How a listing is sorted: by a key, in a direction; ties by name, A to Z.
struct ListingOrder: Equatable {
    enum Key: String, CaseIterable {
        case name, time, size

        /// Where a click on the column starts: names A to Z, the newest and the largest first.
        var firstDirection: Direction { self == .name ? .asc : .desc }
    }

    enum Direction: String, CaseIterable {
        case asc, desc

        var reversed: Direction { self == .asc ? .desc : .asc }
    }

    var key: Key
    var direction: Direction

    static let `default` = ListingOrder(key: .name, direction: .asc)

    struct Refusal: Error {
        var message: String
    }

    /// The order from the query arguments `sort` and `order` (each absent: the default).
    static func parse(sort: String??, order: String??) -> Result<ListingOrder, Refusal> {
        func value<T: RawRepresentable & CaseIterable>(_ argument: String??, _ name: String, _ fallback: T) -> Result<T, Refusal>
            where T.RawValue == String {
            guard let argument else { return .success(fallback) }
            if let text = argument, let parsed = T(rawValue: text) { return .success(parsed) }
            let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
            let got = argument.map { " (got \"\($0)\")" } ?? " (it has no value)"
            return .failure(Refusal(message: "\(name) must be one of \(allowed)\(got)"))
        }
        return value(sort, "sort", Key.name).flatMap { key in
            value(order, "order", Direction.asc).map { ListingOrder(key: key, direction: $0) }
        }
    }

    /// `?sort=time&order=desc`.
    var query: String { "?sort=\(key.rawValue)&order=\(direction.rawValue)" }

    var description: String {
        switch (key, direction) {
        case (.name, .asc): return "name, A to Z"
        case (.name, .desc): return "name, Z to A"
        case (.time, .asc): return "time, oldest first"
        case (.time, .desc): return "time, newest first"
        case (.size, .asc): return "size, smallest first"
        case (.size, .desc): return "size, largest first"
        }
    }

    /// Folders are not set apart: they sort among the files, as 0 bytes by size.
    func sorted(_ entries: [DirectoryListing.Entry]) -> [DirectoryListing.Entry] {
        // Case-insensitive, then exact, so that the order is total and stable.
        func byName(_ a: DirectoryListing.Entry, _ b: DirectoryListing.Entry) -> Bool {
            let (x, y) = (a.name.lowercased(), b.name.lowercased())
            return x == y ? a.name < b.name : x < y
        }
        func compare(_ a: DirectoryListing.Entry, _ b: DirectoryListing.Entry) -> Int {
            switch key {
            case .name: return 0
            case .size: return a.size == b.size ? 0 : (a.size < b.size ? -1 : 1)
            case .time:
                let (x, y) = ((a.modified.tv_sec, a.modified.tv_nsec), (b.modified.tv_sec, b.modified.tv_nsec))
                return x == y ? 0 : (x < y ? -1 : 1)
            }
        }
        return entries.sorted { a, b in
            let primary = compare(a, b)
            if primary != 0 { return direction == .asc ? primary < 0 : primary > 0 }
            return direction == .desc && key == .name ? byName(b, a) : byName(a, b)
        }
    }
}
