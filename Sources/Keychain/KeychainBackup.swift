import Foundation
import Crypto
import GRDB
import Cipher
import Vault
#if canImport(GRDBSQLite)
import GRDBSQLite
#else
import SQLite3
#endif

/// A keychain as it goes into a backup (docs/FORMATS.md, "Backup").
package struct KeychainBackupCopy: Sendable {
    /// The database file's bytes: every row that verified, none of a thisDeviceOnly class.
    package var bytes: [UInt8]
    /// The thisDeviceOnly items left out, each named (its service and account, when its class
    /// key could open it, else its id) with its class.
    package var leftBehind: [(name: String, accessibility: String)]
    /// Rows left out because their class binding did not verify (damaged or planted).
    package var damaged: [String]
    /// Items copied.
    package var items: Int
}

extension KeychainDeviceKeyDependent {
    /// A consistent copy of the keychain for a backup, taken while other connections write
    /// (SQLite's backup API copies one snapshot into memory; nothing is written to disk). Every
    /// row's class binding is checked under `indexKey`, the blind-index key of this device: a
    /// row that does not verify is left out and named. Rows of the thisDeviceOnly classes are
    /// left out and named (through `names`, which opens them when their class key is at hand).
    /// The copy is rebuilt (`VACUUM`) so no byte of a removed row remains in it.
    /// - Parameters:
    ///   - indexKey: The keychain's blind-index key on this device.
    ///   - names: The keys of a thisDeviceOnly class (current first), or empty when unavailable.
    /// - Returns: The copy.
    /// - Throws: ``KeychainError`` for the file.
    package func backupCopy(indexKey: SecretBytes, names: (Accessibility) -> [SecretBytes]) throws -> KeychainBackupCopy {
        let mac = HMAC<SHA256>(key: indexKey.symmetricKey)
        var copy = KeychainBackupCopy(bytes: [], leftBehind: [], damaged: [], items: 0)
        do {
            try SecureFile.checkPrivate(path, isDirectory: false)
        } catch let failure {
            throw KeychainError.fromFile(failure, path: path)
        }
        do {
            var config = GRDB.Configuration()
            config.busyMode = .timeout(10)
            config.label = "securefoundation.keychain.backup"
            let source = try DatabaseQueue(path: path, configuration: config)
            let memory = try DatabaseQueue()
            try source.backup(to: memory)
            try source.close()
            try memory.inDatabase { db in
                guard let stored = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'"),
                      let format = try Int64.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'format'") else {
                    throw KeychainError.corrupted("\(path) has no keychain format or index-key check")
                }
                guard format == KeychainSchema.formatVersion else {
                    throw KeychainError.corrupted("\(path) is in keychain format \(format); open it once with this version (which upgrades it), then back up")
                }
                guard ConstantTime.equals(Array(stored), Array(ItemCodec.indexKeyCheck(format: format, key: indexKey.symmetricKey))) else {
                    throw KeychainError.keyUnavailable("\(path) is not under this device key's blind-index key; it belongs to another vault or device key")
                }
                guard let id = try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'keychain_id'"), id.count == 16 else {
                    throw KeychainError.corrupted("\(path) has no valid keychain_id in keychain_meta")
                }
                let keychainID = Array(id)
                // Reinstall detection's marker is this installation's, not the data's.
                try db.execute(sql: "DELETE FROM keychain_meta WHERE key = 'install_id'")
                let rows = try GRDB.Row.fetchAll(db, sql: "SELECT \(KeychainSchema.selectColumns) FROM keychain_items ORDER BY item_id")
                var drop: [Data] = []
                for raw in rows {
                    let idData: Data = (raw[0] as Data?) ?? Data()
                    guard let row = try? KeychainSchema.row(from: raw) else {
                        copy.damaged.append("item \(Encoding.hex(Array(idData.prefix(9))))")
                        drop.append(idData)
                        continue
                    }
                    let label = "item \(Encoding.hex(row.id.bytes.prefix(9)))"
                    let expected = ItemCodec.rowMAC(keychain: keychainID, id: row.id, accessibility: row.accessibility, sealed: row.sealed, prototype: mac)
                    guard ConstantTime.equals(expected, row.mac), let accessibility = try? ItemCodec.accessibility(code: Int64(row.accessibility)) else {
                        copy.damaged.append(label)
                        drop.append(idData)
                        continue
                    }
                    if accessibility.thisDeviceOnly {
                        copy.leftBehind.append((name(of: row, accessibility: accessibility, keys: names(accessibility)) ?? label, accessibility.name))
                        drop.append(idData)
                        continue
                    }
                    copy.items += 1
                }
                try db.execute(sql: "PRAGMA secure_delete = ON")
                for idData in drop { try db.execute(sql: KeychainSchema.deleteSQL, arguments: [idData]) }
                try db.execute(sql: "VACUUM")
                var size: sqlite3_int64 = 0
                guard let pointer = sqlite3_serialize(db.sqliteConnection, "main", &size, 0) else {
                    throw KeychainError.database("\(path): the copy for the backup could not be serialized (SQLite \(sqlite3_errcode(db.sqliteConnection)))")
                }
                defer { sqlite3_free(pointer) }
                copy.bytes = Array(UnsafeRawBufferPointer(start: pointer, count: Int(size)))
            }
            try memory.close()
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainSchema.map(error, path: path)
        }
        return copy
    }

    /// An item's names (``ItemKey``) opened with `keys`, or nil. The keys are wiped.
    func name(of row: StoredRow, accessibility: Accessibility, keys: [SecretBytes]) -> String? {
        let ring = keys.compactMap { try? SealingKey(key: $0) }
        defer { keys.forEach { $0.wipe() }; ring.forEach { $0.key.wipe() } }
        guard let itemClass = ItemClass(rawValue: row.itemClass), let keyring = try? Keyring(ring),
              var plain = try? Sealed.open(row.sealed, with: keyring, context: ItemCodec.itemContext(accessibility: row.accessibility, id: row.id)) else { return nil }
        defer { ItemCodec.zero(&plain) }
        guard let (names, _) = try? ItemCodec.splitItem(plain), let (key, _, _) = try? ItemCodec.decodeNames(plain[names], itemClass: itemClass) else { return nil }
        return key.description
    }
}
