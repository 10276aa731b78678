import Foundation
import Testing

/// The repository's root folder: the nearest folder above this file that holds Package.swift
/// (test files sit at different depths under Tests/CounterpartTests).
let repositoryRoot: URL = {
    var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while folder.path != "/" && !FileManager.default.fileExists(atPath: folder.appendingPathComponent("Package.swift").path) {
        folder.deleteLastPathComponent()
    }
    return folder
}()

/// A product built beside the test bundle (or in .build/debug), for tests that run the commands.
func builtProduct(_ name: String) throws -> URL {
    let candidates = [
        URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0]).deletingLastPathComponent(),
        repositoryRoot.appendingPathComponent(".build/debug"),
    ].map { $0.appendingPathComponent(name) }
    return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) },
                        "build the \(name) product first (swift build)")
}

/// The Python of the build's own virtual environment (scripts/setup puts tuspy and the browser driver in it).
let buildPython = repositoryRoot.appendingPathComponent(".build/python/bin/python3").path
