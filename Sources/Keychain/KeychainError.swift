import Foundation
import Cipher
import Vault

/// Everything the keychain can fail with. Each case says why and, where it helps, what to do.
public enum KeychainError: Error, Sendable, CustomStringConvertible {
    /// No item matches. `item` describes what was looked for.
    case itemNotFound(String)
    /// An item with the same class, service and account (and server, protocol, port, path for
    /// internet passwords) exists already; use ``Keychain/update(_:with:)`` or
    /// ``Keychain/addOrUpdate(_:for:accessibility:label:comment:)`` instead.
    case duplicateItem(String)
    /// The class key of `accessibility` is unavailable, for `reason` (locked, no first unlock yet...).
    case interactionNotAllowed(Accessibility, ClassKeyUnavailableReason)
    /// Stored data failed its integrity check or does not parse: a flipped byte, rows swapped
    /// between items, a truncated database, or data written under another key.
    case corrupted(String)
    /// A file or directory cannot be read or written for lack of permission.
    case permissionDenied(path: String, detail: String)
    /// A file or directory is open to other users, owned by someone else, or not the expected type.
    case insecurePermissions(path: String, detail: String)
    /// An argument the operation does not accept.
    case invalidArgument(String)
    /// The stored value is not valid UTF-8 (asked for as a string).
    case notUTF8(String)
    /// The key source failed for a reason other than an unavailable class key.
    case keyUnavailable(String)
    /// The vault (the key source) failed, with its own typed error: a damaged, truncated or
    /// rolled-back key file (`always.key`, `vault.state`), a full disk while it wrote one, an
    /// erased vault. The vault's message says what to do.
    case vault(VaultError)
    /// The database failed (busy beyond the timeout, I/O error...).
    case database(String)
    /// A file call failed for another reason than permissions or a full disk: a legacy keychain
    /// file that is missing, or a directory where a file belongs. The file helper's own error,
    /// which names the call, the path and the system's reason.
    case file(SecureFile.Failure)
    /// The file system holding the keychain is full: `path` (the database, its write-ahead log
    /// `-wal` or its shared-memory index `-shm`) could not grow. Nothing was half-written: the
    /// transaction was rolled back, and writes not yet committed stay queued for a later flush.
    case diskFull(path: String, detail: String)
    /// A legacy keychain file could not be read.
    case legacyFormat(String)
    /// The item is stored under a weaker class than the caller requires (see
    /// `Accessibility.isAtLeast(_:)`): it was written that way, or its row was changed by
    /// someone who can write the keychain's directory. Its value is not returned.
    case accessibilityTooWeak(item: String, stored: Accessibility, required: Accessibility)
    /// The keychain at `path` was closed (``Keychain/close()``): every operation is refused at
    /// once, before any key is asked for and any file is touched. Open the keychain again to use it.
    case closed(path: String)
    /// Rows of the keychain file are damaged (a column of the wrong type or out of bounds, a
    /// failed class binding or integrity check, a key that is not an item id), so a listing
    /// cannot give them: each is named by its item id with what is wrong.
    /// ``Keychain/listing()`` returns the other items beside them.
    case damagedItems([DamagedItem])

