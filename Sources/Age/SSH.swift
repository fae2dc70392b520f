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
import Cipher
import CAgePayload
import CPlatform

// age's SSH recipient types (age-encryption.org/v1 `ssh-ed25519` and `ssh-rsa` stanzas), as the
// reference implementation's agessh package defines them: encryption to the SSH public keys
// people already have, decryption with their OpenSSH private keys.

/// The SSH wire encoding (RFC 4251): big-endian uint32 lengths, strings, mpints.
struct SSHReader {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { index == bytes.count }
    var remaining: Int { bytes.count - index }

    mutating func uint32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { index += 4 }
        return UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8 | UInt32(bytes[index + 3])
    }

    mutating func string() -> [UInt8]? {
        guard let length = uint32(), Int(length) <= remaining else { return nil }
        defer { index += Int(length) }
        return Array(bytes[index..<index + Int(length)])
    }

    /// A non-negative mpint as its magnitude without leading zeros.
    mutating func mpint() -> [UInt8]? {
        guard let value = string() else { return nil }
        if let first = value.first, first & 0x80 != 0 { return nil }
        return Array(value.drop(while: { $0 == 0 }))
    }

    /// Zeroes the bytes the reader holds, in place (see ``Scrub/zero(_:)``).
    func wipe() { Scrub.zero(bytes) }
}

/// Zeroes secret bytes held in arrays.
enum Scrub {
    /// Zeroes the storage of `array` in place, shared or not: copies of an array share its
    /// storage until one is mutated, and mutating one to zero it would copy it first and leave
    /// the shared bytes as they were.
    static func zero(_ array: [UInt8]) {
        array.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            sf_secure_zero(UnsafeMutableRawPointer(mutating: base), buffer.count)
        }
    }
}

enum SSHWire {
    static func string(_ value: [UInt8]) -> [UInt8] {
        let n = UInt32(value.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + value
    }

    static func mpint(_ magnitude: [UInt8]) -> [UInt8] {
        let trimmed = Array(magnitude.drop(while: { $0 == 0 }))
        if let first = trimmed.first, first & 0x80 != 0 { return string([0] + trimmed) }
        return string(trimmed)
    }

    /// The stanza's first argument: unpadded base64 of the first 4 bytes of SHA-256 of the
    /// public key's wire encoding.
    static func tag(_ publicKey: [UInt8]) -> String {
        AgeBase64.encodeString(Array(SHA256.hash(data: publicKey).prefix(4)))
    }
}

/// A parsed SSH public key (wire encoding kept, as the stanza tag and the ssh-ed25519 tweak use it).
enum SSHPublicKey {
    case ed25519(key: [UInt8], wire: [UInt8])
    case rsa(n: [UInt8], e: [UInt8], wire: [UInt8])
    case other(type: String)

    /// Parses the wire encoding of a public key.
    static func parse(wire: [UInt8]) -> SSHPublicKey? {
        var reader = SSHReader(wire)
        guard let type = reader.string() else { return nil }
        switch String(decoding: type, as: UTF8.self) {
        case "ssh-ed25519":
            guard let key = reader.string(), key.count == 32, reader.isAtEnd else { return nil }
            return .ed25519(key: key, wire: wire)
        case "ssh-rsa":
            guard let e = reader.mpint(), let n = reader.mpint(), reader.isAtEnd, !e.isEmpty, !n.isEmpty else { return nil }
            return .rsa(n: n, e: e, wire: wire)
        default:
            return .other(type: String(decoding: type, as: UTF8.self))
        }
    }

    /// Parses an authorized_keys line or `.pub` file: `TYPE BASE64 [COMMENT]` (the type of the
    /// key is the one its encoding names, as OpenSSH and age read it). Options before the type
    /// are not accepted, as age does not accept them.
    static func parse(authorizedKey line: String) -> SSHPublicKey? {
        let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
        guard fields.count >= 2, let wire = AgeBase64.decode(Array(fields[1].utf8), padded: true) else { return nil }
        return parse(wire: wire)
    }
}

/// The label of the ssh-ed25519 HKDFs and of the ssh-rsa OAEP.
private let ed25519Label = "age-encryption.org/v1/ssh-ed25519"
private let rsaLabel = Array("age-encryption.org/v1/ssh-rsa".utf8)

/// Shared by the ssh-ed25519 recipient and identity.
enum SSHEd25519Math {
    /// The X25519 public key of an Ed25519 public key (the birational map), or nil for bytes
    /// that are not a curve point.
    static func montgomery(_ edwards: [UInt8]) -> [UInt8]? {
        guard edwards.count == 32 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        let ok = edwards.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { sf_ssh_ed25519_to_x25519(input.baseAddress!, $0.baseAddress!) }
        }
        return ok == 1 ? out : nil
    }

