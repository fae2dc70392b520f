import Foundation
import Crypto
import CryptoExtras
import Cipher

/// Something a file key can be wrapped for: produces the recipient stanzas of a header.
public protocol AgeRecipient: Sendable {
    /// Wraps the 16-byte file key into one or more stanzas.
    /// - Parameter fileKey: The file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError`` or a random-generator failure.
    func wrap(fileKey: SecretBytes) throws -> [AgeStanza]
    /// True when this recipient's stanza must be alone in the header (scrypt).
    var requiresSoleStanza: Bool { get }
}

extension AgeRecipient {
    /// Most recipient types can be mixed with others.
    public var requiresSoleStanza: Bool { false }
}

/// Something that can unwrap a file key from the header's stanzas.
public protocol AgeIdentity: Sendable {
    /// Looks for a stanza addressed to this identity and unwraps the file key from it.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError/headerFailure(_:)`` for a stanza of this identity's type that is malformed.
    func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes?
}

/// ChaCha20-Poly1305 with the all-zero nonce, used to wrap file keys.
enum KeyWrap {
    static func seal(_ fileKey: SecretBytes, key: SecretBytes) throws -> [UInt8] {
        let nonce = try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12))
        let box = try fileKey.withUnsafeBytes { try ChaChaPoly.seal($0, using: key.symmetricKey, nonce: nonce) }
        return Array(box.ciphertext) + Array(box.tag)
    }

    /// Nil when authentication fails; checks the body is exactly 32 bytes first.
    static func open(_ body: [UInt8], key: SecretBytes) throws -> SecretBytes? {
        guard body.count == 32 else {
            throw AgeError.headerFailure("a wrapped file key is \(body.count) bytes, not 32")
        }
        guard let nonce = try? ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)),
              let box = try? ChaChaPoly.SealedBox(nonce: nonce, ciphertext: body[0..<16], tag: body[16..<32]),
              var plain = try? ChaChaPoly.open(box, using: key.symmetricKey) else { return nil }
        defer { plain.resetBytes(in: 0..<plain.count) }
        return SecretBytes(copying: plain)
    }
}

// MARK: - X25519

/// An X25519 recipient, `age1…`.
public struct X25519Recipient: AgeRecipient, CustomStringConvertible, Hashable {
    /// The Curve25519 public key.
    public let publicKey: Curve25519.KeyAgreement.PublicKey

    /// Creates a recipient from a public key.
    public init(publicKey: Curve25519.KeyAgreement.PublicKey) { self.publicKey = publicKey }

    /// Parses an `age1…` recipient string.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public init(_ string: String) throws {
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

    public static func == (a: Self, b: Self) -> Bool { a.publicKey.rawRepresentation == b.publicKey.rawRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(publicKey.rawRepresentation) }

    /// Wraps the file key in an `X25519` stanza with a fresh ephemeral share.
    public func wrap(fileKey: SecretBytes) throws -> [AgeStanza] {
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

/// An X25519 identity, `AGE-SECRET-KEY-1…`.
public struct X25519Identity: AgeIdentity, Sendable {
    /// The Curve25519 private key (held by swift-crypto, which zeroes it when freed).
    public let privateKey: Curve25519.KeyAgreement.PrivateKey

    /// Creates an identity from a private key.
    public init(privateKey: Curve25519.KeyAgreement.PrivateKey) { self.privateKey = privateKey }

    /// A new random identity.
    public static func generate() -> X25519Identity { X25519Identity(privateKey: .init()) }

    /// Parses `AGE-SECRET-KEY-1…` held in locked memory.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(encoded: SecretBytes) throws {
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
    public init(_ string: String) throws { try self.init(encoded: SecretBytes(utf8: string)) }

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
    public func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes? {
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
    public init(passphrase: SecretBytes, policy: KDFPolicy = .sensitive) throws {
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

    static func wrapKey(passphrase: SecretBytes, salt: [UInt8], logN: Int) throws -> SecretBytes {
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
        let key = try passphrase.withUnsafeBytes { pw in
            try KDF.Scrypt.deriveKey(from: pw, salt: fullSalt, outputByteCount: 32, rounds: 1 << logN, blockSize: 8, parallelism: 1)
        }
        return SecretBytes(key)
    }

    /// Wraps the file key in an `scrypt` stanza with a fresh 16-byte salt.
    public func wrap(fileKey: SecretBytes) throws -> [AgeStanza] {
        let salt = try SecureRandom.bytes(16)
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
    public func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes? {
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
    public init(publicKey: XWingMLKEM768X25519.PublicKey) { self.publicKey = publicKey }

    /// Parses an `age1pq1…` recipient string.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public init(_ string: String) throws {
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
    public func wrap(fileKey: SecretBytes) throws -> [AgeStanza] {
        var sender = try HPKE.Sender(recipientKey: publicKey, ciphersuite: HybridSuite.ciphersuite, info: HybridSuite.info)
        let body = try fileKey.withUnsafeBytes { try sender.seal($0) }
        return [AgeStanza(type: "mlkem768x25519", arguments: [AgeBase64.encodeString(Array(sender.encapsulatedKey))], body: Array(body))]
    }
}

/// A post-quantum hybrid identity, `AGE-SECRET-KEY-PQ-1…` (a 32-byte X-Wing seed).
public struct MLKEM768X25519Identity: AgeIdentity {
    /// The X-Wing private key.
    public let privateKey: XWingMLKEM768X25519.PrivateKey

    /// Creates an identity from a private key.
    public init(privateKey: XWingMLKEM768X25519.PrivateKey) { self.privateKey = privateKey }

    /// A new random identity.
    /// - Throws: If the key generator fails.
    public static func generate() throws -> MLKEM768X25519Identity {
        MLKEM768X25519Identity(privateKey: try .generate())
    }

    /// Parses `AGE-SECRET-KEY-PQ-1…` held in locked memory.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(encoded: SecretBytes) throws {
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
    public init(_ string: String) throws { try self.init(encoded: SecretBytes(utf8: string)) }

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
    public func unwrap(stanzas: [AgeStanza]) throws -> SecretBytes? {
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
