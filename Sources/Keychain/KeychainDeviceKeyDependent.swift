import Foundation
import Crypto
import GRDB
import Cipher
import Vault

/// A ``DeviceBoundKeys`` as a keychain key source: its class keys, and its blind-index key
/// (the device sub-key "keychain blind index v1" of its device key).
extension DeviceBoundKeys: KeychainKeySource {
    /// The device sub-key "keychain blind index v1".
    /// - Returns: The key (the caller wipes it).
    /// - Throws: Nothing in this conformance (the protocol allows a source to).
    public func blindIndexKey() throws(KeychainError) -> SecretBytes {
        deviceSubkey(purpose: Keychain.blindIndexPurpose)
    }
}

extension Keychain {
    /// The purpose of the blind-index device sub-key.
    static let blindIndexPurpose = "keychain blind index v1"
}

/// One keychain database as a dependent of the device key: its blind indexes (every item id),
/// its row MACs and index-key check (under the blind-index key, a device sub-key), and its
/// thisDeviceOnly items (sealed under class keys bound to the device key).
///
/// Re-keying rewrites every row in ONE SQLite transaction (read and re-sealed in batches of
/// ``batchSize`` rows), with `secure_delete` on; then the file is rebuilt (`VACUUM`) and the log
/// truncated, so the file holds the rows under the old key or under the new one, never both,
/// and the old rows' bytes remain nowhere in it. `secure_delete` alone is not enough: it zeroes
/// deleted cells and freed pages, but when SQLite rebalances a page it leaves the bytes of
/// cells it moved in the page's unused gap (in a measured 4 % of 600-item re-keyings, a whole
/// old record survived that way). The `index_key_check` value tells which key the file is
/// under, so a resumed rotation skips a keychain already done. No other process may have the
/// keychain open meanwhile (it would keep the old blind-index key).
package struct KeychainDeviceKeyDependent: DeviceKeyDependent {
    /// The database file.
    package let path: String
    package var description: String { path }
    /// Rows read and re-sealed per batch (all batches commit together).
    static let batchSize = 256

    /// How long the log may stay held by another connection after the rows were re-keyed
    /// before the rotation stops with an error (it is then finished with `--resume`).
    package var logWait: Double = 30

    package init(path: String) { self.path = path }

    /// The keychains of a home: `HOME/keychain.sqlite` and `HOME/*/keychain.sqlite` (no symlinks).
    /// - Parameter home: The vault's data directory.
    /// - Returns: One dependent per keychain file found.
    package static func keychains(in home: String) -> [KeychainDeviceKeyDependent] {
        var found: [String] = []
        func isFile(_ path: String) -> Bool { (try? FileCalls.linkStatus(path))?.isRegularFile == true }
        if isFile(home + "/keychain.sqlite") { found.append(home + "/keychain.sqlite") }
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: home)) ?? []).sorted() where !name.hasPrefix(".") {
            guard (try? FileCalls.linkStatus(home + "/" + name))?.kind == .directory else { continue }
            if isFile(home + "/" + name + "/keychain.sqlite") { found.append(home + "/" + name + "/keychain.sqlite") }
        }
        return found.map { KeychainDeviceKeyDependent(path: $0) }
    }

    package func rekey(from old: DeviceBoundKeys, to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRekeyResult {
        let oldIndex = try old.blindIndexKey(), newIndex = try new.blindIndexKey()
        defer { oldIndex.wipe(); newIndex.wipe() }
        let oldMAC = HMAC<SHA256>(key: oldIndex.symmetricKey), newMAC = HMAC<SHA256>(key: newIndex.symmetricKey)
        let newCheck = ItemCodec.indexKeyCheck(format: KeychainSchema.formatVersion, key: newIndex.symmetricKey)

        var (format, stored) = try readCheck()
        if ConstantTime.equals(Array(stored), Array(newCheck)) {
            // Done before, perhaps up to the rebuild or the log (stopped there, or a reader kept
            // it then): rebuild and empty it now.
            do {
                try open().inDatabase { db in try scrub(db) }
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainSchema.map(error, path: path)
            }
            return DeviceKeyRekeyResult(description: path, rekeyed: 0, alreadyNew: try count())
        }
        guard ConstantTime.equals(Array(stored), Array(ItemCodec.indexKeyCheck(format: format, key: oldIndex.symmetricKey))) else {
            throw KeychainError.keyUnavailable("\(path) is under neither the old nor the new device key's blind-index key; it belongs to another vault or device key, so it was left alone")
        }
        if format != KeychainSchema.formatVersion {
            // An older format: opening it with the old keys upgrades it first.
            let keychain = try Keychain(directory: SecureFile.directoryOf(path), keySource: old,
                                        configuration: { var c = Keychain.Configuration(); c.fileName = (path as NSString).lastPathComponent; return c }())
            try keychain.close()
            (format, stored) = try readCheck()
            guard format == KeychainSchema.formatVersion else { throw KeychainError.corrupted("\(path) kept keychain format \(format) after its upgrade") }
        }

        let queue = try open()
        var rekeyed = 0
        var unreadable: [String] = []
        do {
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA secure_delete = ON")
                try db.inTransaction(.immediate) {
                    guard let id = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'keychain_id'"), id.count == 16 else {
                        throw KeychainError.corrupted("\(path) has no valid keychain_id in keychain_meta")
                    }
                    let keychainID = Array(id)
                    let ids = try Data.fetchAll(db, sql: "SELECT item_id FROM keychain_items ORDER BY item_id")
                    var start = 0
                    while start < ids.count {
                        let batch = ids[start..<min(start + Self.batchSize, ids.count)]
                        start += batch.count
                        var rows: [(old: Data, new: StoredRow)] = []
                        for idData in batch {
                            do {
                                guard let raw = try GRDB.Row.fetchOne(db, sql: KeychainSchema.selectOneSQL, arguments: [idData]) else { continue }
                                let row = try KeychainSchema.row(from: raw)
                                rows.append((idData, try rekeyRow(row, keychainID: keychainID, old: old, new: new, oldMAC: oldMAC, newMAC: newMAC)))
                            } catch let error as KeychainError {
                                guard case .corrupted = error else { throw error }
                                unreadable.append(Encoding.hex(Array(idData)))
                            }
                        }
                        for (oldID, row) in rows {
                            try db.execute(sql: KeychainSchema.deleteSQL, arguments: [oldID])
                            try Self.insert(row, in: db)
                        }
                        rekeyed += rows.count
                        try step("keychain batch")
                    }
                    try Self.markKeyed(db, check: newCheck)
                    return .commit
                }
                // The old rows' cells are zeroed (secure_delete), but copies of some may remain in
                // the unused gaps of rebalanced pages: rebuild the file, then empty the log.
                try scrub(db)
            }
        } catch let error as DatabaseError {
            throw KeychainSchema.map(error, path: path)
        }
        try step("keychain committed")
        return DeviceKeyRekeyResult(description: path, rekeyed: rekeyed, unreadable: unreadable)
    }

    /// One row under the new keys: its MAC checked and its record opened under the old keys,
    /// its names read back to compute its new id, its record sealed again for that id.
    func rekeyRow(_ row: StoredRow, keychainID: [UInt8], old: DeviceBoundKeys, new: DeviceBoundKeys,
                  oldMAC: HMAC<SHA256>, newMAC: HMAC<SHA256>) throws -> StoredRow {
        let label = "the item with id \(Encoding.hex(row.id.bytes.prefix(9)))"
        let expected = ItemCodec.rowMAC(keychain: keychainID, id: row.id, accessibility: row.accessibility, sealed: row.sealed, prototype: oldMAC)
        guard ConstantTime.equals(expected, row.mac) else { throw KeychainError.corrupted("\(label) failed its class binding check") }
        let accessibility = try ItemCodec.accessibility(code: Int64(row.accessibility))
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { throw KeychainError.corrupted("\(label) has an unknown item class") }
        let keys = try Self.sealingKeys(old, accessibility)
        defer { keys.forEach { $0.key.wipe() } }
        var plain: [UInt8]
        do {
            plain = try Sealed.open(row.sealed, with: try Keyring(keys), context: ItemCodec.itemContext(accessibility: row.accessibility, id: row.id))
        } catch {
            throw KeychainError.corrupted("\(label) does not open under the old keys (\(error))")
        }
        defer { ItemCodec.zero(&plain) }
        let (names, _) = try ItemCodec.splitItem(plain)
        let (key, _, _) = try ItemCodec.decodeNames(plain[names], itemClass: itemClass)
        guard Self.itemID(key, under: oldMAC) == row.id else { throw KeychainError.corrupted("\(label): its names do not match its id") }
        let sealing = try SealingKey(key: try new.classKeyCopy(for: accessibility))
        defer { sealing.key.wipe() }
        return try Self.resealed(row, plain: plain, key: key, sealing: sealing, keychainID: keychainID, newMAC: newMAC)
    }

    /// Inserts a re-keyed row.
    static func insert(_ row: StoredRow, in db: Database) throws {
        try db.execute(sql: "INSERT INTO keychain_items (item_id, accessibility, sealed, created, modified, row_mac) VALUES (?, ?, ?, ?, ?, ?)",
                       arguments: [row.id.data, Int64(row.accessibility), Data(row.sealed), row.created.seconds, row.modified, Data(row.mac)])
    }

    /// Records that every row is under the blind-index key of `check`, as the last write of the transaction.
    static func markKeyed(_ db: Database, check: Data) throws {
        try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'index_key_check'", arguments: [check])
        _ = try Int64.fetchOne(db, sql: KeychainSchema.bumpGenerationSQL)
    }

    /// The current and retired keys of `accessibility` in `keys`, current first, each once.
    static func sealingKeys(_ keys: DeviceBoundKeys, _ accessibility: Accessibility) throws -> [SealingKey] {
        var ring = [try SealingKey(key: try keys.classKeyCopy(for: accessibility))]
        for raw in keys.retiredClassKeys(for: accessibility) {
            guard let key = try? SealingKey(key: raw), !ring.contains(where: { $0.id == key.id }) else { raw.wipe(); continue }
            ring.append(key)
        }
        return ring
    }

    /// The id of the item named `key` under the blind-index MAC `mac`.
    static func itemID(_ key: ItemKey, under mac: HMAC<SHA256>) -> ItemID {
        ItemID(itemClass: key.itemClass.rawValue,
               group: ItemCodec.mac16(ItemCodec.serviceIndexInput(itemClass: key.itemClass, name: key.groupName), prototype: mac),
               name: ItemCodec.mac16(ItemCodec.nameIndexInput(key), prototype: mac))
    }

    /// `row`'s record `plain` (its names `key`) under its id for `newMAC`, sealed with `sealing`, with its new row MAC.
    static func resealed(_ row: StoredRow, plain: [UInt8], key: ItemKey, sealing: SealingKey, keychainID: [UInt8],
                         newMAC: HMAC<SHA256>) throws -> StoredRow {
        let newID = itemID(key, under: newMAC)
        let sealed: [UInt8]
        do {
            sealed = try Sealed.seal(plain, with: sealing, context: ItemCodec.itemContext(accessibility: row.accessibility, id: newID))
        } catch {
            throw KeychainError.keyUnavailable("sealing failed: \(error)")
        }
        return StoredRow(id: newID, accessibility: row.accessibility, sealed: sealed, created: row.created, modified: row.modified,
                         mac: ItemCodec.rowMAC(keychain: keychainID, id: newID, accessibility: row.accessibility, sealed: sealed, prototype: newMAC))
    }

    func open() throws -> DatabaseQueue {
        var config = GRDB.Configuration()
        config.busyMode = .timeout(max(0.1, logWait))
        config.label = "securefoundation.keychain.rekey"
        do {
            try SecureFile.checkPrivate(path, isDirectory: false)
            let queue = try DatabaseQueue(path: path, configuration: config)
            try queue.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            return queue
        } catch let failure as SecureFile.Failure {
            throw KeychainError.fromFile(failure, path: path)
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    /// Rebuilds the database (`VACUUM`: every page written afresh from the live rows, the
    /// temporary copy in memory, not in a temporary file), then empties the log
    /// (``truncateLog(_:)``). Nothing of a row deleted earlier remains in the file afterwards.
    func scrub(_ db: Database) throws {
        try db.execute(sql: "PRAGMA temp_store = MEMORY")
        do {
            // The connection's busy timeout (``logWait``) already waits for another
            // connection's lock.
            try db.execute(sql: "VACUUM")
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            throw KeychainError.database("\(path): another program has this keychain open, so the copies of the rows under the old device key could not be cleared from it; close that program, then finish with `vault rotate-device-key --resume`")
        }
        try truncateLog(db)
    }

    /// Copies the log into the file and empties it (`wal_checkpoint(TRUNCATE)`). Until that has
    /// completed, the old rows' pages are still in the file or the log: a reader or a checkpoint of
    /// another connection makes SQLite report the checkpoint as busy, so it is tried again for a
    /// bounded time and then refused with what to do, never passed over.
    func truncateLog(_ db: Database) throws {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, logWait) * 1e9)
        for _ in 0..<1000 {
            // busy, log frames, frames checkpointed: busy 0 means the log was copied and emptied.
            do {
                if let row = try GRDB.Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)"), (row[0] as Int64?) == 0 { return }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
                // As busy: tried again until the deadline.
            }
            guard DispatchTime.now().uptimeNanoseconds < deadline else { break }
            usleep(50_000)
        }
        throw KeychainError.database("\(path): another program has this keychain open, so its log still holds the rows under the old device key; close that program, then finish with `vault rotate-device-key --resume`")
    }

    func readCheck() throws -> (format: Int64, check: Data) {
        let queue = try open()
        do {
            return try queue.inDatabase { db in
                guard let format = try Int64.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'format'"),
                      let check = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'") else {
                    throw KeychainError.corrupted("\(path) has no keychain format or index-key check")
                }
                return (format, check)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }

    func count() throws -> Int {
        do {
            return try open().inDatabase { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_items") ?? 0 }
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
    }
}