    /// X25519(HKDF-SHA-256(empty key material, salt: SSH public key, info: label), shared
    /// secret): the tweaked secret.
    static func tweak(_ secret: SharedSecret, sshKey: [UInt8]) throws -> SecretBytes {
        let scalar = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: [UInt8]()), salt: sshKey,
                                            info: Array(ed25519Label.utf8), outputByteCount: 32)
        let tweak = try scalar.withUnsafeBytes { try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: $0) }
        let point = try secret.withUnsafeBytes { try Curve25519.KeyAgreement.PublicKey(rawRepresentation: $0) }
        let tweaked = try tweak.sharedSecretFromKeyAgreement(with: point)
        return tweaked.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    static func wrapKey(tweaked: SecretBytes, share: [UInt8], recipient: [UInt8]) -> SecretBytes {
        KeyDerivation.hkdf(tweaked, salt: share + recipient, info: ed25519Label)
    }
}

// MARK: - ssh-ed25519

/// An SSH Ed25519 public key as an age recipient (`ssh-ed25519 AAAA…`): an `ssh-ed25519`
/// stanza, readable with the matching OpenSSH private key (``SSHEd25519Identity``).
public struct SSHEd25519Recipient: AgeRecipient, CustomStringConvertible, Hashable {
    let wire: [UInt8]
    let montgomery: Curve25519.KeyAgreement.PublicKey
    /// The stanza tag (first 4 bytes of SHA-256 of the SSH public key, base64).
    public let tag: String

    /// Parses `ssh-ed25519 AAAA… [comment]` (an authorized_keys line or a `.pub` file).
    /// - Parameter authorizedKey: The public key line.
    /// - Throws: ``AgeError/invalidRecipient(_:)``.
    public init(_ authorizedKey: String) throws(AgeError) {
        guard case .ed25519(let key, let wire)? = SSHPublicKey.parse(authorizedKey: authorizedKey) else {
            throw AgeError.invalidRecipient("not an ssh-ed25519 public key (`ssh-ed25519 AAAA… [comment]`)")
        }
        try self.init(ed25519: key, wire: wire)
    }

    /// A recipient for an Ed25519 public key.
    /// - Parameter publicKey: The Ed25519 public key.
    /// - Throws: ``AgeError/invalidRecipient(_:)`` when the key is not a point of the curve.
    public init(publicKey: Curve25519.Signing.PublicKey) throws(AgeError) {
        let key = Array(publicKey.rawRepresentation)
        try self.init(ed25519: key, wire: SSHWire.string(Array("ssh-ed25519".utf8)) + SSHWire.string(key))
    }

    init(ed25519 key: [UInt8], wire: [UInt8]) throws(AgeError) {
        guard let u = SSHEd25519Math.montgomery(key), let point = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: u) else {
            throw AgeError.invalidRecipient("the ssh-ed25519 public key is not a valid Ed25519 point")
        }
        self.wire = wire
        self.montgomery = point
        self.tag = SSHWire.tag(wire)
    }

    /// `ssh-ed25519 AAAA…`, without comment.
    public var description: String {
        "ssh-ed25519 " + String(decoding: AgeBase64.encode(wire, padded: true), as: UTF8.self)
    }

    /// Whether two recipients are the same key.
    /// - Parameters:
    ///   - a: A recipient.
    ///   - b: Another recipient.
    /// - Returns: Whether their public keys are equal.
    public static func == (a: Self, b: Self) -> Bool { a.wire == b.wire }
    /// Hashes the public key.
    /// - Parameter hasher: The hasher.
    public func hash(into hasher: inout Hasher) { hasher.combine(wire) }

    /// Wraps the file key in an `ssh-ed25519 TAG SHARE` stanza.
    /// - Parameter fileKey: The 16-byte file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError/external(_:)`` with swift-crypto's error if the key agreement or
    ///   sealing fails.
    public func wrap(fileKey: SecretBytes) throws(AgeError) -> [AgeStanza] {
        return try ageCall {
            let ephemeral = Curve25519.KeyAgreement.PrivateKey()
            let share = Array(ephemeral.publicKey.rawRepresentation)
            let shared = try ephemeral.sharedSecretFromKeyAgreement(with: montgomery)
            let tweaked = try SSHEd25519Math.tweak(shared, sshKey: wire)
            defer { tweaked.wipe() }
            let key = SSHEd25519Math.wrapKey(tweaked: tweaked, share: share, recipient: Array(montgomery.rawRepresentation))
            defer { key.wipe() }
            return [AgeStanza(type: "ssh-ed25519", arguments: [tag, AgeBase64.encodeString(share)], body: try KeyWrap.seal(fileKey, key: key))]
        }
    }
}

