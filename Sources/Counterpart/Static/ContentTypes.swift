import HTTPTransfer

/// Media types by file extension, for what apps really move. Anything else is
/// `application/octet-stream`.
enum ContentTypes {
    /// The type for a file name (its extension, case-insensitive).
    static func forName(_ name: String) -> String {
        let bytes = name.utf8
        guard let dot = bytes.lastIndex(of: 0x2E) else { return fallback }
        let ext = bytes[bytes.index(after: dot)...]
        // Lowercased into a small (inline) string: no allocation on every file response.
        guard ext.count <= longestExtension else { return fallback }
        let key = String(unsafeUninitializedCapacity: ext.count) { out in
            for (index, byte) in ext.enumerated() { out[index] = ASCII.lower(byte) }
            return ext.count
        }
        return table[key] ?? fallback
    }

    static let fallback = "application/octet-stream"

    private static let longestExtension = table.keys.map(\.utf8.count).max() ?? 0

    private static let table: [String: String] = [
        // web
        "html": "text/html; charset=utf-8", "htm": "text/html; charset=utf-8",
        "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8", "mjs": "text/javascript; charset=utf-8",
        "json": "application/json", "map": "application/json", "xml": "application/xml",
        "wasm": "application/wasm", "webmanifest": "application/manifest+json",
        "txt": "text/plain; charset=utf-8", "md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8",
        "log": "text/plain; charset=utf-8", "ics": "text/calendar", "vcf": "text/vcard",
        // images
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon", "bmp": "image/bmp", "tif": "image/tiff",
        "tiff": "image/tiff", "heic": "image/heic", "heif": "image/heif", "avif": "image/avif",
        // video
        "mp4": "video/mp4", "m4v": "video/x-m4v", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska", "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        "3gp": "video/3gpp", "ts": "video/mp2t", "m3u8": "application/vnd.apple.mpegurl",
        // audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "flac": "audio/flac",
        "ogg": "audio/ogg", "oga": "audio/ogg", "opus": "audio/opus", "caf": "audio/x-caf", "aiff": "audio/aiff",
        // documents
        "pdf": "application/pdf", "rtf": "application/rtf", "epub": "application/epub+zip",
        "doc": "application/msword", "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel", "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint", "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "pages": "application/vnd.apple.pages", "numbers": "application/vnd.apple.numbers", "key": "application/vnd.apple.keynote",
        // archives and packages
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip", "tar": "application/x-tar",
        "bz2": "application/x-bzip2", "xz": "application/x-xz", "7z": "application/x-7z-compressed",
        "rar": "application/vnd.rar", "zst": "application/zstd", "dmg": "application/x-apple-diskimage",
        "ipa": "application/octet-stream", "apk": "application/vnd.android.package-archive",
        "jar": "application/java-archive", "iso": "application/x-iso9660-image",
        // fonts
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
    ]
}
