import Foundation
import Crypto
import Cipher

/// Where a device key is to be kept and how: what `vault init --device-key-provider` and
/// `vault migrate-device-key --to` ask for, as an application can ask for it.
///
/// ``install(_:home:filePath:)`` stores a key with the chosen provider (a file, a systemd
/// credential, the TPM, a PKCS #11 token, or the kernel keyring in front of one of those) and
/// returns the record naming it; ``migrate(manager:current:filePath:)`` moves a vault's device
/// key to it without changing the key.
package struct DeviceKeyInstallation: Sendable {
    /// The provider.
    package var kind: DeviceKeyRecord.Kind
    /// systemd-credential: the credential's name.
    package var credentialName = DeviceKeyRecord.defaultCredentialName
    /// systemd-credential: where the encrypted credential is written (nil: `HOME/device-key.cred`).
    package var credentialFile: String?
    /// systemd-credential: `systemd-creds --with-key` (host, tpm2, host+tpm2, auto).
    package var withKey = "host"
    /// tpm2: the sealed key's files `PREFIX.pub` and `PREFIX.priv` (nil: `HOME/device-key.tpm`).
    package var tpmSealed: String?
    /// tpm2: the SHA-256 PCRs the key is bound to (0-23).
    package var pcrs: [Int] = []
    /// keyring: seconds the key stays cached in the kernel keyring.
    package var keyringTimeout = 600
    /// keyring: the provider behind the cache (not keyring).
    package var keyringBacking: DeviceKeyRecord.Kind = .file
    /// pkcs11: the token's secret key (an RFC 7512 URI).
    package var pkcs11URI: String?
    /// pkcs11: the token's PKCS #11 module (absolute, outside the data directory).
    package var pkcs11Module: String?
    /// pkcs11: where the device key wrapped by the token is written (nil: `HOME/device-key.pkcs11`).
    package var pkcs11Wrapped: String?

    /// - Parameter kind: The provider; set its settings on the value before installing.
    package init(kind: DeviceKeyRecord.Kind) {
        self.kind = kind
    }

    /// Checks the settings for ``kind`` without storing anything.
    /// - Throws: ``VaultError/invalidArgument(_:)`` saying which setting is wrong.
    package func validate() throws(VaultError) {
        guard pcrs.allSatisfy({ (0...23).contains($0) }) else { throw VaultError.invalidArgument("PCR numbers are 0-23") }
        switch kind {
        case .pkcs11:
            guard pkcs11URI != nil, pkcs11Module != nil else {
                throw VaultError.invalidArgument("the pkcs11 provider needs the token key's URI and the PKCS #11 module (--pkcs11-uri, --pkcs11-module)")
            }
        case .keyring:
            guard keyringBacking != .keyring else { throw VaultError.invalidArgument("the keyring's backing provider cannot be keyring") }
            guard keyringTimeout >= 1 else { throw VaultError.invalidArgument("the keyring timeout must be at least 1 second") }
            var backing = self
            backing.kind = keyringBacking
            try backing.validate()
        default:
            break
        }
    }

    /// Puts `key` where ``kind`` keeps it and returns the record naming it (the key is not
    /// changed; the record is not saved).
    /// - Parameters:
    ///   - key: The device key (32 bytes).
    ///   - home: The vault's data directory (default places of the sealed files).
    ///   - filePath: The device-key file (the file provider's, and where the record is kept beside).
    /// - Returns: The record naming where the key is.
    /// - Throws: ``VaultError/invalidArgument(_:)`` for wrong settings; ``VaultError/deviceKey(_:)``
    ///   when a file already holds another key; the providers' errors.
    package func install(_ key: SecretBytes, home: String, filePath: String?) throws(VaultError) -> DeviceKeyRecord {
        return try VaultError.call {
            try validate()
            let check = DeviceKeyRecord.checkValue(of: key)
            switch kind {
            case .file:
                let path = filePath.map { VaultPaths.absolute($0) } ?? FileDeviceKeyProvider.defaultPath()
                if access(path, F_OK) == 0 {
                    let existing = try FileDeviceKeyProvider(path: path).deviceKey()
                    defer { existing.wipe() }
                    guard existing == key else {
                        throw VaultError.deviceKey("\(path) already holds another device key; give another --device-key path")
                    }
                } else {
                    try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(path))
                    try key.withUnsafeBytes { try SecureFile.writeAtomically(Array($0), to: path) }
                }
                return DeviceKeyRecord(kind: .file, path: path, check: check)
            case .systemdCredential:
                let path = VaultPaths.absolute(credentialFile ?? home + "/device-key.cred")
                try SystemdCredentialDeviceKeyProvider.seal(key, name: credentialName, to: path, withKey: withKey)
                return DeviceKeyRecord(kind: .systemdCredential, name: credentialName, sealedPath: path, check: check)
            case .tpm2:
                let prefix = VaultPaths.absolute(tpmSealed ?? home + "/device-key.tpm")
                let record = DeviceKeyRecord(kind: .tpm2, sealedPath: prefix, pcrs: pcrs, check: check)
                try DeviceKeyHardware.backend(for: .tpm2).seal(key, as: record, refusing: [], tcti: nil)
                return record
            case .pkcs11:
                guard let pkcs11URI, let pkcs11Module else { throw VaultError.invalidArgument("the pkcs11 provider needs a URI and a module") }
                let path = VaultPaths.absolute(pkcs11Wrapped ?? home + "/device-key.pkcs11")
                let record = DeviceKeyRecord(kind: .pkcs11, sealedPath: path, module: pkcs11Module, uri: pkcs11URI, check: check)
                try DeviceKeyHardware.backend(for: .pkcs11).seal(key, as: record, refusing: [home], tcti: nil)
                return record
            case .keyring:
                var backing = self
                backing.kind = keyringBacking
                var record = try backing.install(key, home: home, filePath: filePath)
                record.backing = record.kind
                record.backingName = record.kind == .systemdCredential ? record.name : nil
                record.kind = .keyring
                record.name = "securefoundation:device-key:" + VaultPaths.digest(of: home)
                record.timeout = keyringTimeout
                return record
            }
        }
    }

    /// Moves the device key of `manager`'s vault to this provider without changing it: the key
    /// is read from `current`, stored here, read back and checked through the new record, and
    /// only then is the record saved (beside the device key). The old copy is left where it was.
    /// - Parameters:
    ///   - manager: The vault (set up; it need not be unlocked).
    ///   - current: The vault's present device-key provider.
    ///   - filePath: The device-key file the record is kept beside.
    /// - Returns: The new record.
    /// - Throws: What ``install(_:home:filePath:)`` throws, the providers' errors, and
    ///   ``VaultError/deviceKey(_:)`` when the key read back differs.
    @discardableResult
    package func migrate(manager: CryptoManager, current: any DeviceKeyProvider, filePath: String?) throws(VaultError) -> DeviceKeyRecord {
        return try VaultError.call {
            let previous = try? DeviceKeyRecord.load(directory: manager.directory, filePath: filePath)
            let key = try current.deviceKey()
            defer { key.wipe() }
            let record = try install(key, home: manager.directory, filePath: filePath)
            // A keyring entry under the new description may be another vault's (an erased one at
            // this path): the read-back below must take the key from its source.
            if record.kind == .keyring, let name = record.name { KeyringDeviceKeyProvider.evict(description: name) }
            let readBack = try record.provider(filePath: filePath).deviceKey()
            defer { readBack.wipe() }
            guard readBack == key else { throw VaultError.deviceKey("the new provider returned another key than the one stored; nothing was changed") }
            try record.save(directory: manager.directory, filePath: filePath)
            // The old provider's keyring cache no longer names this vault's key source.
            if let previous, previous.kind == .keyring, let name = previous.name, !(record.kind == .keyring && record.name == name) {
                KeyringDeviceKeyProvider.evict(description: name)
            }
            return record
        }
    }
}
