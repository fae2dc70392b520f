import Foundation
import GRDB
import Cipher
import Vault
import ProtectedFiles
import CSQLiteCodec

/// An SQLite database under a data-protection class, opened through GRDB, encrypted and
/// authenticated page by page in SQLCipher 4's format (docs/PROTECTED-DATABASE.md).
///
/// The database's key (32 random bytes, SQLCipher's raw key) lives in its key record
/// `PATH-key`, a protected file of the database's class; the classes mean what they mean for
/// protected files:
/// - `FileProtection.complete`: opening needs the class key; when the vault locks, every
///   connection refuses further reads and writes (``ProtectedDatabaseError/locked(path:_:)``),
///   no row is served from SQLite's page cache afterwards, and the database is opened again
///   after the next unlock;
/// - `FileProtection.completeUnlessOpen`: a database open while unlocked stays usable after
///   the lock until closed; a new one can be created while locked;
/// - `FileProtection.completeUntilFirstUserAuthentication`: opens from the first unlock
///   until the process stops;
/// - `FileProtection.none`: under the device key only.
///
/// ```swift
/// let files = ProtectedFiles(manager: manager)
/// let db = try ProtectedDatabase.create(at: path, protection: .complete, files: files)
/// try db.write { try $0.execute(sql: "CREATE TABLE notes(body TEXT)") }
/// ```
///
/// Protected databases run in WAL mode (rollback journals are refused), temporary tables and
/// statement journals stay in memory, and pages are never memory-mapped.
public final class ProtectedDatabase: @unchecked Sendable {
    /// Which GRDB writer to open: one connection (`DatabaseQueue`) or a writer and
    /// concurrent readers (`DatabasePool`). Both run in WAL mode.
    public enum Kind: String, Sendable, CaseIterable {
        case queue
        case pool
    }

    /// The path the database was opened with.
    public let path: String
    /// The class of its key record.
    public let protection: FileProtectionClass
    /// The GRDB writer on the database (a `DatabaseQueue` or `DatabasePool`). Every
    /// connection goes through the codec; prefer ``read(_:)`` and ``write(_:)``, which also
    /// check the class's lock state and map errors to ``ProtectedDatabaseError``.
    public let writer: any DatabaseWriter
    /// The path SQLite uses (symbolic links resolved): the codec's registry key.
    let fullPath: String
    private let manager: CryptoManager
    private let lifecycle: Lifecycle
    private var observer: Task<Void, Never>?

    final class Lifecycle: @unchecked Sendable {
        private let lock = NSLock()
        private var _revoked = false
        private var _closed = false
        var revoked: Bool { lock.withLock { _revoked } }
        var closed: Bool { lock.withLock { _closed } }
        func markRevoked() -> Bool { lock.withLock { defer { _revoked = true }; return !_revoked } }
        func markClosed() -> Bool { lock.withLock { defer { _closed = true }; return !_closed } }
    }

    /// The key record of the database at `path`.
    /// - Parameter path: The database's path.
    /// - Returns: The key record's path, `PATH-key`.
    package static func keyPath(for path: String) -> String { path + "-key" }

    private init(path: String, fullPath: String, protection: FileProtectionClass, writer: any DatabaseWriter, manager: CryptoManager,
                 lifecycle: Lifecycle) {
        self.lifecycle = lifecycle
        self.path = path
        self.fullPath = fullPath
        self.protection = protection
        self.writer = writer
        self.manager = manager
        if protection.protection == .complete {
            let changes = manager.lockStateChanges
            observer = Task.detached { [weak self] in
                for await state in changes where state == .locked {
                    // (A manager that an unlock agent serves is locked itself: its lock comes
                    // from the agent, seen at the next use.)
                    guard let self, !Self.servedBySource(self.manager) else { continue }
                    self.revoke()
                    break
                }
            }
        }
    }

    deinit {
        observer?.cancel()
        if lifecycle.markClosed() {
            try? writer.close()
            _ = sf_db_codec_detach(fullPath)
        }
    }

    // MARK: Opening

