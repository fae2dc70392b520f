import Foundation
import Cipher
import Vault

extension Keychain {
    /// What ``importLegacyKeychain(at:accessibility:overwrite:)`` did.
    public struct LegacyImportReport: Sendable, Equatable {
        /// Items written.
        public var imported: Int
        /// Items left alone because the keychain already had them (without `overwrite`).
        public var skipped: Int
        /// Entries not imported, with the reason (a value that is neither data nor text).
        public var failed: [LegacyEntryFailure] = []
    }

    /// One entry of a legacy keychain file.
    public struct LegacyEntry: Sendable, Equatable {
        public var service: String
        public var account: String
        /// The stored bytes (text values as their UTF-8 bytes).
        public var value: [UInt8]
    }

    /// An entry of a legacy keychain file that could not be read, and why.
    public struct LegacyEntryFailure: Sendable, Equatable, CustomStringConvertible {
        public var service: String
        public var account: String
        public var reason: String
        public var description: String { "service \"\(service)\", account \"\(account)\": \(reason)" }
    }

    /// The readable entries of a legacy keychain file (sorted by service, then account) and
    /// the entries that were not readable.
    public struct LegacyKeychainContents: Sendable, Equatable {
        public var entries: [LegacyEntry]
        public var failed: [LegacyEntryFailure]
    }

    /// Reads an iMAS `IMSKeychain` file without importing it (see
    /// ``importLegacyKeychain(at:accessibility:overwrite:)`` for the format and the checks).
    /// - Parameter path: The `IMSKeychain` file.
    /// - Returns: The entries read, and those that could not be read.
    /// - Throws: ``KeychainError/legacyFormat(_:)``; ``KeychainError/file(_:)`` for a missing
    ///   file; other file errors as their ``KeychainError`` cases.
    package static func readLegacyKeychain(at path: String) throws(KeychainError) -> LegacyKeychainContents {
        return try KeychainError.typing {
            let bytes: [UInt8]
            do {
                bytes = try SecureFile.read(path, maxLength: LegacyPlistGuard.maximumSize)
            } catch SecureFile.Failure.system(_, _, EFBIG) {
                throw KeychainError.legacyFormat("\(path) is larger than \(LegacyPlistGuard.maximumSize) bytes: not a legacy keychain")
            } catch let SecureFile.Failure.system(operation, failed, code) where code == ENOENT || code == ENOTDIR || code == EISDIR {
                // A missing file is a file error (exit 74 on the command line), not a database error.
                throw KeychainError.file(.system(operation: operation, path: failed, errno: code))
            } catch {
                throw KeychainError.fromFile(error, path: path)
            }
            return try parseLegacyKeychain(bytes, name: path)
        }
    }

    /// Parses the bytes of an iMAS `IMSKeychain` file: a binary or XML property list
    /// `{service: {account: data}}`, 0 bytes for an empty keychain. Hostile bytes are checked
    /// before the property-list parser sees them (at most 16 MiB and three levels of nesting).
    /// - Parameters:
    ///   - bytes: The file's contents.
    ///   - name: How error messages name the file.
    /// - Returns: The entries read, and those that could not be read.
    /// - Throws: ``KeychainError/legacyFormat(_:)`` when the bytes are not such a property list.
    public static func parseLegacyKeychain(_ bytes: [UInt8], name: String = "the legacy keychain") throws(KeychainError) -> LegacyKeychainContents {
        return try KeychainError.typing {
            var contents = LegacyKeychainContents(entries: [], failed: [])
            guard !bytes.isEmpty else { return contents }
            do {
                try LegacyPlistGuard.check(bytes)
            } catch {
                throw KeychainError.legacyFormat("\(name) is refused unparsed: \(error)")
            }
            let object: Any
            var format = PropertyListSerialization.PropertyListFormat.binary
            do {
                object = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: &format)
            } catch {
                throw KeychainError.legacyFormat("\(name) is not a property list: \(error)")
            }
            // The parser falls back to the OpenStep text format when a file does not parse as what
            // it looks like: only the two legacy formats are accepted.
            guard format == .binary || format == .xml else {
                throw KeychainError.legacyFormat("\(name) is neither a binary nor an XML property list")
            }
            guard let services = object as? [String: Any] else {
                throw KeychainError.legacyFormat("\(name): the root is not a dictionary of services")
            }
            for service in services.keys.sorted() {
                guard let accounts = services[service] as? [String: Any] else {
                    throw KeychainError.legacyFormat("\(name): service \"\(service)\" is not a dictionary of accounts")
                }
                for account in accounts.keys.sorted() {
                    if let data = accounts[account] as? Data {
                        contents.entries.append(LegacyEntry(service: service, account: account, value: Array(data)))
                    } else if let text = accounts[account] as? String {
                        contents.entries.append(LegacyEntry(service: service, account: account, value: Array(text.utf8)))
                    } else {
                        contents.failed.append(LegacyEntryFailure(service: service, account: account,
                                                                  reason: "the value is neither data nor text (\(type(of: accounts[account]!)))"))
                    }
                }
            }
            return contents
        }
    }

    /// Imports an iMAS `IMSKeychain` file: a binary (or XML) property list
    /// `{service: {account: data}}`, as found at `Library/...` (or the older `Library/.imskeychain`).
    /// An empty (0-byte) file is an empty keychain. Values are imported as they are: entries the
    /// old library stored "securely" stay encrypted in the old crypto manager's format (the
    /// `Migration` module and `securefoundation migrate imas-data` decrypt and re-seal them).
    ///
    /// - Parameters:
    ///   - path: The legacy file.
    ///   - accessibility: The accessibility of the imported items (default `.always`, as the
    ///     legacy file needed no unlock).
    ///   - overwrite: Whether to replace items that exist already.
    /// - Returns: Counts of imported and skipped items, and the entries not imported with the
    ///   reason (a value that is neither data nor text). The writes are flushed before returning.
    /// The file is checked before it is parsed: at most 16 MiB and three levels of nesting (a
    /// binary list's references are followed with bounds), so a hostile file cannot exhaust the
    /// parser's stack or memory.
    /// - Throws: ``KeychainError/legacyFormat(_:)`` when the file is not such a property list;
    ///   ``KeychainError/interactionNotAllowed(_:_:)``; database errors.
    @discardableResult
    public func importLegacyKeychain(at path: String, accessibility: Accessibility = .always,
                                     overwrite: Bool = false) throws(KeychainError) -> LegacyImportReport {
        return try typed {
            try requireOpen()
            let contents = try Self.readLegacyKeychain(at: path)
            var report = LegacyImportReport(imported: 0, skipped: 0, failed: contents.failed)
            guard !contents.entries.isEmpty else { return report }
            for entry in contents.entries {
                let key = ItemKey.generic(service: entry.service, account: entry.account)
                do {
                    try entry.value.withUnsafeBytes { try store($0, for: key, accessibility: accessibility, mustNotExist: !overwrite) }
                    report.imported += 1
                } catch KeychainError.duplicateItem {
                    report.skipped += 1
                }
            }
            try flush()
            return report
        }
    }
}
