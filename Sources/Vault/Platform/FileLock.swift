import Foundation
import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive advisory lock (`flock`) on a lock file, held for the duration of a closure.
/// It serializes read-modify-write of the vault's files between processes; inside one process
/// the manager's own lock serializes threads first.
enum FileLock {
    static func withExclusiveLock<Result>(path: String, _ body: () throws -> Result) throws -> Result {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw SecureFile.Failure.system(operation: "open lock file", path: path, errno: errno) }
        defer { close(fd) }
        try SecureFile.checkPrivate(path, isDirectory: false)
        while flock(fd, LOCK_EX) != 0 {
            if errno == EINTR { continue }
            throw SecureFile.Failure.system(operation: "flock", path: path, errno: errno)
        }
        defer { _ = flock(fd, LOCK_UN) }
        return try body()
    }

    /// As ``withExclusiveLock(path:_:)`` when the lock is free now; nil (without calling
    /// `body`) when another holds it.
    static func withExclusiveLockIfFree<Result>(path: String, _ body: () throws -> Result) throws -> Result? {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw SecureFile.Failure.system(operation: "open lock file", path: path, errno: errno) }
        defer { close(fd) }
        try SecureFile.checkPrivate(path, isDirectory: false)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            if errno == EWOULDBLOCK { return nil }
            throw SecureFile.Failure.system(operation: "flock", path: path, errno: errno)
        }
        defer { _ = flock(fd, LOCK_UN) }
        return try body()
    }
}
