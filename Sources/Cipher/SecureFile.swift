import Foundation

/// Persistent files done safely: atomic replacement (temporary file, fsync, rename, fsync of the
/// directory), private modes (0600 files in 0700 directories) and ssh-style ownership checks.
public enum SecureFile {
    /// Errors of the file helpers.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// A file or directory is accessible to group or others, or owned by another user.
        case insecurePermissions(path: String, reason: String, fix: String)
        /// A system call failed.
        case system(operation: String, path: String, errno: Int32)

        public var description: String {
            switch self {
            case let .insecurePermissions(path, reason, fix):
                return "refusing \(path): \(reason). Fix it with: \(fix)"
            case let .system(operation, path, code):
                return "\(operation) \(path) failed: \(String(cString: strerror(code)))"
            }
        }
    }

    /// Creates `path` (and missing parents) as a 0700 directory if it does not exist, then
    /// checks it with ``checkPrivate(_:isDirectory:)``.
    public static func ensurePrivateDirectory(_ path: String) throws {
        var info = stat()
        if lstat(path, &info) != 0 {
            guard errno == ENOENT else { throw Failure.system(operation: "stat", path: path, errno: errno) }
            let parent = directoryOf(path)
            if parent != "." && parent != path && parent != "/" {
                var parentInfo = stat()
                if lstat(parent, &parentInfo) != 0 {
                    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true,
                                                            attributes: [.posixPermissions: 0o700])
                }
            }
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                throw Failure.system(operation: "mkdir", path: path, errno: errno)
            }
            _ = chmod(path, 0o700)
        }
        try checkPrivate(path, isDirectory: true)
    }

    /// Refuses a file or directory that is group- or world-accessible, not owned by the current
    /// user, or (for a directory) a symlink, as ssh does with ~/.ssh.
    public static func checkPrivate(_ path: String, isDirectory: Bool) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Failure.system(operation: "stat", path: path, errno: errno) }
        let type = info.st_mode & S_IFMT
        if isDirectory && type != S_IFDIR {
            throw Failure.insecurePermissions(path: path, reason: "it is not a directory (a symlink is not accepted)",
                                              fix: "mv \(path) \(path).old && mkdir -m 700 \(path)")
        }
        if !isDirectory && type != S_IFREG {
            throw Failure.insecurePermissions(path: path, reason: "it is not a regular file", fix: "rm \(path)")
        }
        if info.st_uid != geteuid() {
            throw Failure.insecurePermissions(path: path, reason: "it is owned by uid \(info.st_uid), not by you (uid \(geteuid()))",
                                              fix: "chown \(geteuid()) \(path)")
        }
        if info.st_mode & 0o077 != 0 {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw Failure.insecurePermissions(path: path, reason: "its mode \(mode) lets group or others in",
                                              fix: "chmod \(isDirectory ? "700" : "600") \(path)")
        }
    }

    /// Writes `bytes` to `path` atomically with mode 0600: a crash leaves either the old file or
    /// the new one, never a mix.
    public static func writeAtomically<Bytes: DataProtocol>(_ bytes: Bytes, to path: String, mode: mode_t = 0o600) throws {
        try replaceAtomically(path, mode: mode) { fd in
            for region in bytes.regions {
                try region.withUnsafeBytes { try writeAll(fd, $0, path: path) }
            }
        }
    }

    /// Creates a temporary file beside `path`, lets `body` write it, then fsyncs, renames over
    /// `path` and fsyncs the directory. On any failure the temporary file is removed and `path`
    /// is untouched.
    public static func replaceAtomically(_ path: String, mode: mode_t = 0o600, _ body: (Int32) throws -> Void) throws {
        let directory = directoryOf(path)
        let (fd, temporary) = try makeTemporaryFile(in: directory, mode: mode)
        var committed = false
        defer {
            if !committed { unlink(temporary) }
        }
        do {
            try body(fd)
            guard fsync(fd) == 0 else { throw Failure.system(operation: "fsync", path: temporary, errno: errno) }
        } catch {
            close(fd)
            throw error
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw Failure.system(operation: "rename", path: path, errno: errno) }
        committed = true
        try syncDirectory(directory)
    }

    /// Creates an exclusive temporary file `.<random>.tmp` in `directory`.
    public static func makeTemporaryFile(in directory: String, mode: mode_t = 0o600) throws -> (Int32, String) {
        for _ in 0..<16 {
            let name = ".sf-" + (try SecureRandom.string(length: 16, alphabet: SecureRandom.alphanumeric)) + ".tmp"
            let path = directory + "/" + name
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
            if fd >= 0 {
                _ = fchmod(fd, mode)
                return (fd, path)
            }
            if errno != EEXIST { throw Failure.system(operation: "create", path: path, errno: errno) }
        }
        throw Failure.system(operation: "create temporary file in", path: directory, errno: EEXIST)
    }

    /// fsyncs a directory so a rename or unlink in it is durable.
    public static func syncDirectory(_ directory: String) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure.system(operation: "open directory", path: directory, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0 && errno != EINVAL { throw Failure.system(operation: "fsync directory", path: directory, errno: errno) }
    }

    /// Writes all of `buffer` to `fd`, retrying short writes and EINTR.
    public static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String = "file") throws {
        var done = 0
        while done < buffer.count {
            let n = write(fd, buffer.baseAddress! + done, buffer.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure.system(operation: "write", path: path, errno: errno)
            }
            done += n
        }
    }

    /// Reads the whole file at `path`, refusing files larger than `maxLength`.
    public static func read(_ path: String, maxLength: Int = 64 << 20) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure.system(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        var result = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure.system(operation: "read", path: path, errno: errno)
            }
            if n == 0 { break }
            result += buffer[0..<n]
            if result.count > maxLength { throw Failure.system(operation: "read (larger than \(maxLength) bytes)", path: path, errno: EFBIG) }
        }
        return result
    }

    /// The directory part of `path` ("." when there is none).
    /// (Written by hand: Foundation's `deletingLastPathComponent` traps on some single-component
    /// relative paths on Linux.)
    public static func directoryOf(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        var directory = trimmed[..<slash]
        while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
        return directory.isEmpty ? "/" : String(directory)
    }
}