    /// Creates a database of class `protection` at `path` (which must not exist) and its key
    /// record `PATH-key`, and opens it. A `FileProtection.completeUnlessOpen` database can
    /// be created while the vault is locked; the others need their class key.
    /// - Parameters:
    ///   - path: Where the database goes.
    ///   - protection: The class of its key record.
    ///   - files: The protected files of the vault, which keep the key record.
    ///   - kind: One connection or a writer and concurrent readers.
    ///   - configuration: GRDB's settings for the connections.
    /// - Returns: The open database.
    /// - Throws: ``ProtectedDatabaseError``.
    public static func create(at path: String, protection: FileProtectionClass, files: ProtectedFiles,
                              kind: Kind = .pool, configuration: Configuration = Configuration()) throws(ProtectedDatabaseError) -> ProtectedDatabase {
        let fullPath = try codecPath(path)
        if FileManager.default.fileExists(atPath: path) || isLink(path) { throw ProtectedDatabaseError.exists(path: path) }
        let keyPath = keyPath(for: path)
        if isLink(keyPath) { throw ProtectedDatabaseError.exists(path: keyPath) }
        for leftover in [path + "-wal", path + "-shm", path + "-journal", rekeyPath(for: path)] { unlink(leftover) }
        let key = try KeyRecord.fresh()
        // The record first: a database never exists without the key that opens it.
        try writeRecord(KeyRecord(keys: [key]), to: keyPath, protection: protection, files: files)
        do throws(ProtectedDatabaseError) {
            try attach(fullPath, key)
            defer { _ = sf_db_codec_detach(fullPath) }
            try makeDatabase(at: path, fullPath: fullPath)
            return try openAttached(path: path, fullPath: fullPath, key: key, protection: protection,
                                    manager: files.manager, kind: kind, configuration: configuration)
        } catch {
            for file in [path, path + "-wal", path + "-shm", keyPath] { unlink(file) }
            throw error
        }
    }

    /// Opens the database at `path`. With `expecting`, a database of any other class is
    /// refused (``ProtectedDatabaseError/classMismatch(path:expected:found:)``): an application
    /// that knows its database's class should say so, so that a key record of a weaker class
    /// put in its place is not accepted.
    /// - Parameters:
    ///   - path: The database's path.
    ///   - files: The protected files of the vault, which keep the key record.
    ///   - expecting: The class the database must be of (nil: any).
    ///   - kind: One connection or a writer and concurrent readers.
    ///   - configuration: GRDB's settings for the connections.
    /// - Returns: The open database.
    /// - Throws: ``ProtectedDatabaseError``.
    public static func open(at path: String, files: ProtectedFiles, expecting: FileProtectionClass? = nil,
                            kind: Kind = .pool, configuration: Configuration = Configuration()) throws(ProtectedDatabaseError) -> ProtectedDatabase {
        let fullPath = try codecPath(path)
        let (key, cls, _) = try readKey(at: path, files: files, expecting: expecting)
        return try openAttached(path: path, fullPath: fullPath, key: key, protection: cls,
                                manager: files.manager, kind: kind, configuration: configuration)
    }

    /// Opens the GRDB writer on an attached database (one more user of the codec entry,
    /// released by ``close()`` or when the instance is freed).
    private static func openAttached(path: String, fullPath: String, key: KeyRecord.Key, protection: FileProtectionClass,
                                     manager: CryptoManager, kind: Kind, configuration: Configuration) throws(ProtectedDatabaseError) -> ProtectedDatabase {
        privateModes(path)
        try attach(fullPath, key)
        do throws(ProtectedDatabaseError) {
            var config = configuration
            let guardStatements = protection.protection == .complete
            let lifecycle = Lifecycle()
            config.prepareDatabase { db in
                // A connection a pool opens after this instance was revoked or closed: refused
                // (the key may be back for another instance after the next unlock).
                if lifecycle.revoked || lifecycle.closed { throw ProtectedDatabaseError.locked(path: path, protection) }
                try prepare(db, fullPath: fullPath, guardStatements: guardStatements)
            }
            let writer: any DatabaseWriter
            switch kind {
            case .queue:
                config.journalMode = .wal
                writer = try mapSQLite(path: path) { try DatabaseQueue(path: path, configuration: config) }
            case .pool:
                writer = try mapSQLite(path: path) { try DatabasePool(path: path, configuration: config) }
            }
            upgradeVersionOneWAL(writer, fullPath: fullPath)
            return ProtectedDatabase(path: path, fullPath: fullPath, protection: protection, writer: writer, manager: manager,
                                     lifecycle: lifecycle)
        } catch {
            _ = sf_db_codec_detach(fullPath)
            throw error
        }
    }

