import Foundation
import Cipher
import HardwareKeys
import Vault

/// The device key sealed to a TPM 2.0, optionally bound to PCR values.
///
/// ``seal(_:to:pcrs:tcti:)`` creates a sealed-data object under the owner hierarchy's primary
/// key (ECC P-256, re-created from the TPM's seed at every use, so nothing but the object's
/// public and encrypted private parts is stored: `PREFIX.pub`, `PREFIX.priv`). Only the same TPM
/// unseals it, so the data directory and these files copied to another machine open nothing;
/// with PCRs the TPM also refuses once a measured component (firmware, boot loader, kernel)
/// changed. The TPM is reached in-process through the TPM Software Stack (HardwareKeys' `TPM2`,
/// shared with TPM-resident TLS keys), with the TCTI spelled as tpm2-tools spell it: `tcti` or
/// `$TPM2TOOLS_TCTI` (for example `swtpm:host=127.0.0.1,port=2321`, or `device:/dev/tpmrm0`).
/// The two files are tpm2-tools' (`tpm2_create -u/-r`): either seals what the other unseals.
public struct TPM2DeviceKeyProvider: DeviceKeyProvider {
    /// `PREFIX` of `PREFIX.pub` and `PREFIX.priv`.
    public let sealedPath: String
    /// PCRs of the SHA-256 bank the key is bound to (empty: none).
    public let pcrs: [Int]
    /// The TCTI (nil: `$TPM2TOOLS_TCTI` or the tools' default).
    public let tcti: String?

    /// A provider of the key sealed at `sealedPath`.
    /// - Parameters:
    ///   - sealedPath: `PREFIX` of `PREFIX.pub` and `PREFIX.priv`.
    ///   - pcrs: The PCRs it is bound to (empty: none).
    ///   - tcti: The TCTI (nil: `$TPM2TOOLS_TCTI`).
    public init(sealedPath: String, pcrs: [Int] = [], tcti: String? = nil) {
        self.sealedPath = VaultPaths.absolute(sealedPath)
        self.pcrs = pcrs
        self.tcti = tcti
    }

    /// Unseals the device key in the TPM (in-process: the TPM Software Stack, the answer
    /// encrypted between the TPM and this process by a session salted with the primary key).
    /// - Returns: The 32-byte device key.
    /// - Throws: `VaultError` when the TPM Software Stack is missing, the TPM does not answer,
    ///   the PCR policy fails or the sealed files are not this TPM's.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        return try VaultError.call {
            let publicArea: [UInt8], privateArea: [UInt8]
            do {
                publicArea = try SecureFile.read(sealedPath + ".pub", maxLength: 16_384)
                privateArea = try SecureFile.read(sealedPath + ".priv", maxLength: 16_384)
            } catch {
                throw VaultError.deviceKey("the sealed device key \(sealedPath).pub/.priv cannot be read: \(error)")
            }
            let key = try unseal(publicArea, privateArea)
            guard key.count == 32 else {
                key.wipe()
                throw VaultError.deviceKey("the TPM unsealed \(key.count) bytes, not a 32-byte device key")
            }
            return key
        }
    }

    /// The sealed bytes of the object with these areas.
    private func unseal(_ publicArea: [UInt8], _ privateArea: [UInt8]) throws(VaultError) -> SecretBytes {
        let what = "the sealed device key \(sealedPath)"
        let pcrs = pcrs
        let result: Result<SecretBytes, HardwareKeyError> = Result { () throws(HardwareKeyError) -> SecretBytes in
            try TPM2.using(tcti, privately: true) { connection throws(HardwareKeyError) -> SecretBytes in
                let primary = try connection.primary()
                defer { connection.flush(primary) }
                let item = try connection.load(parent: primary, publicArea: publicArea, privateArea: privateArea, what)
                defer { connection.flush(item) }
                return try connection.unseal(parent: primary, item: item, pcrs: pcrs, what)
            }
        }
        switch result {
        case .success(let key):
            return key
        case .failure(.tpmPolicyFailed):
            throw .deviceKey("the TPM refused to unseal the device key: PCRs \(pcrs.map(String.init).joined(separator: ",")) differ from their values at sealing (firmware, boot loader or kernel changed, or this is another machine); re-seal with `securefoundation vault migrate-device-key` from a trusted state, or restore the previous boot chain")
        case .failure(let error):
            throw .deviceKey(error.description)
        }
    }

    /// Seals `key` to the TPM: writes `PREFIX.pub` and `PREFIX.priv` (0600), bound to `pcrs`'
    /// current values when given. The key travels to the TPM encrypted (a session salted with
    /// the primary key).
    /// - Parameters:
    ///   - key: The 32-byte device key.
    ///   - prefix: The path prefix of the two files.
    ///   - pcrs: The PCRs (0-23) to bind the key to (empty: none).
    ///   - tcti: The TCTI (nil: `$TPM2TOOLS_TCTI`, else the TPM Software Stack's default).
    /// - Throws: `VaultError/invalidArgument(_:)` for a key that is not 32 bytes or a PCR out of
    ///   range, `VaultError/deviceKey(_:)` when the TPM Software Stack is missing or the TPM fails.
    public static func seal(_ key: SecretBytes, to prefix: String, pcrs: [Int] = [], tcti: String? = nil) throws(VaultError) {
        try VaultError.call {
            guard key.count == 32 else { throw VaultError.invalidArgument("a device key of \(key.count) bytes") }
            guard pcrs.allSatisfy({ (0...23).contains($0) }) else { throw VaultError.invalidArgument("PCRs are 0-23") }
            let pcrs = Array(Set(pcrs)).sorted()
            let prefix = VaultPaths.absolute(prefix)
            try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(prefix))
            let areas = try sealed(key, pcrs: pcrs, tcti: tcti)
            try SecureFile.writeAtomically(areas.publicArea, to: prefix + ".pub")
            try SecureFile.writeAtomically(areas.privateArea, to: prefix + ".priv")
        }
    }

    /// A sealed-data object holding `key`, made under the primary key: its two areas.
    private static func sealed(_ key: SecretBytes, pcrs: [Int], tcti: String?) throws(VaultError)
        -> (publicArea: [UInt8], privateArea: [UInt8]) {
        do {
            return try TPM2.using(tcti, privately: true) { connection throws(HardwareKeyError) in
                let primary = try connection.primary()
                defer { connection.flush(primary) }
                return try connection.create(parent: primary, sealing: key, pcrs: pcrs, "a sealed device key")
            }
        } catch {
            throw .deviceKey(error.description)
        }
    }
}
