#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CPlatform

/// Persistent files done safely: atomic replacement (temporary file, fsync, rename, fsync of the
/// directory), private modes (0600 files in 0700 directories) and ssh-style ownership checks.
public enum SecureFile {
    /// Errors of the file helpers.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// A file or directory is accessible to group or others, or owned by another user, or
        /// is of a kind that is refused (a symlinked state directory; an output path that is a
        /// symbolic link, directory, socket or block device).
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
    /// - Parameter path: The directory.
    /// - Throws: ``SecureFile/Failure`` when it cannot be created or is not private.
    public static func ensurePrivateDirectory(_ path: String) throws(SecureFile.Failure) {
        do {
            _ = try FileCalls.linkStatus(path)
        } catch {
            guard error.code == ENOENT else { throw Failure(error, path: path) }
            let parent = directoryOf(path)
            if parent != "." && parent != path && parent != "/" {
                if (try? FileCalls.linkStatus(parent)) == nil {
                    do {
                        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true,
                                                                attributes: [.posixPermissions: 0o700])
                    } catch {
                        throw Failure.system(operation: "mkdir -p", path: parent, errno: posixCode(of: error))
                    }
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
    /// - Parameters:
    ///   - path: The file or directory.
    ///   - isDirectory: Whether `path` must be a directory.
    /// - Throws: ``SecureFile/Failure/insecurePermissions(path:reason:fix:)`` with the fix, or ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path.
    public static func checkPrivate(_ path: String, isDirectory: Bool) throws(SecureFile.Failure) {
        let info: FileStatus
        do { info = try FileCalls.linkStatus(path) } catch { throw Failure(error, path: path) }
        try checkPrivate(info, path: path, isDirectory: isDirectory)
    }

    /// As ``checkPrivate(_:isDirectory:)``, on a status already taken (the `fstat` of a
    /// descriptor about to be read).
    package static func checkPrivate(_ info: FileStatus, path: String, isDirectory: Bool) throws(SecureFile.Failure) {
        let type = info.kind
        if isDirectory && type != .directory {
            throw Failure.insecurePermissions(path: path, reason: "it is not a directory (a symlink is not accepted)",
                                              fix: "mv \(path) \(path).old && mkdir -m 700 \(path)")
        }
        if !isDirectory && type != .regular {
            throw Failure.insecurePermissions(path: path, reason: "it is not a regular file", fix: "rm \(path)")
        }
        if info.owner != geteuid() {
            throw Failure.insecurePermissions(path: path, reason: "it is owned by uid \(info.owner), not by you (uid \(geteuid()))",
                                              fix: "chown \(geteuid()) \(path)")
        }
        if info.permissions & 0o077 != 0 {
            let mode = String(info.permissions & 0o777, radix: 8)
            throw Failure.insecurePermissions(path: path, reason: "its mode \(mode) lets group or others in",
                                              fix: "chmod \(isDirectory ? "700" : "600") \(path)")
        }
    }

    /// Writes `bytes` to `path` atomically with mode 0600: a crash leaves either the old file or
    /// the new one, never a mix.
    /// - Parameters:
    ///   - bytes: The new contents.
    ///   - path: The file to replace or create.
    ///   - mode: Its mode.
    /// - Throws: ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path.
    public static func writeAtomically<Bytes: DataProtocol>(_ bytes: Bytes, to path: String, mode: mode_t = 0o600) throws(SecureFile.Failure) {
        try replacing(path, mode: mode, failure: { $0 }) { (fd) throws(Failure) in
            for region in bytes.regions {
                try region.withUnsafeBytes { buffer in Result { () throws(Failure) in try writeAll(fd, buffer, path: path) } }.get()
            }
        }
    }

    /// Creates a temporary file beside `path`, lets `body` write it, then fsyncs, renames over
    /// `path` and fsyncs the directory. On any failure the temporary file is removed and `path`
    /// is untouched.
    ///
    /// The temporary is an unnamed file (`O_TMPFILE`) where the filesystem supports it, named
    /// `.sf-lk-<random>.tmp` only for the instant between `linkat` and `rename`; elsewhere it is a
    /// named `.sf-lk-<random>.tmp` from the start. Either way it is `flock`ed while its writer
    /// lives, so a process killed mid-write leaves nothing, or a name that the next replacement
    /// in the same directory recognises as abandoned (unlocked) and removes
    /// (`removeAbandonedTemporaries(in:)`).
    ///
    /// `path` itself is replaced whatever it is (a symlink included); for a path a person
    /// named, use ``writeOutput(to:mode:_:)``.
    /// - Parameters:
    ///   - path: The file to replace or create.
    ///   - mode: Its mode.
    ///   - body: Writes the new contents to the descriptor it is given.
    /// - Throws: ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path, or what `body` throws (then `path` is unchanged).
    public static func replaceAtomically(_ path: String, mode: mode_t = 0o600, _ body: (Int32) throws -> Void) throws {
        try replacing(path, mode: mode, failure: { $0 }, body)
    }

    /// ``replaceAtomically(_:mode:_:)`` for a `body` whose errors have the type `E`, into which
    /// `failure` turns the replacement's own ``Failure``.
    static func replacing<E: Error>(_ path: String, mode: mode_t, failure: (Failure) -> E,
                                    _ body: (Int32) throws(E) -> Void) throws(E) {
        let directory = directoryOf(path)
        removeAbandonedTemporaries(in: directory)
        let temporary: LockedTemporary
        do { temporary = try LockedTemporary(in: directory, mode: mode) } catch { throw failure(error) }
        defer { temporary.discard() }
        try body(temporary.fd)
        do throws(Failure) {
            do { try FileCalls.sync(temporary.fd) } catch { throw Failure(error, path: temporary.displayName) }
            try temporary.commit(as: path)
            try syncDirectory(directory)
        } catch {
            throw failure(error)
        }
    }

    /// The `errno` behind an error from Foundation's file calls (`EIO` when it names none):
    /// a `POSIXError`, or a `CocoaError` whose underlying error is one.
    static func posixCode(of error: any Error) -> Int32 {
        if let posix = error as? POSIXError { return posix.code.rawValue }
        if let cocoa = error as? CocoaError, let posix = cocoa.userInfo["NSUnderlyingError"] as? POSIXError {
            return posix.code.rawValue
        }
        return EIO
    }

    /// The prefix and suffix of the temporaries ``replaceAtomically(_:mode:_:)`` names.
    static let lockedTemporaryPrefix = ".sf-lk-"
    static let temporarySuffix = ".tmp"
    static let temporaryRandomLength = 16

    /// Whether `name` has the form `.sf-lk-<16 letters or digits>.tmp`.
    static func isLockedTemporaryName(_ name: String) -> Bool {
        guard name.hasPrefix(lockedTemporaryPrefix), name.hasSuffix(temporarySuffix) else { return false }
        let middle = name.utf8.dropFirst(lockedTemporaryPrefix.utf8.count).dropLast(temporarySuffix.utf8.count)
        return middle.count == temporaryRandomLength && middle.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    /// Removes the temporaries of replacements in `directory` whose writer is gone: files named
    /// `.sf-lk-<16 letters or digits>.tmp`, regular, owned by the current user, on which no
    /// process holds the `flock` a live writer holds from creation to rename. Best effort:
    /// errors are ignored; at most 100,000 directory entries are looked at. Returns the number
    /// removed.
    /// - Parameter directory: The directory to clean.
    /// - Returns: How many temporaries were removed.
    @discardableResult
    package static func removeAbandonedTemporaries(in directory: String) -> Int {
        guard let stream = opendir(directory) else { return 0 }
        defer { closedir(stream) }
        let directoryFD = dirfd(stream)
        var removed = 0
        var seen = 0
        while seen < 100_000, let entry = readdir(stream) {
            seen += 1
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard isLockedTemporaryName(name) else { continue }
            guard let fd = try? FileCalls.open(in: directoryFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) else { continue }
            defer { close(fd) }
            guard let info = try? FileCalls.status(fd), info.isRegularFile, info.owner == geteuid() else { continue }
            guard FileCalls.tryLockExclusive(fd) else { continue }
            // Still the same file under that name (not replaced since it was opened).
            guard let current = try? FileCalls.linkStatus(in: directoryFD, name),
                  current.isSameFile(as: info) else { continue }
            if (try? FileCalls.unlink(in: directoryFD, name)) != nil { removed += 1 }
        }
        return removed
    }

    /// A temporary file held under an exclusive `flock` from creation until it is renamed into
    /// place or discarded.
    final class LockedTemporary {
        let fd: Int32
        let directory: String
        /// The temporary's path while it has a name (always for the named kind; between linkat
        /// and rename for the unnamed kind).
        private(set) var path: String?
        private var closed = false

        var displayName: String { path ?? directory + "/(unnamed temporary)" }

        /// - Parameter unnamed: Try an `O_TMPFILE` file first (tests pass false to exercise the
        ///   named kind, which filesystems without `O_TMPFILE` get).
        init(in directory: String, mode: mode_t, unnamed: Bool = true) throws(SecureFile.Failure) {
            self.directory = directory
            #if os(Linux)
            let anonymous = unnamed ? sf_open_tmpfile(directory, mode) : -1
            if anonymous >= 0 {
                // linkat needs /proc/self/fd (or CAP_DAC_READ_SEARCH); without it use a name.
                if access("/proc/self/fd/\(anonymous)", F_OK) == 0, FileCalls.tryLockExclusive(anonymous) {
                    _ = fchmod(anonymous, mode)
                    fd = anonymous
                    path = nil
                    return
                }
                close(anonymous)
            }
            #endif
            for _ in 0..<16 {
                let candidate = directory + "/" + (try SecureFile.lockedTemporaryName(in: directory))
                let named = open(candidate, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
                if named < 0 {
                    if errno == EEXIST { continue }
                    // Name the caller's directory, not the internal temporary name.
                    throw Failure.system(operation: "write into directory", path: directory, errno: errno)
                }
                // Locked and still under its name: a cleaner may have taken the name between
                // the open and the lock (then it removed it); take another.
                if FileCalls.tryLockExclusive(named), let mine = try? FileCalls.status(named),
                   let there = try? FileCalls.linkStatus(candidate), mine.isSameFile(as: there) {
                    _ = fchmod(named, mode)
                    fd = named
                    path = candidate
                    return
                }
                close(named)
            }
            throw Failure.system(operation: "create temporary file in", path: directory, errno: EEXIST)
        }

        /// Names the file (if unnamed), renames it over `destination`, then releases it.
        func commit(as destination: String) throws(SecureFile.Failure) {
            if path == nil {
                var linked: String?
                for _ in 0..<16 {
                    let candidate = directory + "/" + (try SecureFile.lockedTemporaryName(in: directory))
                    let code = sf_link_open_file(fd, candidate)
                    if code == 0 { linked = candidate; break }
                    if code != EEXIST { throw Failure.system(operation: "link temporary file", path: candidate, errno: code) }
                }
                guard let linked else { throw Failure.system(operation: "link temporary file in", path: directory, errno: EEXIST) }
                path = linked
            }
            guard let path else { return }
            guard rename(path, destination) == 0 else { throw Failure.system(operation: "rename", path: destination, errno: errno) }
            self.path = nil
            close(fd)
            closed = true
        }

        /// Removes the temporary (if it still has a name) and closes it. Idempotent.
        func discard() {
            if let path { unlink(path); self.path = nil }
            if !closed { close(fd); closed = true }
        }
    }

    static func lockedTemporaryName(in directory: String) throws(SecureFile.Failure) -> String {
        lockedTemporaryPrefix + (try randomName(length: temporaryRandomLength, in: directory)) + temporarySuffix
    }

    /// Random letters and digits for a temporary's name; a failing system generator is
    /// ``Failure/system(operation:path:errno:)`` (`EIO`) naming the directory.
    static func randomName(length: Int, in directory: String) throws(SecureFile.Failure) -> String {
        do {
            return try SecureRandom.string(length: length, alphabet: SecureRandom.alphanumeric)
        } catch {
            throw Failure.system(operation: "draw a random temporary name (\(error)) in", path: directory, errno: EIO)
        }
    }

    /// Creates an exclusive temporary file `.<random>.tmp` in `directory`.
    /// - Parameters:
    ///   - directory: Where to create it.
    ///   - mode: Its mode.
    /// - Returns: The open descriptor and the file's path.
    /// - Throws: ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path.
    package static func makeTemporaryFile(in directory: String, mode: mode_t = 0o600) throws(SecureFile.Failure) -> (Int32, String) {
        for _ in 0..<16 {
            let name = ".sf-" + (try randomName(length: 16, in: directory)) + ".tmp"
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
    /// - Parameter directory: The directory.
    /// - Throws: ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path.
    package static func syncDirectory(_ directory: String) throws(SecureFile.Failure) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure.system(operation: "open directory", path: directory, errno: errno) }
        defer { close(fd) }
        do {
            try FileCalls.sync(fd)
        } catch where error.code != EINVAL {
            throw Failure.system(operation: "fsync directory", path: directory, errno: error.code)
        } catch {}
    }

    /// Moves a file that another writer made beside `destination` (at a staging name of its own:
    /// SQLite's, `systemd-creds`', a protected-file writer's) into place as
    /// ``replaceAtomically(_:mode:_:)`` puts its own: the staged file is synced and given `mode`,
    /// renamed over `destination`, and the directory synced (best effort: once renamed, the
    /// file is in place and no error is reported). The staged file must be a regular
    /// file (it is opened without following a link); a `destination` that exists and is not a
    /// regular file (a link, FIFO, socket or device) is refused and left as it is.
    /// - Parameters:
    ///   - staged: The finished file, in the directory of `destination`.
    ///   - destination: The path it takes.
    ///   - mode: Its permissions (0600 by default).
    /// - Throws: ``SecureFile/Failure/insecurePermissions(path:reason:fix:)`` for a file that is
    ///   not regular, ``SecureFile/Failure/system(operation:path:errno:)`` naming the failed call.
    ///   On a throw `staged` is left for the caller to remove.
    package static func moveIntoPlace(_ staged: String, over destination: String, mode: mode_t = 0o600) throws(SecureFile.Failure) {
        let fd: Int32
        do { fd = try FileCalls.open(staged, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) } catch {
            if error.code == ELOOP { throw Failure.insecurePermissions(path: staged, reason: "it is not a regular file", fix: "rm \(staged)") }
            throw Failure(error, path: staged)
        }
        defer { FileCalls.close(fd) }
        let info: FileStatus
        do { info = try FileCalls.status(fd) } catch { throw Failure(error, path: staged) }
        guard info.isRegularFile else {
            throw Failure.insecurePermissions(path: staged, reason: "it is not a regular file", fix: "rm \(staged)")
        }
        do {
            try FileCalls.setMode(fd, mode)
            try FileCalls.sync(fd)
        } catch { throw Failure(error, path: staged) }
        if let existing = try? FileCalls.linkStatus(destination), !existing.isRegularFile {
            throw Failure.insecurePermissions(path: destination, reason: "it is not a regular file, and only a regular file is replaced",
                                              fix: "move it away, then run the command again")
        }
        do { try FileCalls.rename(staged, destination) } catch { throw Failure(error, path: destination) }
        // The file is in place: a directory that cannot be synced (a file system that refuses
        // it) does not turn that into a failure the caller would undo.
        try? syncDirectory(directoryOf(destination))
    }

    /// Writes all of `buffer` to `fd`, retrying short writes and EINTR.
    /// - Parameters:
    ///   - fd: The descriptor.
    ///   - buffer: The bytes.
    ///   - path: What the descriptor is called in errors.
    /// - Throws: ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path.
    public static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String = "file") throws(SecureFile.Failure) {
        do { try FileCalls.writeAll(fd, buffer) } catch { throw Failure(error, path: path) }
    }

    /// Reads the whole file at `path`, refusing files larger than `maxLength`.
    /// - Parameters:
    ///   - path: The file.
    ///   - maxLength: Larger files are refused.
    /// - Returns: The file's bytes.
    /// - Throws: ``SecureFile/Failure/system(operation:path:errno:)`` naming the call and the path; a file over `maxLength` is refused the same way (`EFBIG`).
    public static func read(_ path: String, maxLength: Int = 64 << 20) throws(SecureFile.Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure.system(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        return try readAll(fd, path: path, maxLength: maxLength)
    }

    /// Reads the whole file at `path` as ``read(_:maxLength:)``, with the file's status taken
    /// just before and just after the read (equal when nothing changed the file meanwhile, within
    /// the file system's time-stamp granularity).
    /// The file must be a private regular file (``checkPrivate(_:isDirectory:)``): it is checked
    /// by `lstat` before the open (so a symbolic link or a FIFO is refused unopened) and again
    /// on the descriptor before anything is read (it is opened without following a link and
    /// without blocking, so a file swapped in between cannot hang the read or be another file).
    package static func readPrivateWithStatus(_ path: String, maxLength: Int) throws(SecureFile.Failure) -> ([UInt8], FileStatus, FileStatus) {
        try checkPrivate(path, isDirectory: false)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ELOOP { throw Failure.insecurePermissions(path: path, reason: "it is not a regular file", fix: "rm \(path)") }
            throw Failure.system(operation: "open", path: path, errno: errno)
        }
        defer { close(fd) }
        let before: FileStatus
        do { before = try FileCalls.status(fd) } catch { throw Failure(error, path: path) }
        try checkPrivate(before, path: path, isDirectory: false)
        let bytes = try readAll(fd, path: path, maxLength: maxLength)
        let after: FileStatus
        do { after = try FileCalls.status(fd) } catch { throw Failure(error, path: path) }
        return (bytes, before, after)
    }

    private static func readAll(_ fd: Int32, path: String, maxLength: Int) throws(SecureFile.Failure) -> [UInt8] {
        var result = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let read = buffer.withUnsafeMutableBytes { raw in Result { () throws(SystemCallError) in try FileCalls.readSome(fd, into: raw) } }
            let n: Int
            do { n = try read.get() } catch { throw Failure(error, path: path) }
            if n == 0 { break }
            result += buffer[0..<n]
            if result.count > maxLength { throw Failure.system(operation: "read (larger than \(maxLength) bytes)", path: path, errno: EFBIG) }
        }
        return result
    }

    /// The directory part of `path` ("." when there is none).
    /// (Written by hand: Foundation's `deletingLastPathComponent` traps on some single-component
    /// relative paths on Linux.)
    /// - Parameter path: A file path.
    /// - Returns: Its directory.
    package static func directoryOf(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        var directory = trimmed[..<slash]
        while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
        return directory.isEmpty ? "/" : String(directory)
    }
}
