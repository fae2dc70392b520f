import Foundation
import Crypto
import GRDB
import Cipher

/// The keychain's storage engine: the SQLite file (schema, format upgrade, reinstall check), a
/// read cache and per-service id sets kept current across connections, and the coalesced
/// writer, which commits the pending writes in one transaction on a serial queue and
/// checkpoints the WAL apart from the commits. It stores rows as it is given them: sealing and
/// the class binding are ``ItemSealer``'s.
///
/// Thread safety: the in-memory state (pending writes, read cache, id sets, generation
/// counters) sits behind `lock`; the SQLite connections are GRDB serial queues; the checkpoint
/// schedule is used only on `writeQueue`. The class is therefore `@unchecked Sendable`.
final class ItemStore: @unchecked Sendable {
    /// The database file.
    let path: String
    /// The keychain's random id (`keychain_id` in `keychain_meta`), part of every row MAC, so a
    /// row cannot be moved from another keychain of the same device key.
    let keychainID: [UInt8]
    /// The number of items wiped as stale on open by reinstall detection (0 when none or off).
    let wipedStaleItems: Int

    let configuration: Keychain.Configuration
    let writer: DatabaseQueue
    let reader: DatabaseQueue
    let writeQueue = DispatchQueue(label: "securefoundation.keychain.writer", qos: .utility)

    // Guarded by `lock`.
    let lock = NSLock()
    var pending: [ItemID: PendingChange] = [:]
    var inFlight: [ItemID: PendingChange] = [:]
    /// Rows as the file holds them (so with known creation dates).
    var cache: [ItemID: StoredRow] = [:]
    var commitScheduled = false
    var knownGeneration: Int64
    var lastDataVersion: Int64 = -1
    var lastWriteError: KeychainError?
    var closed = false
    /// The ids present in the file for services (groups) that saw many existence checks (see
    /// ``exists(_:)``), kept current by this keychain's commits and dropped when another
    /// connection commits.
    var idSets: [GroupID: Set<ItemID>] = [:]
    var idSetTotal = 0
    var existenceChecks: [GroupID: Int] = [:]
    var largeGroups: Set<GroupID> = []
    var lastValidation: UInt64 = 0
    // Used only on `writeQueue`.
    var lastCheckpoint: UInt64 = 0
    var checkpointScheduled = false

    // MARK: Opening

