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

extension SecureFile {
    /// How a path a person named as output (a command's `-o PATH`, a `toFile:` argument) is written.
    public enum OutputTarget: Equatable, Sendable {
        /// A new path or an existing regular file: replaced atomically (temporary file, fsync,
        /// rename, fsync of the directory), mode 0600.
        case replace
        /// `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N` (or a symlink to one of
        /// them): the already open descriptor N is written, whatever it is (terminal, pipe,
        /// socket, regular file).
        case descriptor(Int32)
        /// A character device (`/dev/null`, a terminal) or a FIFO: opened without creating or
        /// truncating and written in place; nothing is replaced.
        case inPlace
    }

    /// Decides how `path` is written as output, without writing anything.
    ///
    /// - Parameter path: The path a person named.
    /// - Returns: What writing to `path` would do.
    /// - Throws: ``Failure/insecurePermissions(path:reason:fix:)`` for a symbolic link (other than
    ///   to a descriptor: it is neither followed nor replaced), a directory, a socket or a block
    ///   device; ``Failure/system(operation:path:errno:)`` when `path` cannot be examined or
    ///   names a descriptor that is not open for writing.
    package static func outputTarget(of path: String) throws(SecureFile.Failure) -> OutputTarget {
        if let number = descriptorNumber(path) { return .descriptor(try writableDescriptor(number, path: path)) }
        let info: FileStatus
        do {
            info = try FileCalls.linkStatus(path)
        } catch {
            if error.code == ENOENT { return .replace }
            throw Failure(error, path: path)
        }
        switch info.kind {
        case .regular:
            return .replace
        case .characterDevice, .fifo:
            try requireTrustedOwner(info, path: path, kind: info.kind == .fifo ? "FIFO" : "device")
            return .inPlace
        case .symbolicLink:
            let target = linkTarget(path) ?? "?"
            if let number = descriptorNumber(target) {
                try requireTrustedOwner(info, path: path, kind: "symbolic link")
                return .descriptor(try writableDescriptor(number, path: path))
            }
            throw Failure.insecurePermissions(path: path, reason: "it is a symbolic link (to \(target)), which output neither follows nor replaces",
                                            fix: "name the file it points to instead, or rm \(path)")
        case .directory:
            throw Failure.insecurePermissions(path: path, reason: "it is a directory, not a file to write", fix: "name a file inside it")
        case .socket:
            throw Failure.insecurePermissions(path: path, reason: "it is a socket, which cannot be opened as a file",
                                            fix: "write to standard output and pipe it to a client: | socat - UNIX-CONNECT:\(path)")
        case .blockDevice:
            throw Failure.insecurePermissions(path: path, reason: "it is a block device",
                                            fix: "write to standard output and redirect it (> \(path)) if that is really meant")
        case .other:
            throw Failure.insecurePermissions(path: path, reason: "it is not a regular file, character device or FIFO", fix: "name a regular file")
        }
    }

    /// Output is written into a FIFO or device, or through a link to a descriptor, only when it
    /// belongs to the caller or to root: another user's FIFO (planted in a shared directory such
    /// as /tmp, where a rename over their path would fail) would hand them what is written.
    static func requireTrustedOwner(_ info: FileStatus, path: String, kind: String) throws(SecureFile.Failure) {
        guard info.owner == geteuid() || info.owner == 0 else {
            throw Failure.insecurePermissions(path: path, reason: "it is a \(kind) owned by another user (uid \(info.owner)), who could read what is written into it",
                                            fix: "write to a path of your own")
        }
    }

    /// Writes output to a path a person named, as its kind demands (`outputTarget(of:)`):
    /// a new path or a regular file is replaced atomically with `mode` (``replaceAtomically(_:mode:_:)``);
    /// a character device or FIFO is opened (a FIFO waits for its reader) and written in place;
    /// `/dev/stdout`, `/dev/fd/N` and the like write into the open descriptor, which is left open.
    /// A symbolic link, directory, socket or block device is refused before `body` runs.
    ///
    /// - Parameters:
    ///   - path: The path a person named as output.
    ///   - mode: The permissions of a file created or replaced (default 0600).
    ///   - body: Writes everything to the descriptor it is given.
    /// - Returns: How the path was written.
    /// - Throws: ``Failure`` or what `body` throws.
    @discardableResult
    public static func writeOutput(to path: String, mode: mode_t = 0o600, _ body: (Int32) throws -> Void) throws -> OutputTarget {
        try writingOutput(to: path, mode: mode, failure: { $0 }, body)
    }

