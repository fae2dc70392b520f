import Foundation
import GRDB
import Cipher

/// The SQL side of the keychain: schema, statements, and the mapping of SQLite errors.
enum KeychainSchema {
    /// Format 3 adds the `row_mac` column to format 2 (nothing else changed); a format-2 file is
    /// upgraded when it is opened (``addMACColumnSQL``, ``setMACSQL``).
    static let formatVersion: Int64 = 3

    static let createStatements = [
        """
        CREATE TABLE IF NOT EXISTS keychain_meta (
            key TEXT PRIMARY KEY NOT NULL,
            value BLOB NOT NULL
        ) WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS keychain_items (
            item_id BLOB PRIMARY KEY NOT NULL,
            accessibility INTEGER NOT NULL,
            sealed BLOB NOT NULL,
            created REAL NOT NULL,
            modified REAL NOT NULL,
            row_mac BLOB
        ) WITHOUT ROWID
        """,
    ]

    /// Format 2 to 3: the column of the class binding, filled in by the upgrade.
    static let addMACColumnSQL = "ALTER TABLE keychain_items ADD COLUMN row_mac BLOB"
    static let setMACSQL = "UPDATE keychain_items SET row_mac = ? WHERE item_id = ?"

    /// Parameters: id, accessibility, sealed, creation date, modification date, row MAC, and
    /// whether the creation date replaces the one of an existing row (1, ``CreationDate/at(_:)``)
    /// or is only that of a new row (0, ``CreationDate/storedOr(_:)``).
    static let upsertSQL = """
        INSERT INTO keychain_items (item_id, accessibility, sealed, created, modified, row_mac) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
        ON CONFLICT (item_id) DO UPDATE SET
            accessibility = excluded.accessibility, sealed = excluded.sealed, modified = excluded.modified,
            row_mac = excluded.row_mac, created = CASE WHEN ?7 THEN excluded.created ELSE keychain_items.created END
        """
    static let deleteSQL = "DELETE FROM keychain_items WHERE item_id = ?"
    /// A re-sealed record, written only where the row still holds the record that was read.
    static let resealSQL = "UPDATE keychain_items SET sealed = ?, row_mac = ? WHERE item_id = ? AND sealed = ?"
    static let selectColumns = "item_id, accessibility, sealed, created, modified, row_mac"
    static let selectOneSQL = "SELECT \(selectColumns) FROM keychain_items WHERE item_id = ?"
    static let existsSQL = "SELECT 1 FROM keychain_items WHERE item_id = ?"
    static let selectRangeIDsSQL = "SELECT item_id FROM keychain_items WHERE item_id BETWEEN ? AND ? LIMIT ?"
    static let selectRangeSQL = "SELECT \(selectColumns) FROM keychain_items WHERE item_id BETWEEN ? AND ?"
    static let selectAllSQL = "SELECT \(selectColumns) FROM keychain_items"
    static let generationSQL = "SELECT value FROM keychain_meta WHERE key = 'generation'"
    /// Counts a commit and returns the new generation (one statement, inside the commit).
    static let bumpGenerationSQL = "UPDATE keychain_meta SET value = value + 1 WHERE key = 'generation' RETURNING value"

    /// Decodes a row of ``selectColumns`` with the exact SQLite storage class of every column
    /// (GRDB's non-throwing accessors stop the process on a mistyped value): an id of 33 bytes, an
    /// integer accessibility code, a blob record, numeric dates and a 16-byte MAC.
    /// - Throws: ``KeychainError/corrupted(_:)`` naming the column, for any other value.
    static func row(from row: GRDB.Row) throws -> StoredRow {
        func value(_ index: Int) -> DatabaseValue.Storage {
            let value: DatabaseValue = row[index]
            return value.storage
        }
        func bad(_ column: String, _ storage: DatabaseValue.Storage, _ wanted: String) -> KeychainError {
            let found: String
            switch storage {
            case .null: found = "NULL"
            case .int64: found = "an integer"
            case .double: found = "a real number"
            case .string: found = "text"
            case .blob(let data): found = "a blob of \(data.count) bytes"
            }
            var which = ""
            if case .blob(let id) = value(0) { which = " (item id \(Encoding.hex(Array(id))))" }
            return KeychainError.corrupted("a keychain_items row\(which) has \(found) in its \(column) column where \(wanted) belongs; delete the item, or all of its service (or restore the file from a backup)")
        }
        func blob(_ index: Int, _ column: String, count: Int? = nil) throws -> Data {
            let storage = value(index)
            guard case .blob(let data) = storage, count.map({ data.count == $0 }) ?? true else {
                throw bad(column, storage, count.map { "a blob of \($0) bytes" } ?? "a blob")
            }
            return data
        }
        func date(_ index: Int, _ column: String) throws -> Double {
            switch value(index) {
            case .double(let number) where number.isFinite: return number
            case .int64(let number): return Double(number)
            case let other: throw bad(column, other, "a date (a number)")
            }
        }
        let idData = try blob(0, "item_id", count: ItemID.size)
        guard let id = ItemID(idData) else { throw bad("item_id", value(0), "a blob of \(ItemID.size) bytes") }
        guard case .int64(let code) = value(1), let accessibility = UInt8(exactly: code) else {
            throw bad("accessibility", value(1), "an accessibility code")
        }
        let sealed = try blob(2, "sealed")
        let created = try date(3, "created")
        let modified = try date(4, "modified")
        let mac = try blob(5, "row_mac", count: ItemCodec.rowMACSize)
        return StoredRow(id: id, accessibility: accessibility, sealed: Array(sealed), created: .at(created), modified: modified, mac: Array(mac))
    }