    /// A WAL left by an earlier version (SQLite's checksums in clear: version 1, FORMATS.md) is
    /// read as it is, but frames appended to it would keep the clear checksums: the first read
    /// (which recovers the WAL) tells, and a TRUNCATE checkpoint empties it, so the next WAL is
    /// version 2. A checkpoint that cannot run now (another connection reading) is tried again
    /// at the next open.
    static func upgradeVersionOneWAL(_ writer: any DatabaseWriter, fullPath: String) {
        _ = try? writer.read { try Int.fetchOne($0, sql: "PRAGMA schema_version") }
        guard sf_db_codec_take_v1_wal(fullPath) != 0 else { return }
        _ = try? writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
    }

    /// What every connection runs first: the codec check and reserve, the statement guard,
    /// temporary storage in memory.
    static func prepare(_ db: Database, fullPath: String, guardStatements: Bool) throws {
        guard sf_db_codec_prepare_connection(UnsafeMutableRawPointer(db.sqliteConnection), fullPath, guardStatements ? 1 : 0) == SF_DB_OK else {
            throw ProtectedDatabaseError.notProtectedDatabase(
                path: fullPath, reason: "the connection does not run on the codec (was it opened before the codec was registered, or through another VFS?)")
        }
        try db.execute(sql: "PRAGMA temp_store = MEMORY")
    }

    /// Writes page 1 of a new database (4096-byte pages, 80 reserved bytes, WAL mode) into
    /// the main file, so the file carries its salt and SQLCipher opens it; for a database
    /// SQLCipher wrote, switches it to WAL mode.
    static func makeDatabase(at path: String, fullPath: String, creating: Bool = true) throws(ProtectedDatabaseError) {
        if creating {
            // SQLite would create the file 0644 (and its WAL and shared memory like it): 0600,
            // and never a file that appeared since the caller looked.
            let fd = Foundation.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else {
                if errno == EEXIST { throw ProtectedDatabaseError.exists(path: path) }
                throw ProtectedDatabaseError.io("cannot create \(path): \(String(cString: strerror(errno)))")
            }
            Foundation.close(fd)
        }
        var config = Configuration()
        config.prepareDatabase { db in
            try prepare(db, fullPath: fullPath, guardStatements: false)
            // The switch to WAL goes through a rollback journal, which the codec refuses on
            // disk: keep that one in memory (an empty database has nothing to roll back; a
            // database being adopted is switched in one step).
            try db.execute(sql: "PRAGMA page_size = 4096")
            try db.execute(sql: "PRAGMA journal_mode = MEMORY")
        }
        config.journalMode = .wal
        try mapSQLite(path: path) {
            let queue = try DatabaseQueue(path: path, configuration: config)
            _ = try queue.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            try queue.close()
        }
        guard let status = linkStatus(path), status.size >= Int64(SF_DB_PAGE_SIZE) else {
            throw ProtectedDatabaseError.io("\(path): SQLite did not write the first page")
        }
        _ = SecureFile.syncParent(of: path)
    }

    // MARK: Use

