import Foundation
import Crypto
import GRDB
import Cipher
import Vault

extension KeychainDeviceKeyDependent {
    /// Re-binds the keychain to `new` when the old device key is lost (``DeviceKeyRebinding``).
    ///
    /// In ONE SQLite transaction, with `secure_delete` on: every row of a thisDeviceOnly class is
    /// removed (its record opens only under the lost key) and named by its id and class; every
    /// other row is opened under its class key (current or retired), its names read back give
    /// its new id under the new blind-index key, and it is sealed again for that id with a new
    /// row MAC. The old row MACs cannot be checked (they are under the lost key): a row of the
    /// class `always` (whose key lies in the data directory) is re-bound but reported as
    /// unverified, and gives way to a row of a stronger class with the same names. Then the file
    /// is rebuilt and its log emptied, as in a rotation. A keychain already under `new` (its
    /// index-key check) is left alone.
    /// - Parameters:
    ///   - new: The keys bound to the new device key.
    ///   - step: Called at each batch and at the commit.
    /// - Returns: What was re-bound, left behind and re-bound without a check.
    /// - Throws: ``KeychainError`` for the file; what `step` throws.
    package func rebind(to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRebindResult {
        let newIndex = try new.blindIndexKey()
        defer { newIndex.wipe() }
        let newMAC = HMAC<SHA256>(key: newIndex.symmetricKey)
        let newCheck = ItemCodec.indexKeyCheck(format: KeychainSchema.formatVersion, key: newIndex.symmetricKey)
        let (format, stored) = try readCheck()
        if ConstantTime.equals(Array(stored), Array(newCheck)) {
            do {
                try open().inDatabase { db in try scrub(db) }
            } catch let error as KeychainError {
                throw error
            } catch {
                throw KeychainSchema.map(error, path: path)
            }
            return DeviceKeyRebindResult(description: path, rebound: 0, alreadyNew: try count())
        }
        guard format == KeychainSchema.formatVersion else {
            throw KeychainError.corrupted("\(path) is in keychain format \(format); without its old device key only format \(KeychainSchema.formatVersion) can be re-bound: open it once with the version and the device key that wrote it, or restore it from a backup")
        }
        var result = DeviceKeyRebindResult(description: path, rebound: 0)
        let queue = try open()
        do {
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA secure_delete = ON")
                try db.inTransaction(.immediate) {
                    guard let id = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'keychain_id'"), id.count == 16 else {
                        throw KeychainError.corrupted("\(path) has no valid keychain_id in keychain_meta")
                    }
                    let keychainID = Array(id)
                    // Rows of the always class last: a row of a stronger class with the same
                    // names is kept before them.
                    let ids = try GRDB.Row.fetchAll(db, sql: "SELECT item_id, accessibility FROM keychain_items ORDER BY (accessibility & 15) = 3, item_id")
                        .compactMap { row -> Data? in row[0] as Data? }
                    var taken = Set<Data>()
                    var start = 0
                    while start < ids.count {
                        let batch = ids[start..<min(start + Self.batchSize, ids.count)]
                        start += batch.count
                        for idData in batch {
                            guard let raw = try GRDB.Row.fetchOne(db, sql: KeychainSchema.selectOneSQL, arguments: [idData]) else { continue }
                            let row: StoredRow
                            do {
                                row = try KeychainSchema.row(from: raw)
                            } catch let error as KeychainError {
                                guard case .corrupted = error else { throw error }
                                result.unreadable.append(Encoding.hex(Array(idData)))
                                continue
                            }
                            let label = "item \(Encoding.hex(row.id.bytes.prefix(9)))"
                            guard let accessibility = try? ItemCodec.accessibility(code: Int64(row.accessibility)) else {
                                result.unreadable.append(label)
                                continue
                            }
                            if accessibility.thisDeviceOnly {
                                result.leftBehind.append("\(label) (\(accessibility.name))")
                                try db.execute(sql: KeychainSchema.deleteSQL, arguments: [idData])
                                continue
                            }
                            guard let (next, key) = try? rebindRow(row, accessibility: accessibility, keychainID: keychainID, new: new, newMAC: newMAC) else {
                                result.unreadable.append(label)
                                continue
                            }
                            try db.execute(sql: KeychainSchema.deleteSQL, arguments: [idData])
                            let nextID = next.id.data
                            guard taken.insert(nextID).inserted else {
                                result.unverified.append("\(key) (\(accessibility.name)): removed, a row of a stronger class has the same names")
                                continue
                            }
                            try Self.insert(next, in: db)
                            if accessibility.protectionClass == .always { result.unverified.append("\(key) (\(accessibility.name))") }
                            result.rebound += 1
                        }
                        try step("keychain batch")
                    }
                    try Self.markKeyed(db, check: newCheck)
                    return .commit
                }
                try scrub(db)
            }
        } catch let error as DatabaseError {
            throw KeychainSchema.map(error, path: path)
        }
        try step("keychain committed")
        return result
    }

    /// One row opened under its class key (no MAC check: it is under the lost key), with its
    /// new id, record and MAC under `new`; and its names.
    func rebindRow(_ row: StoredRow, accessibility: Accessibility, keychainID: [UInt8], new: DeviceBoundKeys,
                   newMAC: HMAC<SHA256>) throws -> (StoredRow, ItemKey) {
        guard let itemClass = ItemClass(rawValue: row.itemClass) else { throw KeychainError.corrupted("an unknown item class") }
        let keys = try Self.sealingKeys(new, accessibility)
        defer { keys.forEach { $0.key.wipe() } }
        var plain = try Sealed.open(row.sealed, with: try Keyring(keys), context: ItemCodec.itemContext(accessibility: row.accessibility, id: row.id))
        defer { ItemCodec.zero(&plain) }
        let (names, _) = try ItemCodec.splitItem(plain)
        let (key, _, _) = try ItemCodec.decodeNames(plain[names], itemClass: itemClass)
        return (try Self.resealed(row, plain: plain, key: key, sealing: keys[0], keychainID: keychainID, newMAC: newMAC), key)
    }
}
