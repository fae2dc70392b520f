import Vault
import Keychain
import ProtectedFiles

extension DeviceKeyRotation {
    /// Everything in `manager`'s home that depends on the device key: the protected-file key
    /// table and every keychain (`HOME/keychain.sqlite`, `HOME/*/keychain.sqlite`).
    /// - Parameter manager: The vault whose data directory is searched.
    /// - Returns: The dependents to pass to `DeviceKeyRotation.rotate(manager:filePath:dependents:options:)`.
    public static func dependents(of manager: CryptoManager) -> [any DeviceKeyDependent] {
        [ProtectedFilesDeviceKeyDependent(manager: manager)] + KeychainDeviceKeyDependent.keychains(in: manager.directory)
    }
}

extension DeviceKeyRebinding {
    /// Everything in `manager`'s home that a re-binding moves to the new device key: the
    /// protected-file key table and every keychain.
    /// - Parameters:
    ///   - manager: The vault whose data directory is searched.
    ///   - restoring: The home was just restored from a backup (the key table may be older than the rollback anchor).
    ///   - tableDigest: With `restoring`, the SHA-256 of the key table the restore authenticated,
    ///     or empty when the backup held none (a table found then is refused).
    /// - Returns: The dependents.
    package static func dependents(of manager: CryptoManager, restoring: Bool, tableDigest: [UInt8]? = nil) -> [any DeviceKeyDependent] {
        [ProtectedFilesDeviceKeyDependent(manager: manager, restoring: restoring, expectedDigest: tableDigest)]
            + KeychainDeviceKeyDependent.keychains(in: manager.directory)
    }

    /// Binds `manager`'s vault to this machine's device key when the one it was made with is
    /// lost: the key file (`filePath`, or the default, created when missing) or the provider
    /// recorded beside it. Keychain items, protected-file key pairs and protected databases of
    /// the classes without `ThisDeviceOnly` open again; the ThisDeviceOnly ones are removed and
    /// named in the report. docs/RECOVERY.md describes when to use it.
    /// - Parameters:
    ///   - manager: The vault.
    ///   - credential: The passcode, the answers or the recovery key (a wrong one is a counted attempt).
    ///   - filePath: The device-key file (nil: the default).
    /// - Returns: What was re-bound and left behind.
    /// - Throws: ``VaultError``, ``KeychainError``, ``ProtectedFileError``.
    public static func rebind(manager: CryptoManager, credential: VaultCredential, filePath: String? = nil) throws -> Report {
        try rebind(manager: manager, credential: credential, filePath: filePath, dependents: dependents(of: manager, restoring: false))
    }
}
