import Cipher
import Foundation

/// Files named by a policy, a command line or a configuration are read only when they are
/// regular files, and only up to a bound: a FIFO would block the reader forever, `/dev/zero`
/// or `/dev/urandom` would never end, a directory or a socket is a mistake.
enum RegularFile {
    /// Opens `path` for reading without blocking (a FIFO without a writer would block `open`
    /// itself) and checks that it is a regular file.
    ///
    /// - Returns: the descriptor (blocking again), for the caller to close.
    /// - Throws: ``PinnedTLSError/io(path:detail:)`` when it cannot be opened,
    ///   ``PinnedTLSError/notARegularFile(path:kind:)`` otherwise.
    static func openForReading(_ path: String) throws(PinnedTLSError) -> Int32 {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { throw .io(path: path, detail: String(cString: strerror(errno))) }
        let status: FileStatus
        do throws(SystemCallError) { status = try FileCalls.status(fd) } catch {
            close(fd)
            throw .io(path: path, detail: String(cString: strerror(error.code)))
        }
        guard status.isRegularFile else {
            close(fd)
            throw .notARegularFile(path: path, kind: kind(status.kind))
        }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        return fd
    }

    /// The whole content of the regular file `path`, at most `maxLength` bytes.
    ///
    /// - Throws: ``PinnedTLSError/notARegularFile(path:kind:)``,
    ///   ``PinnedTLSError/fileTooLarge(path:limit:)``, ``PinnedTLSError/io(path:detail:)``.
    static func contents(_ path: String, maxLength: Int) throws(PinnedTLSError) -> [UInt8] {
        let fd = try openForReading(path)
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: maxLength + 1)
        let read = bytes.withUnsafeMutableBytes { raw in Result { () throws(SystemCallError) in try FileCalls.readFully(fd, into: raw) } }
        let total: Int
        do { total = try read.get() } catch { throw .io(path: path, detail: String(cString: strerror(error.code))) }
        guard total <= maxLength else { throw .fileTooLarge(path: path, limit: maxLength) }
        bytes.removeLast(bytes.count - total)
        return bytes
    }

    /// What a file that is not regular is, for the message.
    static func kind(_ kind: FileStatus.Kind) -> String {
        switch kind {
        case .fifo: return "a FIFO"
        case .characterDevice: return "a character device"
        case .blockDevice: return "a block device"
        case .directory: return "a directory"
        case .socket: return "a socket"
        case .symbolicLink: return "a symbolic link"
        case .regular: return "a regular file"
        case .other: return "a special file"
        }
    }
}
