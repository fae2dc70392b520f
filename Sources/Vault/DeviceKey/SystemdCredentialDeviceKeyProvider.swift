import Foundation
import Cipher

/// The device key from a systemd credential.
///
/// Inside a unit with `LoadCredentialEncrypted=NAME:/path/NAME.cred` (or `LoadCredential=`),
/// systemd decrypts the credential and the key is read from `$CREDENTIALS_DIRECTORY/NAME`.
/// Outside such a unit, when the encrypted credential's path is known, it is decrypted with
/// `systemd-creds decrypt` (which needs root for the host key, and the TPM for a TPM-bound
/// credential). Set up with ``seal(_:name:to:withKey:)`` (`systemd-creds encrypt`).
public struct SystemdCredentialDeviceKeyProvider: DeviceKeyProvider {
    /// The credential's name.
    public let name: String
    /// The encrypted credential file, or nil to rely on `$CREDENTIALS_DIRECTORY` only.
    public let encryptedCredential: String?
    /// Whether `$CREDENTIALS_DIRECTORY/NAME` is read first (a device-key rotation reads the
    /// encrypted file itself: the directory holds what the unit was started with).
    var readsCredentialsDirectory = true

    /// - Parameters:
    ///   - name: The credential's name.
    ///   - encryptedCredential: The encrypted credential file (nil: `$CREDENTIALS_DIRECTORY` only).
    public init(name: String, encryptedCredential: String? = nil) {
        self.name = name
        self.encryptedCredential = encryptedCredential.map { VaultPaths.absolute($0) }
    }

