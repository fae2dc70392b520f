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

// MARK: - X25519

/// An X25519 recipient, `age1…`.
public struct X25519Recipient: AgeRecipient, CustomStringConvertible, Hashable {
    /// The Curve25519 public key.
    public let publicKey: Curve25519.KeyAgreement.PublicKey

    /// Creates a recipient from a public key.
    /// - Parameter publicKey: The Curve25519 public key.
    public init(publicKey: Curve25519.KeyAgreement.PublicKey) { self.publicKey = publicKey }

    /// Parses an `age1…` recipient string.
    /// - Parameter string: The recipient string.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public init(_ string: String) throws(AgeError) {
        guard let (hrp, data) = Bech32.decode(string), hrp == "age" else {
            throw AgeError.invalidRecipient("\(string.prefix(20))… is not an age1… X25519 recipient")
        }
        guard data.count == 32, let key = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: data) else {
            throw AgeError.invalidRecipient("an X25519 recipient holds 32 bytes, this one \(data.count)")
        }
        publicKey = key
    }

    /// The `age1…` encoding.
    public var description: String {
        String(decoding: Bech32.encode(hrp: "age", data: Array(publicKey.rawRepresentation)), as: UTF8.self)
    }

    /// Whether two recipients are the same key.
    /// - Parameters:
    ///   - a: A recipient.
    ///   - b: Another recipient.
    /// - Returns: Whether their public keys are equal.
    public static func == (a: Self, b: Self) -> Bool { a.publicKey.rawRepresentation == b.publicKey.rawRepresentation }
    /// Hashes the public key.
    /// - Parameter hasher: The hasher.
    public func hash(into hasher: inout Hasher) { hasher.combine(publicKey.rawRepresentation) }

    /// Wraps the file key in an `X25519` stanza with a fresh ephemeral share.
    /// - Parameter fileKey: The 16-byte file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError/external(_:)`` with swift-crypto's error if the key agreement or sealing fails.
    public func wrap(fileKey: SecretBytes) throws(AgeError) -> [AgeStanza] {
        return try ageCall {
            let ephemeral = Curve25519.KeyAgreement.PrivateKey()
            let share = Array(ephemeral.publicKey.rawRepresentation)
            let shared = try ephemeral.sharedSecretFromKeyAgreement(with: publicKey)
            let secret = shared.withUnsafeBytes { SecretBytes(copying: $0) }
            defer { secret.wipe() }
            let salt = share + Array(publicKey.rawRepresentation)
            let wrapKey = KeyDerivation.hkdf(secret, salt: salt, info: "age-encryption.org/v1/X25519")
            defer { wrapKey.wipe() }
            return [AgeStanza(type: "X25519", arguments: [AgeBase64.encodeString(share)], body: try KeyWrap.seal(fileKey, key: wrapKey))]
        }
    }
}

/// An X25519 identity, `AGE-SECRET-KEY-1…`.
public struct X25519Identity: AgeIdentity, Sendable {
    /// The Curve25519 private key (held by swift-crypto, which zeroes it when freed).
    public let privateKey: Curve25519.KeyAgreement.PrivateKey

    /// Creates an identity from a private key.
    /// - Parameter privateKey: The Curve25519 private key.
    public init(privateKey: Curve25519.KeyAgreement.PrivateKey) { self.privateKey = privateKey }

    /// A new random identity.
    /// - Returns: The identity.
    public static func generate() -> X25519Identity { X25519Identity(privateKey: .init()) }

    /// Parses `AGE-SECRET-KEY-1…` held in locked memory.
    /// - Parameter encoded: The identity's text.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(encoded: SecretBytes) throws(AgeError) {
        guard var (hrp, data) = encoded.withUnsafeBytes({ Bech32.decode($0) }), hrp == "age-secret-key-" else {
            throw AgeError.invalidIdentity("not an AGE-SECRET-KEY-1… identity")
        }
        defer { for i in data.indices { data[i] = 0 }; hrp = "" }
        guard data.count == 32, let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: data) else {
            throw AgeError.invalidIdentity("an X25519 identity holds 32 bytes")
        }
        privateKey = key
    }

    /// Parses an `AGE-SECRET-KEY-1…` string.
    /// - Parameter string: The identity string.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(_ string: String) throws(AgeError) { try self.init(encoded: SecretBytes(utf8: string)) }

    /// The matching recipient.
    public var recipient: X25519Recipient { X25519Recipient(publicKey: privateKey.publicKey) }

    /// The `AGE-SECRET-KEY-1…` encoding, in locked memory.
    public var encoded: SecretBytes {
        var raw = Array(privateKey.rawRepresentation)
        defer { for i in raw.indices { raw[i] = 0 } }
        var text = Bech32.encode(hrp: "age-secret-key-", data: raw, uppercase: true)
        defer { for i in text.indices { text[i] = 0 } }
        return SecretBytes(copying: text)
    }

    /// Unwraps an `X25519` stanza addressed to this key.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError`` (``AgeError/headerFailure(_:)`` for a malformed stanza of this type).
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        for stanza in stanzas where stanza.type == "X25519" {
            guard stanza.arguments.count == 1 else { throw AgeError.headerFailure("an X25519 stanza must have exactly two arguments") }
            guard let share = AgeBase64.decode(Array(stanza.arguments[0].utf8)), share.count == 32 else {
                throw AgeError.headerFailure("an X25519 share must be canonical base64 of 32 bytes")
            }
            guard stanza.body.count == 32 else { throw AgeError.headerFailure("an X25519 stanza body must be 32 bytes") }
            guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: share),
                  let shared = try? privateKey.sharedSecretFromKeyAgreement(with: peer) else {
                throw AgeError.headerFailure("the X25519 share is a low-order point (all-zero shared secret)")
            }
            let secret = shared.withUnsafeBytes { SecretBytes(copying: $0) }
            defer { secret.wipe() }
            let isZero = secret.withUnsafeBytes { $0.allSatisfy { $0 == 0 } }
            if isZero { throw AgeError.headerFailure("the X25519 share is a low-order point (all-zero shared secret)") }
            let salt = share + Array(privateKey.publicKey.rawRepresentation)
            let wrapKey = KeyDerivation.hkdf(secret, salt: salt, info: "age-encryption.org/v1/X25519")
            defer { wrapKey.wipe() }
            if let fileKey = try KeyWrap.open(stanza.body, key: wrapKey) { return fileKey }
        }
        return nil
    }
}