/// An OpenSSH Ed25519 private key as an age identity (unwraps `ssh-ed25519` stanzas).
public struct SSHEd25519Identity: AgeIdentity {
    let scalar: Curve25519.KeyAgreement.PrivateKey
    /// The recipient this identity decrypts for.
    public let recipient: SSHEd25519Recipient

    /// An identity for an Ed25519 signing key.
    /// - Parameter privateKey: The Ed25519 private key.
    /// - Throws: ``AgeError/invalidIdentity(_:)``.
    public init(privateKey: Curve25519.Signing.PrivateKey) throws(AgeError) {
        let seed = Array(privateKey.rawRepresentation)
        defer { Scrub.zero(seed) }
        try self.init(seed: seed, publicKey: Array(privateKey.publicKey.rawRepresentation))
    }

    /// The X25519 scalar is the first half of SHA-512 of the seed (clamped by X25519).
    init(seed: [UInt8], publicKey: [UInt8]) throws(AgeError) {
        let digest = Array(SHA512.hash(data: seed))
        defer { Scrub.zero(digest) }
        guard let scalar = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: digest[0..<32]) else {
            throw AgeError.invalidIdentity("the Ed25519 seed does not make an X25519 key")
        }
        do {
            recipient = try SSHEd25519Recipient(ed25519: publicKey, wire: SSHWire.string(Array("ssh-ed25519".utf8)) + SSHWire.string(publicKey))
        } catch { throw AgeError.invalidIdentity("the ssh-ed25519 public key is not a valid Ed25519 point") }
        guard scalar.publicKey.rawRepresentation == recipient.montgomery.rawRepresentation else {
            throw AgeError.invalidIdentity("the Ed25519 private key does not match its public key")
        }
        self.scalar = scalar
    }

    /// Unwraps an `ssh-ed25519` stanza whose tag is this key's.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError`` (``AgeError/headerFailure(_:)`` for a malformed stanza of this type).
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        for stanza in stanzas where stanza.type == "ssh-ed25519" {
            guard stanza.arguments.count == 2 else { throw AgeError.headerFailure("an ssh-ed25519 stanza must have exactly three arguments") }
            guard let share = AgeBase64.decode(Array(stanza.arguments[1].utf8)), share.count == 32 else {
                throw AgeError.headerFailure("an ssh-ed25519 share must be canonical base64 of 32 bytes")
            }
            guard stanza.arguments[0] == recipient.tag else { continue }
            guard stanza.body.count == 32 else { throw AgeError.headerFailure("an ssh-ed25519 stanza body must be 32 bytes") }
            guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: share),
                  let shared = try? scalar.sharedSecretFromKeyAgreement(with: peer),
                  !shared.withUnsafeBytes({ $0.allSatisfy { $0 == 0 } }),
                  let tweaked = try? SSHEd25519Math.tweak(shared, sshKey: recipient.wire) else {
                throw AgeError.headerFailure("the ssh-ed25519 share is a low-order point (all-zero shared secret)")
            }
            defer { tweaked.wipe() }
            let key = SSHEd25519Math.wrapKey(tweaked: tweaked, share: share, recipient: Array(recipient.montgomery.rawRepresentation))
            defer { key.wipe() }
            if let fileKey = try KeyWrap.open(stanza.body, key: key) { return fileKey }
        }
        return nil
    }
}

// MARK: - ssh-rsa

