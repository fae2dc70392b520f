import Foundation
import Cipher

/// The keys held while unlocked.
final class UnlockedKeys: @unchecked Sendable {
    let vaultID: Data
    let keyID: [UInt8]
    let appKey: SecretBytes
    let classMaster: SecretBytes
    let retired: [(id: [UInt8], key: SecretBytes)]
    /// Class masters of earlier generations, newest first.
    let retiredClassMasters: [SecretBytes]
    /// Sealing keys derived from the current and retired application keys.
    let keyring: Keyring
    /// The identity of the state file these keys were read from (or written to); a different
    /// identity on disk means another process changed the state.
    let stateIdentity: FileIdentity?

    init(vaultID: Data, keyID: [UInt8], appKey: SecretBytes, secrets: VaultSecrets, stateIdentity: FileIdentity?) throws {
        self.vaultID = vaultID
        self.keyID = keyID
        self.appKey = appKey
        self.classMaster = secrets.classMaster
        self.retired = secrets.retired
        self.retiredClassMasters = secrets.retiredClassMasters
        self.stateIdentity = stateIdentity
        var keys = [try SealingKey(key: KeyHierarchy.dataKey(appKey.copyKey()), id: keyID)]
        for entry in secrets.retired where !keys.contains(where: { $0.id == entry.id }) {
            keys.append(try SealingKey(key: KeyHierarchy.dataKey(entry.key.copyKey()), id: entry.id))
        }
        self.keyring = try Keyring(keys)
    }

    /// The keys of `state`: its ids, `appKey` and `secrets` (both owned from now on).
    convenience init(state: VaultState, appKey: SecretBytes, secrets: VaultSecrets, stateIdentity: FileIdentity?) throws {
        try self.init(vaultID: state.vaultID, keyID: Array(state.keyID), appKey: appKey, secrets: secrets, stateIdentity: stateIdentity)
    }

    /// Throws ``VaultError/locked`` when a concurrent lock wiped the class master meanwhile
    /// (never derives from a wiped key).
    func classKey(_ protectionClass: ProtectionClass) throws -> SecretBytes {
        let master = try classMaster.copyKey()
        defer { master.wipe() }
        return KeyHierarchy.classKey(protectionClass, master: master)
    }

    /// The class keys of every generation, current first.
    func classKeys(_ protectionClass: ProtectionClass) throws -> [SecretBytes] {
        var keys = [try classKey(protectionClass)]
        for retired in retiredClassMasters {
            let master = try retired.copyKey()
            defer { master.wipe() }
            keys.append(KeyHierarchy.classKey(protectionClass, master: master))
        }
        return keys
    }

    /// Copies of the secrets (for a new state), with the caller wiping them.
    func secretsCopy() throws -> VaultSecrets {
        VaultSecrets(classMaster: try classMaster.copyKey(),
                     retired: try retired.map { (id: $0.id, key: try $0.key.copyKey()) },
                     retiredClassMasters: try retiredClassMasters.map { try $0.copyKey() })
    }

    func wipe() {
        appKey.wipe()
        classMaster.wipe()
        for master in retiredClassMasters { master.wipe() }
        for entry in retired { entry.key.wipe() }
        for key in keyring.keys { key.key.wipe() }
    }
}
