import Cipher
import Crypto
import Foundation
import HardwareKeys
import Keychain
import PinnedTLS
import Vault
import X509

/// The group's record (revocations, members, whether this machine issues certificates) and
/// the device lists kept in the keychain.
extension ShareGroup {
    /// The keychain account of the group's record.
    package static let recordAccount = "group"

    /// The record, upgraded from an older group's items when there is none yet.
    func groupRecord() throws(ShareError) -> ShareGroupRecord {
        let record: ShareGroupRecord
        if let stored = try readRecord() {
            record = stored
        } else {
            record = try upgrade()
        }
        try checkAnchor(revocationGeneration: record.generation)
        return record
    }

    /// The vault's rollback anchor (``RollbackAnchor``, beside the device key, outside the data
    /// directory) when the keychain's keys come from a vault that has one; nil otherwise (a
    /// keychain on another key source, a device key given in memory).
    func anchor() throws(ShareError) -> RollbackAnchor? {
        guard let manager = store.keychain.keySource as? CryptoManager else { return nil }
        do { return try manager.rollbackAnchor } catch {
            throw .storage("the vault's rollback anchor cannot be read: \(error)")
        }
    }

    /// Checks the record's generation against the anchor's `share.revocations` counter: a
    /// record older than the newest one written here (the keychain, or the record and root rows,
    /// put back from a backup) is refused, never read as the current list.
    func checkAnchor(revocationGeneration: UInt64) throws(ShareError) {
        guard let anchor = try anchor() else { return }
        do {
            try anchor.check(RollbackAnchor.shareRevocations, found: revocationGeneration,
                             file: "the share group's record (keychain.sqlite)")
        } catch VaultError.rolledBack(_, let found, let expected) {
            throw .revocationsTampered("the share group's revocation list is generation \(found), older than generation \(expected) recorded beside the device key: the keychain was rolled back to an older copy, which brings back devices revoked since. Restore the newest backup of the data directory, or re-create the group and revoke again")
        } catch {
            throw .storage("the vault's rollback anchor cannot be read: \(error)")
        }
    }

    /// The stored record, or nil when there is none and the group is of an older version
    /// (its root certificate stored `always`).
    /// - Throws: ``ShareError/revocationsTampered(_:)`` when the group commits to a record that is missing.
    func readRecord() throws(ShareError) -> ShareGroupRecord? {
        do {
            let record = try store.keychain.value(ShareGroupRecord.self, forService: Self.service, account: Self.recordAccount,
                                                  requiring: .alwaysThisDeviceOnly)
            guard record.version == ShareGroupRecord.currentVersion else {
                throw ShareError.storage("the group's record has version \(record.version); this version reads \(ShareGroupRecord.currentVersion): update securefoundation")
            }
            guard record.revoked.count == record.count, Self.digest(record.revoked, generation: record.generation) == record.digest else {
                throw ShareError.revocationsTampered("the group's record does not match its own revocation list")
            }
            return record
        } catch let error as ShareError {
            throw error
        } catch KeychainError.itemNotFound {
            // Absence is not emptiness: only a group that never had a record may have none.
            guard try rootIsCommitted() else { return nil }
            throw .revocationsTampered("the group's record (keychain item \(Self.service) / \(Self.recordAccount)) is missing, so the revoked devices are unknown")
        } catch KeychainError.accessibilityTooWeak {
            throw .revocationsTampered("the group's record is not stored alwaysThisDeviceOnly")
        } catch {
            throw .storage("the group's record cannot be read: \(error)")
        }
    }

    /// Whether the group's root certificate is stored the way this version stores it
    /// (`alwaysThisDeviceOnly`): such a group has a record.
    func rootIsCommitted() throws(ShareError) -> Bool {
        do {
            _ = try store.certificates(label: Self.rootLabel, requiring: .alwaysThisDeviceOnly)
            return true
        } catch .accessibilityTooWeak {
            return false
        } catch .notFound {
            throw .notAMember("no group root \"\(Self.rootLabel)\" in the keychain")
        } catch {
            throw .storage("\(error)")
        }
    }

