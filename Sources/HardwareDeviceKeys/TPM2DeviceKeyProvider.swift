import Foundation
import Cipher
import HardwareKeys
import Vault

/// The device key sealed to a TPM 2.0 (tpm2-tools), optionally bound to PCR values.
///
/// ``seal(_:to:pcrs:tcti:)`` creates a sealed-data object under the owner hierarchy's primary
/// key (ECC P-256, re-created from the TPM's seed at every use, so nothing but the object's
/// public and encrypted private parts is stored: `PREFIX.pub`, `PREFIX.priv`). Only the same TPM
/// unseals it, so the data directory and these files copied to another machine open nothing;
/// with PCRs the TPM also refuses once a measured component (firmware, boot loader, kernel)
/// changed. The TPM is reached as tpm2-tools reach it: `$TPM2TOOLS_TCTI` or `tcti` (for
/// example `swtpm:host=127.0.0.1,port=2321`, or `device:/dev/tpmrm0`). The tpm2-tools plumbing
/// (primary key, PCR policy, flushing) is HardwareKeys' `TPM2`, shared with TPM-resident TLS keys.
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

    var pcrSelection: String { TPM2.pcrSelection(pcrs) }

    /// Unseals the device key in the TPM.
    /// - Returns: The 32-byte device key.
    /// - Throws: `VaultError` when the tools are missing, the TPM does not answer, the PCR
    ///   policy fails or the sealed files are not this TPM's.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        return try VaultError.call {
            TPM2.lock.lock()
            defer { TPM2.lock.unlock() }
            let scratch = try Self.vault { try TPM2.Scratch() }
            // The directory goes with the object: keep it until the end.
            defer { withExtendedLifetime(scratch) {} }
            let directory = scratch.path
            try Self.vault { try TPM2.createPrimary(in: directory, tcti: tcti) }
            try Self.vault {
                try TPM2.call(["tpm2_load", "-C", directory + "/primary.ctx", "-u", sealedPath + ".pub", "-r", sealedPath + ".priv",
                               "-c", directory + "/key.ctx"], "load the sealed device key \(sealedPath)", tcti: tcti)
            }
            TPM2.flush(tcti: tcti)
            defer { TPM2.flush(tcti: tcti) }
            var arguments = ["tpm2_unseal", "-c", directory + "/key.ctx"]
            if !pcrs.isEmpty { arguments += ["-p", "pcr:" + pcrSelection] }
            let result = try Self.vault { try TPM2.run(arguments, tcti: tcti, maxOutput: 128) }
            guard result.status == 0 else {
                result.output.wipe()
                if TPM2.isPolicyFailure(result.error) || result.error.contains("policy") {
                    throw VaultError.deviceKey("the TPM refused to unseal the device key: PCRs \(pcrs.map(String.init).joined(separator: ",")) differ from their values at sealing (firmware, boot loader or kernel changed, or this is another machine); re-seal with `securefoundation vault migrate-device-key` from a trusted state, or restore the previous boot chain")
                }
                throw VaultError.deviceKey(TPM2.failure(result.error, "unseal the device key \(sealedPath)", tcti: tcti).description)
            }
            guard result.output.count == 32 else {
                result.output.wipe()
                throw VaultError.deviceKey("the TPM unsealed \(result.output.count) bytes, not a 32-byte device key")
            }
            return result.output
        }
    }

    /// Seals `key` to the TPM: writes `PREFIX.pub` and `PREFIX.priv` (0600), bound to `pcrs`'
    /// current values when given.
    /// - Parameters:
    ///   - key: The 32-byte device key.
    ///   - prefix: The path prefix of the two files.
    ///   - pcrs: The PCRs (0-23) to bind the key to (empty: none).
    ///   - tcti: The TCTI (nil: `$TPM2TOOLS_TCTI`).
    /// - Throws: `VaultError/invalidArgument(_:)` for a key that is not 32 bytes or a PCR out of
    ///   range, `VaultError/deviceKey(_:)` when the TPM tools are missing or fail.
    public static func seal(_ key: SecretBytes, to prefix: String, pcrs: [Int] = [], tcti: String? = nil) throws(VaultError) {
        try VaultError.call {
            guard key.count == 32 else { throw VaultError.invalidArgument("a device key of \(key.count) bytes") }
            guard pcrs.allSatisfy({ (0...23).contains($0) }) else { throw VaultError.invalidArgument("PCRs are 0-23") }
            let prefix = VaultPaths.absolute(prefix)
            try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(prefix))
            TPM2.lock.lock()
            defer { TPM2.lock.unlock() }
            let scratch = try vault { try TPM2.Scratch() }
            let directory = scratch.path
            try vault { try TPM2.createPrimary(in: directory, tcti: tcti) }
            var create = ["tpm2_create", "-C", directory + "/primary.ctx", "-g", "sha256", "-i", "-",
                          "-u", directory + "/key.pub", "-r", directory + "/key.priv"]
            if !pcrs.isEmpty {
                try vault { try TPM2.pcrPolicy(pcrs, to: directory + "/policy.dat", tcti: tcti) }
                create += ["-L", directory + "/policy.dat", "-a", "fixedtpm|fixedparent|noda"]
            }
            defer { TPM2.flush(tcti: tcti) }
            try vault { try TPM2.call(create, "seal the device key", input: key, tcti: tcti) }
            for suffix in [".pub", ".priv"] {
                let bytes = try vault { try scratch.read("key" + suffix) }
                try SecureFile.writeAtomically(bytes, to: prefix + suffix)
            }
        }
    }

    /// A TPM failure as the vault reports it.
    static func vault<Result>(_ body: () throws -> Result) throws -> Result {
        do { return try body() } catch let error as HardwareKeyError { throw VaultError.deviceKey(error.description) }
    }
}
