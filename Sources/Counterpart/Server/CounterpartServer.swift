import Foundation
import HTTPTransfer
import Synchronization

/// A running Counterpart server. Start several in one process if you like: each has its
/// own port and folders.
///
/// ```swift
/// let server = try CounterpartServer(Configuration(root: fixtures, uploads: temporaryFolder))
/// defer { server.stop() }
/// let url = server.baseURL.appendingPathComponent("upload")
/// ```
public final class CounterpartServer: Sendable {
    public let configuration: Configuration
    /// The port it listens on (the one picked when `configuration.port` was 0).
    public let port: UInt16
    /// The last requests it answered (`configuration.journalCapacity` of them).
    public let journal: RequestJournal
    /// The faults it applies of its own accord: `configuration.faults` and the rules armed
    /// (`configuration.faultRules`, `POST /__counterpart/faults`, `faults.arm(…)`).
    public let faults: ServerFaults
    /// What happens on it as it happens: finished requests, transfers in flight, resumable
    /// uploads, fault rules (`/__counterpart/events`, `events.subscribe()`).
    public let events: ServerEvents
    private let daemon: MicroHTTPDDaemon
    private let resumable: ResumableStore
    private let sweeper: PeriodicTask
    private let stopped = Mutex(false)

    /// Why a server could not start.
    public enum StartError: Error, CustomStringConvertible {
        /// A folder to serve or store in cannot be used.
        case unusableFolder(path: String, reason: String)
        /// The address cannot be listened on (taken, not local, not resolvable).
        case cannotListen(host: String, port: UInt16, reason: String)
        /// The certificate or key for HTTPS cannot be used.
        case unusableTLS(reason: String)
        /// The object store (`--store`) cannot be reached or used.
        case unusableStore(url: String, reason: String)

        public var description: String {
            switch self {
            case .unusableTLS(let reason): return "cannot serve HTTPS: \(reason)"
            case .unusableStore(let url, let reason): return "cannot use the object store \(url): \(reason)"
            case .unusableFolder(let path, let reason): return "cannot use the folder \(path): \(reason)"
            case .cannotListen(let host, let port, let reason): return "cannot listen on \(host) port \(port): \(reason)"
            }
        }
    }

