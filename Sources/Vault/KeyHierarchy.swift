import Foundation
import Cipher

/// The derivations of the key hierarchy (docs/VAULT.md). All are HKDF-SHA256 with an empty salt.
enum KeyHierarchy {
    /// The key that seals application data: HKDF(application key, "securefoundation vault v1 data").
    static func dataKey(_ appKey: SecretBytes) -> SecretBytes {
        defer { appKey.wipe() }  // callers pass a copy
        return KeyDerivation.hkdf(appKey, info: "securefoundation vault v1 data")
    }

    /// The key that seals the state's secret section: HKDF(application key, "securefoundation vault v1 state").
    static func stateKey(_ appKey: SecretBytes) -> SecretBytes {
        KeyDerivation.hkdf(appKey, info: "securefoundation vault v1 state")
    }

    /// whenUnlocked and afterFirstUnlock: HKDF(class master, "securefoundation class NAME v1").
    static func classKey(_ protectionClass: ProtectionClass, master: SecretBytes) -> SecretBytes {
        KeyDerivation.hkdf(master, info: "securefoundation class \(protectionClass.rawValue) v1")
    }

    /// A thisDeviceOnly variant: HKDF(class key ‖ device key, "securefoundation class NAMEThisDeviceOnly v1").
    static func deviceBound(_ classKey: SecretBytes, deviceKey: SecretBytes, protectionClass: ProtectionClass) -> SecretBytes {
        let material = classKey.appending(deviceKey)
        defer { material.wipe() }
        return KeyDerivation.hkdf(material, info: "securefoundation class \(protectionClass.rawValue)ThisDeviceOnly v1")
    }
}