/// An SSH RSA public key (2048 bits or more) as an age recipient (`ssh-rsa AAAA…`): an
/// `ssh-rsa` stanza, RSA-OAEP with SHA-256 and the label `age-encryption.org/v1/ssh-rsa`.
public struct SSHRSARecipient: AgeRecipient, CustomStringConvertible, Hashable {
    let n: [UInt8]
    let e: [UInt8]
    let wire: [UInt8]
    /// The stanza tag (first 4 bytes of SHA-256 of the SSH public key, base64).
    public let tag: String

    /// Parses `ssh-rsa AAAA… [comment]`.
    /// - Parameter authorizedKey: The public key line.
    /// - Throws: ``AgeError/invalidRecipient(_:)`` (also for keys under 2048 bits, as age refuses them).
    public init(_ authorizedKey: String) throws(AgeError) {
        guard case .rsa(let n, let e, let wire)? = SSHPublicKey.parse(authorizedKey: authorizedKey) else {
            throw AgeError.invalidRecipient("not an ssh-rsa public key (`ssh-rsa AAAA… [comment]`)")
        }
        try self.init(n: n, e: e, wire: wire)
    }

    init(n: [UInt8], e: [UInt8], wire: [UInt8]) throws(AgeError) {
        guard !e.isEmpty else { throw AgeError.invalidRecipient("the ssh-rsa key has a zero exponent") }
        guard n.count >= 256 else {
            throw AgeError.invalidRecipient("the ssh-rsa key has \(n.count * 8) bits or fewer; age needs at least 2048")
        }
        self.n = n
        self.e = e
        self.wire = wire
        self.tag = SSHWire.tag(wire)
    }

    /// `ssh-rsa AAAA…`, without comment.
    public var description: String {
        "ssh-rsa " + String(decoding: AgeBase64.encode(wire, padded: true), as: UTF8.self)
    }

    /// Whether two recipients are the same key.
    /// - Parameters:
    ///   - a: A recipient.
    ///   - b: Another recipient.
    /// - Returns: Whether their public keys are equal.
    public static func == (a: Self, b: Self) -> Bool { a.wire == b.wire }
    /// Hashes the public key.
    /// - Parameter hasher: The hasher.
    public func hash(into hasher: inout Hasher) { hasher.combine(wire) }

    /// Wraps the file key in an `ssh-rsa TAG` stanza.
    /// - Parameter fileKey: The 16-byte file key.
    /// - Returns: The stanzas to put in the header.
    /// - Throws: ``AgeError/invalidRecipient(_:)`` when RSA-OAEP refuses the key.
    public func wrap(fileKey: SecretBytes) throws(AgeError) -> [AgeStanza] {
        var out = [UInt8](repeating: 0, count: n.count + 1)
        var length = 0
        let ok = fileKey.withUnsafeBytes { key in
            out.withUnsafeMutableBufferPointer { buffer in
                sf_ssh_rsa_oaep_encrypt(n, n.count, e, e.count, rsaLabel, rsaLabel.count,
                                        key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count,
                                        buffer.baseAddress!, buffer.count, &length)
            }
        }
        guard ok == 1 else { throw AgeError.invalidRecipient("the ssh-rsa key is refused by RSA-OAEP (its modulus or exponent is out of range)") }
        return [AgeStanza(type: "ssh-rsa", arguments: [tag], body: Array(out[0..<length]))]
    }
}

/// An OpenSSH RSA private key as an age identity (unwraps `ssh-rsa` stanzas).
public struct SSHRSAIdentity: AgeIdentity {
    let d: SecretBytes
    let p: SecretBytes
    let q: SecretBytes
    /// The recipient this identity decrypts for.
    public let recipient: SSHRSARecipient

    init(n: [UInt8], e: [UInt8], d: [UInt8], p: [UInt8], q: [UInt8]) throws(AgeError) {
        guard !e.isEmpty, !d.isEmpty, !p.isEmpty, !q.isEmpty else { throw AgeError.invalidIdentity("the RSA private key has a zero parameter") }
        do {
            recipient = try SSHRSARecipient(n: n, e: e, wire: SSHWire.string(Array("ssh-rsa".utf8)) + SSHWire.mpint(e) + SSHWire.mpint(n))
        } catch { throw AgeError.invalidIdentity("the RSA key has fewer than 2048 bits, which age does not accept") }
        self.d = SecretBytes(copying: d)
        self.p = SecretBytes(copying: p)
        self.q = SecretBytes(copying: q)
    }

