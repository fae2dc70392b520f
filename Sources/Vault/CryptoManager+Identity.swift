import Foundation
import Cipher

/// Which vault a data directory holds, as it is on disk now: the identity (device, inode, size,
/// change time) of `vault.state`, `device-key.provider`, `device-key.rotation` and the device-key
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
    let deviceKeyFile: FileIdentity?

    /// Whether a vault state exists (false once erased or never set up).
    public var hasState: Bool { state != nil }

    /// Whether this identity, taken now, is still that of the vault seen at `earlier`. A
    /// device-key file that did not exist then is the one created on its first use since, not
    /// a change.
    public func matches(_ earlier: VaultStateIdentity) -> Bool {
        state == earlier.state && deviceKeyRecord == earlier.deviceKeyRecord && deviceKeyJournal == earlier.deviceKeyJournal
            && (earlier.deviceKeyFile == nil || deviceKeyFile == earlier.deviceKeyFile)
    }
}

extension CryptoManager {
    /// The on-disk identity of the vault in ``directory`` (see ``VaultStateIdentity``).
    public var stateIdentity: VaultStateIdentity {
        VaultStateIdentity(state: FileIdentity(path: statePath),
                           deviceKeyRecord: FileIdentity(path: directory + "/" + DeviceKeyRecord.fileName),
                           deviceKeyJournal: FileIdentity(path: directory + "/" + DeviceKeyRotation.journalName),
                           deviceKeyFile: deviceKeyFilePath.flatMap(FileIdentity.init(path:)))
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