    /// ``writeOutput(to:mode:_:)`` for a `body` whose errors have the type `E`, into which
    /// `failure` turns the output's own ``Failure``.
    static func writingOutput<E: Error>(to path: String, mode: mode_t, failure: (Failure) -> E,
                                        _ body: (Int32) throws(E) -> Void) throws(E) -> OutputTarget {
        let target: OutputTarget
        do { target = try outputTarget(of: path) } catch { throw failure(error) }
        switch target {
        case .replace:
            try replacing(path, mode: mode, failure: failure, body)
            return .replace
        case .descriptor(let fd):
            try body(fd)
            return .descriptor(fd)
        case .inPlace:
            var fd: Int32
            repeat { fd = open(path, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC) } while fd < 0 && errno == EINTR
            guard fd >= 0 else { throw failure(Failure.system(operation: "open", path: path, errno: errno)) }
            let info: FileStatus
            do {
                info = try FileCalls.status(fd)
            } catch {
                close(fd)
                throw failure(Failure.system(operation: "stat", path: path, errno: error.code))
            }
            let kind = info.kind
            if kind == .characterDevice || kind == .fifo {
                do { try requireTrustedOwner(info, path: path, kind: kind == .fifo ? "FIFO" : "device") } catch { close(fd); throw failure(error) }
            }
            guard kind == .characterDevice || kind == .fifo else {
                // Replaced between the look and the open: decide again from what is there now.
                close(fd)
                if kind == .regular {
                    try replacing(path, mode: mode, failure: failure, body)
                    return .replace
                }
                throw failure(Failure.insecurePermissions(path: path, reason: "it changed while it was being opened", fix: "try again"))
            }
            defer { close(fd) }
            try body(fd)
            return .inPlace
        }
    }

    /// Writes `bytes` as output to a path a person named (see ``writeOutput(to:mode:_:)``).
    /// - Parameters:
    ///   - bytes: What to write.
    ///   - path: The path a person named.
    ///   - mode: The mode of a new file.
    /// - Returns: How the path was written.
    /// - Throws: ``SecureFile/Failure``.
    @discardableResult
    public static func writeOutput<Bytes: DataProtocol>(_ bytes: Bytes, to path: String, mode: mode_t = 0o600) throws(SecureFile.Failure) -> OutputTarget {
        try writingOutput(to: path, mode: mode, failure: { $0 }) { (fd) throws(Failure) in
            for region in bytes.regions {
                try region.withUnsafeBytes { buffer in Result { () throws(Failure) in try writeAll(fd, buffer, path: path) } }.get()
            }
        }
    }

    /// The descriptor number a path names: `/dev/stdin|stdout|stderr`, `/dev/fd/N`,
    /// `/proc/self/fd/N`, `/proc/thread-self/fd/N` or `/proc/<this process>/fd/N`.
    static func descriptorNumber(_ path: String) -> Int32? {
        switch path {
        case "/dev/stdin": return 0
        case "/dev/stdout": return 1
        case "/dev/stderr": return 2
        default: break
        }
        let prefixes = ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", "/proc/\(getpid())/fd/"]
        for prefix in prefixes where path.hasPrefix(prefix) {
            let digits = path.dropFirst(prefix.count)
            guard !digits.isEmpty, digits.count <= 9, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int32(digits)
        }
        return nil
    }

    private static func writableDescriptor(_ number: Int32, path: String) throws(SecureFile.Failure) -> Int32 {
        let flags = fcntl(number, F_GETFL)
        guard flags >= 0 else { throw Failure.system(operation: "use descriptor \(number) named by", path: path, errno: errno) }
        guard flags & O_ACCMODE != O_RDONLY else {
            throw Failure.system(operation: "write to descriptor \(number) (open read-only) named by", path: path, errno: EBADF)
        }
        return number
    }

    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
