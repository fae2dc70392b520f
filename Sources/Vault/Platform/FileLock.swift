import Foundation
import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive advisory lock (`flock`) on a lock file, held for the duration of a closure: the
/// one place of the package that opens a lock file (0600, without following a link), checks it
/// is private, and waits for or tries the lock. It serializes read-modify-write of the vault's
/// files (and the protected files' key table) between processes; inside one process the
/// caller's own lock serializes threads first.
///
/// Failures of the lock itself (opening the file, its permission check, `flock`) are given to
/// `failure`, which returns the error to throw (the ``SecureFile/Failure`` itself by default),
/// so each module reports them in its own error type; whatever `body` throws passes unchanged.
package enum FileLock {
    /// Runs `body` holding the lock, waiting for it as long as another process holds it.
    package static func withExclusiveLock<Result>(path: String, failure: (SecureFile.Failure) -> any Error = { $0 },
                                                  _ body: () throws -> Result) throws -> Result {
        guard let fd = try acquire(path: path, wait: true, failure: failure) else {
            throw failure(.system(operation: "flock", path: path, errno: EWOULDBLOCK))
        }
        defer { release(fd) }
        return try body()
    }

    /// As ``withExclusiveLock(path:failure:_:)`` when the lock is free now; nil (without
    /// calling `body`) when another holds it.
    package static func withExclusiveLockIfFree<Result>(path: String, failure: (SecureFile.Failure) -> any Error = { $0 },
                                                        _ body: () throws -> Result) throws -> Result? {
        guard let fd = try acquire(path: path, wait: false, failure: failure) else { return nil }
        defer { release(fd) }
        return try body()
    }

    /// The descriptor of the lock file, holding the lock; nil when `wait` is false and another
    /// holds it.
    private static func acquire(path: String, wait: Bool, failure: (SecureFile.Failure) -> any Error) throws -> Int32? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw failure(.system(operation: "open lock file", path: path, errno: errno)) }
        do {
            try SecureFile.checkPrivate(path, isDirectory: false)
        } catch {
            close(fd)
            throw failure(error)
        }
        do {
            if try FileCalls.lockExclusive(fd, wait: wait) { return fd }
            close(fd)
            return nil
        } catch {
            close(fd)
            throw failure(SecureFile.Failure(error, path: path))
        }
    }

    private static func release(_ fd: Int32) {
        FileCalls.unlock(fd)
        close(fd)
    }
}
