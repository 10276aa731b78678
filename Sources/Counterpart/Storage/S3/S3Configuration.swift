/// Where an S3 store is and how to sign for it.
public struct S3Configuration: Sendable, Equatable {
    /// `http(s)://HOST[:PORT]`, no path; requests go path-style to `ENDPOINT/BUCKET/KEY`.
    public var endpoint: String
    public var bucket: String
    /// Prepended to every key the client is given: "" or a prefix ending in "/".
    public var prefix: String
    public var region: String
    public var accessKeyID: String
    public var secretAccessKey: String
    /// Seconds a request to the store may move no byte before it fails (`--s3-timeout`): the
    /// client then gets 503. A store that stops answering (a full OSD blocks writes without a
    /// byte) must fail a request well within the clients' own patience.
    public var stallSeconds = S3Configuration.defaultStallSeconds

    public static let defaultStallSeconds = 20
    /// What `--s3-timeout` takes.
    public static let stallSecondsRange = 1...3600

    /// The values as given; `prefix` is normalised to end with "/" unless empty.
    public init(endpoint: String, bucket: String, prefix: String = "", region: String = "us-east-1",
                accessKeyID: String, secretAccessKey: String) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.prefix = prefix.isEmpty || prefix.hasSuffix("/") ? prefix : prefix + "/"
        self.region = region
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }

    /// Parses `s3://BUCKET[/PREFIX]` (the store's location), the endpoint (`--s3-endpoint`),
    /// and the credentials and region from the environment: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` or else `AWS_DEFAULT_REGION` (else us-east-1),
    /// each also as `COUNTERPART_AWS_…`: any `COUNTERPART_` one wins over the plain names (it
    /// was set for Counterpart alone). Session tokens are not read: the store is a test engine
    /// with one key pair.
    public init(storeURL: String, endpoint: String?, environment: [String: String]) throws(S3ConfigurationError) {
        guard storeURL.hasPrefix("s3://") else { throw .notAnS3URL(storeURL) }
        let location = storeURL.dropFirst(5)
        let bucket = String(location.prefix { $0 != "/" })
        let prefix = String(location.dropFirst(bucket.count).drop { $0 == "/" })
        guard Self.isValidBucketName(bucket) else { throw .invalidBucket(bucket) }
        guard !prefix.contains("//") else { throw .invalidPrefix(prefix) }

        guard let endpoint = endpoint.flatMap({ $0.isEmpty ? nil : $0 }) else { throw .missingEndpoint }
        let normalisedEndpoint = try Self.normalisedEndpoint(endpoint)

        func variable(_ names: String...) -> String? {
            for candidate in names.map({ "COUNTERPART_" + $0 }) + names {
                if let value = environment[candidate], !value.isEmpty { return value }
            }
            return nil
        }
        guard let accessKeyID = variable("AWS_ACCESS_KEY_ID") else {
            throw .missingVariable("AWS_ACCESS_KEY_ID (or COUNTERPART_AWS_ACCESS_KEY_ID)")
        }
        guard let secretAccessKey = variable("AWS_SECRET_ACCESS_KEY") else {
            throw .missingVariable("AWS_SECRET_ACCESS_KEY (or COUNTERPART_AWS_SECRET_ACCESS_KEY)")
        }
        let region = variable("AWS_REGION", "AWS_DEFAULT_REGION") ?? "us-east-1"
        // The region goes into curl's `aws:amz:REGION:s3`, where a colon would split it.
        guard region.utf8.allSatisfy({ Self.isLowerAlphanumeric($0) || (0x41...0x5A).contains($0) || $0 == UInt8(ascii: "-") }) else {
            throw .invalidRegion(region)
        }
        self.init(endpoint: normalisedEndpoint, bucket: bucket, prefix: prefix, region: region,
                  accessKeyID: accessKeyID, secretAccessKey: secretAccessKey)
    }

    /// S3's bucket naming rules: 3–63 of lower-case letters, digits, `.` and `-`, starting and
    /// ending with a letter or digit (path-style URLs carry it as is).
    static func isValidBucketName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count),
              let first = bytes.first, let last = bytes.last,
              Self.isLowerAlphanumeric(first), Self.isLowerAlphanumeric(last) else { return false }
        return bytes.allSatisfy { Self.isLowerAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
    }

    private static func normalisedEndpoint(_ text: String) throws(S3ConfigurationError) -> String {
        let scheme: String
        if text.hasPrefix("http://") { scheme = "http://" } else if text.hasPrefix("https://") { scheme = "https://" } else {
            throw .invalidEndpoint(text, "it must start with http:// or https://")
        }
        var authority = text.dropFirst(scheme.count)
        while authority.hasSuffix("/") { authority.removeLast() }
        guard !authority.isEmpty else { throw .invalidEndpoint(text, "it has no host") }
        guard !authority.contains(where: { "/?#@ ".contains($0) }) else {
            throw .invalidEndpoint(text, "it must be only a scheme, a host and a port (buckets go in the path, credentials in the environment)")
        }
        return scheme + authority
    }
}

/// Why an S3 store's settings were refused; each says what to change.
public enum S3ConfigurationError: Error, Equatable, CustomStringConvertible {
    case notAnS3URL(String)
    case invalidBucket(String)
    case invalidPrefix(String)
    case missingEndpoint
    case invalidEndpoint(String, String)
    case missingVariable(String)
    case invalidRegion(String)

    public var description: String {
        switch self {
        case .notAnS3URL(let text):
            return "\"\(text)\" is not an S3 location: write s3://BUCKET or s3://BUCKET/PREFIX"
        case .invalidBucket(let name):
            return name.isEmpty
                ? "the S3 location has no bucket: write s3://BUCKET or s3://BUCKET/PREFIX"
                : "\"\(name)\" is not a valid S3 bucket name (3 to 63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit)"
        case .invalidPrefix(let prefix):
            return "the S3 prefix \"\(prefix)\" has an empty segment (\"//\")"
        case .missingEndpoint:
            return "no S3 endpoint: pass --s3-endpoint http://HOST:PORT"
        case .invalidEndpoint(let text, let reason):
            return "the S3 endpoint \"\(text)\" is not valid: \(reason)"
        case .missingVariable(let name):
            return "no S3 credentials: set \(name) in the environment"
        case .invalidRegion(let region):
            return "\"\(region)\" is not an S3 region name (letters, digits and '-')"
        }
    }
}
