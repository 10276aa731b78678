/// The stores one server runs on, chosen by its configuration: the uploads folder, or an
/// S3 bucket that several servers share. Nothing above this picks a backend.
struct ServerStorage {
    let uploads: any UploadStorage
    let resumable: any ResumableStorage
    /// What serves `/uploads/…`.
    let uploadedFiles: any FileServing
    /// The uploads folder, when uploads are local files (what `touch` can change).
    let uploadsFolder: StaticFiles?

    /// Whether a name is one a local store keeps beside its uploads, never to be served
    /// from any folder (the uploads folder may sit inside the root): an upload's temporary
    /// file, or the folder of resumable uploads' data and state.
    @Sendable static func isLocalBookkeeping(_ name: String) -> Bool {
        name.hasPrefix(LocalUploadStore.temporaryPrefix) || name == LocalResumableStorage.folderName
    }

    init(_ configuration: Configuration, uploadedFileHeaders: [HTTPField]) throws(CounterpartServer.StartError) {
        if let objectStore = configuration.objectStore {
            let client: S3Client
            do {
                client = try S3Client(objectStore)
                try client.createBucketIfMissing()
            } catch {
                throw .unusableStore(url: "s3://\(objectStore.bucket)/\(objectStore.prefix)", reason: "\(error)")
            }
            let uploads = S3UploadStore(client: client)
            uploads.removeStaleStagingObjects()
            self.uploads = uploads
            resumable = S3ResumableStorage(client: client, uploads: uploads)
            uploadedFiles = StoredObjectFiles(client: client, urlPrefix: ["uploads"], fileHeaders: uploadedFileHeaders,
                                              rangePolicy: configuration.rangePolicy, readAheadBudget: uploads.buffers)
            uploadsFolder = nil
            return
        }
        let store = try LocalUploadStore(folder: configuration.uploads, keepFree: configuration.minFreeDiskBytes, sync: configuration.sync)
        store.removeStaleTemporaryFiles()
        uploads = store
        resumable = LocalResumableStorage(uploadsFolder: store.folder, freeSpace: store.freeSpace, sync: configuration.sync)
        let files = StaticFiles(folder: try ServedFolder(path: store.folder), urlPrefix: ["uploads"], hidesDotFiles: true,
                                servesIndexFiles: false, fileHeaders: uploadedFileHeaders, rangePolicy: configuration.rangePolicy,
                                isUnserved: ServerStorage.isLocalBookkeeping)
        uploadedFiles = files
        uploadsFolder = files
    }
}
