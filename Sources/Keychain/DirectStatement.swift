import Foundation
import GRDB
import Cipher
#if canImport(GRDBSQLite)
import GRDBSQLite
#else
import SQLite3
#endif

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

    func bind(_ index: Int32, id: ItemID) throws {
        let code = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: ItemID.size) { buffer in
            id.write(to: UnsafeMutableRawBufferPointer(buffer))
            return sqlite3_bind_blob(handle, index, buffer.baseAddress, Int32(ItemID.size), DirectStatement.transient)
        }
        try check(code, binding: index)
    }

    func bind(_ index: Int32, blob: [UInt8]) throws {
        let code = blob.withUnsafeBytes { bytes in
            // A zero-length blob still needs a non-null pointer, or SQLite binds NULL.
            let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)
            return sqlite3_bind_blob(handle, index, base, Int32(bytes.count), DirectStatement.transient)
        }
        try check(code, binding: index)
    }

    func bind(_ index: Int32, int: Int64) throws { try check(sqlite3_bind_int64(handle, index, int), binding: index) }

    func bind(_ index: Int32, double: Double) throws { try check(sqlite3_bind_double(handle, index, double), binding: index) }

    /// A failed bind leaves the parameter NULL (a delete would then match nothing and succeed):
    /// it fails the commit instead.
    private func check(_ code: Int32, binding index: Int32) throws {
        guard code == SQLITE_OK else {
            sqlite3_clear_bindings(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "binding parameter \(index) failed", sql: statement.sql)
        }
    }

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
