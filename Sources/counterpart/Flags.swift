import Counterpart

private let defaults = Configuration()
private let positive = 1...Int(Int32.max)
/// `Configuration.connectionMemoryRange` as the usage and its errors say it.
private let connectionMemoryRange = "\(Configuration.connectionMemoryRange.lowerBound >> 10)KiB to \(Configuration.connectionMemoryRange.upperBound >> 20)MiB"

extension Flag {
    /// Every flag of the command, in the order the usage lists them. Adding a flag is adding
    /// an entry here: the command line, its `COUNTERPART_` variable and `--help` follow.
    static let all: [Flag] = [
        Flag("--host", value: "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)") { value, source, options throws(UsageError) in
            if value.isEmpty { throw UsageError(message: "\(source) needs an address") }
            options.configuration.host = value
        },
        Flag("--port", value: "N", "port (default 8080; 0 picks a free one)") { value, source, options throws(UsageError) in
            options.configuration.port = UInt16(try number(value, source, in: 0...65535, "a port number (0-65535)"))
        },
        Flag("--root", value: "DIR", "folder served as static files (default ./public)") { value, _, options in
            options.configuration.root = value
        },
        Flag("--uploads", value: "DIR", "folder uploads are stored in, served at /uploads/ (default ./uploads)") { value, _, options in
            options.configuration.uploads = value
        },
        Flag("--store", value: "URL", """
            keep uploads in an S3 bucket instead of --uploads: s3://BUCKET/PREFIX,
            shared by several servers (credentials: AWS_ACCESS_KEY_ID,
            AWS_SECRET_ACCESS_KEY, AWS_REGION, or the same with COUNTERPART_)
            """) { value, _, options in
            options.store = value
        },
        Flag("--s3-endpoint", value: "URL", "the S3 service --store talks to, e.g. http://127.0.0.1:7480") { value, _, options in
            options.s3Endpoint = value
        },
        Flag("--s3-timeout", value: "SECONDS", """
            a request to the store that moves no byte for this long fails, and its
            client gets 503 (default \(S3Configuration.defaultStallSeconds); for a store that stops answering)
            """) { value, source, options throws(UsageError) in
            let range = S3Configuration.stallSecondsRange
            options.s3Timeout = try number(value, source, in: range, "a number of seconds from \(range.lowerBound) to \(range.upperBound)")
        },
        Flag("--max-upload-bytes", value: "N", "larger request bodies get 413 (default 10GiB; suffixes K M G T, KiB MiB GiB TiB)") { value, source, options throws(UsageError) in
            options.configuration.maxUploadBytes = try size(value, source)
        },
        Flag("--threads", value: "N", "threads serving connections (default \(defaults.threads); 0: one per connection)") { value, source, options throws(UsageError) in
            options.configuration.threads = try number(value, source, in: 0...1024, "a number from 0 to 1024")
        },
        Flag("--quiet", "no access log on stderr") { options in
            options.configuration.accessLog = false
        },
        Flag("--log-format", value: "FORMAT", "the access log's lines: text (default) or json, one object per request") { value, source, options throws(UsageError) in
            guard let format = AccessLogFormat(rawValue: value) else { throw UsageError(message: "\(source): \"\(value)\" is not text or json") }
            options.configuration.accessLogFormat = format
        },
        Flag("--fault", value: "SPEC", """
            faults for every request, e.g. cut=1048576 or rate=64KiB,delay=200
            (cut, stall, rate, delay, status, reset, reset=N, fail=P, seed,
            jitter, first-byte; a rule's and a request's own win)
            """) { value, source, options throws(UsageError) in
            do { options.configuration.faults = try FaultSpec(parsing: value) } catch { throw UsageError(message: "\(source): \(error)") }
        },
        Flag("--fault-rule", value: "RULE", """
            arm a counted fault, repeatable, tried in order:
            [METHOD] PATH FAULT [times=N] [skip=N], PATH exact or ending in *,
            e.g. 'POST /upload cut=1MiB times=2' (see /__counterpart/faults)
            """) { value, source, options throws(UsageError) in
            do { options.configuration.faultRules.append(try FaultRule(parsing: value)) } catch { throw UsageError(message: "\(source): \(error)") }
        },
        Flag("--journal-size", value: "N", "requests kept for GET /__counterpart/requests (default \(defaults.journalCapacity))") { value, source, options throws(UsageError) in
            options.configuration.journalCapacity = try number(value, source, in: 0...Int.max, "a number of requests")
        },
        Flag("--cors", value: "ORIGIN", "allow browser apps from ORIGIN (or *) to use the server") { value, source, options throws(UsageError) in
            guard value == "*" || value.hasPrefix("http://") || value.hasPrefix("https://") else {
                throw UsageError(message: "\(source): \"\(value)\" is not * or an origin such as https://app.example")
            }
            options.configuration.corsOrigin = value
        },
        Flag("--allow-remote-control", "let other machines use /__counterpart/ (the journal, clearing uploads, arming faults)") { options in
            options.configuration.allowsRemoteControl = true
        },
        Flag("--tls-cert", value: "FILE", "serve HTTPS with this PEM certificate (chain)...") { value, _, options in
            options.tlsCertificateFile = value
        },
        Flag("--tls-key", value: "FILE", "...and this PEM private key") { value, _, options in
            options.tlsKeyFile = value
        },
        Flag("--tls-self-signed", """
            serve HTTPS with a throwaway self-signed certificate; where it is
            written and its SHA-256 fingerprint are printed on stderr
            """) { options in
            options.tlsSelfSigned = true
        },
        Flag("--max-resumable-uploads", value: "N", "tus and IETF resumable uploads in progress at once (default \(defaults.resumableLimits.maxUploads))") { value, source, options throws(UsageError) in
            options.configuration.resumableLimits.maxUploads = try number(value, source, in: positive, "a positive number")
        },
        Flag("--resumable-expiry", value: "SECONDS", "an idle resumable upload is removed after this (default \(defaults.resumableLimits.expirySeconds))") { value, source, options throws(UsageError) in
            options.configuration.resumableLimits.expirySeconds = try number(value, source, in: positive, "a positive number of seconds")
        },
        Flag("--sync", value: "MODE", """
            full (default): an upload is synced to disk before it is answered;
            none: nothing is synced (fast, for CI and fixtures; a power cut may lose it)
            """) { value, source, options throws(UsageError) in
            guard let mode = SyncMode(rawValue: value) else { throw UsageError(message: "\(source): \"\(value)\" is not full or none") }
            options.configuration.sync = mode
        },
        Flag("--auth-file", value: "FILE", """
            every request needs HTTP Basic credentials of a line user:HASH:RIGHTS
            (HASH from counterpart hash-password; RIGHTS a comma-separated set of
            read, write, control)
            """) { value, _, options in
            options.authFile = value
        },
        Flag("--token-file", value: "FILE", "...or an Authorization: Bearer token of a line name:TOKEN:RIGHTS") { value, _, options in
            options.tokenFile = value
        },
        Flag("--max-part-header-bytes", value: "N", "header section of one multipart part (default \(defaults.multipartLimits.maxHeaderBytes); 400)", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.multipartLimits.maxHeaderBytes = Int(min(try size(value, source), UInt64(Int32.max)))
        },
        Flag("--max-parts", value: "N", "parts in one multipart body (default \(defaults.multipartLimits.maxParts); 413)", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.multipartLimits.maxParts = try number(value, source, in: positive, "a positive number")
        },
        Flag("--max-field-bytes", value: "N", "text fields, names and file names of one form together (default \(defaults.multipartLimits.maxFieldBytes); 413)", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.multipartLimits.maxFieldBytes = Int(min(try size(value, source), UInt64(Int.max)))
        },
        Flag("--max-ranges", value: "N", "ranges in one Range header; more get the whole file, 200 (default \(defaults.rangePolicy.maxRanges))", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.rangePolicy.maxRanges = try number(value, source, in: positive, "a positive number")
        },
        Flag("--max-connections", value: "N", "connections at once; more wait to be accepted (default \(defaults.maxConnections))", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.maxConnections = UInt32(try number(value, source, in: positive, "a positive number"))
        },
        Flag("--max-connections-per-client", value: "N", "from one address; more get 503 (default \(defaults.maxConnectionsPerClient), 0: no limit)", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.maxConnectionsPerClient = UInt32(try number(value, source, in: 0...Int(Int32.max), "a number (0: no limit)"))
        },
        Flag("--idle-timeout", value: "SECONDS", "a silent connection is closed (default \(defaults.connectionTimeout))", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.connectionTimeout = UInt32(try number(value, source, in: positive, "a positive number of seconds"))
        },
        Flag("--head-timeout", value: "SECONDS", "time to send a whole request head, then closed (default \(defaults.headTimeout), 0: none)", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.headTimeout = UInt32(try number(value, source, in: 0...Int(Int32.max), "a number of seconds (0: none)"))
        },
        Flag("--head-grace", value: "SECONDS", "a request head may take this long before --min-head-rate applies (default \(defaults.headGrace))", section: .limits) { value, source, options throws(UsageError) in
            options.configuration.headGrace = UInt32(try number(value, source, in: 0...Int(Int32.max), "a number of seconds"))
        },
        Flag("--min-head-rate", value: "BYTES", """
            past its grace a head must keep arriving at this many bytes a second,
            each BYTES buying another second; slower is closed (default \(defaults.minHeadRate), 0: none)
            """, section: .limits) { value, source, options throws(UsageError) in
            options.configuration.minHeadRate = UInt32(min(try size(value, source, allowingZero: true), UInt64(UInt32.max)))
        },
        Flag("--evict-at", value: "PERCENT", """
            with this share of --max-connections open, idle connections and
            unfinished heads are closed, the longest silent first (default \(defaults.evictAtPercent), 0: never)
            """, section: .limits) { value, source, options throws(UsageError) in
            options.configuration.evictAtPercent = UInt32(try number(value, source, in: 0...100, "a percentage from 0 to 100"))
        },
        Flag("--min-body-rate", value: "BYTES", """
            a request body slower than this many bytes a second over 10 s
            gets 408 and nothing is stored (default \(defaults.minBodyRate): none)
            """, section: .limits) { value, source, options throws(UsageError) in
            options.configuration.minBodyRate = UInt32(min(try size(value, source, allowingZero: true), UInt64(UInt32.max)))
        },
        Flag("--min-free-disk", value: "N", """
            free space kept on the uploads disk; uploads that need it get 507
            (default \(defaults.minFreeDiskBytes / 1_048_576)MiB, 0: none)
            """, section: .limits) { value, source, options throws(UsageError) in
            options.configuration.minFreeDiskBytes = try size(value, source, allowingZero: true)
        },
        Flag("--connection-memory", value: "N", """
            memory of each connection, \(connectionMemoryRange) (default \(defaults.connectionMemoryBytes >> 10)KiB): a request
            head must fit (431); more reads uploads in larger pieces, less makes
            small requests cheaper (it is cleared before each request)
            """, section: .limits) { value, source, options throws(UsageError) in
            let bytes = try size(value, source)
            guard Configuration.connectionMemoryRange.contains(bytes) else {
                throw UsageError(message: "\(source): \"\(value)\" is not from \(connectionMemoryRange)")
            }
            options.configuration.connectionMemoryBytes = Int(bytes)
        },
    ]
}
