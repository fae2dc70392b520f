import Foundation
import Cipher

/// Binds a vault to a new device key when the old one is lost (a dead disk, a reinstall, a new
/// server, a TPM replaced with its motherboard), with the passcode, the answers or the recovery
/// key (docs/RECOVERY.md).
///
/// A vault refuses every device key but its own (`vault.state` records the key's check value),
/// so that whoever can write the data directory cannot swap the key. A re-binding is the one
/// way past that refusal, and it needs a credential: without one nothing changes.
///
/// Steps:
/// 1. the vault is unlocked with the credential (one counted attempt), without comparing the
///    device key; the rollback anchor is still checked (unless restoring from a backup);
/// 2. the new device key is put where it will live (the file provider's key file, created when
///    missing, or the provider the caller installs) before anything depends on it;
/// 3. each dependent (keychains, the protected-file key table) is re-bound: what the class keys
///    open is re-keyed, the thisDeviceOnly parts (sealed under keys mixed with the lost device
///    key) are removed and named;
/// 4. `vault.state` records the new key's check value and one more entry in its re-binding
///    record (when, from which key to which, with which credential), authenticated with the
///    other public fields.
///
/// A kill at any point leaves a vault the same command finishes: each dependent is re-bound in
/// one commit and tells by itself whether it is done, and the state names the new key only at
/// the end. Make a new `CryptoManager` afterwards.
public enum DeviceKeyRebinding {
    /// What a re-binding did.
    public struct Report: Sendable {
        /// The new device key's check value (``DeviceKeyRecord/checkValue(of:)``).
        public var newCheck: Data
        /// The check value the vault recorded before (nil: none).
        public var previousCheck: Data?
        /// The vault was bound to this device key already; nothing was changed.
        public var alreadyBound: Bool
        /// What each dependent did.
        public var dependents: [DeviceKeyRebindResult]
        /// Where the new device key lives (the provider record's summary, or the key file).
        public var keyLocation: String

        /// Every thisDeviceOnly part left behind, over all dependents.
        public var leftBehind: [String] { dependents.flatMap(\.leftBehind) }
        /// Every part re-bound without the lost key's check.
        public var unverified: [String] { dependents.flatMap(\.unverified) }
        /// What the operator must redo.
        public var notes: [String] {
            alreadyBound ? [] : [
                "values derived from the device key changed: every `securefoundation secrets device-share` output (CryptoManager.deviceSubkey(purpose:)), so run it again and rebuild the sealed secrets that use it",
                "processes that had the vault open before hold the old state: restart them",
            ]
        }
    }

    /// Re-binds `manager`'s vault to a new device key.
    ///
    /// - Parameters:
    ///   - manager: The vault (locked or not; it is unlocked with `credential`).
    ///   - credential: The passcode, the answers or the recovery key.
    ///   - filePath: The device-key file (`--device-key`; nil: the default), used when
    ///     `installation` is nil and the vault has no provider record beside it.
    ///   - installation: Where to keep a new device key (a systemd credential, the TPM, a PKCS #11
    ///     token…); nil: the provider record beside the device key if there is one, else the key
    ///     file (created when missing).
    ///   - dependents: Everything in the home that depends on the device key, made for `manager`.
    ///   - restoring: The home was just restored from an authenticated backup: a generation below
    ///     the rollback anchor's is accepted, and the new state and key table go past it.
    ///   - expectedState: With `restoring`: the digest of the state the restore authenticated
    ///     (``CryptoManager/whenUnlockedKey(opening:stateDigest:)``); another state is refused.
    ///   - step: Called with each step's name (fault-injection tests stop the process there).
    /// - Returns: What was re-bound, left behind, and what to redo.
    /// - Throws: The credential's unlock errors (a wrong one is a counted attempt),
    ///   ``VaultError/deviceKey(_:)`` when the new key cannot be stored or read, the dependents' errors.
    package static func rebind(manager: CryptoManager, credential: VaultCredential, filePath: String?,
                               installation: DeviceKeyInstallation? = nil, dependents: [any DeviceKeyDependent],
                               restoring: Bool = false, expectedState: [UInt8]? = nil,
                               step: (String) throws -> Void = { _ in }) throws -> Report {
        let directory = manager.directory
        return try FileLock.withExclusiveLock(path: directory + "/" + DeviceKeyRotation.lockName) {
            if try DeviceKeyRotation.pending(directory: directory, filePath: filePath) != nil {
                throw VaultError.deviceKey("a device-key rotation of \(directory) is unfinished; finish it with `securefoundation vault rotate-device-key --resume` (it needs the old device key) before re-binding")
            }
            let (recorded, unlockedDigest) = try manager.unlockForRebinding(credential, restoring: restoring, expectedState: expectedState)
            try step("unlocked")
            let (key, location) = try newDeviceKey(manager: manager, filePath: filePath, installation: installation,
                                                   recorded: recorded)
            defer { key.wipe() }
            let check = DeviceKeyRecord.checkValue(of: key)
            if recorded == check && !restoring {
                return Report(newCheck: check, previousCheck: recorded, alreadyBound: true, dependents: [], keyLocation: location)
            }
            try step("key stored")
            let keys = try manager.deviceBoundKeys(deviceKey: key)
            defer { keys.wipe() }
            var results: [DeviceKeyRebindResult] = []
            for dependent in dependents {
                results.append(try dependent.rebind(to: keys, step: step))
                try step("rebound")
            }
            var minimum: UInt64 = 0
            if restoring, let anchor = try manager.rollbackAnchor {
                minimum = try anchor.current(RollbackAnchor.vaultState) + 1
            }
            try manager.recordRebinding(to: check, by: credential.name, minimumGeneration: minimum, expectedState: unlockedDigest)
            try step("state recorded")
            manager.forgetDeviceKey()
            return Report(newCheck: check, previousCheck: recorded, alreadyBound: false, dependents: results, keyLocation: location)
        }
    }

