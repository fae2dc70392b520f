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

    private let configuration: Keychain.Configuration
    private let writer: DatabaseQueue
    private let reader: DatabaseQueue
    private let writeQueue = DispatchQueue(label: "securefoundation.keychain.writer", qos: .utility)

    // Guarded by `lock`.
    private let lock = NSLock()
    private var pending: [ItemID: PendingChange] = [:]
    private var inFlight: [ItemID: PendingChange] = [:]
    /// Rows as the file holds them (so with known creation dates).
    private var cache: [ItemID: StoredRow] = [:]
    private var commitScheduled = false
    private var knownGeneration: Int64
    private var lastDataVersion: Int64 = -1
    private var lastWriteError: KeychainError?
    private var closed = false
    /// The ids present in the file for services (groups) that saw many existence checks (see
    /// ``exists(_:)``), kept current by this keychain's commits and dropped when another
    /// connection commits.
    private var idSets: [GroupID: Set<ItemID>] = [:]
    private var idSetTotal = 0
    private var existenceChecks: [GroupID: Int] = [:]
    private var largeGroups: Set<GroupID> = []
    private var lastValidation: UInt64 = 0
    // Used only on `writeQueue`.
    private var lastCheckpoint: UInt64 = 0
    private var checkpointScheduled = false

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
    private static func openSchema(_ writer: DatabaseQueue, path: String, configuration: Keychain.Configuration,
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
    private static func upgradeFromFormat2(_ db: Database, keychainID: [UInt8], indexKey: SymmetricKey) throws {
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
    private static func newKeychainID() throws -> [UInt8] {
        do { return try SecureRandom.bytes(16) } catch { throw KeychainError.keyUnavailable("no randomness for the keychain id: \(error)") }
    }

    /// The `synchronous` setting of the writer and reader connections (2 is FULL), for tests.
    func synchronousSettings() throws -> (writer: Int, reader: Int) {
        let writerSetting = try writer.inDatabase { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        let readerSetting = try reader.inDatabase { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
        return (writerSetting, readerSetting)
    }

    // MARK: Re-sealing

    /// Writes re-sealed rows in one transaction, each only where the row is still as it was read
    /// (a row another writer changed since is left to that writer).
    /// - Returns: The number of rows replaced.
    func replaceSealed(_ batch: [(old: StoredRow, new: StoredRow)]) throws -> Int {
        try checkOpen()
        guard !batch.isEmpty else { return 0 }
        do {
            return try writer.inDatabase { db -> Int in
                var changed = 0
                try db.inTransaction(.immediate) {
                    for (old, new) in batch {
                        try db.execute(sql: KeychainSchema.resealSQL,
                                       arguments: [Data(new.sealed), Data(new.mac), old.id.data, Data(old.sealed)])
                        changed += db.changesCount
                    }
                    _ = try Int64.fetchOne(db, sql: KeychainSchema.bumpGenerationSQL)
                    return .commit
                }
                return changed
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    // MARK: Reading rows

    /// Checks, under `lock`, whether another connection committed since the cache was filled,
    /// and empties the cache if so.
    private func validateCacheLocked(_ db: Database) throws {
        let version = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA data_version")) ?? 0
        if version == lastDataVersion { return }
        let generation = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.generationSQL)) ?? 0
        lastDataVersion = version
        if generation != knownGeneration {
            cache.removeAll(keepingCapacity: true)
            dropIDSetsLocked()
            knownGeneration = generation
        }
    }

    /// Runs `body` in one read transaction of the reader connection (started with cached
    /// statements, so that a read pays for one lock round rather than one per statement).
    private func inReadTransaction<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        // All three prepared before the transaction starts, so that ending it cannot fail on a
        // statement's first preparation (GRDB stops the process if a transaction is left open).
        let begin = try db.cachedStatement(sql: "BEGIN DEFERRED TRANSACTION")
        let commit = try db.cachedStatement(sql: "COMMIT TRANSACTION")
        let rollback = try db.cachedStatement(sql: "ROLLBACK TRANSACTION")
        try begin.execute()
        do {
            let result = try body()
            try commit.execute()
            return result
        } catch {
            try? rollback.execute()
            throw error
        }
    }

    /// The row of `index`: pending writes first, then the cache, then the database. A pending
    /// write that keeps the stored creation date is returned with the date of the row it
    /// replaces, read as the row of an item without pending writes is.
    func lookup(_ index: ItemID) throws -> StoredRow? {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        var written: StoredRow?
        if let change = pending[index] ?? inFlight[index] {
            guard case .put(let row) = change else { return nil }
            if row.created.isKnown { return row }
            written = row
        }
        do {
            // One trip to the reader: is the cache current, and if the row is not cached, the row.
            // A row not cached is read in the same read transaction as the check (in WAL mode a
            // statement outside a transaction is a read transaction of its own, two fcntl locks).
            let (found, cached) = try reader.inDatabase { db -> (StoredRow?, Bool) in
                if cache[index] != nil {
                    try validateCacheLocked(db)
                    if let row = cache[index] { return (row, true) }
                }
                return try inReadTransaction(db) {
                    try validateCacheLocked(db)
                    guard let row = try GRDB.Row.fetchOne(db.cachedStatement(sql: KeychainSchema.selectOneSQL), arguments: [index.data]) else {
                        return (nil, false)
                    }
                    return (try KeychainSchema.row(from: row), false)
                }
            }
            if let found, !cached {
                if cache.count >= configuration.readCacheLimit { cache.removeAll(keepingCapacity: true) }
                cache[index] = found
            }
            guard var written else { return found }
            written.created = found?.created ?? .at(written.created.seconds)
            return written
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Whether `index` has an item, for deletes (which must throw itemNotFound at the call).
    ///
    /// Pending writes answer first. Then, for a service that has seen ``idSetThreshold`` checks,
    /// the set of its ids read in one range scan: a delete costs no SQL statement (in WAL mode each
    /// statement outside a transaction is a read transaction of its own, two `fcntl` locks, about
    /// 4 µs, more than the rest of the call). The set is kept current by this keychain's commits
    /// and dropped when another connection has committed, checked at most every 100 ms here and
    /// on every read; an id missing from it is always looked up. So a stale set can only say an
    /// item another process deleted less than 100 ms ago still exists: the delete then succeeds
    /// as a no-op, as it would have a moment earlier. Services with more than
    /// ``idSetGroupLimit`` items are always looked up.
    func exists(_ index: ItemID) throws -> Bool {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        if let change = pending[index] ?? inFlight[index] {
            if case .put = change { return true }
            return false
        }
        do {
            return try reader.inDatabase { db -> Bool in
                let now = DispatchTime.now().uptimeNanoseconds
                if now &- lastValidation > 100_000_000 {
                    try validateCacheLocked(db)
                    lastValidation = now
                }
                let group = GroupID(index)
                if let ids = idSets[group], ids.contains(index) { return true }
                if cache[index] != nil { return true }
                let found = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.existsSQL), arguments: [index.data]) != nil
                if idSets[group] != nil {
                    if found { idSets[group]!.insert(index); idSetTotal += 1 }
                    return found
                }
                guard !largeGroups.contains(group) else { return found }
                let checks = existenceChecks[group, default: 0] + 1
                existenceChecks[group] = checks
                if checks >= ItemStore.idSetThreshold { try loadIDSetLocked(group, db) }
                return found
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Existence checks in one service before its ids are read into a set.
    static let idSetThreshold = 8
    /// The largest service whose ids are kept in a set, and the most ids kept in all.
    static let idSetGroupLimit = 20_000
    static let idSetTotalLimit = 200_000

    /// Reads the ids of one service into ``idSets`` (one range scan), unless it is too large.
    private func loadIDSetLocked(_ group: GroupID, _ db: Database) throws {
        existenceChecks[group] = nil
        let (lower, upper) = ItemID.range(itemClass: group.itemClass, group: (group.g0, group.g1))
        var ids = Set<ItemID>()
        let rows = try Data.fetchCursor(db.cachedStatement(sql: KeychainSchema.selectRangeIDsSQL),
                                        arguments: [lower, upper, ItemStore.idSetGroupLimit + 1])
        while let data = try rows.next() {
            guard let id = ItemID(data) else { continue }
            ids.insert(id)
        }
        if ids.count > ItemStore.idSetGroupLimit {
            largeGroups.insert(group)
            return
        }
        if idSetTotal + ids.count > ItemStore.idSetTotalLimit { dropIDSetsLocked() }
        idSets[group] = ids
        idSetTotal += ids.count
    }

    private func dropIDSetsLocked() {
        idSets.removeAll()
        idSetTotal = 0
        existenceChecks.removeAll()
        largeGroups.removeAll()
    }

    /// Every row of a class (optionally one service or server), database and pending writes
    /// merged (a pending write that keeps the stored creation date takes that of the row it
    /// replaces), oldest first.
    /// - Throws: ``KeychainError/corrupted(_:)`` for the first row that does not decode.
    func rows(itemClass: ItemClass, group: (UInt64, UInt64)?) throws -> [StoredRow] {
        let found = try rowsReportingDamage(itemClass: itemClass, group: group)
        if let first = found.damaged.first { throw first.error }
        return found.rows
    }

    /// A row of the file that does not decode (a column of the wrong type or out of bounds).
    struct UndecodedRow: Sendable {
        /// The `item_id` value: its bytes in hex for a blob, else as SQLite would quote it.
        var key: String
        /// The item id, when the `item_id` column holds one.
        var id: ItemID?
        /// The `accessibility` column, when it holds an integer of a byte.
        var accessibility: UInt8?
        /// Names the column and what it holds.
        var error: KeychainError
    }

    /// As ``rows(itemClass:group:)``, with the rows that do not decode reported beside the
    /// others instead of failing the whole read.
    func rowsReportingDamage(itemClass: ItemClass, group: (UInt64, UInt64)?) throws -> (rows: [StoredRow], damaged: [UndecodedRow]) {
        let (lower, upper) = ItemID.range(itemClass: itemClass.rawValue, group: group)
        return try collectRows(sql: KeychainSchema.selectRangeSQL, arguments: [lower, upper]) { id in
            id.itemClass == itemClass.rawValue && (group.map { id.isIn(group: $0) } ?? true)
        }
    }

    /// Every row of the file, whatever its key (also keys that are not item ids, which no class
    /// or service range holds), database and pending writes merged: the rows that decode by
    /// class then oldest first, and those that do not.
    func allRowsReportingDamage() throws -> (rows: [StoredRow], damaged: [UndecodedRow]) {
        try collectRows(sql: KeychainSchema.selectAllSQL, arguments: []) { _ in true }
    }

    private func collectRows(sql: String, arguments: StatementArguments,
                             inScope: (ItemID) -> Bool) throws -> (rows: [StoredRow], damaged: [UndecodedRow]) {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        var result: [ItemID: StoredRow] = [:]
        var damaged: [UndecodedRow] = []
        do {
            try reader.inDatabase { db in
                try validateCacheLocked(db)
                let rows = try GRDB.Row.fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
                while let row = try rows.next() {
                    do {
                        let stored = try KeychainSchema.row(from: row)
                        result[stored.id] = stored
                    } catch let error as KeychainError {
                        damaged.append(KeychainSchema.undecoded(row, error: error))
                    }
                }
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        for overlay in [inFlight, pending] {
            for (index, change) in overlay {
                switch change {
                case .delete: result[index] = nil
                case .put(var row):
                    if inScope(row.id) {
                        if !row.created.isKnown { row.created = result[index]?.created ?? .at(row.created.seconds) }
                        result[index] = row
                    } else {
                        result[index] = nil
                    }
                }
                // A damaged row deleted or written again here is no longer the file's.
                damaged.removeAll { $0.id == index }
            }
        }
        let rows = result.values.sorted { a, b in
            if a.itemClass != b.itemClass { return a.itemClass < b.itemClass }
            if a.created.seconds != b.created.seconds { return a.created.seconds < b.created.seconds }
            return a.id < b.id
        }
        return (rows, damaged.sorted { $0.key < $1.key })
    }

    /// The ids of every item of a class (optionally one service), database and pending writes
    /// merged. No other column is read, so a row with a damaged column is still found (and can
    /// be deleted).
    func ids(itemClass: ItemClass, group: (UInt64, UInt64)?) throws -> [ItemID] {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        var result = Set<ItemID>()
        do {
            try reader.inDatabase { db in
                let (lower, upper) = ItemID.range(itemClass: itemClass.rawValue, group: group)
                let rows = try Data.fetchCursor(db.cachedStatement(sql: KeychainSchema.selectRangeIDsSQL),
                                                arguments: [lower, upper, Int64.max])
                while let data = try rows.next() {
                    if let id = ItemID(data) { result.insert(id) }
                }
            }
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        for overlay in [inFlight, pending] {
            for (index, change) in overlay where index.itemClass == itemClass.rawValue && (group.map { index.isIn(group: $0) } ?? true) {
                switch change {
                case .delete: result.remove(index)
                case .put: result.insert(index)
                }
            }
        }
        return result.sorted()
    }

    // MARK: Writing

    func enqueue(_ index: ItemID, _ change: PendingChange) throws {
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        // One hash of the id in the common case (a new item): the change goes in first. A write
        // that keeps the stored creation date takes the date of the row it replaces where this
        // keychain holds that row (pending, being committed, or cached); after a delete it is a
        // new item, created now. Otherwise the commit resolves it.
        let replaced = pending.updateValue(change, forKey: index)
        if case .put(let written) = change, !written.created.isKnown {
            var created = written.created
            switch replaced ?? (inFlight.isEmpty ? nil : inFlight[index]) {
            case .put(let old)?: created = old.created
            case .delete?: created = .at(written.modified)
            case nil: if !cache.isEmpty, let old = cache[index] { created = old.created }
            }
            if created != written.created {
                var row = written
                row.created = created
                pending[index] = .put(row)
            }
        }
        scheduleLocked(after: configuration.coalescingInterval)
    }

    private func scheduleLocked(after delay: Duration) {
        guard !commitScheduled else { return }
        commitScheduled = true
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        writeQueue.asyncAfter(deadline: .now() + seconds) { [self] in
            do { try commitOnWriteQueue(fromTimer: true) } catch {}
        }
    }

    /// Commits the pending writes in one transaction. Runs on `writeQueue` only.
    /// `fromTimer` is true for the scheduled run; a flush leaves the scheduled run in place (it
    /// will find nothing or the writes made since), so a set-and-flush loop arms one timer per
    /// interval rather than one per flush.
    private func commitOnWriteQueue(fromTimer: Bool = false) throws {
        let batch: [ItemID: PendingChange] = lock.withLock {
            if fromTimer { commitScheduled = false }
            if closed { return [:] }
            inFlight = pending
            // Writes keep arriving at about the same rate: start the next batch at this size.
            pending = Dictionary(minimumCapacity: min(pending.count, 1 << 16))
            return inFlight
        }
        guard !batch.isEmpty else { return }
        let startGeneration: Int64
        do {
            startGeneration = try writer.inDatabase { db -> Int64 in
                var start: Int64 = 0
                try db.inTransaction(.immediate) {
                    let upsert = DirectStatement(try db.cachedStatement(sql: KeychainSchema.upsertSQL))
                    let delete = DirectStatement(try db.cachedStatement(sql: KeychainSchema.deleteSQL))
                    // In index order: neighbouring inserts touch neighbouring B-tree pages.
                    for (index, change) in batch.sorted(by: { $0.key < $1.key }) {
                        switch change {
                        case .put(let row):
                            try upsert.bind(1, id: row.id)
                            try upsert.bind(2, int: Int64(row.accessibility))
                            try upsert.bind(3, blob: row.sealed)
                            try upsert.bind(4, double: row.created.seconds)
                            try upsert.bind(5, double: row.modified)
                            try upsert.bind(6, blob: row.mac)
                            try upsert.bind(7, int: row.created.isKnown ? 1 : 0)
                            try upsert.run(db)
                        case .delete:
                            try delete.bind(1, id: index)
                            try delete.run(db)
                        }
                    }
                    guard let next = try Int64.fetchOne(db.cachedStatement(sql: KeychainSchema.bumpGenerationSQL)) else {
                        throw KeychainError.corrupted("\(path) has no generation counter in keychain_meta")
                    }
                    start = next - 1
                    return .commit
                }
                return start
            }
        } catch {
            let mapped = KeychainSchema.map(error, path: path)
            lock.withLock {
                for (index, change) in inFlight where pending[index] == nil { pending[index] = change }
                inFlight = [:]
                lastWriteError = mapped
                scheduleLocked(after: .milliseconds(250))
            }
            throw mapped
        }
        defer { checkpointIfDue() }
        // The committed batch is released after the lock is let go (freeing a large batch takes a while).
        let committed: [ItemID: PendingChange] = lock.withLock {
            lastWriteError = nil
            if knownGeneration < startGeneration {
                cache.removeAll(keepingCapacity: true)
                dropIDSetsLocked()
            }
            if knownGeneration <= startGeneration + 1 {
                knownGeneration = startGeneration + 1
                // Cached rows are brought up to date; rows not cached stay uncached (the next read
                // fetches them), so a large batch does not grow the cache by its whole size under
                // the lock.
                if !idSets.isEmpty {
                    for (index, change) in inFlight {
                        let group = GroupID(index)
                        guard idSets[group] != nil else { continue }
                        switch change {
                        case .delete: if idSets[group]!.remove(index) != nil { idSetTotal -= 1 }
                        case .put: if idSets[group]!.insert(index).inserted { idSetTotal += 1 }
                        }
                    }
                }
                if !cache.isEmpty {
                    for (index, change) in inFlight {
                        guard let old = cache[index] else { continue }
                        switch change {
                        case .delete: cache[index] = nil
                        case .put(var row):
                            if !row.created.isKnown { row.created = old.created }
                            cache[index] = row
                        }
                    }
                }
            } else {
                for index in inFlight.keys { cache[index] = nil }
                dropIDSetsLocked()
            }
            defer { inFlight = [:] }
            return inFlight
        }
        _ = committed
    }

    /// Copies committed WAL frames into the database (a passive checkpoint) at most once a second,
    /// as a separate job on `writeQueue`, so that the WAL stays small without a commit (or a
    /// flush) paying for the copy. Runs on `writeQueue` only.
    private func checkpointIfDue() {
        let now = DispatchTime.now().uptimeNanoseconds
        guard !checkpointScheduled, now - lastCheckpoint >= 1_000_000_000 else { return }
        checkpointScheduled = true
        writeQueue.async { [self] in
            checkpointScheduled = false
            lastCheckpoint = DispatchTime.now().uptimeNanoseconds
            guard !lock.withLock({ closed }) else { return }
            _ = try? writer.inDatabase { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
        }
    }

    /// Commits every pending write now and returns once it is durable (the commit ran with
    /// `synchronous=FULL`, so the WAL was synced to disk).
    /// - Throws: The database errors of the commit; the writes stay pending and are retried.
    /// - Throws: ``KeychainError/closed(path:)`` after ``close()``.
    func flush() throws {
        try checkOpen()
        try writeQueue.sync {
            try commitOnWriteQueue()
        }
    }

    /// Commits the pending writes durably, then closes the connections and drops the rows held
    /// in memory. Afterwards every operation throws ``KeychainError/closed(path:)``; closing
    /// again does nothing.
    /// - Throws: The error of the final commit; the connections are closed regardless.
    func close() throws {
        if lock.withLock({ closed }) { return }
        let result = Result { try flush() }
        try writeQueue.sync {
            lock.withLock {
                closed = true
                cache.removeAll()
            }
            do {
                try writer.close()
                try reader.close()
            } catch {
                throw KeychainSchema.map(error, path: path)
            }
        }
        try result.get()
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

    private func checkOpenLocked() throws {
        if closed { throw KeychainError.closed(path: path) }
    }

    /// Throws ``KeychainError/closed(path:)`` once ``close()`` has run.
    func checkOpen() throws {
        try lock.withLock { try checkOpenLocked() }
    }

    /// The number of writes not yet committed.
    var pendingWriteCount: Int { lock.withLock { pending.count + inFlight.count } }

    /// The error of the last background commit, if it failed (the writes stay pending).
    var lastBackgroundError: KeychainError? { lock.withLock { lastWriteError } }
}
