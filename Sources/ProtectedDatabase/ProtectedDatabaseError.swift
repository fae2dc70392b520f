import Foundation
import ProtectedFiles

/// Everything a protected database can fail with; each message says what to do.
public enum ProtectedDatabaseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The database's class key is not available now (the vault is locked, or has not been
    /// unlocked since the process started), or the vault locked while a
    /// `FileProtection.complete` database was open: its connections refuse every read and
    /// write from then on; open it again after the next unlock.
    case locked(path: String, FileProtectionClass)
    /// A page, the WAL or the key record does not authenticate: the data directory was
    /// written by someone without the key (or the disk is damaged).
    case tampered(path: String, reason: String)
    /// The key record next to the database belongs to another database (or another version
    /// of this one): it was swapped or rolled back.
    case keyMismatch(path: String)
    /// The database is of another class than the application expects (a key record of a
    /// weaker class was put in its place, or the class was never changed).
    case classMismatch(path: String, expected: FileProtectionClass, found: FileProtectionClass)
    /// There is no database (or no key record) at the path.
    case notFound(path: String)
    /// A database or its key record exists at the path already.
    case exists(path: String)
    /// The file is not a database in this format (page size, reserve, SQLite header).
    case notProtectedDatabase(path: String, reason: String)
    /// The database was closed (or revoked) and cannot be used.
    case closed(path: String)
    /// The key record failed as a protected file (its message says what to do).
    case protectedFile(ProtectedFileError)
    /// SQLite failed (the code and message are SQLite's).
    case sqlite(code: Int32, message: String)
    /// The disk is full: nothing was changed (the database is as it was before the failed
    /// statement). Free space, then run the operation again.
    case diskFull(path: String)
    /// An argument is not acceptable.
    case invalidArgument(String)
    /// A file operation failed.
    case io(String)

    public var description: String {
        switch self {
        case let .locked(path, cls):
            return "\(path) is a \(cls.name) database and its class key is not available now: unlock the vault, then open it again"
        case let .tampered(path, reason):
            return "\(path) was modified or damaged: \(reason); restore the database and its key record from a backup"
        case let .keyMismatch(path):
            return "the key record \(ProtectedDatabase.keyPath(for: path)) does not belong to \(path) (it was replaced, swapped or rolled back); restore both from the same backup"
        case let .classMismatch(path, expected, found):
            return "\(path) is of class \(found.name), but \(expected.name) was expected; if the change is wanted, run `securefoundation db upgrade \(path) --from \(found.name) --to \(expected.name)`, otherwise restore its key record from a backup"
        case let .notFound(path):
            return "no protected database at \(path) (or its key record \(ProtectedDatabase.keyPath(for: path)) is missing); create one with `securefoundation db create \(path)`"
        case let .exists(path):
            return "\(path) exists already; pick another path or remove the database and its key record first"
        case let .notProtectedDatabase(path, reason):
            return "\(path) is not a protected database: \(reason)"
        case let .closed(path):
            return "\(path) was closed; open it again"
        case let .protectedFile(error):
            return "\(error)"
        case let .sqlite(code, message):
            return "SQLite error \(code): \(message)"
        case let .diskFull(path):
            return "the disk holding \(path) is full; nothing was changed: free space, then run the operation again"
        case let .invalidArgument(why):
            return "invalid argument: \(why)"
        case let .io(why):
            return why
        }
    }
}

extension ProtectedDatabaseError {
    /// `error` as a protected-database error with the message it prints today: itself when it
    /// is one; a protected file's error becomes ``protectedFile(_:)``; anything else from below
    /// (a random-generator `CipherError`) becomes ``io(_:)`` with its own message. SQLite's
    /// errors are mapped before this (`mapSQLite`).
    static func mapping(_ error: any Error) -> ProtectedDatabaseError {
        switch error {
        case let error as ProtectedDatabaseError: return error
        case let error as ProtectedFileError: return .protectedFile(error)
        default: return .io("\(error)")
        }
    }
}