    /// Makes the record of a group of an older version: its `revoked` item (trusted as it is,
    /// this once; missing reads as empty), whether this machine holds the root (its identity is
    /// stored), then the root certificate stored `alwaysThisDeviceOnly`, which commits the
    /// group to its record from then on.
    func upgrade() throws(ShareError) -> ShareGroupRecord {
        let legacy = try list("revoked")
        let issuer: Bool
        do {
            issuer = try store.list().items.contains { $0.label == Self.rootLabel && $0.kind == .identity }
        } catch {
            throw .storage("the keychain cannot be listed: \(error)")
        }
        let record = ShareGroupRecord(generation: legacy.isEmpty ? 0 : 1, revoked: legacy, issuer: issuer)
        try write(record)
        try commitRoot()
        return record
    }

    /// Stores the root certificate `alwaysThisDeviceOnly` (after the record exists).
    func commitRoot() throws(ShareError) {
        let root = try rootCertificate()
        try Self.map {
            try store.storeCertificates([root], label: Self.rootLabel, accessibility: .alwaysThisDeviceOnly, replace: true)
            try store.flush()
        }
    }

    /// Writes the record (a new group, a join, a revocation), and the `revoked` item older
    /// versions read (never trusted by this one).
    func write(_ record: ShareGroupRecord) throws(ShareError) {
        var record = record
        record.version = ShareGroupRecord.currentVersion
        record.count = record.revoked.count
        record.digest = Self.digest(record.revoked, generation: record.generation)
        do {
            try store.keychain.set(record, forService: Self.service, account: Self.recordAccount,
                                   accessibility: .alwaysThisDeviceOnly)
            try store.keychain.set(record.revoked, forService: Self.service, account: "revoked", accessibility: .always)
            try store.keychain.flush()
        } catch {
            throw .storage("the group's record cannot be written: \(error)")
        }
        // The anchor moves only once the record is durable: a kill in between leaves it behind,
        // and the newer record is accepted (and the anchor advanced) at the next read.
        guard let anchor = try anchor() else { return }
        do { _ = try anchor.advance(RollbackAnchor.shareRevocations, to: record.generation) } catch {
            throw .storage("the group's record was written but the rollback anchor cannot be advanced: \(error)")
        }
    }

    /// Starts the record of a group made or joined here, keeping the revocations already
    /// recorded on this machine (a device revoked stays revoked when the machine joins again).
    func startRecord(issuer: Bool) throws(ShareError) {
        var previous: ShareGroupRecord?
        do {
            previous = try store.keychain.value(ShareGroupRecord.self, forService: Self.service, account: Self.recordAccount)
        } catch {
            previous = nil
        }
        let revoked: [ShareDeviceRecord]
        if let previous { revoked = previous.revoked } else { revoked = try list("revoked") }
        try write(ShareGroupRecord(generation: (previous?.generation ?? 0) + 1, revoked: revoked, issuer: issuer))
    }

    /// The SHA-256 the record keeps of its revocation list: over a context, the generation
    /// (u64 BE), the count (u32 BE), then each entry's name, pin (each u32 BE length, UTF-8) and
    /// time (i64 BE), in order. Hex.
    static func digest(_ devices: [ShareDeviceRecord], generation: UInt64) -> String {
        var hasher = SHA256()
        func u64(_ value: UInt64) { hasher.update(data: (0..<8).map { UInt8(truncatingIfNeeded: value >> UInt64(56 - 8 * $0)) }) }
        func bytes(_ text: String) {
            let raw = Array(text.utf8)
            hasher.update(data: (0..<4).map { UInt8(truncatingIfNeeded: UInt32(raw.count) >> UInt32(24 - 8 * $0)) })
            hasher.update(data: raw)
        }
        bytes("securefoundation share revocations v1")
        u64(generation)
        hasher.update(data: (0..<4).map { UInt8(truncatingIfNeeded: UInt32(devices.count) >> UInt32(24 - 8 * $0)) })
        for device in devices {
            bytes(device.device)
            bytes(device.pin)
            u64(UInt64(bitPattern: device.time))
        }
        return Encoding.hex(Array(hasher.finalize()))
    }

    func list(_ account: String) throws(ShareError) -> [ShareDeviceRecord] {
        do {
            return try store.keychain.value([ShareDeviceRecord].self, forService: Self.service, account: account)
        } catch KeychainError.itemNotFound {
            return []
        } catch {
            throw .storage("the \(account) list cannot be read: \(error)")
        }
    }

    func save(_ records: [ShareDeviceRecord], _ account: String) throws(ShareError) {
        do {
            try store.keychain.set(records, forService: Self.service, account: account, accessibility: .always)
            try store.keychain.flush()
        } catch {
            throw .storage("the \(account) list cannot be written: \(error)")
        }
    }
}
