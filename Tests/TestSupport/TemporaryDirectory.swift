import Foundation
import Synchronization

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

    private init(existing path: String) { self.path = path }

    /// Creates `$TMPDIR/PREFIX-UUID` (mode 0700) for a fixture that lives as long as the test
    /// process (a `static let`, whose value is never released, so `deinit` would never remove
    /// it): the directory is removed, with everything in it, when the process exits.
    /// - Parameter prefix: names the directory after what uses it, to find leftovers.
    /// - Throws: the file system's error when the directory cannot be created.
    public static func forProcess(prefix: String) throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: prefix)
        ProcessLifetime.removeAtExit(directory.path)
        return directory
    }

    /// Creates `/tmp/PREFIX-XXXXXX` (mode 0700, `mkdtemp`), whatever `$TMPDIR` says: a short
    /// path, for UNIX-domain sockets inside it (a socket's path holds at most 107 bytes).
    /// - Parameter prefix: names the directory after what uses it, to find leftovers.
    /// - Throws: `CocoaError` when the directory cannot be created.
    public static func short(prefix: String) throws -> TemporaryDirectory {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: "/tmp/\(prefix)-XXXXXX"])
        }
        return TemporaryDirectory(existing: String(cString: made))
    }

    /// Creates `/dev/shm/PREFIX-UUID` (mode 0700): a directory in memory (tmpfs), or nil when
    /// `/dev/shm` is not a writable tmpfs here.
    /// - Parameter prefix: names the directory after what uses it, to find leftovers.
    /// - Throws: the file system's error when the directory cannot be created.
    public static func inMemory(prefix: String) throws -> TemporaryDirectory? {
        #if os(Linux)
        // /proc files report size 0: read to the end.
        let mounts = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/mounts")).readToEnd()) ?? nil
        let isTmpfs = String(decoding: mounts ?? Data(), as: UTF8.self).split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 2 && fields[1] == "/dev/shm" && fields[2] == "tmpfs"
        }
        guard isTmpfs, access("/dev/shm", W_OK) == 0 else { return nil }
        let path = "/dev/shm/\(prefix)-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        return TemporaryDirectory(existing: path)
        #else
        return nil
        #endif
    }

    /// The path of `name` inside the directory (nothing is created).
    public func path(_ name: String) -> String { path + "/" + name }

    /// Creates the directory `name` (mode 0700, with its missing parents) inside the directory and
    /// returns its path.
    /// - Throws: the file system's error when the directory cannot be created.
    @discardableResult
    public func directory(_ name: String) throws -> String {
        let full = path(name)
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        return full
    }

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

/// The directories `TemporaryDirectory.forProcess(prefix:)` made, removed by one `atexit`
/// handler.
private enum ProcessLifetime {
    static let paths = Mutex<[String]>([])
    static let handler: Void = { _ = atexit { ProcessLifetime.removeAll() } }()

    static func removeAtExit(_ path: String) {
        _ = handler
        paths.withLock { $0.append(path) }
    }

    static func removeAll() {
        for path in paths.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
    }
}
