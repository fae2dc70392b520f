import Foundation
import Crypto
import GRDB
import Cipher

// Reading rows (through the cache and the per-group id sets) and re-sealing them.
extension ItemStore {
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
    func validateCacheLocked(_ db: Database) throws {
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
    func inReadTransaction<T>(_ db: Database, _ body: () throws -> T) throws -> T {
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
    func loadIDSetLocked(_ group: GroupID, _ db: Database) throws {
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

    func dropIDSetsLocked() {
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

    func collectRows(sql: String, arguments: StatementArguments,
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
}
