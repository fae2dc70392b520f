import Foundation
import Cipher
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The vault's file-system calls that go beyond ``SecureFile``: hard links, `lstat`, and the
/// attempt record's in-place rewrite. A port to another system starts here and in the other
/// `Platform/` files.
enum VaultFiles {
    /// What `lstat` says about one directory entry (a symbolic link is not followed).
    struct Entry {
        enum Kind { case regular, directory, other }
        var device: UInt64
        var inode: UInt64
        var kind: Kind
        var links: UInt64

        /// Whether this entry and `other` are the same file.
        func isSameFile(as other: Entry) -> Bool { device == other.device && inode == other.inode }
    }

    /// The entry at `path`, or nil when there is none (or it cannot be examined).
    static func entry(_ path: String) -> Entry? {
        guard let info = try? FileCalls.linkStatus(path) else { return nil }
        let kind: Entry.Kind
        switch info.kind {
        case .regular: kind = .regular
        case .directory: kind = .directory
        default: kind = .other
        }
        return Entry(device: info.device, inode: info.inode, kind: kind, links: info.links)
    }

    /// Gives the file at `path` the additional name `newName` (a hard link; never replaces).
    /// - Returns: Whether the link was made.
    static func hardLink(_ path: String, as newName: String) -> Bool {
        link(path, newName) == 0
    }

    /// Rewrites the start of the file at `path` (created 0600 if missing, never through a
    /// symbolic link) with `bytes` in one `pwrite`, truncates anything after them, and with
    /// `durable` runs `fdatasync`.
    /// - Throws: ``SecureFile/Failure`` naming the call that failed, or the permission check's.
    static func overwriteInPlace(_ bytes: [UInt8], path: String, durable: Bool) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw SecureFile.Failure.system(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        try SecureFile.checkPrivate(path, isDirectory: false)
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress!, $0.count, 0) }
        guard written == bytes.count else { throw SecureFile.Failure.system(operation: "write", path: path, errno: errno) }
        if let info = try? FileCalls.status(fd), info.size != Int64(bytes.count) {
            guard ftruncate(fd, off_t(bytes.count)) == 0 else {
                throw SecureFile.Failure.system(operation: "truncate", path: path, errno: errno)
            }
        }
        if durable {
            #if canImport(Darwin)
            let synced = fcntl(fd, F_FULLFSYNC) == 0 || fsync(fd) == 0
            #else
            let synced = fdatasync(fd) == 0
            #endif
            guard synced else { throw SecureFile.Failure.system(operation: "fdatasync", path: path, errno: errno) }
        }
    }
}