    /// Opens (creating if needed) the database at `path`, whose directory exists and is private.
    /// - Parameters:
    ///   - path: The database file.
    ///   - configuration: The keychain's settings.
    ///   - indexKey: The blind-index key: it is checked against `index_key_check`, and keys the
    ///     row MACs of a format-2 file being upgraded.
    /// - Throws: as ``Keychain/init(directory:keySource:configuration:)``.
    init(path: String, configuration: Keychain.Configuration, indexKey: SymmetricKey) throws {
        self.path = path
        self.configuration = configuration
        try KeychainFiles.prepareDatabaseFile(path)

        var config = GRDB.Configuration()
        config.busyMode = .timeout(TimeInterval(configuration.busyTimeout.components.seconds))
        config.journalMode = .wal
        config.label = "securefoundation.keychain"
        config.prepareDatabase { db in
            // A 32 MiB page cache keeps a large coalesced batch from spilling to the WAL before it
            // commits. (synchronous = FULL is set once GRDB's WAL set-up has run, in
            // DiskFull.openConnections.)
            try db.execute(sql: "PRAGMA cache_size = -32768")
            // Checkpoints run on the writer queue after commits (see checkpointIfDue), not
            // inside the commit that flush() waits for.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        do {
            // Both with synchronous = FULL; on a full disk, reads through one exclusive connection
            // (see DiskFull.openConnections).
            (writer, reader) = try DiskFull.openConnections(path: path, configuration: config)
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        try KeychainFiles.checkSidecars(path)
        do {
            let opened = try ItemStore.openSchema(writer, path: path, configuration: configuration, indexKey: indexKey)
            (keychainID, wipedStaleItems) = (opened.keychainID, opened.wiped)
            knownGeneration = try reader.inDatabase { db in try Int64.fetchOne(db, sql: KeychainSchema.generationSQL) ?? 0 }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Creates the schema or checks the one present (format, blind-index key, keychain id),
    /// upgrades a format-2 file and runs reinstall detection, in one transaction.
    /// - Returns: The keychain id and the number of items wiped as stale.
    static func openSchema(_ writer: DatabaseQueue, path: String, configuration: Keychain.Configuration,
                                   indexKey: SymmetricKey) throws -> (keychainID: [UInt8], wiped: Int) {
        let check = ItemCodec.indexKeyCheck(format: KeychainSchema.formatVersion, key: indexKey)
        let marker = configuration.installMarkerPath
        return try writer.inDatabase { db in
            var opened: (keychainID: [UInt8], wiped: Int) = ([], 0)
            try db.inTransaction(.immediate) {
                for sql in KeychainSchema.createStatements { try db.execute(sql: sql) }
                let format = try Int64.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'format'")
                if format == nil, try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_meta") ?? 0 > 0 {
                    throw KeychainError.corrupted("\(path) has keychain metadata without a format: it was changed by someone without the keychain's keys (restore it from a backup)")
                }
                if format == 2 && !configuration.upgradesFormat2 {
                    throw KeychainError.corrupted("\(path) has keychain format 2, which this application no longer upgrades (Configuration.upgradesFormat2 is off): a file put back from before its upgrade, or changed by someone without the keychain's keys")
                }
                if let format {
                    guard format == KeychainSchema.formatVersion || format == 2 else {
                        let hint = format < KeychainSchema.formatVersion
                            ? " (format 1 was written only by pre-release builds: read its items with the build that wrote it and store them again)"
                            : " (written by a newer version of the library)"
                        throw KeychainError.corrupted("\(path) has keychain format \(format); this library reads format \(KeychainSchema.formatVersion)\(hint)")
                    }
                } else {
                    try db.execute(sql: "INSERT INTO keychain_meta (key, value) VALUES ('format', ?), ('generation', 0), ('index_key_check', ?), ('keychain_id', ?)",
                                   arguments: [KeychainSchema.formatVersion, check, Data(try newKeychainID())])
                }
                // The check value depends on the format, so a format-3 file relabelled as format
                // 2 (to have its rows bound again by the upgrade) fails here: a format-2 check
                // exists only in files written before the upgrade.
                let expected = ItemCodec.indexKeyCheck(format: format ?? KeychainSchema.formatVersion, key: indexKey)
                guard let stored = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'"),
                      ConstantTime.equals(Array(stored), Array(expected)) else {
                    if format == 2, let stored = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'"),
                       ConstantTime.equals(Array(stored), Array(check)) {
                        throw KeychainError.corrupted("\(path) says format 2 but was written in format 3: it was changed by someone without the keychain's keys (restore it from a backup)")
                    }
                    throw KeychainError.keyUnavailable("the blind-index key is not the one \(path) was created with (another device key?); the items cannot be found with it")
                }
                if format == 2 {
                    try db.execute(sql: "INSERT OR REPLACE INTO keychain_meta (key, value) VALUES ('keychain_id', ?)",
                                   arguments: [Data(try newKeychainID())])
                }
                guard let id = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'keychain_id'"), id.count == 16 else {
                    throw KeychainError.corrupted("\(path) has no valid keychain_id in keychain_meta: it was changed by someone without the keychain's keys (restore it from a backup)")
                }
                opened.keychainID = Array(id)
                if format == 2 { try upgradeFromFormat2(db, keychainID: opened.keychainID, indexKey: indexKey) }
                if let marker {
                    opened.wiped = try Reinstall.check(db: db, markerPath: marker)
                }
                return .commit
            }
            return opened
        }
    }

    /// Format 2 to 3, inside the opening transaction (so all or nothing): adds the `row_mac`
    /// column and binds every row's class to it. It needs only the blind-index key, so a locked
    /// vault does not stop it. The rows of a format-2 file are taken at their word here, once:
    /// a class changed in the file before the upgrade cannot be told from the real one.
    static func upgradeFromFormat2(_ db: Database, keychainID: [UInt8], indexKey: SymmetricKey) throws {
        let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('keychain_items')")
        if !columns.contains("row_mac") { try db.execute(sql: KeychainSchema.addMACColumnSQL) }
        let rows = try GRDB.Row.fetchCursor(db, sql: "SELECT item_id, accessibility, sealed FROM keychain_items")
        let prototype = HMAC<SHA256>(key: indexKey)
        var tags: [(Data, Data)] = []
        while let row = try rows.next() {
            // A row that does not decode keeps no MAC and is reported as damaged when read.
            let idValue: DatabaseValue = row[0], codeValue: DatabaseValue = row[1], sealedValue: DatabaseValue = row[2]
            guard case .blob(let idData) = idValue.storage, let id = ItemID(idData),
                  case .int64(let code) = codeValue.storage, let accessibility = UInt8(exactly: code),
                  case .blob(let sealed) = sealedValue.storage else { continue }
            let mac = ItemCodec.rowMAC(keychain: keychainID, id: id, accessibility: accessibility, sealed: Array(sealed), prototype: prototype)
            tags.append((Data(mac), idData))
        }
        for (mac, id) in tags { try db.execute(sql: KeychainSchema.setMACSQL, arguments: [mac, id]) }
        try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'format'", arguments: [KeychainSchema.formatVersion])
        try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'index_key_check'",
                       arguments: [ItemCodec.indexKeyCheck(format: KeychainSchema.formatVersion, key: indexKey)])
    }

    /// 16 random bytes.
    static func newKeychainID() throws -> [UInt8] {
        do { return try SecureRandom.bytes(16) } catch { throw KeychainError.keyUnavailable("no randomness for the keychain id: \(error)") }
    }

    /// The `synchronous` setting of the writer and reader connections (2 is FULL), for tests.
    func synchronousSettings() throws -> (writer: Int, reader: Int) {
        let writerSetting = try writer.inDatabase { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        let readerSetting = try reader.inDatabase { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        return (writerSetting, readerSetting)
    }

    /// A store released without ``close()`` closes its connections here, each on its own queue
    /// and in a fixed order (writer, then reader), rather than leaving it to the connections'
    /// deinitialisers: dropping an open keychain used to crash the process in optimised builds.
    /// Pending writes cannot be left behind: a scheduled commit keeps the store alive until it
    /// has run.
    deinit {
        try? writer.close()
        try? reader.close()
    }
}
