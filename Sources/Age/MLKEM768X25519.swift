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

// MARK: - ML-KEM-768 + X25519 (X-Wing) hybrid

enum HybridSuite {
    static let info = Data("age-encryption.org/mlkem768x25519".utf8)
    static let ciphersuite = HPKE.Ciphersuite(kem: .XWingMLKEM768X25519, kdf: .HKDF_SHA256, aead: .chaChaPoly)
    static let encLength = 1120
    static let publicKeyLength = 1216
}

/// A post-quantum hybrid recipient, `age1pq1…` (ML-KEM-768 + X25519, X-Wing, through HPKE).
public struct MLKEM768X25519Recipient: AgeRecipient, CustomStringConvertible {
    /// The X-Wing public key (1216 bytes).
    public let publicKey: XWingMLKEM768X25519.PublicKey

    /// Creates a recipient from a public key.
    /// - Parameter publicKey: The X-Wing public key.
    public init(publicKey: XWingMLKEM768X25519.PublicKey) { self.publicKey = publicKey }

    /// Parses an `age1pq1…` recipient string.
    /// - Parameter string: The recipient string.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public init(_ string: String) throws(AgeError) {
        guard let (hrp, data) = Bech32.decode(string), hrp == "age1pq" else {
            throw AgeError.invalidRecipient("\(string.prefix(20))… is not an age1pq1… recipient")
        }
        guard data.count == HybridSuite.publicKeyLength, let key = try? XWingMLKEM768X25519.PublicKey(rawRepresentation: data) else {
            throw AgeError.invalidRecipient("an age1pq1 recipient holds \(HybridSuite.publicKeyLength) bytes, this one \(data.count)")
        }
        publicKey = key
    }

    /// The `age1pq1…` encoding.
    public var description: String {
        String(decoding: Bech32.encode(hrp: "age1pq", data: Array(publicKey.rawRepresentation)), as: UTF8.self)
    }

    /// Wraps the file key with HPKE SealBase in an `mlkem768x25519` stanza.
    /// - Parameter fileKey: The 16-byte file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError/external(_:)`` with swift-crypto's error if HPKE fails.
    public func wrap(fileKey: SecretBytes) throws(AgeError) -> [AgeStanza] {
        return try ageCall {
            var sender = try HPKE.Sender(recipientKey: publicKey, ciphersuite: HybridSuite.ciphersuite, info: HybridSuite.info)
            let body = try fileKey.withUnsafeBytes { try sender.seal($0) }
            return [AgeStanza(type: "mlkem768x25519", arguments: [AgeBase64.encodeString(Array(sender.encapsulatedKey))], body: Array(body))]
        }
    }
}

/// A post-quantum hybrid identity, `AGE-SECRET-KEY-PQ-1…` (a 32-byte X-Wing seed).
public struct MLKEM768X25519Identity: AgeIdentity {
    /// The X-Wing private key.
    public let privateKey: XWingMLKEM768X25519.PrivateKey

    /// Creates an identity from a private key.
    /// - Parameter privateKey: The X-Wing private key.
    init(privateKey: XWingMLKEM768X25519.PrivateKey) { self.privateKey = privateKey }

    /// A new random identity.
    /// - Returns: The identity.
    /// - Throws: ``AgeError/external(_:)`` with swift-crypto's error if the key generator fails.
    public static func generate() throws(AgeError) -> MLKEM768X25519Identity {
        do { return MLKEM768X25519Identity(privateKey: try .generate()) } catch { throw AgeError.wrap(error) }
    }

    /// Parses `AGE-SECRET-KEY-PQ-1…` held in locked memory.
    /// - Parameter encoded: The identity's text.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    init(encoded: SecretBytes) throws(AgeError) {
        guard var (hrp, data) = encoded.withUnsafeBytes({ Bech32.decode($0) }), hrp == "age-secret-key-pq-" else {
            throw AgeError.invalidIdentity("not an AGE-SECRET-KEY-PQ-1… identity")
        }
        defer { for i in data.indices { data[i] = 0 }; hrp = "" }
        guard data.count == 32, let key = try? XWingMLKEM768X25519.PrivateKey(seedRepresentation: data, publicKey: nil) else {
            throw AgeError.invalidIdentity("a hybrid identity holds a 32-byte seed")
        }
        privateKey = key
    }

    /// Parses an `AGE-SECRET-KEY-PQ-1…` string.
    /// - Parameter string: The identity string.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(_ string: String) throws(AgeError) { try self.init(encoded: SecretBytes(utf8: string)) }

    /// The matching recipient.
    public var recipient: MLKEM768X25519Recipient { MLKEM768X25519Recipient(publicKey: privateKey.publicKey) }

    /// The `AGE-SECRET-KEY-PQ-1…` encoding, in locked memory.
    public var encoded: SecretBytes {
        var seed = Array(privateKey.seedRepresentation)
        defer { for i in seed.indices { seed[i] = 0 } }
        var text = Bech32.encode(hrp: "age-secret-key-pq-", data: seed, uppercase: true)
        defer { for i in text.indices { text[i] = 0 } }
        return SecretBytes(copying: text)
    }

    /// A clamped scalar: X25519 with it yields zero exactly for small-order points.
    private static let probe = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: 0x42, count: 32))

    /// Unwraps an `mlkem768x25519` stanza with HPKE OpenBase.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError`` (``AgeError/headerFailure(_:)`` for a malformed stanza of this type).
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        for stanza in stanzas where stanza.type == "mlkem768x25519" {
            guard stanza.arguments.count == 1 else { throw AgeError.headerFailure("an mlkem768x25519 stanza must have exactly two arguments") }
            guard let enc = AgeBase64.decode(Array(stanza.arguments[0].utf8)), enc.count == HybridSuite.encLength else {
                throw AgeError.headerFailure("the mlkem768x25519 enc must be canonical base64 of \(HybridSuite.encLength) bytes")
            }
            guard stanza.body.count == 32 else { throw AgeError.headerFailure("an mlkem768x25519 stanza body must be 32 bytes") }
            // The X25519 half of enc must not be a small-order point (all-zero shared secret).
            let share = Array(enc[(enc.count - 32)...])
            guard let probe = Self.probe, let point = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: share),
                  let probeSecret = try? probe.sharedSecretFromKeyAgreement(with: point),
                  !probeSecret.withUnsafeBytes({ $0.allSatisfy { $0 == 0 } }) else {
                throw AgeError.headerFailure("the X25519 part of the mlkem768x25519 enc is a low-order point (all-zero shared secret)")
            }
            guard var recipient = try? HPKE.Recipient(privateKey: privateKey, ciphersuite: HybridSuite.ciphersuite,
                                                      info: HybridSuite.info, encapsulatedKey: Data(enc)),
                  var plain = try? recipient.open(stanza.body) else { continue }
            defer { plain.resetBytes(in: 0..<plain.count) }
            guard plain.count == 16 else { throw AgeError.headerFailure("the unwrapped file key is not 16 bytes") }
            return SecretBytes(copying: plain)
        }
        return nil
    }
}
