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

/// What a small trusted file (the vault's state, its rollback anchor, the protected files' key
/// table) parsed to and passed its checks with, kept for the process while the file is unchanged,
/// so that one command, or one request to a long-running agent, reads and checks each such file
/// once instead of at every property it asks.
///
/// A value is reused only when the path still names (`lstat`, no symlink followed) the same
/// regular file as when it was read: the same device, inode, size, permissions, owner,
/// modification time and change time. Every writer of these files replaces them atomically (a
/// new inode), and a change in place or of the permissions moves the change time, which no
/// process can set back (it is the kernel's clock). Two guards keep that sound:
/// - the file's status is taken before and after the read; a file that changed meanwhile is used
///   for this call but not kept;
/// - a file whose change time is less than ``settleInterval`` before now is not kept (as git's
///   "racily clean" index entries): a change within the file system's time-stamp granularity
///   (one clock tick, or a whole second on some file systems) would not move the time stamps.
///
/// What a cached value protects against stays what its checks protected against: whoever can
/// write the data directory can replace the file, which changes its identity, and the value is
/// then read and checked again. Checks that depend on another file (the rollback anchor) are
/// made by the caller on every use, from that file's own cached value.
package enum CheckedFileCache {
    /// How old (by the change time) a file must be before its value is kept.
    package static let settleInterval: Double = 2

    /// The identity of one version of a file.
    struct Stamp: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var permissions: UInt32
        var owner: UInt32
        var modified: FileStatus.Time
        var changed: FileStatus.Time

        init(_ status: FileStatus) {
            device = status.device
            inode = status.inode
            size = status.size
            permissions = status.permissions
            owner = status.owner
            modified = status.modified
            changed = status.changed
        }

        /// Whether the change time is at least ``settleInterval`` before now.
        var isSettled: Bool {
            Double(changed.seconds) + Double(changed.nanoseconds) / 1e9 + CheckedFileCache.settleInterval <= Date().timeIntervalSince1970
        }
    }

    private static func key<Value>(_ kind: Value.Type, _ path: String) -> String { String(describing: kind) + "\u{0}" + path }

    private struct Entry {
        var stamp: Stamp
        var value: any Sendable
        /// A value its writer kept (``keep(_:at:)``): used only until the file's change time is
        /// ``settleInterval`` old, then read again once.
        var provisional = false
    }

    private final class Store: @unchecked Sendable {
        let lock = Lock()
        var entries: [String: Entry] = [:]

        /// Stores `entry` (a bounded number of files: the few a process trusts).
        func store(_ entry: Entry, key: String) {
            lock.withLock {
                if entries.count >= CheckedFileCache.maximumEntries && entries[key] == nil { entries.removeAll() }
                entries[key] = entry
            }
        }
    }

    /// At most this many files are kept (a process trusts a handful: one vault's state, anchor
    /// and key table, or a few vaults').
    static let maximumEntries = 64

    private static let store = Store()

    /// The value `parse` made of the file at `path`, from the cache when the file is unchanged.
    /// - Parameters:
    ///   - path: The file (an absolute path, or one relative to a directory the process does not
    ///     leave; the path is the cache's key).
    ///   - kind: The kind of value (files are cached separately per kind).
    ///   - maxLength: Larger files are refused (`EFBIG`), as ``SecureFile/read(_:maxLength:)``.
    ///   - parse: Parses and checks the bytes read; its errors pass through, and nothing is kept. The file is a private regular file when `parse`
    ///     runs (``SecureFile/checkPrivate(_:isDirectory:)`` on the path and on the descriptor).
    ///   - fresh: Read the file whatever is kept (a read-modify-write under the file's lock).
    /// - Returns: The value.
    /// - Throws: ``SecureFile/Failure`` for a file that cannot be read; whatever `parse` throws.
    package static func value<Value: Sendable>(
        at path: String, kind: Value.Type, maxLength: Int, fresh: Bool = false,
        parse: (_ bytes: [UInt8]) throws -> Value
    ) throws -> Value {
        let key = key(kind, path)
        if !fresh, let current = try? FileCalls.linkStatus(path), current.kind == .regular {
            let stamp = Stamp(current)
            let cached: (any Sendable)? = store.lock.withLock {
                guard let entry = store.entries[key], entry.stamp == stamp, !(entry.provisional && stamp.isSettled) else { return nil }
                return entry.value
            }
            if let value = cached as? Value { return value }
        }
        let (bytes, before, after) = try SecureFile.readPrivateWithStatus(path, maxLength: maxLength)
        let value: Value
        do { value = try parse(bytes) } catch {
            forget(path: path, kind: kind)
            throw error
        }
        let stamp = Stamp(after)
        if Stamp(before) == stamp, stamp.isSettled {
            store.store(Entry(stamp: stamp, value: value), key: key)
        } else {
            forget(path: path, kind: kind)
        }
        return value
    }

    /// Keeps `value` as what the file at `path` holds now, for a writer that has just replaced
    /// the file with the bytes of `value`, under a lock that every writer of the file takes, in
    /// a directory that only the user writes. Provisional: used only while the file's change
    /// time is under ``settleInterval`` old (then read again once), and never on a file system
    /// whose time stamps have no sub-second part (there a file that reused the inode within the
    /// same second could carry the same stamp). Read-modify-write under the lock must not use
    /// it: read with ``value(at:kind:maxLength:fresh:parse:)`` and `fresh: true`.
    package static func keep<Value: Sendable>(_ value: Value, at path: String) {
        guard let current = try? FileCalls.linkStatus(path), current.kind == .regular, current.changed.nanoseconds != 0 else {
            forget(path: path, kind: Value.self)
            return
        }
        store.store(Entry(stamp: Stamp(current), value: value, provisional: true), key: key(Value.self, path))
    }

    /// Drops what is kept for `path` (a writer of this process calls it after replacing the file;
    /// the new identity alone would do, this frees the memory at once).
    package static func forget<Value>(path: String, kind: Value.Type) {
        _ = store.lock.withLock { store.entries.removeValue(forKey: key(kind, path)) }
    }
}
