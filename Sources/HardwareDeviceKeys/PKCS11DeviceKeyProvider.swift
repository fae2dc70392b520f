import Foundation
import Cipher
import HardwareKeys
import Vault

/// The device key wrapped under a key that never leaves a PKCS #11 token (a smart card, a USB
/// token, an HSM, a cloud KMS's PKCS #11 library).
///
/// The token holds a generic secret key (CKK_GENERIC_SECRET, sensitive, not extractable); the
/// token computes HMAC-SHA256 with it over a salt, and the result is the key-encryption key
/// that wraps the device key (AES-256-GCM) in the file `sealedPath`
/// (docs/FORMATS.md, "device-key.pkcs11"). The file and the whole disk copied elsewhere open
/// nothing without the token (and its PIN). The device key itself is not changed: a vault
/// migrates to and from this provider without re-encrypting anything.
///
/// The module is loaded from `modulePath` under the loading rules of `PKCS11Module` (HardwareKeys) (never
/// from inside the directory of the sealed file, which is the data directory by default). The
/// PIN comes from the URI's `pin-source=file:/PATH`, else `pin` (by default the PIN this process
/// holds — `DeviceKeyHardware.holdPIN(_:)`, which the unlock agent calls with the PIN `agent unlock` gave it —
/// else the environment variable `SECUREFOUNDATION_TOKEN_PIN`).
public struct PKCS11DeviceKeyProvider: DeviceKeyProvider {
    /// The module's absolute path.
    public let modulePath: String
    /// The secret key's `pkcs11:` URI.
    public let uri: String
    /// The file holding the wrapped device key.
    public let sealedPath: String
    /// Where the PIN comes from when the URI names no `pin-source`.
    public var pin: PKCS11PINSource
    /// Directories the module must not be in (besides the sealed file's own).
    public var refusing: [String]

    /// The environment variable the PIN is read from by default.
    static let pinEnvironmentVariable = "SECUREFOUNDATION_TOKEN_PIN"

    /// - Parameters:
    ///   - modulePath: The module's absolute path.
    ///   - uri: The secret key's `pkcs11:` URI.
    ///   - sealedPath: The file holding the wrapped device key.
    ///   - pin: Where the PIN comes from (nil: `$SECUREFOUNDATION_TOKEN_PIN`).
    ///   - refusing: Directories the module must not be in.
    public init(modulePath: String, uri: String, sealedPath: String, pin: PKCS11PINSource? = nil, refusing: [String] = []) {
        self.modulePath = modulePath
        self.uri = uri
        self.sealedPath = VaultPaths.absolute(sealedPath)
        self.pin = pin ?? .prompt({
            if let held = DeviceKeyHardware.heldPIN() { return held }
            do {
                return try PKCS11PINSource.environment(Self.pinEnvironmentVariable).read()
            } catch {
                throw HardwareKeyError.pinUnavailable("the environment variable \(Self.pinEnvironmentVariable) is not set and no PIN was given to this process (`securefoundation agent unlock --token-pin` gives one to the unlock agent); or name a file with pin-source= in the URI")
            }
        })
        self.refusing = refusing
    }

    /// Holds `pin` in this process for the device key's token: `DeviceKeyHardware/holdPIN(_:)`.
    /// - Parameter pin: The token's user PIN (a copy is kept), or nil to forget it.
    public static func holdPIN(_ pin: SecretBytes?) { DeviceKeyHardware.holdPIN(pin) }

    /// True: a token can be removed at any time, so the vault reads the key again at every use.
    public var isOnRemovableHardware: Bool { true }

    static let magic: [UInt8] = Array("SFPKCS11".utf8)
    static let version: UInt8 = 1
    static let saltLength = 32
    static let context = Array("securefoundation pkcs11 device key v1".utf8)

    /// Unwraps the device key with the key the token derives.
    /// - Returns: The 32-byte device key.
    /// - Throws: `VaultError` naming the token's error (`CKR_…`) or a wrapped file that does
    ///   not open.
    public func deviceKey() throws(VaultError) -> SecretBytes {
        return try VaultError.call {
            let bytes = try SecureFile.read(sealedPath, maxLength: 4096)
            let header = Self.magic.count + 1 + Self.saltLength
            guard bytes.count > header, Array(bytes[0..<Self.magic.count]) == Self.magic else {
                throw VaultError.corrupted("\(sealedPath) is not a device key wrapped by a PKCS #11 token")
            }
            guard bytes[Self.magic.count] == Self.version else {
                throw VaultError.corrupted("\(sealedPath): version \(bytes[Self.magic.count]) is not supported by this version of SecureFoundation")
            }
            let salt = Array(bytes[(Self.magic.count + 1)..<header])
            let kek = try keyEncryptionKey(salt: salt)
            defer { kek.wipe() }
            do {
                let key = try KeyWrap.unwrap(Array(bytes[header...]), under: kek, aad: Array(bytes[0..<header]))
                guard key.count == 32 else {
                    key.wipe()
                    throw VaultError.corrupted("\(sealedPath) holds a key of \(key.count) bytes, not a 32-byte device key")
                }
                return key
            } catch is KeyWrap.WrongKey {
                throw VaultError.deviceKey("the token's key does not open \(sealedPath): it was wrapped under another token key (another token, or the key was replaced), or the file was changed")
            }
        }
    }

    /// Wraps `key` under the token's key into `sealedPath` (atomically, 0600), then reads it
    /// back through the token.
    /// - Parameter key: The 32-byte device key.
    /// - Throws: `VaultError/invalidArgument(_:)` for a key that is not 32 bytes, and the
    ///   token's or the file's errors.
    public func seal(_ key: SecretBytes) throws(VaultError) {
        try VaultError.call {
            guard key.count == 32 else { throw VaultError.invalidArgument("a device key of \(key.count) bytes") }
            let salt = try SecureRandom.bytes(Self.saltLength)
            let header = Self.magic + [Self.version] + salt
            let kek = try keyEncryptionKey(salt: salt)
            defer { kek.wipe() }
            let wrapped = try KeyWrap.wrap(key, under: kek, aad: header)
            try SecureFile.ensurePrivateDirectory(SecureFile.directoryOf(sealedPath))
            try SecureFile.writeAtomically(header + wrapped, to: sealedPath)
            let back = try deviceKey()
            defer { back.wipe() }
            guard back == key else { throw VaultError.deviceKey("the device key wrapped by the token did not read back the same") }
        }
    }

    /// HMAC-SHA256(token key, context ‖ salt), computed by the token.
    func keyEncryptionKey(salt: [UInt8]) throws -> SecretBytes {
        do {
            let parsed = try PKCS11URI(uri)
            let secretKey = try PKCS11SecretKey(uri: parsed, modulePath: modulePath,
                                                refusing: refusing + [SecureFile.directoryOf(sealedPath)], pin: pin)
            return try secretKey.hmacSHA256(Self.context + salt)
        } catch {
            if case .pinUnavailable(let reason) = error { throw VaultError.tokenPINUnavailable(reason) }
            if let name = error.returnValueName, HardwareKeyError.wrongPINNames.contains(name) {
                throw VaultError.wrongTokenPIN(error.description)
            }
            throw VaultError.deviceKey("the PKCS #11 token cannot unwrap the device key: \(error)")
        }
    }
}