    /// Unwraps an `ssh-rsa` stanza whose tag is this key's.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError`` (``AgeError/headerFailure(_:)`` for a malformed stanza of this type).
    public func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        for stanza in stanzas where stanza.type == "ssh-rsa" {
            guard stanza.arguments.count == 1 else { throw AgeError.headerFailure("an ssh-rsa stanza must have exactly two arguments") }
            guard stanza.arguments[0] == recipient.tag else { continue }
            let n = recipient.n, e = recipient.e
            var length = 0
            var result: Int32 = -1
            // The plaintext goes straight into locked memory.
            let plain = SecretBytes(count: n.count) { out in
                result = d.withUnsafeBytes { d in p.withUnsafeBytes { p in q.withUnsafeBytes { q in
                    sf_ssh_rsa_oaep_decrypt(n, n.count, e, e.count,
                                            d.baseAddress!.assumingMemoryBound(to: UInt8.self), d.count,
                                            p.baseAddress!.assumingMemoryBound(to: UInt8.self), p.count,
                                            q.baseAddress!.assumingMemoryBound(to: UInt8.self), q.count,
                                            rsaLabel, rsaLabel.count, stanza.body, stanza.body.count,
                                            out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &length)
                } } }
            }
            defer { plain.wipe() }
            if result < 0 { throw AgeError.invalidIdentity("the RSA private key is not consistent (its check failed)") }
            if result == 0 { continue }
            guard length == 16 else { throw AgeError.headerFailure("the ssh-rsa stanza holds a \(length)-byte file key, not 16") }
            return plain.slice(0..<length)
        }
        return nil
    }
}

// MARK: - Passphrase-protected keys

/// A passphrase-protected OpenSSH private key. Its public key is readable, so it recognises
/// the stanzas addressed to it; the first time one is, the passphrase is asked for (the
/// `passphrase` given when the file was read) and the key is decrypted by OpenSSH's
/// `ssh-keygen` in memory (the key derivation of these keys, bcrypt_pbkdf, is built on
/// Blowfish, which swift-crypto does not offer and this project does not implement; see
/// `SSHKeyDecryption`). The decrypted identity is kept for later files. Without a passphrase source,
/// or without `ssh-keygen`, unwrapping fails with ``AgeError/invalidIdentity(_:)`` saying what to do.
package struct EncryptedSSHIdentity: AgeIdentity {
    let type: String
    let tag: String
    let wire: [UInt8]
    /// Where the key came from, for the message.
    package let name: String
    let contents: SecretBytes?
    let passphrase: (@Sendable () throws -> SecretBytes)?
    let decrypted = DecryptedKey()

    /// The identity once decrypted (one decryption per key file read).
    final class DecryptedKey: @unchecked Sendable {
        let lock = Lock()
        var identity: (any AgeIdentity)?
    }

    init?(publicKey: SSHPublicKey, name: String, contents: SecretBytes? = nil, passphrase: (@Sendable () throws -> SecretBytes)? = nil) {
        switch publicKey {
        case .ed25519(_, let wire): type = "ssh-ed25519"; self.wire = wire
        case .rsa(_, _, let wire): type = "ssh-rsa"; self.wire = wire
        case .other: return nil
        }
        tag = SSHWire.tag(wire)
        self.name = name
        self.contents = contents
        self.passphrase = passphrase
    }

    /// The public key (`ssh-ed25519 AAAA…`, `ssh-rsa AAAA…`), readable without the passphrase.
    package var publicKey: String { type + " " + String(decoding: AgeBase64.encode(wire, padded: true), as: UTF8.self) }

    static func refusal(_ name: String) -> AgeError {
        .invalidIdentity("\(name) is a passphrase-protected SSH key and no passphrase can be asked here; "
                         + "give it on a terminal, or decrypt a copy with `cp \(name) COPY && ssh-keygen -p -N \"\" -f COPY`, use COPY, and delete it afterwards")
    }

    /// Nil unless a stanza is addressed to this key; then decrypts the key (once) and unwraps.
    /// - Parameter stanzas: All stanzas of the header.
    /// - Returns: The 16-byte file key, or nil when no stanza is for this identity.
    /// - Throws: ``AgeError/noMatchingIdentity(_:)`` for a wrong passphrase; ``AgeError/invalidIdentity(_:)``
    ///   when the key cannot be decrypted here; ``AgeError/headerFailure(_:)`` for a malformed stanza of this type.
    package func unwrap(stanzas: [AgeStanza]) throws(AgeError) -> SecretBytes? {
        return try ageCall {
            guard stanzas.contains(where: { $0.type == type && $0.arguments.first == tag }) else { return nil }
            return try identity().unwrap(stanzas: stanzas)
        }
    }

    /// The decrypted identity, checked against the public key in clear.
    func identity() throws -> any AgeIdentity {
        try decrypted.lock.withLock {
            if let identity = decrypted.identity { return identity }
            guard let contents, let passphrase else { throw Self.refusal(name) }
            let secret = try passphrase()
            defer { secret.wipe() }
            let plain = try SSHKeyDecryption.decrypt(contents, passphrase: secret, name: name)
            defer { plain.wipe() }
            let identity = try SSHPrivateKeyFile.identity(plain, name: name)
            guard !(identity is EncryptedSSHIdentity), AgeKeys.recipient(of: identity) == publicKey else {
                throw AgeError.invalidIdentity("ssh-keygen returned another key than \(name)'s public key")
            }
            decrypted.identity = identity
            return identity
        }
    }
}

