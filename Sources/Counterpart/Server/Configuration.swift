import Foundation
import HTTPTransfer

/// Everything a Counterpart server is started with. The command builds one from its
/// flags; a test builds one directly.
public struct Configuration: Sendable {
    /// The address to listen on.
    public var host: String
    /// The port; 0 picks a free one (read it back from `CounterpartServer.port`).
    public var port: UInt16
    /// The folder served as static files.
    public var root: String
    /// The folder uploads are stored in (created if missing), served at `/uploads/`.
    public var uploads: String
    /// Request bodies larger than this are refused with 413.
    public var maxUploadBytes: UInt64
    /// Threads serving connections (a pool, each polling its share); 0 runs a thread per connection.
    public var threads: Int
    /// Limits of one multipart body: header bytes per part, parts, bytes of text fields.
    public var multipartLimits: MultipartLimits
    /// Ranges per request before the whole file is sent instead; coalescing.
    public var rangePolicy: RangePolicy
    /// Seconds a connection may stay idle (nothing received or sent) before it is closed.
    public var connectionTimeout: UInt32
    /// Seconds a connection has to send a complete request head, from when it opens or its
    /// previous response ends; then it is closed (a slowloris client never finishes its
    /// head). 0: no limit.
    public var headTimeout: UInt32
    /// Seconds a request head may take before `minHeadRate` applies.
    public var headGrace: UInt32
    /// Bytes a second a request head must keep arriving at once its grace is over: each
    /// `minHeadRate` bytes buys another second (Apache's mod_reqtimeout `MinRate`); slower,
    /// the connection is closed. 0: no minimum (`headTimeout` still applies).
    public var minHeadRate: UInt32
    /// Connections served at once; more wait in the listen queue.
    public var maxConnections: UInt32
    /// Percent of `maxConnections` at which the connections waiting for a request head (idle
    /// keep-alive ones and heads not finished) are closed, the longest silent first, down to
    /// half the mark, so that new connections get in. A request whose body or
    /// response is on its way is never closed for it. 0: never.
    public var evictAtPercent: UInt32
    /// Bytes a second a request body must arrive at, measured over windows of
    /// `bodyRateWindow` seconds in which the server did not hold the connection itself
    /// (faults): slower gets `408` and the connection closes (an upload stores nothing; a
    /// resumable one keeps what was stored). 0: no minimum.
    public var minBodyRate: UInt32
    /// Seconds over which `minBodyRate` is measured.
    public var bodyRateWindow: UInt32
    /// Connections one client address may hold: requests on more get `503` and the
    /// connection closes; past twice as many, new ones are closed at once. 0: no limit.
    public var maxConnectionsPerClient: UInt32
    /// Free space kept on the uploads folder's filesystem: an upload that would go below
    /// it gets `507` and nothing is stored. 0: none kept (the disk may fill up).
    public var minFreeDiskBytes: UInt64
    /// Memory libmicrohttpd gives each connection: its request head must fit in it (a larger
    /// head gets libmicrohttpd's own 431), and body chunks arrive in pieces of about half.
    /// libmicrohttpd clears all of it before every request on the connection: more makes
    /// uploads cheaper (fewer, larger reads) and small requests dearer.
    public var connectionMemoryBytes: Int
    /// What `--connection-memory` takes.
    public static let connectionMemoryRange: ClosedRange<UInt64> = (16 << 10)...(16 << 20)
    /// Body bytes still read (and thrown away) after a request's answer is decided, so that
    /// a client that sends its body at once gets that answer; a body that goes on longer
    /// is cut.
    public var maxDrainBytes: UInt64
    /// One line per request on stderr.
    public var accessLog: Bool
    /// The access log's lines: text, or one JSON object per line.
    public var accessLogFormat: AccessLogFormat
    /// Faults injected into every request (a request's own fault spec overrides them).
    public var faults: FaultSpec
    /// Fault rules armed from the start (`--fault-rule`), tried in this order.
    public var faultRules: [FaultRule]
    /// Requests the journal keeps (the oldest go first); 0 keeps none.
    public var journalCapacity: Int
    /// Bytes of text (targets, headers, part names) the journal keeps at most: a few hostile
    /// requests with 60 KB heads or 1,000 named parts must not make it hold gigabytes.
    public var journalMaxBytes: Int
    /// The origin browser apps may use the server from (`*` for any); nil: no CORS headers.
    public var corsOrigin: String?
    /// Whether clients on other machines may use the control endpoints that change state.
    public var allowsRemoteControl: Bool
    /// HTTPS with this certificate and key; nil: plain HTTP.
    public var tls: TLSCredentials?
    /// Users and tokens whose credentials every request needs (`--auth-file`,
    /// `--token-file`); nil: none needed.
    public var accessControl: AccessControl?
    /// Resumable uploads (tus and IETF) in progress at once, and how long one may sit idle.
    public var resumableLimits: ResumableLimits
    /// Whether uploads are synced to disk before they are answered for (`full`) or not (`none`).
    public var sync: SyncMode
    /// Where uploads and resumable uploads are kept: nil for the `uploads` folder; an S3
    /// bucket (`--store s3://BUCKET/PREFIX`) that several servers share, so that any of
    /// them takes any request.
    public var objectStore: S3Configuration? = nil
    /// Events kept for `/__counterpart/events` readers that lag or reconnect with `Last-Event-ID`.
    public var eventBacklog = 4_096
    /// How long requests are still kept as events once the last listener has gone (seconds):
    /// a page that reloads or a stream that reconnects within it goes on without a gap. After
    /// it the backlog is forgotten, and a server nobody watches pays nothing per request again.
    public var requestEventGrace = 60.0
    /// What `/__counterpart/events?requests=latest` (the live page's stream) sends of the
    /// request events at most, a second (and at once, after a quiet second): above it, the
    /// newest of each batch the stream reads and a `skipped` event that counts the others.
    /// While only such streams listen, the server keeps no more requests as events than this.
    public var latestRequestsPerSecond = 1_000

