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