// MARK: - Private key files

enum SSHPrivateKeyFile {
    static let opensshBegin = Array("-----BEGIN OPENSSH PRIVATE KEY-----".utf8)
    static let opensshEnd = Array("-----END OPENSSH PRIVATE KEY-----".utf8)
    static let rsaBegin = Array("-----BEGIN RSA PRIVATE KEY-----".utf8)
    static let rsaEnd = Array("-----END RSA PRIVATE KEY-----".utf8)

    /// The base64 body between `begin` and `end` (header lines with `:` refused by the caller).
    static func pemBody(_ bytes: UnsafeRawBufferPointer, begin: [UInt8], end: [UInt8]) -> (body: [UInt8], headers: Bool)? {
        var lines = [[UInt8]]()
        var current = [UInt8]()
        for byte in bytes {
            if byte == 0x0A { lines.append(current); current.removeAll() } else if byte != 0x0D { current.append(byte) }
        }
        if !current.isEmpty { lines.append(current) }
        defer { for line in lines { Scrub.zero(line) }; Scrub.zero(current) }
        guard let first = lines.firstIndex(where: { !$0.isEmpty }), lines[first] == begin,
              let last = lines.lastIndex(where: { !$0.isEmpty }), lines[last] == end, last > first else { return nil }
        var text = [UInt8]()
        var headers = false
        for line in lines[(first + 1)..<last] {
            if line.contains(0x3A) { headers = true; continue }
            text += line.filter { $0 != 0x20 && $0 != 0x09 }
        }
        defer { Scrub.zero(text) }
        guard let body = AgeBase64.decode(text, padded: true) else { return nil }
        return (body, headers)
    }

    /// Parses an SSH private key file: OpenSSH's format (unencrypted, or encrypted and then
    /// recognised by its public key only) or the older PEM `RSA PRIVATE KEY`.
    static func identity(_ contents: SecretBytes, name: String, passphrase: (@Sendable () throws -> SecretBytes)? = nil) throws -> any AgeIdentity {
        try contents.withUnsafeBytes { bytes in
            if let (body, _) = pemBody(bytes, begin: opensshBegin, end: opensshEnd) {
                defer { Scrub.zero(body) }
                return try openssh(body, name: name, original: bytes, passphrase: passphrase)
            }
            if let (body, headers) = pemBody(bytes, begin: rsaBegin, end: rsaEnd) {
                defer { Scrub.zero(body) }
                if headers { throw EncryptedSSHIdentity.refusal(name) }
                return try pkcs1(body, name: name)
            }
            throw AgeError.invalidIdentity("\(name) is not an OpenSSH private key (`-----BEGIN OPENSSH PRIVATE KEY-----`) or a PEM RSA private key")
        }
    }