    public static let defaultMaxUploadBytes: UInt64 = 10 << 30
    /// One thread per CPU, at least 2 (a thread waiting in the kernel, on a disk sync, does
    /// not hold every connection): more threads than CPUs preempt each other once the server
    /// runs in a session of its own, as a service does (see the README's Threading).
    public static let defaultThreads = max(2, ProcessInfo.processInfo.activeProcessorCount)
    public static let defaultJournalCapacity = 1_000
    public static let defaultMinFreeDiskBytes: UInt64 = 64 << 20

    public init(
        host: String = "127.0.0.1",
        port: UInt16 = 0,
        root: String = "public",
        uploads: String = "uploads",
        maxUploadBytes: UInt64 = defaultMaxUploadBytes,
        threads: Int = defaultThreads,
        multipartLimits: MultipartLimits = MultipartLimits(),
        rangePolicy: RangePolicy = RangePolicy(),
        connectionTimeout: UInt32 = 30,
        headTimeout: UInt32 = 30,
        headGrace: UInt32 = 5,
        minHeadRate: UInt32 = 500,
        maxConnections: UInt32 = 1_000,
        evictAtPercent: UInt32 = 90,
        minBodyRate: UInt32 = 0,
        bodyRateWindow: UInt32 = 10,
        maxConnectionsPerClient: UInt32 = 0,
        minFreeDiskBytes: UInt64 = defaultMinFreeDiskBytes,
        connectionMemoryBytes: Int = 64 * 1024,
        maxDrainBytes: UInt64 = 64 << 20,
        accessLog: Bool = false,
        accessLogFormat: AccessLogFormat = .text,
        faults: FaultSpec = FaultSpec(),
        faultRules: [FaultRule] = [],
        journalCapacity: Int = defaultJournalCapacity,
        journalMaxBytes: Int = 16 << 20,
        corsOrigin: String? = nil,
        allowsRemoteControl: Bool = false,
        tls: TLSCredentials? = nil,
        resumableLimits: ResumableLimits = ResumableLimits(),
        sync: SyncMode = .full,
        accessControl: AccessControl? = nil
    ) {
        self.host = host
        self.port = port
        self.root = root
        self.uploads = uploads
        self.maxUploadBytes = maxUploadBytes
        self.threads = threads
        self.multipartLimits = multipartLimits
        self.rangePolicy = rangePolicy
        self.connectionTimeout = connectionTimeout
        self.headTimeout = headTimeout
        self.headGrace = headGrace
        self.minHeadRate = minHeadRate
        self.maxConnections = maxConnections
        self.evictAtPercent = evictAtPercent
        self.minBodyRate = minBodyRate
        self.bodyRateWindow = bodyRateWindow
        self.maxConnectionsPerClient = maxConnectionsPerClient
        self.minFreeDiskBytes = minFreeDiskBytes
        self.connectionMemoryBytes = connectionMemoryBytes
        self.maxDrainBytes = maxDrainBytes
        self.accessLog = accessLog
        self.accessLogFormat = accessLogFormat
        self.faults = faults
        self.faultRules = faultRules
        self.journalCapacity = journalCapacity
        self.journalMaxBytes = journalMaxBytes
        self.corsOrigin = corsOrigin
        self.allowsRemoteControl = allowsRemoteControl
        self.tls = tls
        self.resumableLimits = resumableLimits
        self.sync = sync
        self.accessControl = accessControl
    }
}
