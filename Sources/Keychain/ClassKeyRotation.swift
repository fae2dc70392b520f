import Foundation
import Cipher
import Vault

extension Keychain {
    // MARK: Class-key rotation

    /// What a re-seal did.
    public struct ResealReport: Sendable, Equatable {
        /// Items sealed again under their class's current key.
        public var resealed: Int
        /// Items that could not be opened (a damaged row, or one sealed under a key that no
        /// longer exists), by item id in hex: they are left as they are. Delete them (by name,
        /// with their service, or with ``deleteAll()``) or restore the file from a backup.
        public var unreadable: [String]

        /// - Parameters: see the properties.
        public init(resealed: Int, unreadable: [String]) {
            self.resealed = resealed
            self.unreadable = unreadable
        }
    }

    /// Replaces the class keys at the key source (for a `CryptoManager`: a new class master and a
    /// new always key, see `CryptoManager.rotateClassKeys()`), then re-seals every item under
    /// the new keys. Afterwards an old copy of the vault's state or of `always.key` opens no
    /// item, even with the passcode of the time.
    ///
    /// Items still sealed under an earlier key (an interrupted run) are re-sealed first, so no
    /// item is ever more than one generation behind; the source keeps a bounded number of
    /// retired generations. Crash safety: each batch of re-sealed rows is one transaction that
    /// replaces a row only if it is still the row that was read, and the retired keys open the
    /// rest; so a kill at any moment leaves every item readable. ``resealUnderCurrentClassKeys()``
    /// (or this again) finishes an interrupted run. Damaged items do not stop it: they are
    /// reported and left alone.
    /// - Returns: The items re-sealed (before and after the rotation) and those that could not be opened.
    /// - Throws: ``KeychainError/invalidArgument(_:)`` when the key source cannot rotate,
    ///   ``KeychainError/interactionNotAllowed(_:_:)`` while the vault is locked, database errors.
    @discardableResult
    public func rotateClassKeys() throws(KeychainError) -> ResealReport {
        return try typed {
            try requireOpen()
            guard let source = keySource as? any ClassKeyRotatingSource else {
                throw KeychainError.invalidArgument("this keychain's key source cannot rotate class keys (it does not conform to ClassKeyRotatingSource)")
            }
            let before = try resealUnderCurrentClassKeys()
            do {
                try source.rotateClassKeys()
            } catch {
                throw KeychainError.fromKeySource(error)
            }
            sealer.dropClassKeys()
            var after = try resealUnderCurrentClassKeys()
            after.resealed += before.resealed
            return after
        }
    }

    /// Re-seals every item whose record names a class key other than its class's current one
    /// (sealed before a class-key rotation), in transactions of at most `resealBatchSize` (256) rows.
    /// A row changed by another writer since it was read is left to that writer; a row that
    /// cannot be opened is reported and left alone. Needs every class key of the items present
    /// (the vault unlocked).
    /// - Returns: The number of items re-sealed (0 when all are current) and the unreadable ones.
    /// - Throws: ``KeychainError/interactionNotAllowed(_:_:)``, database errors.
    @discardableResult
    public func resealUnderCurrentClassKeys() throws(KeychainError) -> ResealReport {
        return try typed {
            try requireOpen()
            try itemStore.flush()
            sealer.dropClassKeys()
            var batch: [(old: StoredRow, new: StoredRow)] = []
            var report = ResealReport(resealed: 0, unreadable: [])
            for itemClass in ItemClass.allCases {
                // Id by id (a row with a damaged column is skipped, not the end of the run).
                for id in try itemStore.ids(itemClass: itemClass, group: nil) {
                    do {
                        guard let row = try itemStore.lookup(id) else { continue }
                        guard let resealed = try sealer.resealed(row) else { continue }
                        batch.append((row, resealed))
                    } catch KeychainError.corrupted {
                        report.unreadable.append(Encoding.hex(id.bytes))
                        continue
                    }
                    if batch.count >= Keychain.resealBatchSize {
                        report.resealed += try itemStore.replaceSealed(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
            }
            report.resealed += try itemStore.replaceSealed(batch)
            return report
        }
    }

    /// Rows re-sealed per transaction.
    static let resealBatchSize = 256
}
