import Foundation
import GRDB
import Cipher
#if canImport(GRDBSQLite)
import GRDBSQLite
#else
import SQLite3
#endif

/// One row of the `keychain_items` table, as held in memory.
struct StoredRow: Sendable {
    var id: ItemID
    var accessibility: UInt8
    /// The sealed-data envelope of the item record (names and secret).
    var sealed: [UInt8]
    /// Seconds since 1970; nil when the database keeps the stored creation date (an update of an
    /// item this process has not read).
    var created: Double?
    var modified: Double

    var itemClass: UInt8 { id.itemClass }
}

/// A change waiting for the background writer.
enum PendingChange: Sendable {
    case put(StoredRow)
    case delete
}

/// The SQL side of the keychain: schema, statements, and the mapping of SQLite errors.
enum KeychainSchema {
    static let formatVersion: Int64 = 2

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
            modified REAL NOT NULL
        ) WITHOUT ROWID
        """,
    ]

    static let upsertSQL = """
        INSERT INTO keychain_items (item_id, accessibility, sealed, created, modified) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (item_id) DO UPDATE SET
            accessibility = excluded.accessibility, sealed = excluded.sealed, modified = excluded.modified
        """
    static let deleteSQL = "DELETE FROM keychain_items WHERE item_id = ?"
    static let selectColumns = "item_id, accessibility, sealed, created, modified"
    static let selectOneSQL = "SELECT \(selectColumns) FROM keychain_items WHERE item_id = ?"
    static let existsSQL = "SELECT 1 FROM keychain_items WHERE item_id = ?"
    static let selectRangeIDsSQL = "SELECT item_id FROM keychain_items WHERE item_id BETWEEN ? AND ? LIMIT ?"
    static let selectRangeSQL = "SELECT \(selectColumns) FROM keychain_items WHERE item_id BETWEEN ? AND ?"
    static let generationSQL = "SELECT value FROM keychain_meta WHERE key = 'generation'"
    /// Counts a commit and returns the new generation (one statement, inside the commit).
    static let bumpGenerationSQL = "UPDATE keychain_meta SET value = value + 1 WHERE key = 'generation' RETURNING value"

    static func row(from row: GRDB.Row) throws -> StoredRow {
        guard let idData = row[0] as Data?, let accessibility = row[1] as Int64?, let sealed = row[2] as Data?,
              let created = row[3] as Double?, let modified = row[4] as Double?,
              let accessByte = UInt8(exactly: accessibility), let id = ItemID(idData) else {
            throw KeychainError.corrupted("a keychain_items row has a missing or mistyped column")
        }
        return StoredRow(id: id, accessibility: accessByte, sealed: Array(sealed), created: created, modified: modified)
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

/// Runs a statement that GRDB prepared and caches, binding its parameters with the SQLite C API.
///
/// Used on the background writer's per-row path only: GRDB's `StatementArguments` box every value
/// in an existential array and copy every blob into a `Data`, which measured over a third of a
/// large commit's time. GRDB still owns the connection, the transaction and the statement; the
/// statement is left reset with its parameters cleared, as GRDB expects to find it.
struct DirectStatement {
    private let statement: Statement
    private let handle: SQLiteStatement

    init(_ statement: Statement) {
        self.statement = statement
        self.handle = statement.sqliteStatement
    }

    /// SQLITE_TRANSIENT: SQLite copies the bytes before the bind call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ index: Int32, id: ItemID) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: ItemID.size) { buffer in
            id.write(to: UnsafeMutableRawBufferPointer(buffer))
            _ = sqlite3_bind_blob(handle, index, buffer.baseAddress, Int32(ItemID.size), DirectStatement.transient)
        }
    }

    func bind(_ index: Int32, blob: [UInt8]) {
        blob.withUnsafeBytes { bytes in
            // A zero-length blob still needs a non-null pointer, or SQLite binds NULL.
            let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
            _ = sqlite3_bind_blob(handle, index, base, Int32(bytes.count), DirectStatement.transient)
        }
    }

    func bind(_ index: Int32, int: Int64) { _ = sqlite3_bind_int64(handle, index, int) }

    func bind(_ index: Int32, double: Double) { _ = sqlite3_bind_double(handle, index, double) }

    /// Steps the statement to completion (it returns no rows), then resets it and clears its
    /// parameters; a failure is thrown as GRDB's `DatabaseError`.
    func run(_ db: Database) throws {
        let code = sqlite3_step(handle)
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        guard code == SQLITE_DONE else {
            let message = db.sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }
}