    /// What went wrong, for people.
    public var description: String {
        switch self {
        case .itemNotFound(let item): return "item not found: \(item)"
        case .duplicateItem(let item): return "duplicate item: \(item) exists already (update it, or use addOrUpdate, instead)"
        case let .interactionNotAllowed(accessibility, reason):
            let why: String
            switch reason {
            case .locked: why = "the vault is locked; unlock it with its passcode"
            case .noFirstUnlockYet: why = "the vault has not been unlocked since this process started"
            case .notSetUp: why = "no vault is set up to hold this class key"
            case .deviceKeyMissing: why = "the device key cannot be read"
            }
            return "interaction not allowed: the \(accessibility.name) class key is unavailable (\(why))"
        case .corrupted(let detail): return "keychain corrupted or tampered with: \(detail)"
        case let .permissionDenied(path, detail): return "permission denied on \(path): \(detail)"
        case let .insecurePermissions(path, detail):
            return "refusing \(path): \(detail)"
        case .invalidArgument(let detail): return "invalid argument: \(detail)"
        case .notUTF8(let item): return "the value of \(item) is not valid UTF-8 text; read it as data"
        case .keyUnavailable(let detail): return "key unavailable: \(detail)"
        case .vault(let error): return "\(error)"
        case .database(let detail): return "keychain database error: \(detail)"
        case .file(let failure): return "\(failure)"
        case let .diskFull(path, detail):
            return "the disk is full: \(path) could not grow (\(detail)); free some space on that file system and try again (writes not yet committed stay queued)"
        case .legacyFormat(let detail): return "legacy keychain unreadable: \(detail)"
        case let .accessibilityTooWeak(item, stored, required):
            return "refusing \(item): it is stored as \(stored.name), weaker than the \(required.name) required; store it again with the required accessibility if that is what it should have"
        case .closed(let path):
            return "the keychain \(path) was closed; open it again to use it"
        case .damagedItems(let items):
            let shown = items.prefix(8).map { "item id \($0.itemID)" }.joined(separator: ", ")
            let more = items.count > 8 ? " and \(items.count - 8) more" : ""
            return "\(items.count) keychain item(s) are damaged (\(shown)\(more)): someone who can write the keychain's file changed them, or the disk damaged them; delete them (delete their service with deleteAccounts(forService:), or everything with deleteAll()) or restore the keychain from a backup; listing() gives the other items and what is wrong with each damaged one"
        }
    }

    /// Any failure from below the public API as a keychain error: a keychain error as it is, a
    /// key source's (the vault's) as ``fromKeySource(_:)`` maps it, a file helper's as
    /// ``fromFile(_:path:)``, a database error as its SQLite code says (corrupted, permission
    /// denied, disk full, database), a sealing or random-generator failure as
    /// ``keyUnavailable(_:)``.
    static func typed(_ error: any Error, path: String) -> KeychainError {
        switch error {
        case let error as KeychainError: return error
        case is VaultError: return fromKeySource(error)
        case let failure as SecureFile.Failure:
            let mapped = fromFile(failure, path: path)
            if case .database = mapped { return .file(failure) }
            return mapped
        case let error as CipherError: return .keyUnavailable("\(error)")
        default: return KeychainSchema.map(error, path: path)
        }
    }

    /// The body of a static operation (reading or parsing a legacy keychain) with its failure as
    /// a keychain error (``typed(_:path:)``).
    static func typing<T>(_ body: () throws -> T) throws(KeychainError) -> T {
        do { return try body() } catch { throw typed(error, path: "the legacy keychain") }
    }

    /// Maps an error thrown by a key source to a keychain error.
    static func fromKeySource(_ error: any Error) -> KeychainError {
        switch error {
        case let error as KeychainError:
            return error
        case let VaultError.classKeyUnavailable(accessibility, reason):
            return .interactionNotAllowed(accessibility, reason)
        case let VaultError.insecurePermissions(path, reason, fix):
            return .insecurePermissions(path: path, detail: "\(reason); fix it with: \(fix)")
        case let error as VaultError:
            return .vault(error)
        default:
            return .keyUnavailable(String(describing: error))
        }
    }

    /// Maps a file-helper failure.
    static func fromFile(_ error: any Error, path: String) -> KeychainError {
        switch error {
        case let SecureFile.Failure.insecurePermissions(path, reason, fix):
            return .insecurePermissions(path: path, detail: "\(reason); fix it with: \(fix)")
        case let SecureFile.Failure.system(operation, path, code) where code == ENOSPC || code == EDQUOT:
            return .diskFull(path: path, detail: "\(operation) failed: \(String(cString: strerror(code)))")
        case let SecureFile.Failure.system(operation, path, code) where code == EACCES || code == EPERM || code == EROFS:
            return .permissionDenied(path: path, detail: "\(operation) failed: \(String(cString: strerror(code)))")
        case let error as KeychainError:
            return error
        default:
            return .database("\(path): \(error)")
        }
    }
}
