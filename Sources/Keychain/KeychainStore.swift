import Foundation
import GRDB
import Cipher

/// One row of the `keychain_items` table, as held in memory.
struct StoredRow: Sendable {
    var nameIndex: BlindIndex
    var serviceIndex: BlindIndex
    var itemClass: UInt8
    var accessibility: UInt8
    var names: [UInt8]
    var value: [UInt8]
    /// Seconds since 1970; nil when the database keeps the stored creation date (an update of an
    /// item this process has not read).
    var created: Double?
    var modified: Double
}

/// A change waiting for the background writer.
enum PendingChange: Sendable {
    case put(StoredRow)
    case delete
}

/// The SQL side of the keychain: schema, statements, and the mapping of SQLite errors.
enum KeychainSchema {
    static let formatVersion: Int64 = 1

    static let createStatements = [
        """
        CREATE TABLE IF NOT EXISTS keychain_meta (
            key TEXT PRIMARY KEY NOT NULL,
            value BLOB NOT NULL
        ) WITHOUT ROWID
        """,
        """
        CREATE TABLE IF NOT EXISTS keychain_items (
            id INTEGER PRIMARY KEY,
            name_index BLOB NOT NULL UNIQUE,
            service_index BLOB NOT NULL,
            item_class INTEGER NOT NULL,
            accessibility INTEGER NOT NULL,
            names BLOB NOT NULL,
            value BLOB NOT NULL,
            created REAL NOT NULL,
            modified REAL NOT NULL
        )
        """,
        "CREATE INDEX IF NOT EXISTS keychain_items_by_service ON keychain_items (service_index)",
    ]

    static let upsertSQL = """
        INSERT INTO keychain_items (name_index, service_index, item_class, accessibility, names, value, created, modified)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (name_index) DO UPDATE SET
            service_index = excluded.service_index, item_class = excluded.item_class,
            accessibility = excluded.accessibility, names = excluded.names, value = excluded.value,
            modified = excluded.modified
        """
    static let deleteSQL = "DELETE FROM keychain_items WHERE name_index = ?"
    static let selectColumns = "name_index, service_index, item_class, accessibility, names, value, created, modified"
    static let selectOneSQL = "SELECT \(selectColumns) FROM keychain_items WHERE name_index = ?"
    static let generationSQL = "SELECT value FROM keychain_meta WHERE key = 'generation'"

    static func row(from row: GRDB.Row) throws -> StoredRow {
        guard let nameData = row[0] as Data?, let serviceData = row[1] as Data?,
              let itemClass = row[2] as Int64?, let accessibility = row[3] as Int64?,
              let names = row[4] as Data?, let value = row[5] as Data?,
              let created = row[6] as Double?, let modified = row[7] as Double?,
              let classByte = UInt8(exactly: itemClass), let accessByte = UInt8(exactly: accessibility),
              let nameIndex = BlindIndex(nameData), let serviceIndex = BlindIndex(serviceData) else {
            throw KeychainError.corrupted("a keychain_items row has a missing or mistyped column")
        }
        return StoredRow(nameIndex: nameIndex, serviceIndex: serviceIndex, itemClass: classByte, accessibility: accessByte,
                         names: Array(names), value: Array(value), created: created, modified: modified)
    }

    /// Maps a GRDB or SQLite error to a keychain error.
    static func map(_ error: any Error, path: String) -> KeychainError {
        if let error = error as? KeychainError { return error }
        if let error = error as? DatabaseError {
            let detail = "\(error.message ?? "SQLite error") (SQLite code \(error.extendedResultCode.rawValue))"
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
