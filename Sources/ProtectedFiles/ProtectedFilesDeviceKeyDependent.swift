import Foundation
import Crypto
import Cipher
import Age
import Vault

/// The protected-file key table (`protected-files.keys`) as a dependent of the device key: every
/// entry's MAC is under a device sub-key, and the identities of the ThisDeviceOnly classes
/// (current and retired) are sealed under class keys bound to the device key. The key pairs do
/// not change, so protected files are not re-wrapped.
///
/// The table is written once, atomically; each entry's MAC tells which key it is under, so a
/// resumed rotation skips what is done.
package struct ProtectedFilesDeviceKeyDependent: DeviceKeyDependent {
    let table: ClassKeyTable
    /// A re-binding after a restore: a table older than the rollback anchor is accepted (its
    /// next generation goes past the anchor).
    let restoring: Bool
    /// With `restoring`: the SHA-256 the table's bytes must have (the restore's authenticated copy).
    let expectedDigest: [UInt8]?
    package var description: String { table.path }

    /// - Parameters:
    ///   - manager: The vault whose home holds the table.
    ///   - restoring: Accept a table older than the rollback anchor (a restore from a backup).
    ///   - expectedDigest: With `restoring`, the SHA-256 the table's bytes must have.
    package init(manager: CryptoManager, restoring: Bool = false, expectedDigest: [UInt8]? = nil) {
        table = ClassKeyTable(manager: manager)
        self.restoring = restoring
        self.expectedDigest = expectedDigest
    }

    /// Whether the home has a key table.
    package var exists: Bool { access(table.path, F_OK) == 0 }

    /// `DeviceKeyDependent` (Vault's extension point, untyped): throws ``ProtectedFileError``
    /// for the table, and what `step` throws, unchanged.
    package func rekey(from old: DeviceBoundKeys, to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRekeyResult {
        guard exists else { return DeviceKeyRekeyResult(description: table.path, rekeyed: 0) }
        let newMACKey = new.deviceSubkey(purpose: ClassKeyTable.macPurpose)
        defer { newMACKey.wipe() }
        let vaultID = try table.vaultID()
        return try table.withLock {
            var file = try table.loadFile()
            func mac(_ entry: ClassKeyEntry, _ key: SecretBytes) -> String {
                ClassKeyTable.mac(entry, format: file.format, vaultID: vaultID, generation: file.generation ?? 0, key: key)
            }
            var rekeyed = 0, alreadyNew = 0
            var unreadable: [String] = []
            for index in file.entries.indices {
                let entry = file.entries[index]
                guard let cls = FileProtectionClass(name: entry.name) else { unreadable.append(entry.name); continue }
                if let stored = Data(base64Encoded: entry.mac), ConstantTime.equals(Array(stored), Array(Data(base64Encoded: mac(entry, newMACKey)) ?? Data())) {
                    alreadyNew += 1
                    file.vouch(entry)
                    continue
                }
                var next = entry
                if cls.thisDeviceOnly {
                    // Under the old bound key (or already under the new one, its MAC not yet written).
                    guard let identity = try? open(entry, cls, old) ?? open(entry, cls, new) else { unreadable.append(entry.name); continue }
                    var raw = Array(identity.privateKey.rawRepresentation)
                    defer { for i in raw.indices { raw[i] = 0 } }
                    next.sealedIdentity = try seal(raw, cls, entry, under: new, retired: false)
                } else {
                    // The class key does not depend on the device key: only the MAC changes, once
                    // the identity proves the entry genuine.
                    guard (try? open(entry, cls, old)) != nil else { unreadable.append(entry.name); continue }
                }
                // `save` writes the MAC under the new key for the table's next generation.
                file.entries[index] = next
                file.vouch(next)
                rekeyed += 1
            }
            for index in file.retired.indices {
                let entry = file.retired[index]
                guard let cls = FileProtectionClass(name: entry.name), cls.thisDeviceOnly else { continue }
                guard let identity = try? open(entry, cls, old, retired: true) else { continue }  // already new, or damaged
                var raw = Array(identity.privateKey.rawRepresentation)
                defer { for i in raw.indices { raw[i] = 0 } }
                file.retired[index].sealedIdentity = try seal(raw, cls, entry, under: new, retired: true)
                rekeyed += 1
            }
            if rekeyed > 0 {
                try table.save(file, macKey: newMACKey)
                try step("protected-files committed")
            }
            return DeviceKeyRekeyResult(description: table.path, rekeyed: rekeyed, alreadyNew: alreadyNew, unreadable: unreadable)
        }
    }

    /// Re-binds the table to `new` when the old device key is lost: the entries of the
    /// thisDeviceOnly classes (and their retired key pairs) are removed and named, since their
    /// identities open only under the lost key; every other entry whose identity opens with its
    /// class key gets a MAC under the new device sub-key (an entry of the class `none`, whose
    /// key lies in the data directory, is reported as unverified). One atomic write.
    /// - Parameters:
    ///   - new: The keys bound to the new device key.
    ///   - step: Called after the write.
    /// - Returns: What was re-bound and left behind.
    /// - Throws: ``ProtectedFileError`` for the table; what `step` throws.
    package func rebind(to new: DeviceBoundKeys, step: (String) throws -> Void) throws -> DeviceKeyRebindResult {
        var result = DeviceKeyRebindResult(description: table.path, rebound: 0)
        if restoring, let expectedDigest {
            // The restore's pin: the table it authenticated, or (empty digest) none at all.
            if expectedDigest.isEmpty && exists {
                throw ProtectedFileError.keyTable("\(table.path) appeared after the restore was authenticated (the backup held no key table); restore again")
            }
            if !expectedDigest.isEmpty && !exists {
                throw ProtectedFileError.keyTable("\(table.path) was removed after the restore was authenticated; restore again")
            }
            if !exists {
                // No table: one the anchor may count must not be missed as rolled back afterwards.
                if try table.anchoredGeneration() > 0 {
                    let key = new.deviceSubkey(purpose: ClassKeyTable.macPurpose)
                    defer { key.wipe() }
                    try table.withLock { try table.save(ClassKeyTableFile(), macKey: key) }
                }
                return result
            }
        }
        guard exists else { return result }
        let newMACKey = new.deviceSubkey(purpose: ClassKeyTable.macPurpose)
        defer { newMACKey.wipe() }
        let vaultID = try table.vaultID()
        return try table.withLock {
            var file = try table.loadFile(checkingAnchor: !restoring, expectingDigest: restoring ? expectedDigest.flatMap { $0.isEmpty ? nil : $0 } : nil)
            var kept: [ClassKeyEntry] = []
            var changed = false
            for entry in file.entries {
                guard let cls = FileProtectionClass(name: entry.name) else { result.unreadable.append(entry.name); kept.append(entry); continue }
                if table.macMatches(entry, format: file.format, vaultID: vaultID, generation: file.generation ?? 0, key: newMACKey) {
                    result.alreadyNew += 1
                    file.vouch(entry)
                    kept.append(entry)
                    continue
                }
                changed = true
                if cls.thisDeviceOnly {
                    result.leftBehind.append("protected-file class \(cls.name)")
                    continue
                }
                guard (try? open(entry, cls, new)) != nil else { result.unreadable.append(entry.name); kept.append(entry); continue }
                file.vouch(entry)
                kept.append(entry)
                result.rebound += 1
                if cls.accessibility.protectionClass == .always { result.unverified.append("protected-file class \(cls.name)") }
            }
            file.entries = kept
            let retired = file.retired.filter { FileProtectionClass(name: $0.name)?.thisDeviceOnly != true }
            if retired.count != file.retired.count {
                result.leftBehind.append("\(file.retired.count - retired.count) retired thisDeviceOnly key pair(s)")
                file.retired = retired
                changed = true
            }
            // A restored table is always written again: its next generation goes past the
            // rollback anchor, which may hold a later one (an older backup restored on purpose).
            if changed || restoring {
                try table.save(file, macKey: newMACKey)
                try step("protected-files committed")
            }
            return result
        }
    }

    /// The key table as it goes into a backup: the entries (and retired key pairs) of the
    /// thisDeviceOnly classes removed, their class names returned; the others as they are
    /// (their MACs stay those of this table's generation, and a restore checks each identity
    /// against its class key). Nil when the home has no table.
    /// - Returns: The table's bytes and the classes left out.
    /// - Throws: ``ProtectedFileError/keyTable(_:)`` as a read of the table does.
    package func backupCopy() throws -> (bytes: [UInt8], leftBehind: [String])? {
        guard exists else { return nil }
        return try table.withLock {
            var file = try table.loadFile()
            var leftBehind = file.entries.filter { FileProtectionClass(name: $0.name)?.thisDeviceOnly == true }.map(\.name)
            file.entries.removeAll { FileProtectionClass(name: $0.name)?.thisDeviceOnly == true }
            let retired = file.retired.count
            file.retired.removeAll { FileProtectionClass(name: $0.name)?.thisDeviceOnly == true }
            if file.retired.count != retired { leftBehind.append("\(retired - file.retired.count) retired thisDeviceOnly key pair(s)") }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            do {
                return (Array(try encoder.encode(file)), leftBehind)
            } catch {
                throw ProtectedFileError.io("cannot encode the key table: \(error)")
            }
        }
    }

    /// The identity of `entry` opened under `keys` (current and retired class keys), or nil when
    /// it does not open; checked against the entry's recipient.
    func open(_ entry: ClassKeyEntry, _ cls: FileProtectionClass, _ keys: DeviceBoundKeys, retired: Bool = false) throws -> X25519Identity? {
        guard let sealed = Data(base64Encoded: entry.sealedIdentity) else { return nil }
        var ring = [try SealingKey(key: try keys.classKeyCopy(for: cls.accessibility))]
        for raw in keys.retiredClassKeys(for: cls.accessibility) {
            guard let key = try? SealingKey(key: raw), !ring.contains(where: { $0.id == key.id }) else { raw.wipe(); continue }
            ring.append(key)
        }
        defer { ring.forEach { $0.key.wipe() } }
        guard var raw = try? Sealed.open(Array(sealed), with: try Keyring(ring),
                                         context: ClassKeyEntry.identityContext(name: entry.name, recipient: entry.recipient, retired: retired)) else { return nil }
        defer { for i in raw.indices { raw[i] = 0 } }
        guard raw.count == 32, let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw) else { return nil }
        let identity = X25519Identity(privateKey: key)
        guard identity.recipient.description == entry.recipient else {
            throw ProtectedFileError.keyTable("the \(cls.name) recipient does not match its identity: the table was altered")
        }
        return identity
    }

    func seal(_ raw: [UInt8], _ cls: FileProtectionClass, _ entry: ClassKeyEntry, under keys: DeviceBoundKeys, retired: Bool) throws -> String {
        let key = try SealingKey(key: try keys.classKeyCopy(for: cls.accessibility))
        defer { key.key.wipe() }
        do {
            let sealed = try Sealed.seal(raw, with: key, context: ClassKeyEntry.identityContext(name: entry.name, recipient: entry.recipient, retired: retired))
            return Data(sealed).base64EncodedString()
        } catch {
            throw ProtectedFileError.io("sealing the \(cls.name) identity failed: \(error)")
        }
    }
}
