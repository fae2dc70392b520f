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
    }

    /// Imports an iMAS `IMSKeychain` file: a binary (or XML) property list
    /// `{service: {account: data}}`, as found at `Library/...` (or the older `Library/.imskeychain`).
    /// An empty (0-byte) file is an empty keychain. Values are imported as they are: entries the
    /// old library stored "securely" stay encrypted in the old crypto manager's format.
    ///
    /// - Parameters:
    ///   - path: The legacy file.
    ///   - accessibility: The accessibility of the imported items (default `.always`, as the
    ///     legacy file needed no unlock).
    ///   - overwrite: Whether to replace items that exist already.
    /// - Returns: Counts of imported and skipped items. The writes are flushed before returning.
    /// The file is checked before it is parsed: at most 16 MiB and three levels of nesting (a
    /// binary list's references are followed with bounds), so a hostile file cannot exhaust the
    /// parser's stack or memory.
    /// - Throws: ``KeychainError/legacyFormat(_:)`` when the file is not such a property list;
    ///   ``KeychainError/interactionNotAllowed(_:_:)``; database errors.
    @discardableResult
    public func importLegacyKeychain(at path: String, accessibility: Accessibility = .always,
                                     overwrite: Bool = false) throws -> LegacyImportReport {
        let bytes: [UInt8]
        do {
            bytes = try SecureFile.read(path, maxLength: LegacyPlistGuard.maximumSize)
        } catch SecureFile.Failure.system(_, _, EFBIG) {
            throw KeychainError.legacyFormat("\(path) is larger than \(LegacyPlistGuard.maximumSize) bytes: not a legacy keychain")
        } catch {
            throw KeychainError.fromFile(error, path: path)
        }
        var report = LegacyImportReport(imported: 0, skipped: 0)
        guard !bytes.isEmpty else { return report }
        do {
            try LegacyPlistGuard.check(bytes)
        } catch {
            throw KeychainError.legacyFormat("\(path) is refused unparsed: \(error)")
        }
        let object: Any
        var format = PropertyListSerialization.PropertyListFormat.binary
        do {
            object = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: &format)
        } catch {
            throw KeychainError.legacyFormat("\(path) is not a property list: \(error)")
        }
        // The parser falls back to the OpenStep text format when a file does not parse as what
        // it looks like: only the two legacy formats are accepted.
        guard format == .binary || format == .xml else {
            throw KeychainError.legacyFormat("\(path) is neither a binary nor an XML property list")
        }
        guard let services = object as? [String: Any] else {
            throw KeychainError.legacyFormat("\(path): the root is not a dictionary of services")
        }
        for service in services.keys.sorted() {
            guard let accounts = services[service] as? [String: Any] else {
                throw KeychainError.legacyFormat("\(path): service \"\(service)\" is not a dictionary of accounts")
            }
            for account in accounts.keys.sorted() {
                let value: Data
                if let data = accounts[account] as? Data {
                    value = data
                } else if let text = accounts[account] as? String {
                    value = Data(text.utf8)
                } else {
                    throw KeychainError.legacyFormat("\(path): service \"\(service)\", account \"\(account)\" holds neither data nor text")
                }
                let key = ItemKey.generic(service: service, account: account)
                do {
                    try value.withUnsafeBytes { try store($0, for: key, accessibility: accessibility, mustNotExist: !overwrite) }
                    report.imported += 1
                } catch KeychainError.duplicateItem {
                    report.skipped += 1
                }
            }
        }
        try flush()
        return report
    }
}
