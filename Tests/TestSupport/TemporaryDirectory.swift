import Foundation

/// A private (0700) temporary directory, removed with everything in it when the value goes away.
///
/// Each test makes its own, so tests running in parallel never share a path.
public final class TemporaryDirectory: @unchecked Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates `$TMPDIR/PREFIX-UUID` with mode 0700.
    /// - Parameter prefix: names the directory after what uses it, to find leftovers.
    /// - Throws: the file system's error when the directory cannot be created.
    public init(prefix: String = "sf-test") throws {
        path = FileManager.default.temporaryDirectory.path + "/\(prefix)-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    /// The path of `name` inside the directory (nothing is created).
    public func path(_ name: String) -> String { path + "/" + name }

    /// Writes `contents` to `name` inside the directory, mode 0600, and returns its path.
    /// - Throws: the file system's error when the file cannot be written.
    @discardableResult
    public func file(_ name: String, _ contents: [UInt8]) throws -> String {
        let full = path(name)
        try Data(contents).write(to: URL(fileURLWithPath: full))
        chmod(full, 0o600)
        return full
    }

    /// Writes `text` (UTF-8) to `name` inside the directory, mode 0600, and returns its path.
    /// - Throws: the file system's error when the file cannot be written.
    @discardableResult
    public func file(_ name: String, _ text: String) throws -> String {
        try file(name, Array(text.utf8))
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