    /// Parses the body of an OpenSSH private key; `original` (the whole file, kept for
    /// `ssh-keygen` when the key is passphrase-protected) and `passphrase` serve encrypted keys.
    static func openssh(_ blob: [UInt8], name: String, original: UnsafeRawBufferPointer? = nil,
                        passphrase: (@Sendable () throws -> SecretBytes)? = nil) throws -> any AgeIdentity {
        let malformed = AgeError.invalidIdentity("\(name) is a malformed OpenSSH private key")
        let magic = Array("openssh-key-v1".utf8) + [0]
        guard blob.starts(with: magic) else { throw malformed }
        let reader0 = SSHReader(Array(blob[magic.count...]))
        defer { reader0.wipe() }
        var reader = reader0
        guard let cipher = reader.string(), let kdf = reader.string(), reader.string() != nil,
              let count = reader.uint32(), count == 1, let publicWire = reader.string(), let section = reader.string(), reader.isAtEnd
        else { throw malformed }
        defer { Scrub.zero(section) }
        guard let publicKey = SSHPublicKey.parse(wire: publicWire) else { throw malformed }
        if case .other(let type) = publicKey {
            throw AgeError.invalidIdentity("\(name) is an SSH key of type \(type); age reads ssh-ed25519 and ssh-rsa keys")
        }
        if cipher != Array("none".utf8) || kdf != Array("none".utf8) {
            guard cipher == Array("aes256-ctr".utf8) || cipher == Array("aes256-gcm@openssh.com".utf8) || cipher == Array("aes128-ctr".utf8)
                    || cipher == Array("aes192-ctr".utf8) || cipher == Array("chacha20-poly1305@openssh.com".utf8),
                  kdf == Array("bcrypt".utf8) else {
                throw AgeError.invalidIdentity("\(name) is encrypted with \(String(decoding: cipher, as: UTF8.self)) / \(String(decoding: kdf, as: UTF8.self)), which OpenSSH does not write")
            }
            let copy = original.map { SecretBytes(copying: $0) }
            guard let identity = EncryptedSSHIdentity(publicKey: publicKey, name: name, contents: copy, passphrase: passphrase) else { throw malformed }
            return identity
        }
        var inner = SSHReader(section)
        guard let check1 = inner.uint32(), let check2 = inner.uint32(), check1 == check2, let type = inner.string() else { throw malformed }
        switch (String(decoding: type, as: UTF8.self), publicKey) {
        case ("ssh-ed25519", .ed25519(let key, _)):
            guard let pub = inner.string(), pub == key, let secret = inner.string() else { throw malformed }
            defer { Scrub.zero(secret) }
            guard secret.count == 64, Array(secret[32...]) == key else { throw malformed }
            let seed = Array(secret[0..<32])
            defer { Scrub.zero(seed) }
            return try SSHEd25519Identity(seed: seed, publicKey: key)
        case ("ssh-rsa", .rsa(let n, let e, _)):
            let values = (0..<6).map { _ in inner.mpint() }
            defer { for value in values { if let value { Scrub.zero(value) } } }
            guard let n2 = values[0], let e2 = values[1], n2 == n, e2 == e, let d = values[2], values[3] != nil,
                  let p = values[4], let q = values[5] else { throw malformed }
            return try SSHRSAIdentity(n: n, e: e, d: d, p: p, q: q)
        default:
            throw malformed
        }
    }

    /// PKCS #1 RSAPrivateKey DER: SEQUENCE { version, n, e, d, p, q, dp, dq, qinv }.
    static func pkcs1(_ der: [UInt8], name: String) throws -> any AgeIdentity {
        let malformed = AgeError.invalidIdentity("\(name) is a malformed PEM RSA private key")
        var index = 0
        func length() -> Int? {
            guard index < der.count else { return nil }
            let first = der[index]; index += 1
            if first < 0x80 { return Int(first) }
            let count = Int(first & 0x7f)
            guard count >= 1, count <= 3, index + count <= der.count else { return nil }
            var value = 0
            for _ in 0..<count { value = value << 8 | Int(der[index]); index += 1 }
            return value
        }
        func integer() -> [UInt8]? {
            guard index < der.count, der[index] == 0x02 else { return nil }
            index += 1
            guard let n = length(), n >= 1, index + n <= der.count else { return nil }
            defer { index += n }
            let value = der[index..<index + n]
            if value.first! & 0x80 != 0 { return nil }
            return Array(value.drop(while: { $0 == 0 }))
        }
        guard der.first == 0x30 else { throw malformed }
        index = 1
        guard let total = length(), index + total == der.count, let version = integer(), version.isEmpty,
              let n = integer(), let e = integer() else { throw malformed }
        let secrets = (0..<3).map { _ in integer() }
        defer { for value in secrets { if let value { Scrub.zero(value) } } }
        guard let d = secrets[0], let p = secrets[1], let q = secrets[2] else { throw malformed }
        return try SSHRSAIdentity(n: n, e: e, d: d, p: p, q: q)
    }
}
