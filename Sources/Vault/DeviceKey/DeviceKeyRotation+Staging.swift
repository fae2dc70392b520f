import Foundation
import Cipher

extension DeviceKeyRotation {
    /// The record reading the staged new key of `record` (the provider's real location) and the
    /// renames that put it in place: fixed by the provider's files, never chosen by a journal.
    static func stagedFiles(for record: DeviceKeyRecord, filePath: String?) throws -> (staged: DeviceKeyRecord, moves: [Move]) {
        switch record.kind {
        case .file:
            let path = VaultPaths.absolute(record.path ?? filePath ?? FileDeviceKeyProvider.defaultPath())
            let staged = path + stagedSuffix
            return (DeviceKeyRecord(kind: .file, path: staged, check: record.check), [Move(from: staged, to: path)])
        case .systemdCredential:
            guard let path = record.sealedPath, let name = record.name else {
                throw VaultError.deviceKey("the systemd credential's encrypted file is not recorded, so a new one cannot be written beside it; record it first with `vault migrate-device-key --to systemd-credential --credential-file PATH`")
            }
            let staged = path + stagedSuffix
            return (DeviceKeyRecord(kind: .systemdCredential, name: name, sealedPath: staged, check: record.check), [Move(from: staged, to: path)])
        case .tpm2:
            guard let prefix = record.sealedPath else { throw VaultError.deviceKey("the TPM record names no sealed object") }
            let staged = prefix + stagedSuffix
            return (DeviceKeyRecord(kind: .tpm2, sealedPath: staged, pcrs: record.pcrs, check: record.check),
                    [Move(from: staged + ".pub", to: prefix + ".pub"), Move(from: staged + ".priv", to: prefix + ".priv")])
        case .pkcs11:
            guard let path = record.sealedPath else { throw VaultError.deviceKey("the PKCS #11 record names no wrapped key file") }
            let staged = path + stagedSuffix
            return (DeviceKeyRecord(kind: .pkcs11, sealedPath: staged, module: record.module, uri: record.uri, check: record.check),
                    [Move(from: staged, to: path)])
        case .keyring:
            return try stagedFiles(for: record.backingRecord(), filePath: filePath)
        }
    }

    /// Stores `key` beside the files of `record` (the provider's real location) and returns a
    /// record reading it there, and the renames that put it in place.
    static func stage(_ key: SecretBytes, for record: DeviceKeyRecord, filePath: String, options: Options) throws -> (DeviceKeyRecord, [Move]) {
        let (staged, moves) = try stagedFiles(for: record, filePath: filePath)
        switch staged.kind {
        case .file:
            let path = staged.path ?? ""
            try VaultError.call {
                try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(path))
                try key.withUnsafeBytes { raw in
                    try SecureFile.replaceAtomically(path) { fd in try SecureFile.writeAll(fd, raw, path: path) }
                }
            }
        case .systemdCredential:
            try SystemdCredentialDeviceKeyProvider.seal(key, name: staged.name ?? "", to: staged.sealedPath ?? "", withKey: options.credentialWithKey)
        case .tpm2, .pkcs11:
            try DeviceKeyHardware.backend(for: staged.kind).seal(key, as: staged, refusing: [], tcti: options.tcti)
        case .keyring:
            throw VaultError.deviceKey("a keyring cannot hold a staged key")
        }
        return (staged, moves)
    }

    /// A provider reading `record`'s files directly: no kernel-keyring cache, no
    /// `$CREDENTIALS_DIRECTORY` (which holds what a unit was started with), checked against the record.
    static func stagedProvider(_ record: DeviceKeyRecord, filePath: String? = nil) -> any DeviceKeyProvider {
        let direct = record.backingRecord()
        let inner: any DeviceKeyProvider
        switch direct.kind {
        case .systemdCredential:
            var provider = SystemdCredentialDeviceKeyProvider(name: direct.name ?? "", encryptedCredential: direct.sealedPath)
            provider.readsCredentialsDirectory = false
            inner = provider
        case .tpm2, .pkcs11:
            inner = HardwareDeviceKeyProvider(record: direct)
        case .file, .keyring:
            inner = FileDeviceKeyProvider(path: direct.path ?? filePath)
        }
        return CheckedDeviceKeyProvider(inner: inner, record: record)
    }
}
