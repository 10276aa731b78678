import Glibc
import HTTPTransfer

/// A folder's contents as an HTML page (browsers) or JSON (`Accept: application/json`).
/// Names starting with a dot are left out (hidden files, and uploads in progress).
struct DirectoryListing {
    struct Entry {
        var name: String
        var isFolder: Bool
        var size: UInt64
        var modified: HTTPDate
    }

    /// The served folder, and this folder's path within it.
    let folder: ServedFolder
    let relative: String
    /// This folder, open.
    let file: OpenFile
    /// The URL path of this folder, encoded, ending in `/`.
    let urlPath: String

    func response(for head: RequestHead) -> Response {
        let entries = readEntries()
        if AcceptHeader(head.header("Accept")).prefersJSON {
            return Responses.json(200, json(entries))
        }
        return Responses.html(200, html(entries))
    }

    /// The folder's files and subfolders, by name. Other kinds of entries are left out, and
    /// so are symlinks that lead outside the served folder (their size and date too).
    private func readEntries() -> [Entry] {
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
            entries.append(Entry(name: name, isFolder: isFolder, size: isFolder ? 0 : UInt64(info.st_size),
                                 modified: HTTPDate(secondsSince1970: Int64(info.st_mtim.tv_sec))))
        }
        return entries.sorted { $0.name.lowercased() == $1.name.lowercased() ? $0.name < $1.name : $0.name.lowercased() < $1.name.lowercased() }
    }

    private func url(of entry: Entry) -> String {
        urlPath + PercentEncoding.encode(entry.name) + (entry.isFolder ? "/" : "")
    }

    private func json(_ entries: [Entry]) -> JSON {
        .object([
            ("path", .string(urlPath)),
            ("entries", .array(entries.map { entry in
                .object([
                    ("name", .string(entry.name)),
                    ("type", .string(entry.isFolder ? "folder" : "file")),
                    ("size", .unsigned(entry.size)),
                    ("modified", .string(entry.modified.description)),
                    ("url", .string(url(of: entry))),
                ])
            })),
        ])
    }

    private func html(_ entries: [Entry]) -> String {
        let title = Responses.escapeHTML(PercentEncoding.decode(urlPath) ?? urlPath)
        var rows = ""
        if urlPath != "/" {
            rows += "<tr><td><a href=\"../\">../</a></td><td></td><td></td><td></td></tr>\n"
        }
        for entry in entries {
            let link = Responses.escapeHTML(url(of: entry))
            let name = Responses.escapeHTML(entry.name + (entry.isFolder ? "/" : ""))
            let download = entry.isFolder ? "" : "<a href=\"\(link)?download\">download</a>"
            rows += "<tr><td><a href=\"\(link)\">\(name)</a></td><td class=\"n\">\(entry.isFolder ? "" : String(entry.size))</td>"
                + "<td>\(entry.modified.description)</td><td>\(download)</td></tr>\n"
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Index of \(title)</title>
            <style>body{font-family:system-ui,sans-serif;margin:2rem;color:#111}table{border-collapse:collapse}
            td,th{padding:.3rem .8rem;text-align:left}.n{text-align:right}tr:nth-child(even){background:#f3f3f3}</style>
            </head><body>
            <h1>Index of \(title)</h1>
            <table><thead><tr><th>Name</th><th class="n">Size (bytes)</th><th>Modified</th><th></th></tr></thead>
            <tbody>
            \(rows)</tbody></table>
            </body></html>

            """
    }
}