    /// The device key the vault is to be bound to, stored before it is returned.
    static func newDeviceKey(manager: CryptoManager, filePath: String?, installation: DeviceKeyInstallation?,
                             recorded: Data?) throws(VaultError) -> (SecretBytes, String) {
        let directory = manager.directory
        let resolvedFile = VaultPaths.absolute(filePath ?? FileDeviceKeyProvider.defaultPath())
        if let installation, installation.kind != .file {
            let key = try VaultError.call { try SecretBytes.random(count: 32) }
            do throws(VaultError) {
                let record = try installation.install(key, home: directory, filePath: filePath)
                if record.kind == .keyring, let name = record.name { KeyringDeviceKeyProvider.evict(description: name) }
                let readBack = try VaultError.call { try record.provider(filePath: filePath).deviceKey() }
                defer { readBack.wipe() }
                guard readBack == key else { throw VaultError.deviceKey("the new provider returned another key than the one stored; nothing was changed") }
                try record.save(directory: directory, filePath: filePath)
                return (key, record.summary)
            } catch {
                key.wipe()
                throw error
            }
        }
        if installation == nil, let record = try DeviceKeyRecord.load(directory: directory, filePath: filePath), record.kind != .file || record.check != recorded {
            // A provider recorded beside the device key on this machine (by an earlier, interrupted
            // re-binding, or by the operator): its key, as it reads now.
            let key = try VaultError.call { try record.provider(filePath: filePath).deviceKey() }
            guard key.count == 32, DeviceKeyRecord.checkValue(of: key) == record.check else {
                key.wipe()
                throw VaultError.deviceKey("the device-key provider recorded beside the device key (\(record.summary)) gives another key than its record names; fix or remove that record (vaults/VAULTID.device-key.provider) and try again")
            }
            return (key, record.summary)
        }
        // The key file: this machine's, created when missing. A file provider record naming the
        // lost key's check is replaced by one naming this key.
        let provider = FileDeviceKeyProvider(path: resolvedFile)
        let key = try provider.deviceKey()
        if let record = try? DeviceKeyRecord.load(directory: directory, filePath: filePath), record.kind == .file {
            var next = record
            next.check = DeviceKeyRecord.checkValue(of: key)
            do throws(VaultError) { try next.save(directory: directory, filePath: filePath) } catch { key.wipe(); throw error }
        } else if installation != nil {
            let record = DeviceKeyRecord(kind: .file, path: resolvedFile, check: DeviceKeyRecord.checkValue(of: key))
            do throws(VaultError) { try record.save(directory: directory, filePath: filePath) } catch { key.wipe(); throw error }
        }
        return (key, resolvedFile)
    }
}
