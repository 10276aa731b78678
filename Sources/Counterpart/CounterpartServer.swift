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
    private let daemon: MicroHTTPDDaemon
    private let store: UploadStore
    private let stopped = Mutex(false)

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts listening; returns once the server takes requests.
    public init(_ configuration: Configuration) throws {
        self.configuration = configuration
        let root: ServedFolder
        let uploadsFolder: ServedFolder
        do {
            root = try ServedFolder(path: configuration.root)
            store = try UploadStore(folder: configuration.uploads)
            uploadsFolder = try ServedFolder(path: store.folder)
        } catch {
            throw StartError(description: String(describing: error))
        }
        store.removeStaleTemporaryFiles()
        let router = Router(
            root: StaticFiles(folder: root, urlPrefix: "/", hidesDotFiles: false, rangePolicy: configuration.rangePolicy),
            uploadedFiles: StaticFiles(folder: uploadsFolder, urlPrefix: "/uploads/", hidesDotFiles: true,
                                       rangePolicy: configuration.rangePolicy),
            upload: UploadEndpoint(store: store, limits: UploadLimits(
                maxBodyBytes: configuration.maxUploadBytes, multipart: configuration.multipartLimits,
                maxDrainBytes: configuration.maxDrainBytes)),
            accessLog: configuration.accessLog)
        do {
            daemon = try MicroHTTPDDaemon(options: .init(
                host: configuration.host, port: configuration.port, threads: configuration.threads,
                connectionTimeout: configuration.connectionTimeout,
                connectionMemoryLimit: 64 * 1024, maxConnections: configuration.maxConnections), handler: router)
        } catch {
            throw StartError(description: String(describing: error))
        }
        port = daemon.port
    }

    /// `http://host:port` (IPv6 hosts in brackets).
    public var baseURL: URL {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return URL(string: "http://\(host):\(port)")!
    }

    /// Stops taking connections, lets requests in flight finish for up to `grace`, then
    /// stops: requests still running are cut and their partial uploads removed.
    public func stop(grace: Duration = .seconds(5)) {
        let alreadyStopped = stopped.withLock { stopped in
            defer { stopped = true }
            return stopped
        }
        guard !alreadyStopped else { return }
        daemon.stopAccepting()
        let deadline = ContinuousClock.now + grace
        while daemon.requestsInFlight > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        daemon.stop()
    }

    deinit {
        stop(grace: .zero)
    }
}
