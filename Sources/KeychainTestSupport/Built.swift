import Foundation

/// The package's built executables, beside the test bundle, and the package's root (its scripts and fixtures).
public enum Built {
    public static var directory: URL {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if dir.lastPathComponent.hasSuffix(".xctest") { dir.deleteLastPathComponent() }
        if FileManager.default.fileExists(atPath: dir.appendingPathComponent("security").path) { return dir }
        return Bundle.main.bundleURL.deletingLastPathComponent()
    }

    public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    public static var packageRoot: URL {
        var dir = URL(fileURLWithPath: #filePath)
        while dir.path != "/" {
            dir.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) { return dir }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }
}
