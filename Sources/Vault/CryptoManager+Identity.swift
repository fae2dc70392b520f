import Foundation
import Cipher

/// Which vault a data directory holds, as it is on disk now: the identity (device, inode, size,
/// change time) of `vault.state`, the device-key provider record and rotation journal (beside the
/// device key; and the names earlier versions used in the data directory), and the device-key
/// file the manager's provider reads, if any. Every write of
/// the state (setup, a passcode or questions change, a key or class-key rotation), an erase, a
/// device-key migration or rotation, and a file put back from a copy (a new inode and change
/// time, even when its bytes are those of before) give another value. A holder of keys that
/// outlives one command (an unlock agent) compares it before each use and drops its keys when it
/// differs.
public struct VaultStateIdentity: Equatable, Sendable {
    let state: FileIdentity?
    let deviceKeyRecord: FileIdentity?
    let deviceKeyJournal: FileIdentity?
    /// A record in the data directory (earlier versions; never used, but its arrival changes
    /// which key the CLI's provider gives: none).
    let legacyRecord: FileIdentity?
    let deviceKeyFile: FileIdentity?

    /// Whether a vault state exists (false once erased or never set up).
    public var hasState: Bool { state != nil }

    /// Whether this identity, taken now, is still that of the vault seen at `earlier`. A
    /// device-key file that did not exist then is the one created on its first use since, not
    /// a change.
    /// - Parameter earlier: The identity taken before.
    /// - Returns: Whether it is the same vault.
    public func matches(_ earlier: VaultStateIdentity) -> Bool {
        state == earlier.state && deviceKeyRecord == earlier.deviceKeyRecord && deviceKeyJournal == earlier.deviceKeyJournal
            && legacyRecord == earlier.legacyRecord
            && (earlier.deviceKeyFile == nil || deviceKeyFile == earlier.deviceKeyFile)
    }
}

extension CryptoManager {
    /// The on-disk identity of the vault in ``directory`` (see ``VaultStateIdentity``).
    public var stateIdentity: VaultStateIdentity {
        // The record and journal are named by the vault's id, beside the device-key file (the
        // default place when the provider reads no file).
        // The id in memory while unlocked (no read of the state four times a second); a changed
        // state shows in its own identity.
        let vaultID = memory.withLock({ $0.unlocked?.vaultID }) ?? (try? VaultState.load(directory: directory))??.vaultID
        let filePath = deviceKeyFilePath
        let record = vaultID.map { DeviceKeyRecord.trustedPath(vaultID: $0, filePath: filePath) }
        let journal = vaultID.map { DeviceKeyRotation.journalPath(vaultID: $0, filePath: filePath) }
        return VaultStateIdentity(state: FileIdentity(path: statePath),
                                  deviceKeyRecord: record.flatMap(FileIdentity.init(path:)),
                                  deviceKeyJournal: journal.flatMap(FileIdentity.init(path:)),
                                  legacyRecord: FileIdentity(path: directory + "/" + DeviceKeyRecord.fileName),
                                  deviceKeyFile: filePath.flatMap(FileIdentity.init(path:)))
    }

    /// The key file this manager's provider reads (directly or behind a keyring cache), which a
    /// device-key rotation of a vault without a provider record replaces; nil for other providers.
    var deviceKeyFilePath: String? {
        var provider: any DeviceKeyProvider = deviceKeyProvider
        if let checked = provider as? CheckedDeviceKeyProvider { provider = checked.inner }
        if let cache = provider as? KeyringDeviceKeyProvider { provider = cache.backing }
        return (provider as? FileDeviceKeyProvider)?.path
    }

    /// Locks (as ``lock()``) and also drops what ``lock()`` keeps: the afterFirstUnlock keys this
    /// process holds for the vault `vaultID`, and the device key read by this manager. For a
    /// holder of keys that finds the vault erased, replaced or changed (an unlock agent); the
    /// next afterFirstUnlock key needs an unlock again.
    /// - Parameter vaultID: The id of the vault whose keys were held (the state may be gone).
    public func forgetHeldKeys(vaultID: Data?) {
        lock()
        if let vaultID { FirstUnlockCache.remove(vaultID: vaultID) }
        forgetDeviceKey()
    }
}
