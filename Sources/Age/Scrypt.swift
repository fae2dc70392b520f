#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Crypto
import CryptoExtras
import Cipher

// MARK: - scrypt

/// Passphrase encryption (`scrypt` stanza). Its stanza must be the only one in the header.
public struct ScryptRecipient: AgeRecipient {
    /// The highest work factor (log2 N) accepted when decrypting: 22, the limit of age's
    /// reference implementation (2^22 with r = 8 takes 4 GiB), so every file age opens opens
    /// here. Above Cipher's `KDFCeiling.standard` (1 GiB), which bounds what
    /// ``init(passphrase:policy:)`` writes; lower it per identity with
    /// ``ScryptIdentity/init(passphrase:maximumLogN:)``.
    public static let maximumLogN = 22
    let passphrase: SecretBytes
    /// The scrypt work factor log2 N written to the header.
    public let logN: Int

    /// Creates a passphrase recipient. age uses r = 8, p = 1; N comes from `policy`.
    /// - Parameters:
    ///   - passphrase: The passphrase (not copied; wipe it after encryption).
    ///   - policy: A scrypt KDF policy (default `KDFPolicy.sensitive`, 2^18 as age uses).
    /// - Throws: ``AgeError/invalidArgument(_:)`` for a non-scrypt policy or parameters outside Cipher's bounds.
    public init(passphrase: SecretBytes, policy: KDFPolicy = .sensitive) throws(AgeError) {
        guard case let .scrypt(logN, r, p) = policy.parameters, r == 8, p == 1 else {
            throw AgeError.invalidArgument("age passphrase encryption needs a scrypt policy with r = 8, p = 1, not \(policy.parameters.summary)")
        }
        do { try policy.parameters.validate() } catch { throw AgeError.invalidArgument("\(error)") }
        guard !passphrase.isEmpty else { throw AgeError.invalidArgument("the passphrase is empty") }
        self.passphrase = passphrase
        self.logN = Int(logN)
    }

    /// Internal: any work factor (used by tests to match small test-vector costs).
    init(passphrase: SecretBytes, logN: Int) {
        self.passphrase = passphrase
        self.logN = logN
    }

    public var requiresSoleStanza: Bool { true }

    static func wrapKey(passphrase: SecretBytes, salt: [UInt8], logN: Int) throws(AgeError) -> SecretBytes {
        let fullSalt = Array("age-encryption.org/v1/scrypt".utf8) + salt
        // Within Cipher's bounds, go through its KeyDerivation; age files may use lower work
        // factors (the test vectors use 2^10), which Cipher's floor refuses, so those call
        // swift-crypto's scrypt directly, as do work factors above Cipher's ceiling up to age's
        // own limit (2^22), which ScryptIdentity enforces before calling this.
        let parameters = KDFParameters.scrypt(logN: UInt8(clamping: logN), r: 8, p: 1)
        if (try? parameters.validate()) != nil {
            do { return try KeyDerivation.derive(password: passphrase, salt: fullSalt, parameters: parameters, outputLength: 32) } catch {
                throw AgeError.invalidArgument("scrypt failed: \(error)")
            }
        }
        do {
            let key = try passphrase.withUnsafeBytes { pw in
                try KDF.Scrypt.deriveKey(from: pw, salt: fullSalt, outputByteCount: 32, rounds: 1 << logN, blockSize: 8, parallelism: 1)
            }
            return SecretBytes(key)
        } catch {
            throw AgeError.wrap(error)
        }
    }

    /// Wraps the file key in an `scrypt` stanza with a fresh 16-byte salt.
    /// - Parameter fileKey: The 16-byte file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError/cipher(_:)`` when the random generator fails,
    ///   ``AgeError/invalidArgument(_:)`` or ``AgeError/external(_:)`` when scrypt fails.
    public func wrap(fileKey: SecretBytes) throws(AgeError) -> [AgeStanza] {
        let salt: [UInt8]
        do throws(CipherError) { salt = try SecureRandom.bytes(16) } catch { throw .cipher(error) }
        let key = try Self.wrapKey(passphrase: passphrase, salt: salt, logN: logN)
        defer { key.wipe() }
        return [AgeStanza(type: "scrypt", arguments: [AgeBase64.encodeString(salt), String(logN)], body: try KeyWrap.seal(fileKey, key: key))]
    }
}

/// Passphrase decryption of an `scrypt` stanza.
public struct ScryptIdentity: AgeIdentity {
    let passphrase: SecretBytes
    /// The highest work factor accepted (at most 22).
    public let maximumLogN: Int

    /// - Parameters:
    ///   - passphrase: The passphrase (not copied).
    ///   - maximumLogN: Work factors above this are refused as a header failure (capped at 22).
    public init(passphrase: SecretBytes, maximumLogN: Int = ScryptRecipient.maximumLogN) {
        self.passphrase = passphrase
        self.maximumLogN = min(maximumLogN, ScryptRecipient.maximumLogN)
    }

    /// Unwraps the `scrypt` stanza, which must be the only stanza.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError`` (``AgeError/headerFailure(_:)`` for a malformed stanza of this type).
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        for stanza in stanzas where stanza.type == "scrypt" {
            guard stanzas.count == 1 else { throw AgeError.headerFailure("an scrypt stanza must be the only stanza") }
            guard stanza.arguments.count == 2 else { throw AgeError.headerFailure("an scrypt stanza must have exactly three arguments") }
            guard let salt = AgeBase64.decode(Array(stanza.arguments[0].utf8)), salt.count == 16 else {
                throw AgeError.headerFailure("the scrypt salt must be canonical base64 of 16 bytes")
            }
            let factor = Array(stanza.arguments[1].utf8)
            guard let first = factor.first, first >= 0x31, first <= 0x39, factor.count <= 2,
                  factor.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let logN = Int(stanza.arguments[1]) else {
                throw AgeError.headerFailure("the scrypt work factor \(stanza.arguments[1].prefix(20).debugDescription) is not a decimal number without leading zeros")
            }
            guard logN <= maximumLogN else {
                throw AgeError.headerFailure("the scrypt work factor 2^\(logN) is over the limit 2^\(maximumLogN)")
            }
            guard stanza.body.count == 32 else { throw AgeError.headerFailure("an scrypt stanza body must be 32 bytes") }
            let key = try ScryptRecipient.wrapKey(passphrase: passphrase, salt: salt, logN: logN)
            defer { key.wipe() }
            if let fileKey = try KeyWrap.open(stanza.body, key: key) { return fileKey }
        }
        return nil
    }
}