    /// What can be told of a row of ``selectColumns`` that ``row(from:)`` refused with `error`:
    /// its key (and item id, when it is one) and its accessibility code, each read on its own.
    static func undecoded(_ row: GRDB.Row, error: KeychainError) -> ItemStore.UndecodedRow {
        let key: DatabaseValue = row[0]
        let code: DatabaseValue = row[1]
        var accessibility: UInt8?
        if case .int64(let value) = code.storage { accessibility = UInt8(exactly: value) }
        switch key.storage {
        case .blob(let data):
            return ItemStore.UndecodedRow(key: Encoding.hex(Array(data)), id: ItemID(data), accessibility: accessibility, error: error)
        default:
            return ItemStore.UndecodedRow(key: key.description, id: nil, accessibility: accessibility, error: error)
        }
    }

    /// The file an I/O error of SQLite concerns, by extended code.
    private static func fileOf(_ extended: Int32, path: String) -> String? {
        switch extended {
        case 4874, 4618, 5386, 5130:   // SHMSIZE, SHMOPEN, SHMMAP, SHMLOCK
            return path + "-shm"
        case 778, 1034, 1290, 1546, 6154, 13:   // WRITE, FSYNC, DIR_FSYNC, TRUNCATE, MMAP, FULL
            return path + " (or its -wal log)"
        default:
            return nil
        }
    }

    /// Whether the file system of `path` has no block left for an unprivileged writer.
    static func fileSystemIsFull(_ path: String) -> Bool {
        var info = statvfs()
        guard statvfs(SecureFile.directoryOf(path), &info) == 0 else { return false }
        return info.f_bavail <= 2
    }

    private static func diskFull(_ error: DatabaseError, path: String, detail: String) -> KeychainError? {
        let extended = error.extendedResultCode.rawValue
        if error.resultCode == .SQLITE_FULL {
            return .diskFull(path: fileOf(extended, path: path) ?? path + " (or its -wal log)", detail: detail)
        }
        guard error.resultCode == .SQLITE_IOERR, let file = fileOf(extended, path: path), fileSystemIsFull(path) else { return nil }
        return .diskFull(path: file, detail: detail)
    }

    /// Maps a GRDB or SQLite error to a keychain error. A full disk is ``KeychainError/diskFull(path:detail:)``
    /// naming the file that could not grow: SQLite reports it as SQLITE_FULL, or, when its
    /// shared-memory index or a write of the log fails, as an I/O error whose extended code names
    /// the operation (4874 is "the -shm file could not be extended"); those count as a full disk
    /// when the file system has no free block left.
    static func map(_ error: any Error, path: String) -> KeychainError {
        if let error = error as? KeychainError { return error }
        if let error = error as? DatabaseError {
            let detail = "\(error.message ?? "SQLite error") (SQLite code \(error.extendedResultCode.rawValue))"
            if let full = diskFull(error, path: path, detail: detail) { return full }
            switch error.resultCode {
            case .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FORMAT:
                return .corrupted("\(path): \(detail)")
            case .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_AUTH:
                return .permissionDenied(path: path, detail: detail)
            default:
                return .database("\(path): \(detail)")
            }
        }
        return .database("\(path): \(error)")
    }
}
