import Cipher
import HardwareKeys
import Vault

/// The device-key providers that need hardware: a TPM 2.0 (``TPM2DeviceKeyProvider``) and a
/// PKCS #11 token (``PKCS11DeviceKeyProvider``). They live here, beside HardwareKeys, so that
/// `Vault` and the umbrella module link neither the PKCS #11 loader nor X.509; a program whose
/// vaults may use them registers them once, before it opens a vault:
///
/// ```swift
/// import HardwareDeviceKeys
/// HardwareDeviceKeys.register()
/// ```
///
/// Without the registration, a vault whose provider record names `tpm2` or `pkcs11` refuses
/// to read its device key with `VaultError/deviceKey(_:)` saying what to link.
public enum HardwareDeviceKeys {
    /// Registers the providers of `kinds` with `DeviceKeyHardware` (idempotent).
    /// - Parameter kinds: `.tpm2`, `.pkcs11` (both by default); other kinds are Vault's own.
    public static func register(_ kinds: Set<DeviceKeyRecord.Kind> = [.tpm2, .pkcs11]) {
        if kinds.contains(.tpm2) { DeviceKeyHardware.register(TPM2Backend(), for: .tpm2) }
        if kinds.contains(.pkcs11) { DeviceKeyHardware.register(PKCS11Backend(), for: .pkcs11) }
    }
}

/// The TPM provider as `DeviceKeyHardware` reaches it.
struct TPM2Backend: HardwareDeviceKeyBackend {
    func provider(for record: DeviceKeyRecord) -> any DeviceKeyProvider {
        TPM2DeviceKeyProvider(sealedPath: record.sealedPath ?? "", pcrs: record.pcrs ?? [])
    }

    func seal(_ key: SecretBytes, as record: DeviceKeyRecord, refusing: [String], tcti: String?) throws(VaultError) {
        try TPM2DeviceKeyProvider.seal(key, to: record.sealedPath ?? "", pcrs: record.pcrs ?? [], tcti: tcti)
    }

    func accepts(_ record: DeviceKeyRecord) -> Bool { true }
}

/// The PKCS #11 provider as `DeviceKeyHardware` reaches it.
struct PKCS11Backend: HardwareDeviceKeyBackend {
    func provider(for record: DeviceKeyRecord) -> any DeviceKeyProvider {
        PKCS11DeviceKeyProvider(modulePath: record.module ?? "", uri: record.uri ?? "", sealedPath: record.sealedPath ?? "")
    }

    func seal(_ key: SecretBytes, as record: DeviceKeyRecord, refusing: [String], tcti: String?) throws(VaultError) {
        try PKCS11DeviceKeyProvider(modulePath: record.module ?? "", uri: record.uri ?? "", sealedPath: record.sealedPath ?? "",
                                    refusing: refusing).seal(key)
    }

    func accepts(_ record: DeviceKeyRecord) -> Bool {
        guard let uri = record.uri else { return false }
        return (try? PKCS11URI(uri)) != nil
    }
}
