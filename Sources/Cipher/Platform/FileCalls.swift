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

/// A file call that failed: which call and its `errno`. Each module turns it into its own
/// error (``SecureFile/Failure/system(operation:path:errno:)``, the shredder's, the agent's, ...)
/// with the path it was working on.
package struct SystemCallError: Error, Equatable, Sendable {
    /// The call, as errors name it ("stat", "fsync", ...).
    package let operation: String
    /// The `errno` it left.
    package let code: Int32

    package init(_ operation: String, _ code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }
}

/// The descriptor and metadata calls the modules make directly (stat, sync, lock, link,
/// directory-relative open and unlink), one thin wrapper each, so that a port to another
/// system has one place to look. Each throws ``SystemCallError`` with the call's `errno`, and
/// does nothing else: retries and decisions stay with the caller.
package enum FileCalls {
    /// `lstat`: what is at `path`, a final symbolic link not followed.
    package static func linkStatus(_ path: String) throws(SystemCallError) -> FileStatus {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw SystemCallError("stat") }
        return FileStatus(info)
    }

    /// `stat`: what `path` names, a final symbolic link followed.
    package static func status(atPath path: String) throws(SystemCallError) -> FileStatus {
        var info = stat()
        guard stat(path, &info) == 0 else { throw SystemCallError("stat") }
        return FileStatus(info)
    }

    /// `fstat` of an open descriptor.
    package static func status(_ fd: Int32) throws(SystemCallError) -> FileStatus {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SystemCallError("fstat") }
        return FileStatus(info)
    }

    /// `fstatat(directory, name, AT_SYMLINK_NOFOLLOW)`: what `name` in an open directory is, a
    /// symbolic link not followed.
    package static func linkStatus(in directory: Int32, _ name: String) throws(SystemCallError) -> FileStatus {
        var info = stat()
        guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { throw SystemCallError("stat") }
        return FileStatus(info)
    }

    /// `open(path, flags)` (no mode: nothing is created); the descriptor is the caller's to close.
    package static func open(_ path: String, _ flags: Int32) throws(SystemCallError) -> Int32 {
        let fd = systemOpen(path, flags)
        guard fd >= 0 else { throw SystemCallError("open") }
        return fd
    }

    /// `close`, its result ignored (the descriptor is released either way on Linux).
    package static func close(_ fd: Int32) {
        _ = systemClose(fd)
    }

    /// `openat(directory, name, flags)`; the descriptor is the caller's to close.
    package static func open(in directory: Int32, _ name: String, _ flags: Int32) throws(SystemCallError) -> Int32 {
        let fd = openat(directory, name, flags)
        guard fd >= 0 else { throw SystemCallError("open") }
        return fd
    }

    /// `unlinkat(directory, name)`, with `AT_REMOVEDIR` for an empty directory.
    package static func unlink(in directory: Int32, _ name: String, isDirectory: Bool = false) throws(SystemCallError) {
        guard unlinkat(directory, name, isDirectory ? AT_REMOVEDIR : 0) == 0 else { throw SystemCallError("unlink") }
    }

    /// `flock(LOCK_EX | LOCK_NB)`: whether this descriptor now holds the exclusive lock (false
    /// when another holds it, or on any error).
    package static func tryLockExclusive(_ fd: Int32) -> Bool {
        (try? lockExclusive(fd, wait: false)) ?? false
    }

    /// `flock(LOCK_EX)`, the one place of the project that takes a lock (EINTR retried): with
    /// `wait`, until this descriptor holds the exclusive lock; without, only when it is free now.
    /// - Returns: true when the lock is held; false when `wait` is false and another holds it.
    /// - Throws: ``SystemCallError`` ("flock") for any other failure (ENOLCK, EOPNOTSUPP, ...:
    ///   a file system without locks).
    package static func lockExclusive(_ fd: Int32, wait: Bool) throws(SystemCallError) -> Bool {
        while flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            if !wait, code == EWOULDBLOCK { return false }
            throw SystemCallError("flock", code)
        }
        return true
    }

    /// `flock(LOCK_UN)`: releases this descriptor's lock (closing it releases the lock as well).
    package static func unlock(_ fd: Int32) {
        _ = flock(fd, LOCK_UN)
    }

    /// `fsync`: the file's data and metadata reach the device.
    package static func sync(_ fd: Int32) throws(SystemCallError) {
        guard fsync(fd) == 0 else { throw SystemCallError("fsync") }
    }

    /// `ftruncate`.
    package static func truncate(_ fd: Int32, to length: Int64 = 0) throws(SystemCallError) {
        guard ftruncate(fd, off_t(length)) == 0 else { throw SystemCallError("truncate") }
    }

    /// Writes all of `bytes` to `fd` (at `offset` with `pwrite` when one is given), retrying
    /// short writes and EINTR: the one write loop of the project (sockets, which need
    /// `MSG_NOSIGNAL`, write through the agent's `Socket`).
    /// - Throws: ``SystemCallError`` ("write"); a write that makes no progress fails with EIO.
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64? = nil) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            let pointer = bytes.baseAddress! + done, left = bytes.count - done
            let n = try retryingInterrupts("write") {
                offset.map { pwrite(fd, pointer, left, off_t($0) + off_t(done)) } ?? write(fd, pointer, left)
            }
            if n == 0 { throw SystemCallError("write", EIO) }
            done += n
        }
    }

    /// Reads into `buffer` (from `offset` with `pread` when one is given) until it is full or the
    /// file ends, retrying short reads and EINTR: the one read-fully loop of the project.
    /// - Returns: The bytes read: `buffer.count`, or fewer at the end of the file.
    /// - Throws: ``SystemCallError`` ("read").
    package static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64? = nil) throws(SystemCallError) -> Int {
        var done = 0
        while done < buffer.count {
            let pointer = buffer.baseAddress! + done, left = buffer.count - done
            let n = try retryingInterrupts("read") {
                offset.map { pread(fd, pointer, left, off_t($0) + off_t(done)) } ?? systemRead(fd, pointer, left)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// `read` once (EINTR retried): what is there, up to `buffer.count`; 0 at the end of the file.
    /// - Throws: ``SystemCallError`` ("read").
    package static func readSome(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try retryingInterrupts("read") { systemRead(fd, buffer.baseAddress!, buffer.count) }
    }

    /// Runs `call` (a read or write returning a count, -1 with `errno` on failure) again while it
    /// is interrupted (EINTR).
    private static func retryingInterrupts(_ operation: String, _ call: () -> Int) throws(SystemCallError) -> Int {
        while true {
            let n = call()
            if n >= 0 { return n }
            if errno != EINTR { throw SystemCallError(operation) }
        }
    }

    /// `fchmod`: sets the permission bits of an open file.
    package static func setMode(_ fd: Int32, _ mode: mode_t) throws(SystemCallError) {
        guard fchmod(fd, mode) == 0 else { throw SystemCallError("chmod") }
    }

    /// `rename`: `from` replaces whatever `to` names, atomically.
    package static func rename(_ from: String, _ to: String) throws(SystemCallError) {
        guard systemRename(from, to) == 0 else { throw SystemCallError("rename") }
    }

    /// `link`: a second name for an existing file; fails with EEXIST when `newPath` exists.
    package static func hardLink(_ existing: String, _ newPath: String) throws(SystemCallError) {
        guard link(existing, newPath) == 0 else { throw SystemCallError("link") }
    }
}

// The system's `open` and `close`, which the wrappers of the same names shadow inside the enum.
private func systemOpen(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
private func systemRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, buffer, count) }

extension SecureFile.Failure {
    /// A failed call on `path`, named as the call names itself.
    package init(_ error: SystemCallError, path: String) {
        self = .system(operation: error.operation, path: path, errno: error.code)
    }
}