    /// Runs `body` in a read transaction.
    /// - Parameter body: Reads through the connection it is given.
    /// - Returns: What `body` returns.
    /// - Throws: ``ProtectedDatabaseError`` (and what `body` throws, unchanged: so this stays
    ///   untyped `throws`).
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try checkUsable()
        return try Self.mapSQLiteOnly(path: path, revoked: { self.lifecycle.revoked }) { try writer.read(body) }
    }

    /// Runs `body` in a write transaction (rolled back when it throws).
    /// - Parameter body: Writes through the connection it is given.
    /// - Returns: What `body` returns.
    /// - Throws: ``ProtectedDatabaseError`` (and what `body` throws, unchanged: so this stays
    ///   untyped `throws`).
    public func write<T>(_ body: (Database) throws -> T) throws -> T {
        try checkUsable()
        return try Self.mapSQLiteOnly(path: path, revoked: { self.lifecycle.revoked }) { try writer.write(body) }
    }

    /// What ``verify()`` found in a sound database.
    public struct Verification: Sendable, Equatable {
        /// The pages in the database file (SQLite's `page_count`).
        public let pageCount: Int
        /// The tables in its schema.
        public let tableCount: Int
    }

    /// Reads every page and checks the whole database, in one read transaction: each page
    /// authenticates under the key (the codec), and SQLite's `integrity_check` finds the
    /// authenticated pages consistent (no page moved or rolled back from another version).
    /// - Returns: The page and table counts.
    /// - Throws: ``ProtectedDatabaseError/tampered(path:reason:)`` with SQLite's first findings
    ///   when the check fails, and what ``read(_:)`` throws.
    public func verify() throws(ProtectedDatabaseError) -> Verification {
        let found: ([String], Int, Int)
        do {
            found = try read { db in
                (try String.fetchAll(db, sql: "PRAGMA integrity_check"),
                 try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_schema WHERE type = 'table'") ?? 0)
            }
        } catch { throw ProtectedDatabaseError.mapping(error) }
        guard found.0 == ["ok"] else {
            throw ProtectedDatabaseError.tampered(path: path, reason: "SQLite's integrity check: " + found.0.prefix(5).joined(separator: "; "))
        }
        return Verification(pageCount: found.1, tableCount: found.2)
    }

    /// Whether the connections were revoked (a `FileProtection.complete` database after a lock).
    public var isRevoked: Bool { lifecycle.revoked }

    private func checkUsable() throws(ProtectedDatabaseError) {
        if lifecycle.closed { throw ProtectedDatabaseError.closed(path: path) }
        if protection.protection == .complete && !manager.isUnlocked && !Self.servedBySource(manager) { revoke() }
        if lifecycle.revoked { throw ProtectedDatabaseError.locked(path: path, protection) }
    }

    /// Whether the manager's unlocked-key source (an unlock agent) serves the `complete` class
    /// now, asked at every use while the manager itself is locked: a lock of the agent takes
    /// effect at the next read or write, as it does for protected files.
    static func servedBySource(_ manager: CryptoManager) -> Bool {
        guard manager.unlockedKeySource != nil, let key = try? manager.classKey(for: .whenUnlocked) else { return false }
        key.wipe()
        return true
    }

    /// Revokes the database now, as a lock does to a `FileProtection.complete` one: the key
    /// is wiped, running statements are interrupted, and every connection refuses further
    /// reads and writes (``ProtectedDatabaseError/locked(path:_:)``); cached pages are released.
    public func revoke() {
        guard lifecycle.markRevoked() else { return }
        _ = sf_db_codec_revoke(fullPath)
        writer.interrupt()
        // Cached pages go once no statement holds them (a pool's idle connections at once).
        if let pool = writer as? DatabasePool { pool.releaseMemoryEventually() }
    }

    /// Closes every connection (a checkpoint first, when the key is still there) and wipes
    /// the key of this instance.
    /// - Throws: ``ProtectedDatabaseError``; the instance is closed anyway.
    public func close() throws(ProtectedDatabaseError) {
        guard lifecycle.markClosed() else { return }
        observer?.cancel()
        defer { _ = sf_db_codec_detach(fullPath) }
        if !lifecycle.revoked {
            // Everything into the main file first, so that it is complete on its own (what
            // SQLCipher and a backup read); SQLite would checkpoint at the last close only
            // when no other connection of any process has it open.
            _ = try? writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
            try Self.mapSQLite(path: path) { try writer.close() }
        } else {
            try? writer.close()
        }
    }

    // MARK: Helpers

    static func codecPath(_ path: String) throws(ProtectedDatabaseError) -> String {
        guard !path.isEmpty, !path.contains("\0") else { throw ProtectedDatabaseError.invalidArgument("empty path") }
        guard sf_db_codec_register() == 0 else { throw ProtectedDatabaseError.io("the database codec could not be registered with SQLite") }
        var buffer = [CChar](repeating: 0, count: 4097)
        guard sf_db_codec_full_path(path, &buffer, buffer.count) == SF_DB_OK else {
            throw ProtectedDatabaseError.invalidArgument("\(path): the path cannot be resolved")
        }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func attach(_ fullPath: String, _ key: KeyRecord.Key) throws(ProtectedDatabaseError) {
        let result = key.key.withUnsafeBytes { raw in
            sf_db_codec_attach(fullPath, raw.bindMemory(to: UInt8.self).baseAddress, raw.count, key.salt, key.salt.count)
        }
        switch result {
        case SF_DB_OK: return
        case SF_DB_BUSY:
            throw ProtectedDatabaseError.keyMismatch(path: fullPath)
        default:
            throw ProtectedDatabaseError.io("\(fullPath): the key could not be attached to the codec")
        }
    }

    static func isLink(_ path: String) -> Bool {
        linkStatus(path)?.kind == .symbolicLink
    }

    static func rekeyPath(for path: String) -> String { path + "-rekey" }

    /// What `lstat` says about `path`, or nil when there is nothing there.
    static func linkStatus(_ path: String) -> FileStatus? { try? FileCalls.linkStatus(path) }

    /// Makes the database, its WAL and its shared memory 0600 when they are the user's regular
    /// files and group or others could read them (a database SQLCipher or another program made;
    /// SQLite gives a new WAL and shared memory the main file's mode). Opened without following
    /// a link; anything else is left alone (the open then refuses it as usual).
    /// On Linux the descriptor is a path descriptor (O_PATH): closing it keeps the locks this
    /// process's connections hold on the files, which closing a read descriptor would drop.
    static func privateModes(_ path: String) {
        for name in [path, path + "-wal", path + "-shm"] { sf_db_codec_make_private(name) }
    }

    /// Pages that failed authentication in this process (diagnostics, tests).
    static var tamperedPageCount: UInt64 { sf_db_codec_tamper_count() }

    /// Pages checkpoints copied from the WAL as ciphertext in this process (tests).
    static var copiedPageCount: UInt64 { sf_db_codec_copied_count() }

    /// Runs GRDB calls on the database at `path`, mapping SQLite's errors (and passing on
    /// this module's own, thrown from a connection's preparation; anything else as
    /// ``ProtectedDatabaseError/mapping(_:)`` says).
    static func mapSQLite<T>(path: String, revoked: () -> Bool = { false }, _ body: () throws -> T) throws(ProtectedDatabaseError) -> T {
        do {
            return try mapSQLiteOnly(path: path, revoked: revoked, body)
        } catch {
            throw ProtectedDatabaseError.mapping(error)
        }
    }

    /// Runs GRDB calls with a caller's closure: SQLite's errors are mapped, anything else (what
    /// the closure throws) is passed on unchanged.
    static func mapSQLiteOnly<T>(path: String, revoked: () -> Bool, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError {
            throw map(error, path: path, revoked: revoked())
        }
    }

    static func map(_ error: DatabaseError, path: String, revoked: Bool) -> ProtectedDatabaseError {
        let extended = error.extendedResultCode.rawValue
        let primary = error.resultCode.rawValue
        if revoked && (primary == 9 || extended == 7178 || primary == 23 || primary == 10) {
            return .locked(path: path, .complete)
        }
        switch extended {
        case 8202:  // SQLITE_IOERR_DATA: a page did not authenticate
            return .tampered(path: path, reason: "a page of the database or its WAL does not authenticate under the database key")
        case 7178:  // SQLITE_IOERR_AUTH: the key was wiped
            return .locked(path: path, .complete)
        default: break
        }
        switch primary {
        case 11:    // SQLITE_CORRUPT: authenticated pages that do not fit together (moved or rolled back)
            return .tampered(path: path, reason: "its pages do not fit together (\(error.message ?? "malformed")): pages were rolled back or moved within the file")
        case 13:    // SQLITE_FULL
            return .diskFull(path: path)
        case 26:    // SQLITE_NOTADB
            return .notProtectedDatabase(path: path, reason: error.message ?? "not a database")
        default:
            return .sqlite(code: extended, message: error.message ?? "\(error)")
        }
    }
}

extension SecureFile {
    /// Syncs the directory holding `path`; false when it could not be synced.
    static func syncParent(of path: String) -> Bool {
        let directory = (path as NSString).deletingLastPathComponent
        do { try SecureFile.syncDirectory(directory.isEmpty ? "." : directory); return true } catch { return false }
    }
}