    /// Reads the credential (`$CREDENTIALS_DIRECTORY/NAME`, else `systemd-creds decrypt`).
    /// - Returns: The 32-byte device key.
    /// - Throws: ``VaultError/deviceKey(_:)`` for an invalid name, a credential that cannot be
    ///   read or decrypted, or one that is not 32 bytes.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        return try VaultError.call {
            guard DeviceKeyRecord.validName(name) else { throw VaultError.deviceKey("\"\(name)\" is not a valid credential name") }
            if readsCredentialsDirectory, let directory = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"], directory.hasPrefix("/") {
                let path = directory + "/" + name
                if access(path, F_OK) == 0 {
                    // systemd makes the directory and file readable by the unit's user only (0400/0440).
                    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                    guard fd >= 0 else { throw VaultError.deviceKey("cannot open the credential \(path): \(String(cString: strerror(errno)))") }
                    defer { close(fd) }
                    let key = try SecretBytes(readingFrom: fd, maxLength: 64, trimNewline: false, name: path)
                    guard key.count == 32 else {
                        key.wipe()
                        throw VaultError.deviceKey("the credential \(path) holds \(key.count) bytes, not a 32-byte device key")
                    }
                    return key
                }
            }
            guard let encryptedCredential else {
                throw VaultError.deviceKey("the systemd credential \(name) is not in $CREDENTIALS_DIRECTORY; run under a unit with LoadCredentialEncrypted=\(name):PATH, or record the encrypted credential's path")
            }
            guard let tool = ExternalTool.find("systemd-creds") else {
                throw VaultError.deviceKey("systemd-creds is not installed; it is needed to decrypt \(encryptedCredential)")
            }
            // Anyone can make a credential with the null key (`--with-key=tpm2-absent`) holding a key
            // of their choice, and `systemd-creds decrypt` accepts it with only a warning.
            try Self.refuseNullKey(encryptedCredential)
            let result = try VaultError.tool { try ExternalTool.run([tool, "decrypt", "--name=" + name, encryptedCredential, "-"], maxOutput: 64) }
            if result.status == 0, result.error.lowercased().contains("null key") {
                result.output.wipe()
                throw VaultError.deviceKey(Self.nullKeyRefusal(encryptedCredential))
            }
            guard result.status == 0 else {
                result.output.wipe()
                throw VaultError.deviceKey("systemd-creds could not decrypt \(encryptedCredential) (exit \(result.status)): \(result.error)")
            }
            guard result.output.count == 32 else {
                result.output.wipe()
                throw VaultError.deviceKey("the credential \(encryptedCredential) holds \(result.output.count) bytes, not a 32-byte device key")
            }
            return result.output
        }
    }

    /// The seal-key type of systemd's null key (`CRED_AES256_GCM_BY_NULL`, written by
    /// `systemd-creds encrypt --with-key=tpm2-absent`): the first 16 bytes of the decoded credential.
    static let nullKeyID: [UInt8] = [0x05, 0x84, 0x69, 0xda, 0xf6, 0xf5, 0x43, 0x24, 0x80, 0x05, 0x49, 0xda, 0x0f, 0x8e, 0xa2, 0xfb]

    static func nullKeyRefusal(_ path: String) -> String {
        "the credential \(path) is encrypted with systemd's null key (`--with-key=tpm2-absent`), which anyone can make: it is refused as a device key. Seal the key to the host key or the TPM (`vault migrate-device-key --to systemd-credential --with-key host|tpm2|host+tpm2`)"
    }

    /// Refuses a credential file sealed with the null key: systemd-creds writes base64 whose
    /// first 16 decoded bytes name the seal-key type.
    /// - Throws: ``VaultError/deviceKey(_:)`` for a null-key credential or one that is not base64.
    static func refuseNullKey(_ path: String) throws {
        // A file that cannot be read is left to systemd-creds, which says why.
        guard let text = try? Array(SecureFile.read(path, maxLength: 64 * 1024)) else { return }
        // 24 base64 characters (white space skipped) decode to the 16-byte type and 2 more bytes.
        let characters = text.filter { !($0 == 0x0A || $0 == 0x0D || $0 == 0x20 || $0 == 0x09) }.prefix(24)
        guard characters.count == 24, let header = Data(base64Encoded: Data(characters)), header.count >= 16 else {
            throw VaultError.deviceKey("\(path) is not an encrypted systemd credential")
        }
        if Array(header.prefix(16)) == nullKeyID { throw VaultError.deviceKey(nullKeyRefusal(path)) }
    }

    /// Encrypts `key` into the credential file `path` with `systemd-creds encrypt
    /// --with-key=WITHKEY` (`host`, `tpm2`, `host+tpm2`, `auto`, ...; never `tpm2-absent`, the
    /// null key, which would let anyone make a credential this provider accepts).
    /// - Parameters:
    ///   - key: The 32-byte device key.
    ///   - name: The credential's name (checked by `systemd-creds` when decrypting).
    ///   - path: The credential file to write.
    ///   - withKey: The `--with-key` value.
    /// - Throws: ``VaultError/invalidArgument(_:)`` for an invalid name or the null key,
    ///   ``VaultError/deviceKey(_:)`` when `systemd-creds` is missing or fails.
    public static func seal(_ key: SecretBytes, name: String, to path: String, withKey: String = "host") throws(VaultError) {
        try VaultError.call {
            guard DeviceKeyRecord.validName(name) else { throw VaultError.invalidArgument("\"\(name)\" is not a valid credential name") }
            guard !["tpm2-absent", "null"].contains(withKey.lowercased()) else {
                throw VaultError.invalidArgument("--with-key \(withKey) seals with systemd's null key, which protects nothing: use host, tpm2 or host+tpm2")
            }
            guard let tool = ExternalTool.find("systemd-creds") else {
                throw VaultError.deviceKey("systemd-creds is not installed (Debian: apt-get install systemd)")
            }
            let absolute = VaultPaths.absolute(path)
            try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(absolute))
            let temporary = absolute + ".tmp-" + (try SecureRandom.string(length: 12, alphabet: SecureRandom.alphanumeric))
            defer { unlink(temporary) }
            let result = try VaultError.tool { try ExternalTool.run([tool, "encrypt", "--name=" + name, "--with-key=" + withKey, "-", temporary], input: key) }
            result.output.wipe()
            guard result.status == 0 else {
                throw VaultError.deviceKey("systemd-creds could not encrypt the device key (exit \(result.status)): \(result.error)")
            }
            // `auto-initrd` falls back to the null key without a TPM: refuse what would be refused on reading.
            try refuseNullKey(temporary)
            do { try SecureFile.moveIntoPlace(temporary, over: absolute) } catch {
                throw VaultError.io("cannot install \(absolute): \(error)")
            }
        }
    }
}
