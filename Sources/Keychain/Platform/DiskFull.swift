import Foundation
import GRDB

/// Opening the keychain on a full disk.
enum DiskFull {
    /// Opens the writer and reader connections. When the disk is full and SQLite cannot create
    /// or extend the shared-memory index, opens one connection in exclusive locking mode instead,
    /// which keeps the WAL index in memory: reads work (writes fail with `diskFull` until space
    /// is freed), and other processes wait for this keychain to be closed. If that fails too
    /// (another process has the keychain open), the disk-full error is thrown.
    static func openConnections(path: String, configuration: GRDB.Configuration) throws -> (writer: DatabaseQueue, reader: DatabaseQueue) {
        func open(_ configuration: GRDB.Configuration) throws -> (DatabaseQueue, DatabaseQueue) {
            let writer = try DatabaseQueue(path: path, configuration: configuration)
            let reader = try DatabaseQueue(path: path, configuration: configuration)
            // GRDB's WAL set-up runs after prepareDatabase and selects synchronous = NORMAL, under
            // which a commit does not sync the WAL (it survives a crash of the process, not of
            // the machine). flush() promises durability: every commit is synced.
            for connection in [writer, reader] {
                try connection.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            }
            return (writer, reader)
        }
        do {
            return try open(configuration)
        } catch let original {
            guard case .diskFull = KeychainSchema.map(original, path: path) else { throw original }
            // A configuration of its own: locking_mode must come before any statement that reads
            // the schema (as cache_size does), or SQLite reaches for the shared memory first.
            var exclusive = GRDB.Configuration()
            exclusive.label = configuration.label
            // Not GRDB's WAL set-up, which writes to make the WAL non-empty: the file is in WAL
            // mode already (an empty file is not, and cannot be created on a full disk anyway).
            exclusive.busyMode = .immediateError
            exclusive.prepareDatabase { db in
                try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            }
            do {
                let queue = try DatabaseQueue(path: path, configuration: exclusive)
                try queue.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
                return (queue, queue)
            } catch {
                throw original
            }
        }
    }
}