    /// Starts listening; returns once the server takes requests.
    public init(_ configuration: Configuration) throws(StartError) {
        self.configuration = configuration
        let events = ServerEvents(backlog: configuration.eventBacklog, requestGrace: configuration.requestEventGrace,
                                  latestRequestsPerSecond: configuration.latestRequestsPerSecond)
        self.events = events
        let root = try ServedFolder(path: configuration.root)
        let storage = try ServerStorage(configuration, uploadedFileHeaders: Self.uploadedFileHeaders)
        resumable = ResumableStore(storage: storage.resumable, limits: configuration.resumableLimits, events: events)
        resumable.removeExpired()
        journal = RequestJournal(capacity: configuration.journalCapacity, maxBytes: configuration.journalMaxBytes)
        let changes = ChangeCounters()
        faults = ServerFaults(serverWide: configuration.faults, rules: configuration.faultRules, cleared: { changes.reset() }, events: events)
        let origin = ServerOrigin()
        let uploadEndpoint = UploadEndpoint(store: storage.uploads, limits: UploadLimits(
            maxBodyBytes: configuration.maxUploadBytes, multipart: configuration.multipartLimits,
            maxDrainBytes: configuration.maxDrainBytes))
        let rootFiles = StaticFiles(folder: root, urlPrefix: [], hidesDotFiles: false, servesIndexFiles: true,
                                    fileHeaders: [], rangePolicy: configuration.rangePolicy,
                                    isUnserved: ServerStorage.isLocalBookkeeping)
        let router = Router(
            root: rootFiles,
            uploadedFiles: storage.uploadedFiles,
            generated: GeneratedBytesEndpoint(rangePolicy: configuration.rangePolicy, changes: changes),
            tus: TusEndpoint(store: resumable, uploads: storage.uploads, maxSize: configuration.maxUploadBytes,
                             maxDrainBytes: configuration.maxDrainBytes),
            resumable: ResumableUploads(store: resumable, target: uploadEndpoint, maxSize: configuration.maxUploadBytes,
                                        maxDrainBytes: configuration.maxDrainBytes, origin: origin, isHTTPS: configuration.tls != nil),
            control: ControlEndpoint(journal: journal, store: storage.uploads, faults: FaultsControl(faults: faults),
                                     touch: TouchEndpoint(root: rootFiles, uploads: storage.uploadsFolder), events: EventsEndpoint(events: events, faults: faults,
                                                                                                latestRequestsPerSecond: configuration.latestRequestsPerSecond),
                                     allowsRemoteControl: configuration.allowsRemoteControl,
                                     maxUploadBytes: configuration.maxUploadBytes),
            faults: faults,
            cors: configuration.corsOrigin.map(CORS.init),
            journal: journal,
            events: events,
            accessLog: configuration.accessLog,
            gate: AuthGate(accessControl: configuration.accessControl, allowsRemoteControl: configuration.allowsRemoteControl,
                           ownerOfUpload: { [resumable] id in (try? resumable.upload(id)).map(\.owner) }, failures: FailureLog()),
            accessLogFormat: configuration.accessLogFormat)
        daemon = try MicroHTTPDDaemon(options: .init(
            host: configuration.host, port: configuration.port, threads: configuration.threads,
            connectionTimeout: configuration.connectionTimeout, connectionMemoryLimit: configuration.connectionMemoryBytes,
            maxConnections: configuration.maxConnections,
            maxConnectionsPerClient: Int(configuration.maxConnectionsPerClient), headTimeout: Int(configuration.headTimeout),
            headGrace: Int(configuration.headGrace), minHeadRate: Int(configuration.minHeadRate),
            evictAtPercent: Int(configuration.evictAtPercent), minBodyRate: Int(configuration.minBodyRate),
            bodyRateWindow: Int(configuration.bodyRateWindow),
            maxDrainBytes: configuration.maxDrainBytes,
            tls: configuration.tls), handler: router)
        port = daemon.port
        origin.set(Self.baseURL(configuration, port: port).absoluteString)
        // Abandoned resumable uploads are removed once they expire.
        sweeper = PeriodicTask(every: Self.sweepInterval) { [resumable] in resumable.removeExpired() }
    }

    private static let sweepInterval = 60.0

    /// Files clients uploaded are served as what they are, but never as pages of this
    /// origin: an uploaded `.html` could otherwise run script here.
    static let uploadedFileHeaders = [
        HTTPField(name: "X-Content-Type-Options", value: "nosniff"),
        HTTPField(name: "Content-Security-Policy", value: "sandbox"),
    ]

    /// `http://host:port`, or `https://` with TLS (IPv6 hosts in brackets).
    public var baseURL: URL { Self.baseURL(configuration, port: port) }

    private static func baseURL(_ configuration: Configuration, port: UInt16) -> URL {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return URL(string: "\(configuration.tls == nil ? "http" : "https")://\(host):\(port)")!
    }

    /// Stops taking connections, lets requests in flight finish for up to `grace`, then
    /// stops: requests still running are cut and their partial uploads removed.
    public func stop(grace: Duration = .seconds(5)) {
        let alreadyStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !alreadyStopped else { return }
        sweeper.cancel()
        daemon.stopAccepting()
        events.close()  // event streams would otherwise hold the stop for its whole grace
        let deadline = MonotonicClock.seconds() + grace.seconds
        while daemon.requestsInFlight > 0, MonotonicClock.seconds() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        daemon.stop()
    }

    deinit {
        stop(grace: .zero)
    }
}

extension CounterpartServer {
    /// True where a Linux kernel (before 5.6) or a container's seccomp profile refuses
    /// openat2: files are then opened beneath their folder by walking the path one
    /// component at a time, with the same rules (as on macOS, where this is false).
    public static var kernelRefusesOpenat2: Bool { Platform.kernelRefusesOpenat2 }
}
